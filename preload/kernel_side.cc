#include "preload/kernel_side.hh"

#include <linux/filter.h>

#include <cstddef>

#include "preload/libc.hh"

namespace rawpipe::preload {

bool drop_copies_from(int fd, int ifindex) {
  // Classic BPF on the socket: the ancillary load SKF_AD_IFINDEX is the skb's device, the
  // interface the datagram arrived on (lo for one sent on this host). Return 0 drops it, before
  // it takes room in the receive buffer.
  sock_filter code[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, static_cast<__u32>(SKF_AD_OFF + SKF_AD_IFINDEX)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, static_cast<__u32>(ifindex), 0, 1),
      BPF_STMT(BPF_RET | BPF_K, 0),
      BPF_STMT(BPF_RET | BPF_K, 0xffffffffu),
  };
  const sock_fprog prog{static_cast<unsigned short>(sizeof code / sizeof code[0]), code};
  return libc().setsockopt(fd, SOL_SOCKET, SO_ATTACH_FILTER, &prog, sizeof prog) == 0;
}

void keep_copies(int fd) {
  int unused = 0;
  (void)libc().setsockopt(fd, SOL_SOCKET, SO_DETACH_FILTER, &unused, sizeof unused);
}

ssize_t kernel_recv(int fd, const iovec* iov, int iovcnt, int flags, msghdr* msg) {
  msghdr local{};
  if (!msg) {
    local.msg_iov = const_cast<iovec*>(iov);
    local.msg_iovlen = static_cast<std::size_t>(iovcnt);
    msg = &local;
  }
  return libc().recvmsg(fd, msg, flags | MSG_DONTWAIT);
}

}  // namespace rawpipe::preload
