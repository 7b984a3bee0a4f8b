// The kernel side of an offloaded socket. The application's descriptor stays a bound kernel
// socket, and datagrams the pipeline never sees reach it: from this host over loopback (also to
// the interface's own address), from other interfaces for a wildcard bind, what the port left
// to the kernel. The receive and wait calls read it beside the ring, as VMA polls the OS socket
// of an offloaded one. On a port that sees copies of the kernel's traffic (af_packet) the
// kernel socket would also hold a copy of every datagram the ring gets; a socket filter drops
// those (the ones that arrived on the port's interface) before they are queued.
#pragma once

#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>

namespace rawpipe::preload {

// The interfaces whose datagrams reach the pipeline as copies of the kernel's (the ports on
// af_packet and auto); datagrams arriving there must not be read from the kernel side too.
struct CopyInterfaces {
  static constexpr int kMax = 8;
  int n = 0;
  int ifindex[kMax] = {};
};

// Attaches the filter that drops datagrams that arrived on those interfaces (true at once when
// there are none); false with errno when the kernel refuses it.
bool drop_copies_from(int fd, const CopyInterfaces& from);
// Takes the filter away again: the kernel socket then gets everything (offload turned off).
void keep_copies(int fd);

// One datagram from the kernel socket without waiting: recvmsg with MSG_DONTWAIT into the
// caller's buffers (msg, or a header over iov when msg is null). -1 with EAGAIN when none.
ssize_t kernel_recv(int fd, const iovec* iov, int iovcnt, int flags, msghdr* msg);

}  // namespace rawpipe::preload
