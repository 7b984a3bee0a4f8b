#include <poll.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <vector>

#include "preload/interpose.hh"
#include "preload/libc.hh"
#include "preload/receive.hh"
#include "preload/wait.hh"

using namespace rawpipe::preload;

namespace {

std::mutex g_epoll_mu;  // control path: epoll_ctl of offloaded sockets, epoll close

// No-lcore mode: the port's queue descriptors sit in every epoll set that holds an offloaded
// socket, with one of these addresses as their data; such an event only says "run a pass".
char g_queue_marker[kMaxQueueFds];

bool is_queue_marker(const void* ptr) {
  const auto* p = static_cast<const char*>(ptr);
  return p >= g_queue_marker && p < g_queue_marker + kMaxQueueFds;
}

// The queues join a set with its first offloaded socket and leave it with its last (a set may
// hold sockets only, and then sleeps on the queues too).
void queues_in_epoll(Runtime& rt, int epfd, bool add) {
  if (!rt.drive) return;
  for (int q = 0; q < rt.n_queue_fds; ++q) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.ptr = &g_queue_marker[q];
    (void)libc().epoll_ctl(epfd, add ? EPOLL_CTL_ADD : EPOLL_CTL_DEL, rt.queue_fds[q], &ev);
  }
}

// Readable now? Checks the ring; when empty, arms the endpoint's descriptor so the kernel wait
// that follows wakes for the next packet (arm_fd says 1 when one arrived meanwhile).
bool ready_or_arm(Slot& s, std::uint32_t gen) {
  if (offloaded_ready(s, gen, nullptr)) return true;
  Runtime* rt = running();
  return rt && rt->api->arm_fd(rt->pipeline, s.endpoint) == 1;
}

int left_ms(std::int64_t deadline) {
  if (deadline < 0) return -1;
  const std::int64_t left = deadline - monotonic_ns();
  return left <= 0 ? 0 : static_cast<int>((left + 999999) / 1000000);
}

// An offloaded socket whose kernel side is read (Slot::read_kernel) and that is polled for input.
bool kernel_side_polled(const pollfd& p) {
  FdEntry* e = offloaded(p.fd);
  Slot* s = e ? slot_of(*e) : nullptr;
  return s && s->read_kernel.load(std::memory_order_relaxed) && (p.events & POLLIN);
}

// poll over a set with at least one offloaded descriptor.
int mixed_poll(pollfd* fds, nfds_t n, int timeout_ms, const sigset_t* mask) {
  const Libc& l = libc();
  Runtime* rt = running();
  // The application's set, then (no-lcore mode) the port's queues, whose readiness only says
  // that this thread should run a pass, then the kernel sides of offloaded sockets.
  const nfds_t queues = rt && rt->drive && rt->n_queue_fds > 0 ? static_cast<nfds_t>(rt->n_queue_fds) : 0;
  nfds_t kernel_sides = 0;
  for (nfds_t i = 0; i < n; ++i) kernel_sides += kernel_side_polled(fds[i]) ? 1 : 0;
  pollfd small[64];
  std::vector<pollfd> big;
  pollfd* k = small;
  if (n + queues + kernel_sides > 64) {
    big.resize(n + queues + kernel_sides);
    k = big.data();
  }
  const std::int64_t start = monotonic_ns();
  const std::int64_t deadline = timeout_ms < 0 ? -1 : start + timeout_ms * 1000000ll;
  const std::int64_t spin_until = start + spin_ns();
  // Kernel sides cost a system call to look at: once per call and after each sleep, not on
  // every turn of the spin (unless the set has kernel descriptors, polled each turn anyway).
  bool look_at_kernel = true;
  for (;;) {
    int ready = 0;
    bool any_kernel = false;
    for (nfds_t i = 0; i < n; ++i) {
      fds[i].revents = 0;
      k[i] = fds[i];
      k[i].revents = 0;
      FdEntry* e = offloaded(fds[i].fd);
      if (!e) {
        any_kernel |= fds[i].fd >= 0;
        continue;
      }
      k[i].fd = -1;  // not waited for in the kernel this round
      std::uint32_t gen = 0;
      Slot* s = slot_of(*e, &gen);
      if (!s) {
        fds[i].revents = POLLNVAL;
      } else {
        if ((fds[i].events & POLLIN) && offloaded_ready(*s, gen, nullptr)) fds[i].revents |= POLLIN;
        // A datagram socket can always send (the kernel twin takes what the pipeline does not).
        if (fds[i].events & POLLOUT) fds[i].revents |= POLLOUT;
        if (look_at_kernel && !(fds[i].revents & POLLIN) && kernel_side_polled(fds[i])) {
          k[i].fd = fds[i].fd;
          k[i].events = POLLIN;
          any_kernel = true;
        }
      }
      if (fds[i].revents) ++ready;
    }
    look_at_kernel = false;
    const bool spinning = monotonic_ns() < spin_until && timeout_ms != 0;
    if (ready || spinning || timeout_ms == 0 || any_kernel) {
      if (any_kernel) {
        const int r = l.poll(k, n, 0);
        if (r < 0) return r;
        for (nfds_t i = 0; i < n; ++i) {
          if (k[i].fd < 0 || !k[i].revents) continue;
          if (!fds[i].revents) ++ready;
          // An offloaded socket's kernel side says only whether it has a datagram.
          fds[i].revents |= offloaded(fds[i].fd) ? static_cast<short>(k[i].revents & POLLIN) : k[i].revents;
        }
      }
      if (ready || timeout_ms == 0) return ready;
      if (spinning) continue;
    }
    // Sleep: every offloaded descriptor armed and waited for through its endpoint's eventfd (and
    // its kernel side).
    bool slipped = false;
    nfds_t extra = n + queues;
    for (nfds_t i = 0; i < n; ++i) {
      FdEntry* e = offloaded(fds[i].fd);
      if (!e) continue;
      std::uint32_t gen = 0;
      Slot* s = slot_of(*e, &gen);
      if (!s) continue;
      if ((fds[i].events & POLLIN) && ready_or_arm(*s, gen)) slipped = true;
      k[i].fd = s->wake_fd;
      k[i].events = POLLIN;
      if (kernel_side_polled(fds[i]) && extra < n + queues + kernel_sides) k[extra++] = {fds[i].fd, POLLIN, 0};
    }
    if (slipped) continue;
    for (nfds_t q = 0; q < queues; ++q) k[n + q] = {rt->queue_fds[q], POLLIN, 0};
    const int r = mask ? [&] {
      timespec ts, *tp = nullptr;
      if (deadline >= 0) {
        const std::int64_t left = std::max<std::int64_t>(0, deadline - monotonic_ns());
        ts = {static_cast<time_t>(left / 1000000000), static_cast<long>(left % 1000000000)};
        tp = &ts;
      }
      if (rt && drive_nap_ms(*rt) >= 0 && (!tp || ts.tv_sec > 0 || ts.tv_nsec > 1000000)) {
        ts = {0, 1000000};
        tp = &ts;
      }
      return l.ppoll(k, extra, tp, mask);
    }()
                       : l.poll(k, extra, rt ? capped_wait_ms(*rt, left_ms(deadline)) : left_ms(deadline));
    if (r < 0) return r;
    int got = 0;
    for (nfds_t i = 0; i < n; ++i) {
      FdEntry* e = offloaded(fds[i].fd);
      if (!e) {
        fds[i].revents = k[i].revents;
      } else if (k[i].revents) {
        std::uint32_t gen = 0;
        Slot* s = slot_of(*e, &gen);
        fds[i].revents = !s ? POLLNVAL : offloaded_ready(*s, gen, nullptr) ? POLLIN : 0;
      }
      if (fds[i].revents) ++got;
    }
    if (got) return got;
    // A kernel side that woke the sleep is looked at on the next turn.
    look_at_kernel = true;
    if (deadline >= 0 && monotonic_ns() >= deadline) return 0;
  }
}

bool any_offloaded(const pollfd* fds, nfds_t n) {
  for (nfds_t i = 0; i < n; ++i)
    if (offloaded(fds[i].fd)) return true;
  return false;
}

int mixed_select(int nfds, fd_set* rd, fd_set* wr, fd_set* ex, int timeout_ms, const sigset_t* mask, bool* handled) {
  *handled = false;
  bool any = false;
  for (int fd = 0; fd < nfds && !any; ++fd)
    any = offloaded(fd) && ((rd && FD_ISSET(fd, rd)) || (wr && FD_ISSET(fd, wr)) || (ex && FD_ISSET(fd, ex)));
  if (!any) return 0;
  *handled = true;
  std::vector<pollfd> p;  // select's sets are at most FD_SETSIZE: one allocation per call
  for (int fd = 0; fd < nfds; ++fd) {
    short ev = 0;
    if (rd && FD_ISSET(fd, rd)) ev |= POLLIN;
    if (wr && FD_ISSET(fd, wr)) ev |= POLLOUT;
    if (ex && FD_ISSET(fd, ex)) ev |= POLLPRI;
    if (ev) p.push_back(pollfd{fd, ev, 0});
  }
  const int r = mixed_poll(p.data(), p.size(), timeout_ms, mask);
  if (r < 0) return r;
  if (rd) FD_ZERO(rd);
  if (wr) FD_ZERO(wr);
  if (ex) FD_ZERO(ex);
  int bits = 0;
  for (const pollfd& q : p) {
    if (q.revents & POLLNVAL) {
      errno = EBADF;
      return -1;
    }
    if (rd && (q.revents & (POLLIN | POLLHUP | POLLERR))) FD_SET(q.fd, rd), ++bits;
    if (wr && (q.revents & (POLLOUT | POLLERR))) FD_SET(q.fd, wr), ++bits;
    if (ex && (q.revents & POLLPRI)) FD_SET(q.fd, ex), ++bits;
  }
  return bits;
}

// The record an epoll event's data points at, when it is one of ours: the endpoint's descriptor
// (the record itself) or the socket's kernel side (its kernel_tag; *kernel_side says which).
EpollLink* link_of(Runtime& rt, void* ptr, Slot** slot, bool* kernel_side) {
  const auto* base = reinterpret_cast<const char*>(rt.slots);
  const auto* p = static_cast<const char*>(ptr);
  if (p < base || p >= base + sizeof(Slot) * rt.n_slots) return nullptr;
  Slot& s = rt.slots[(p - base) / sizeof(Slot)];
  for (EpollLink& l : s.epolls)
    if (reinterpret_cast<const char*>(&l) == p || &l.kernel_tag == p) {
      *slot = &s;
      *kernel_side = &l.kernel_tag == p;
      return &l;
    }
  return nullptr;
}

// The kernel side of an offloaded socket (Slot::read_kernel) sits in the set beside its
// endpoint's descriptor while the application waits there for input.
int kernel_side_in_epoll(int epfd, int fd, const Slot& s, EpollLink& link, std::uint32_t app_events) {
  if (!s.read_kernel.load(std::memory_order_relaxed) || !(app_events & EPOLLIN)) {
    if (link.kernel_registered) (void)libc().epoll_ctl(epfd, EPOLL_CTL_DEL, link.kernel_fd, nullptr);
    link.kernel_registered = false;
    return 0;
  }
  epoll_event ev{};
  ev.events = EPOLLIN | (app_events & (EPOLLET | EPOLLONESHOT | EPOLLEXCLUSIVE));
  ev.data.ptr = &link.kernel_tag;
  const int r = libc().epoll_ctl(epfd, link.kernel_registered ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, fd, &ev);
  if (r == 0) {
    link.kernel_registered = true;
    link.kernel_fd = fd;
  }
  return r;
}

int epoll_count(int epfd) {
  FdEntry* e = fd_entry(epfd);
  return e && e->kind.load(std::memory_order_acquire) == FdKind::kEpoll ? e->slot.load(std::memory_order_relaxed) : 0;
}

void epoll_count_add(int epfd, int d) {
  if (FdEntry* e = fd_entry(epfd)) {
    e->slot.store(static_cast<std::uint16_t>(e->slot.load() + d));
    e->kind.store(FdKind::kEpoll, std::memory_order_release);
  }
}

int mixed_epoll_wait(int epfd, epoll_event* events, int max, int timeout_ms, const sigset_t* mask) {
  const Libc& l = libc();
  Runtime* rt = running();
  const std::int64_t start = monotonic_ns();
  const std::int64_t deadline = timeout_ms < 0 ? -1 : start + timeout_ms * 1000000ll;
  const std::int64_t spin_until = start + spin_ns();
  for (;;) {
    const bool spinning = timeout_ms != 0 && monotonic_ns() < spin_until;
    // No-lcore mode: a pass before each look, so what the port holds reaches the rings (and
    // signals their armed descriptors) before epoll is asked.
    if (rt) (void)drive(*rt);
    int wait = spinning ? 0 : left_ms(deadline);
    if (rt) wait = capped_wait_ms(*rt, wait);
    const int n = mask ? l.epoll_pwait(epfd, events, max, wait, mask) : l.epoll_wait(epfd, events, max, wait);
    if (n < 0) return n;
    // A forked child shares its parent's sets: the parent's records in them wake it too, but
    // they are the parent's sockets (the child's copies are kernel sockets); it never sees them.
    Runtime* records = rt ? rt : inherited();
    int out = 0;
    // The sockets reported so far in this batch: one whose ring and kernel side are both ready
    // is one event, as a socket is once in the kernel's.
    EpollLink* reported[64];
    int n_reported = 0;
    // Only in a forked child (no runtime of its own): everything ready was the parent's.
    bool parents_only = rt == nullptr && n > 0;
    for (int i = 0; i < n; ++i) {
      if (is_queue_marker(events[i].data.ptr)) continue;  // the pass at the top of the loop takes it
      Slot* s = nullptr;
      bool kernel_side = false;
      EpollLink* link = records ? link_of(*records, events[i].data.ptr, &s, &kernel_side) : nullptr;
      if (!link) {
        events[out++] = events[i];
        parents_only = false;
        continue;
      }
      if (!rt) continue;
      if (std::find(reported, reported + n_reported, link) != reported + n_reported) continue;
      std::uint32_t ev = 0;
      const std::uint32_t gen = s->gen.load(std::memory_order_acquire);
      if ((link->app_events & EPOLLIN) && (kernel_side || ready_or_arm(*s, gen))) ev |= EPOLLIN;
      if (link->app_events & EPOLLOUT) ev |= EPOLLOUT;
      if (!ev) continue;  // a stale wake: the ring is empty and now armed
      if (n_reported < 64) reported[n_reported++] = link;
      events[out].events = ev;
      events[out].data = link->app_data;
      ++out;
    }
    if (out) return out;
    if (!spinning && (timeout_ms == 0 || (deadline >= 0 && monotonic_ns() >= deadline))) return 0;
    // Only the parent's records were ready. They stay ready until the parent reads, and the
    // child cannot take them out of a set it shares, so asking epoll again at once would spin:
    // it sleeps a millisecond between looks instead (its own events wait at most that long),
    // with the caller's signal mask, as epoll_pwait would have.
    if (parents_only && !spinning) {
      const timespec nap{0, 1000000};
      if (l.ppoll(nullptr, 0, &nap, mask) < 0) return -1;
    }
  }
}

}  // namespace

namespace rawpipe::preload {
void epoll_forget_kernel_sides() {
  Runtime* rt = running();
  if (!rt) return;
  std::lock_guard lock(g_epoll_mu);
  for (unsigned i = 0; i < rt->n_slots; ++i)
    for (EpollLink& l : rt->slots[i].epolls)
      if (l.kernel_registered) {
        (void)libc().epoll_ctl(l.epfd, EPOLL_CTL_DEL, l.kernel_fd, nullptr);
        l.kernel_registered = false;
      }
}

void epoll_closed(int epfd) {
  Runtime* rt = running();
  if (!rt) return;
  std::lock_guard lock(g_epoll_mu);
  for (unsigned i = 0; i < rt->n_slots; ++i)
    for (EpollLink& l : rt->slots[i].epolls)
      if (l.epfd == epfd) l = EpollLink{};
}
}  // namespace rawpipe::preload

RAWPIPE_INTERPOSE int poll(pollfd* fds, nfds_t n, int timeout_ms) {
  if (inside() || !running() || !any_offloaded(fds, n)) return libc().poll(fds, n, timeout_ms);
  return mixed_poll(fds, n, timeout_ms, nullptr);
}

RAWPIPE_INTERPOSE int ppoll(pollfd* fds, nfds_t n, const timespec* timeout, const sigset_t* mask) {
  if (inside() || !running() || !any_offloaded(fds, n)) return libc().ppoll(fds, n, timeout, mask);
  const int ms = timeout ? static_cast<int>(timeout->tv_sec * 1000 + (timeout->tv_nsec + 999999) / 1000000) : -1;
  return mixed_poll(fds, n, ms, mask);
}

RAWPIPE_INTERPOSE int select(int nfds, fd_set* rd, fd_set* wr, fd_set* ex, timeval* timeout) {
  if (!inside() && running()) {
    bool handled = false;
    const int ms = timeout ? static_cast<int>(timeout->tv_sec * 1000 + (timeout->tv_usec + 999) / 1000) : -1;
    const int r = mixed_select(nfds, rd, wr, ex, ms, nullptr, &handled);
    if (handled) return r;
  }
  return libc().select(nfds, rd, wr, ex, timeout);
}

RAWPIPE_INTERPOSE int pselect(int nfds, fd_set* rd, fd_set* wr, fd_set* ex, const timespec* timeout,
                              const sigset_t* mask) {
  if (!inside() && running()) {
    bool handled = false;
    const int ms = timeout ? static_cast<int>(timeout->tv_sec * 1000 + (timeout->tv_nsec + 999999) / 1000000) : -1;
    const int r = mixed_select(nfds, rd, wr, ex, ms, mask, &handled);
    if (handled) return r;
  }
  return libc().pselect(nfds, rd, wr, ex, timeout, mask);
}

RAWPIPE_INTERPOSE int epoll_ctl(int epfd, int op, int fd, epoll_event* event) {
  FdEntry* e = offloaded(fd);
  Runtime* rt = running();
  std::uint32_t gen = 0;
  Slot* s = e && rt ? slot_of(*e, &gen) : nullptr;
  if (!s) return libc().epoll_ctl(epfd, op, fd, event);
  std::lock_guard lock(g_epoll_mu);
  EpollLink* link = nullptr;
  for (EpollLink& l : s->epolls)
    if (l.epfd == epfd) link = &l;
  if (op == EPOLL_CTL_ADD) {
    if (link) {
      errno = EEXIST;
      return -1;
    }
    for (EpollLink& l : s->epolls)
      if (l.epfd < 0 && !link) link = &l;
    if (!link || !event) {
      errno = link ? EFAULT : ENOSPC;  // an offloaded socket can be in kMaxEpolls sets only
      return -1;
    }
  } else if (!link) {
    errno = ENOENT;
    return -1;
  }
  if (op == EPOLL_CTL_DEL) {
    (void)kernel_side_in_epoll(epfd, fd, *s, *link, 0);
    const int r = libc().epoll_ctl(epfd, EPOLL_CTL_DEL, s->wake_fd, nullptr);
    *link = EpollLink{};
    epoll_count_add(epfd, -1);
    if (epoll_count(epfd) == 0) queues_in_epoll(*rt, epfd, false);
    return r;
  }
  if (!event) {
    errno = EFAULT;
    return -1;
  }
  epoll_event ev{};
  // The eventfd is always writable: EPOLLOUT needs no registration of its own.
  ev.events = EPOLLIN | (event->events & (EPOLLET | EPOLLONESHOT | EPOLLEXCLUSIVE));
  ev.data.ptr = link;
  const int r = libc().epoll_ctl(epfd, op, s->wake_fd, &ev);
  if (r != 0) return r;
  if (op == EPOLL_CTL_ADD) {
    if (epoll_count(epfd) == 0) queues_in_epoll(*rt, epfd, true);
    epoll_count_add(epfd, 1);
  }
  link->epfd = epfd;
  link->app_data = event->data;
  link->app_events = event->events;
  if (kernel_side_in_epoll(epfd, fd, *s, *link, event->events) != 0) {
    // The set would not wake for what only the kernel side gets: say so once, keep the rest.
    static std::atomic<bool> said{false};
    if (!said.exchange(true)) {
      const char line[] = "rawpipe-preload: an epoll set refused an offloaded socket's kernel side; loopback datagrams to it wake no epoll_wait\n";
      (void)!libc().write(2, line, sizeof line - 1);
    }
  }
  // Arm the endpoint so the next packet signals the set; data that arrived before the
  // registration signalled nobody (the endpoint was not armed): make the descriptor readable so
  // this set sees it.
  if (ready_or_arm(*s, gen)) {
    const std::uint64_t one = 1;
    (void)!libc().write(s->wake_fd, &one, sizeof one);
  }
  return 0;
}

RAWPIPE_INTERPOSE int epoll_wait(int epfd, epoll_event* events, int max, int timeout_ms) {
  if (inside() || epoll_count(epfd) == 0) return libc().epoll_wait(epfd, events, max, timeout_ms);
  return mixed_epoll_wait(epfd, events, max, timeout_ms, nullptr);
}

RAWPIPE_INTERPOSE int epoll_pwait(int epfd, epoll_event* events, int max, int timeout_ms, const sigset_t* mask) {
  if (inside() || epoll_count(epfd) == 0) return libc().epoll_pwait(epfd, events, max, timeout_ms, mask);
  return mixed_epoll_wait(epfd, events, max, timeout_ms, mask);
}
