#include "preload/kernel_side.hh"

#include <linux/filter.h>

#include <cstddef>

#include "preload/libc.hh"

namespace rawpipe::preload {

bool drop_copies_from(int fd, const CopyInterfaces& from) {
  if (from.n == 0) return true;
  // Classic BPF on the socket: the ancillary load SKF_AD_IFINDEX is the skb's device, the
  // interface the datagram arrived on (lo for one sent on this host). Return 0 drops it, before
  // it takes room in the receive buffer.
  sock_filter code[CopyInterfaces::kMax + 3];
  const int n = from.n;
  code[0] = BPF_STMT(BPF_LD | BPF_W | BPF_ABS, static_cast<__u32>(SKF_AD_OFF + SKF_AD_IFINDEX));
  for (int i = 0; i < n; ++i)  // equal: to the drop at n + 2
    code[1 + i] = BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, static_cast<__u32>(from.ifindex[i]),
                           static_cast<__u8>(n - i), 0);
  code[n + 1] = BPF_STMT(BPF_RET | BPF_K, 0xffffffffu);
  code[n + 2] = BPF_STMT(BPF_RET | BPF_K, 0);
  const sock_fprog prog{static_cast<unsigned short>(n + 3), code};
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
