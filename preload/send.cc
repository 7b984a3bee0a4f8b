// send, sendto, sendmsg, sendmmsg, write, writev on an offloaded socket: one copy into a buffer
// of the port's pool through the Extra API's sendto (which resolves the next hop from the ARP/ND
// frames the pipeline sees). What the pipeline cannot send yet (destination not resolved, no
// source address, larger than a buffer, the hand-off ring full, another thread sending on the
// port) goes out through the socket's kernel twin, so the application never sees a failure the
// kernel would not give it; the summary counts those.
#include <cerrno>
#include <cstring>

#include "preload/interpose.hh"
#include "preload/libc.hh"
#include "rawpipe/socket_extra.h"

using namespace rawpipe::preload;

namespace {

// VMA's VMA_SND_FLAGS_DUMMY is MSG_SYN; the same bit asks for rawpipe's dummy send.
constexpr int kMsgDummy = RAWPIPE_SND_FLAGS_DUMMY;

ssize_t kernel_sendmsg(int fd, const iovec* iov, int iovcnt, int flags, const sockaddr* to, socklen_t tolen) {
  msghdr m{};
  m.msg_name = const_cast<sockaddr*>(to);
  m.msg_namelen = to ? tolen : 0;
  m.msg_iov = const_cast<iovec*>(iov);
  m.msg_iovlen = static_cast<std::size_t>(iovcnt);
  return libc().sendmsg(fd, &m, flags & ~kMsgDummy);
}

ssize_t offloaded_send(int fd, FdEntry& e, const iovec* iov, int iovcnt, int flags, const sockaddr* to,
                       socklen_t tolen) {
  Runtime* rt = running();
  Slot* s = slot_of(e);
  rawpipe_addr dst{};
  const bool have_dst = to ? to_rawpipe_addr(to, tolen, &dst) : s && s->connected.load(std::memory_order_acquire);
  if (!rt || !s || !have_dst || (flags & MSG_MORE)) return kernel_sendmsg(fd, iov, iovcnt, flags, to, tolen);
  if (!to) dst = s->peer;
  // One contiguous datagram: the common single buffer as is, small gathers through the stack.
  const void* data = iovcnt == 1 ? iov[0].iov_base : nullptr;
  std::size_t len = iovcnt == 1 ? iov[0].iov_len : 0;
  char gather[2048];
  if (iovcnt != 1) {
    for (int i = 0; i < iovcnt; ++i) {
      if (len + iov[i].iov_len > sizeof gather) return kernel_sendmsg(fd, iov, iovcnt, flags, to, tolen);
      std::memcpy(gather + len, iov[i].iov_base, iov[i].iov_len);
      len += iov[i].iov_len;
    }
    data = gather;
  }
  rawpipe_addr src{};
  if (s->local_specific) src = s->local;  // else the port's own address of dst's family
  src.port = s->local.port;
  const int saved = errno;
  const long r = rt->api->sendto(rt->pipeline, rt->port, data, len, &dst, &src,
                                 (flags & kMsgDummy) ? RAWPIPE_SEND_DUMMY : 0u);
  if (r >= 0) {
    s->tx_packets.fetch_add(1, std::memory_order_relaxed);
    return r;
  }
  if (flags & kMsgDummy) return static_cast<ssize_t>(len);  // a warm-up never reaches the kernel
  errno = saved;
  s->tx_kernel.fetch_add(1, std::memory_order_relaxed);
  return kernel_sendmsg(fd, iov, iovcnt, flags, to, tolen);
}

}  // namespace

RAWPIPE_INTERPOSE ssize_t send(int fd, const void* buf, size_t len, int flags) {
  FdEntry* e = offloaded(fd);
  if (!e) return libc().send(fd, buf, len, flags);
  const iovec v{const_cast<void*>(buf), len};
  return offloaded_send(fd, *e, &v, 1, flags, nullptr, 0);
}

RAWPIPE_INTERPOSE ssize_t sendto(int fd, const void* buf, size_t len, int flags, const sockaddr* to, socklen_t tolen) {
  FdEntry* e = offloaded(fd);
  if (!e) return libc().sendto(fd, buf, len, flags, to, tolen);
  const iovec v{const_cast<void*>(buf), len};
  return offloaded_send(fd, *e, &v, 1, flags, to, tolen);
}

RAWPIPE_INTERPOSE ssize_t sendmsg(int fd, const msghdr* msg, int flags) {
  FdEntry* e = offloaded(fd);
  // Control messages (IP_PKTINFO source, GSO segments) are the kernel's business.
  if (!e || !msg || msg->msg_controllen) return libc().sendmsg(fd, msg, flags);
  return offloaded_send(fd, *e, msg->msg_iov, static_cast<int>(msg->msg_iovlen), flags,
                        static_cast<const sockaddr*>(msg->msg_name), msg->msg_namelen);
}

RAWPIPE_INTERPOSE int sendmmsg(int fd, mmsghdr* msgs, unsigned n, int flags) {
  if (!offloaded(fd)) return libc().sendmmsg(fd, msgs, n, flags);
  unsigned i = 0;
  for (; i < n; ++i) {
    const ssize_t r = sendmsg(fd, &msgs[i].msg_hdr, flags);
    if (r < 0) return i ? static_cast<int>(i) : -1;
    msgs[i].msg_len = static_cast<unsigned>(r);
  }
  return static_cast<int>(i);
}

RAWPIPE_INTERPOSE ssize_t write(int fd, const void* buf, size_t len) {
  FdEntry* e = offloaded(fd);
  if (!e) return libc().write(fd, buf, len);
  const iovec v{const_cast<void*>(buf), len};
  return offloaded_send(fd, *e, &v, 1, 0, nullptr, 0);
}

RAWPIPE_INTERPOSE ssize_t writev(int fd, const iovec* iov, int iovcnt) {
  FdEntry* e = offloaded(fd);
  if (!e) return libc().writev(fd, iov, iovcnt);
  return offloaded_send(fd, *e, iov, iovcnt, 0, nullptr, 0);
}
