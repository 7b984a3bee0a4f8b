// recv, recvfrom, recvmsg, recvmmsg, read, readv on an offloaded socket (receive.cc does the
// work); every other descriptor goes to the kernel untouched.
#include <cerrno>
#include <cstring>

#include "preload/interpose.hh"
#include "preload/libc.hh"
#include "preload/receive.hh"

using namespace rawpipe::preload;

RAWPIPE_INTERPOSE ssize_t recv(int fd, void* buf, size_t len, int flags) {
  FdEntry* e = offloaded(fd);
  if (!e) return libc().recv(fd, buf, len, flags);
  const iovec v{buf, len};
  return offloaded_recv(*e, &v, 1, flags, nullptr);
}

RAWPIPE_INTERPOSE ssize_t recvfrom(int fd, void* buf, size_t len, int flags, sockaddr* from, socklen_t* fromlen) {
  FdEntry* e = offloaded(fd);
  if (!e) return libc().recvfrom(fd, buf, len, flags, from, fromlen);
  iovec v{buf, len};
  msghdr m{};
  m.msg_name = from;
  m.msg_namelen = from && fromlen ? *fromlen : 0;
  if (!fromlen) m.msg_name = nullptr;
  m.msg_iov = &v;
  m.msg_iovlen = 1;
  const ssize_t r = offloaded_recv(*e, &v, 1, flags, &m);
  if (r >= 0 && from && fromlen) *fromlen = m.msg_namelen;
  return r;
}

RAWPIPE_INTERPOSE ssize_t recvmsg(int fd, msghdr* msg, int flags) {
  FdEntry* e = offloaded(fd);
  if (!e || !msg) return libc().recvmsg(fd, msg, flags);
  return offloaded_recv(*e, msg->msg_iov, static_cast<int>(msg->msg_iovlen), flags, msg);
}

RAWPIPE_INTERPOSE int recvmmsg(int fd, mmsghdr* msgs, unsigned n, int flags, timespec* timeout) {
  FdEntry* e = offloaded(fd);
  if (!e) return libc().recvmmsg(fd, msgs, n, flags, timeout);
  // The first datagram waits as the socket's mode says; the rest are what is already there
  // (MSG_WAITFORONE is then what every call does, as for most callers of the kernel's).
  unsigned i = 0;
  for (; i < n; ++i) {
    const int f = (flags & ~MSG_WAITFORONE) | (i ? MSG_DONTWAIT : 0);
    const ssize_t r = offloaded_recv(*e, msgs[i].msg_hdr.msg_iov, static_cast<int>(msgs[i].msg_hdr.msg_iovlen), f,
                                     &msgs[i].msg_hdr);
    if (r < 0) {
      if (i && errno == EAGAIN) break;
      return i ? static_cast<int>(i) : -1;
    }
    msgs[i].msg_len = static_cast<unsigned>(r);
  }
  return static_cast<int>(i);
}

RAWPIPE_INTERPOSE ssize_t read(int fd, void* buf, size_t len) {
  FdEntry* e = offloaded(fd);
  if (!e) return libc().read(fd, buf, len);
  const iovec v{buf, len};
  return offloaded_recv(*e, &v, 1, 0, nullptr);
}

RAWPIPE_INTERPOSE ssize_t readv(int fd, const iovec* iov, int iovcnt) {
  FdEntry* e = offloaded(fd);
  if (!e) return libc().readv(fd, iov, iovcnt);
  return offloaded_recv(*e, iov, iovcnt, 0, nullptr);
}
