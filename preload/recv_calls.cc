// recv, recvfrom, recvmsg, recvmmsg, read, readv on an offloaded socket (receive.cc does the
// work); every other descriptor goes to the kernel untouched.
#include <time.h>

#include <algorithm>
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
  // As the kernel's: each datagram waits as the socket's mode and `flags` say, MSG_WAITFORONE
  // makes those after the first non-blocking, and the timeout ends the call once it expires,
  // with the time left written back when it returns datagrams (not on an error, as
  // __sys_recvmmsg). Unlike the kernel's (which looks at the timeout only after
  // each datagram, see recvmmsg(2) BUGS) it also bounds the waits themselves: a call that
  // expires returns what it has, or -1 with EAGAIN when it has nothing.
  std::int64_t deadline = -1;
  if (timeout) {
    if (timeout->tv_sec < 0 || timeout->tv_nsec < 0 || timeout->tv_nsec >= 1000000000) {
      errno = EINVAL;
      return -1;
    }
    deadline = monotonic_ns() + timeout->tv_sec * 1000000000ll + timeout->tv_nsec;
  }
  unsigned i = 0;
  for (; i < n; ++i) {
    int f = flags & ~MSG_WAITFORONE;
    if (i && (flags & MSG_WAITFORONE)) f |= MSG_DONTWAIT;
    if (deadline >= 0 && i && monotonic_ns() >= deadline) break;
    const ssize_t r = offloaded_recv(*e, msgs[i].msg_hdr.msg_iov, static_cast<int>(msgs[i].msg_hdr.msg_iovlen), f,
                                     &msgs[i].msg_hdr, deadline);
    if (r < 0) {
      if (i) break;  // what arrived is returned; an error other than EAGAIN comes again next call
      return -1;
    }
    msgs[i].msg_len = static_cast<unsigned>(r);
  }
  if (timeout) {
    const std::int64_t left = std::max<std::int64_t>(0, deadline - monotonic_ns());
    timeout->tv_sec = static_cast<time_t>(left / 1000000000);
    timeout->tv_nsec = static_cast<long>(left % 1000000000);
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
