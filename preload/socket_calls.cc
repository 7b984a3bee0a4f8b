// socket, bind, connect, close, dup/dup2/dup3, fcntl, ioctl, setsockopt, getsockopt.
#include <fcntl.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <sys/ioctl.h>

#include <cerrno>
#include <cstring>

#include "preload/interpose.hh"
#include "preload/libc.hh"
#include "preload/receive.hh"
#include "preload/socket_api.hh"
#include "preload/wait.hh"
#include "rawpipe/socket_extra.h"

using namespace rawpipe::preload;

namespace {

// The descriptor `to` now names what `from` names (dup and friends).
void copy_entry(int from, int to) {
  FdEntry* src = fd_entry(from);
  FdEntry* dst = fd_entry(to);
  if (!dst) return;
  if (!src || src->kind.load(std::memory_order_acquire) == FdKind::kNone) {
    fd_forget(to);
    return;
  }
  fd_touch(to);
  dst->family.store(src->family.load());
  dst->nonblock.store(src->nonblock.load());
  dst->why.store(src->why.load());
  if (Slot* s = slot_of(*src)) {
    add_fd(*s);
    dst->slot.store(src->slot.load());
    dst->gen.store(src->gen.load());
  }
  FdKind k = src->kind.load();
  if (k == FdKind::kOffloaded && !slot_of(*src)) k = FdKind::kUdp;
  dst->kind.store(k, std::memory_order_release);
}

// The descriptor is going away (close, or about to be replaced by dup2).
void forget(int fd) {
  FdEntry* e = fd_entry(fd);
  if (!e) return;
  const FdKind k = e->kind.load(std::memory_order_acquire);
  Slot* s = k == FdKind::kOffloaded ? slot_of(*e) : nullptr;
  if (k == FdKind::kEpoll) epoll_closed(fd);
  fd_forget(fd);
  if (s) drop_fd(*s);
}

}  // namespace

RAWPIPE_INTERPOSE int socket(int domain, int type, int protocol) {
  const int fd = libc().socket(domain, type, protocol);
  if (fd < 0) return fd;
  FdEntry* e = fd_entry(fd);
  if (!e) return fd;
  const bool udp = (domain == AF_INET || domain == AF_INET6) && (type & 0xf) == SOCK_DGRAM &&
                   (protocol == 0 || protocol == IPPROTO_UDP);
  if (!udp || inside()) {
    fd_forget(fd);
    return fd;
  }
  fd_touch(fd);
  e->family.store(static_cast<std::uint8_t>(domain));
  e->nonblock.store((type & SOCK_NONBLOCK) != 0);
  e->why.store(KernelWhy::kNotBound, std::memory_order_relaxed);
  e->kind.store(FdKind::kUdp, std::memory_order_release);
  return fd;
}

RAWPIPE_INTERPOSE int bind(int fd, const sockaddr* addr, socklen_t len) {
  const int r = libc().bind(fd, addr, len);
  if (r == 0 && !inside()) {
    if (FdEntry* e = fd_entry(fd); e && e->kind.load(std::memory_order_acquire) == FdKind::kUdp) offer_bind(fd, *e);
  }
  return r;
}

RAWPIPE_INTERPOSE int connect(int fd, const sockaddr* addr, socklen_t len) {
  const int r = libc().connect(fd, addr, len);
  if (r != 0) return r;
  if (FdEntry* e = offloaded(fd)) {
    if (Slot* s = slot_of(*e)) {
      rawpipe_addr peer{};
      const bool ok = to_rawpipe_addr(addr, len, &peer);  // AF_UNSPEC: disconnect
      set_peer(*s, ok ? &peer : nullptr);
    }
  }
  return r;
}

RAWPIPE_INTERPOSE int close(int fd) {
  if (!inside()) forget(fd);
  return libc().close(fd);
}

RAWPIPE_INTERPOSE int dup(int fd) {
  const int r = libc().dup(fd);
  if (r >= 0 && !inside()) copy_entry(fd, r);
  return r;
}

RAWPIPE_INTERPOSE int dup2(int fd, int to) {
  if (fd == to || inside()) return libc().dup2(fd, to);
  const int r = libc().dup2(fd, to);
  if (r >= 0) {
    forget(to);
    copy_entry(fd, to);
  }
  return r;
}

RAWPIPE_INTERPOSE int dup3(int fd, int to, int flags) {
  if (inside()) return libc().dup3(fd, to, flags);
  const int r = libc().dup3(fd, to, flags);
  if (r >= 0) {
    forget(to);
    copy_entry(fd, to);
  }
  return r;
}

namespace {
int fcntl_common(int fd, int cmd, void* arg) {
  const long larg = reinterpret_cast<long>(arg);
  const int r = libc().fcntl(fd, cmd, arg);
  if (r < 0 || inside()) return r;
  if (cmd == F_SETFL) {
    if (FdEntry* e = fd_entry(fd); e && e->kind.load() != FdKind::kNone) e->nonblock.store((larg & O_NONBLOCK) != 0);
  } else if (cmd == F_DUPFD || cmd == F_DUPFD_CLOEXEC) {
    copy_entry(fd, r);
  }
  return r;
}
}  // namespace

// _FILE_OFFSET_BITS=64 renames fcntl to fcntl64 in the headers: both names, by asm label.
RAWPIPE_INTERPOSE int preload_fcntl(int fd, int cmd, ...) __asm__("fcntl");
RAWPIPE_INTERPOSE int preload_fcntl64(int fd, int cmd, ...) __asm__("fcntl64");

RAWPIPE_INTERPOSE int preload_fcntl(int fd, int cmd, ...) {
  va_list ap;
  va_start(ap, cmd);
  void* arg = va_arg(ap, void*);  // every command's argument fits a pointer (int, long, struct*)
  va_end(ap);
  return fcntl_common(fd, cmd, arg);
}

RAWPIPE_INTERPOSE int preload_fcntl64(int fd, int cmd, ...) {
  va_list ap;
  va_start(ap, cmd);
  void* arg = va_arg(ap, void*);
  va_end(ap);
  return fcntl_common(fd, cmd, arg);
}

RAWPIPE_INTERPOSE int ioctl(int fd, unsigned long request, ...) {
  va_list ap;
  va_start(ap, request);
  void* arg = va_arg(ap, void*);
  va_end(ap);
  FdEntry* e = offloaded(fd);
  if (e && request == FIONREAD) {
    // The next datagram's size, as the kernel reports for UDP (0 when none): the ring's, or
    // when it is empty the kernel side's (which holds only what the pipeline never saw).
    std::uint32_t gen = 0;
    Slot* s = slot_of(*e, &gen);
    if (!s || !arg) {
      errno = s ? EFAULT : EBADF;
      return -1;
    }
    int len = 0;
    if (!offloaded_ready(*s, gen, &len)) len = 0;
    if (!len && s->read_kernel.load(std::memory_order_relaxed) && libc().ioctl(fd, FIONREAD, &len) != 0) len = 0;
    *static_cast<int*>(arg) = len;
    return 0;
  }
  const int r = libc().ioctl(fd, request, arg);
  if (r == 0 && request == FIONBIO && arg && !inside()) {
    if (FdEntry* any = fd_entry(fd); any && any->kind.load() != FdKind::kNone)
      any->nonblock.store(*static_cast<int*>(arg) != 0);
  }
  return r;
}

RAWPIPE_INTERPOSE int setsockopt(int fd, int level, int name, const void* value, socklen_t len) {
  // The kernel socket gets every option first: it stays a true socket (joins make the kernel send
  // IGMP/MLD reports on the interface, so snooping switches forward the group).
  const int r = libc().setsockopt(fd, level, name, value, len);
  if (r != 0) return r;
  FdEntry* e = offloaded(fd);
  Slot* s = e ? slot_of(*e) : nullptr;
  if (!s || !value) return r;
  if (level == SOL_SOCKET && (name == SO_TIMESTAMP || name == SO_TIMESTAMPNS) && len >= sizeof(int)) {
    int on;
    std::memcpy(&on, value, sizeof on);
    s->timestamp.store(on ? name : 0);
  } else if (level == SOL_SOCKET && name == SO_RCVTIMEO && len >= sizeof(timeval)) {
    timeval tv;
    std::memcpy(&tv, value, sizeof tv);
    const long ms = tv.tv_sec * 1000 + (tv.tv_usec + 999) / 1000;
    s->rcvtimeo_ms.store(ms > 0 ? ms : -1);
  } else if (level == IPPROTO_IP &&
             (name == IP_ADD_MEMBERSHIP || name == IP_DROP_MEMBERSHIP) && len >= sizeof(in_addr)) {
    rawpipe_addr g{};
    g.family = 4;
    std::memcpy(g.addr, value, 4);  // ip_mreq and ip_mreqn both start with the group
    name == IP_ADD_MEMBERSHIP ? join_group(*s, g) : leave_group(*s, g);
  } else if (level == IPPROTO_IP && name == IP_ADD_SOURCE_MEMBERSHIP && len >= sizeof(ip_mreq_source)) {
    ip_mreq_source m;
    std::memcpy(&m, value, sizeof m);
    rawpipe_addr g{};
    g.family = 4;
    std::memcpy(g.addr, &m.imr_multiaddr, 4);
    join_group(*s, g);
  } else if (level == IPPROTO_IPV6 && (name == IPV6_JOIN_GROUP || name == IPV6_LEAVE_GROUP) &&
             len >= sizeof(ipv6_mreq)) {
    ipv6_mreq m;
    std::memcpy(&m, value, sizeof m);
    rawpipe_addr g{};
    g.family = 6;
    std::memcpy(g.addr, &m.ipv6mr_multiaddr, 16);
    name == IPV6_JOIN_GROUP ? join_group(*s, g) : leave_group(*s, g);
  }
  return r;
}

RAWPIPE_INTERPOSE int getsockopt(int fd, int level, int name, void* value, socklen_t* len) {
  // VMA's way to the Extra API: a getsockopt on any fd, -1 included.
  if (level == SOL_SOCKET && name == SO_RAWPIPE_GET_API && !inside()) return get_socket_api(value, len);
  return libc().getsockopt(fd, level, name, value, len);
}

RAWPIPE_INTERPOSE pid_t fork() {
  // The child's side runs from the pthread_atfork handler (runtime.cc), which also covers fork
  // calls that do not come through here.
  return libc().fork();
}
