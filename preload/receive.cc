#include "preload/receive.hh"

#include <poll.h>
#include <time.h>

#include <cerrno>
#include <cstring>

#include "preload/kernel_side.hh"
#include "preload/libc.hh"

namespace rawpipe::preload {
namespace {

// The next packet of the slot into *pkt, from the stash first. The caller is the consumer.
bool take(Runtime& rt, Slot& s, rawpipe_packet* pkt, bool keep) {
  if (!s.has_stash) {
    rawpipe_packet next;
    if (take_burst(rt, s, &next, 1) == 0) return false;
    s.stash = next;
    s.has_stash = true;
  }
  *pkt = s.stash;
  if (!keep) s.has_stash = false;
  return true;
}

void put_cmsg(msghdr* msg, std::size_t* used, int level, int type, const void* data, std::size_t len) {
  if (!msg->msg_control) return;
  if (*used + CMSG_SPACE(len) > msg->msg_controllen) {
    msg->msg_flags |= MSG_CTRUNC;
    return;
  }
  auto* c = reinterpret_cast<cmsghdr*>(static_cast<char*>(msg->msg_control) + *used);
  c->cmsg_level = level;
  c->cmsg_type = type;
  c->cmsg_len = CMSG_LEN(len);
  std::memcpy(CMSG_DATA(c), data, len);
  *used += CMSG_SPACE(len);
}

ssize_t copy_out(Runtime& rt, Slot& s, const rawpipe_packet& pkt, const iovec* iov, int iovcnt, int flags,
                 msghdr* msg) {
  const auto* src = static_cast<const std::uint8_t*>(pkt.payload.iov_base);
  const std::size_t len = pkt.payload.iov_len;
  std::size_t done = 0;
  for (int i = 0; i < iovcnt && done < len; ++i) {
    const std::size_t n = std::min(len - done, iov[i].iov_len);
    if (n) std::memcpy(iov[i].iov_base, src + done, n);
    done += n;
  }
  if (msg) {
    msg->msg_flags = 0;
    if (done < len) msg->msg_flags |= MSG_TRUNC;
    if (msg->msg_name) {
      sockaddr_storage ss;
      const socklen_t n = to_sockaddr(pkt.src, s.family, &ss);
      std::memcpy(msg->msg_name, &ss, std::min<socklen_t>(n, msg->msg_namelen));
      msg->msg_namelen = n;
    }
    std::size_t used = 0;
    if (const int ts = s.timestamp.load(std::memory_order_relaxed)) {
      timespec when;
      if (pkt.flags & RAWPIPE_PKT_TIMESTAMP) {
        when.tv_sec = static_cast<time_t>(pkt.timestamp_ns / 1000000000ull);
        when.tv_nsec = static_cast<long>(pkt.timestamp_ns % 1000000000ull);
      } else {
        clock_gettime(CLOCK_REALTIME, &when);  // the port gives none: the time it reached us
      }
      if (ts == SO_TIMESTAMPNS) {
        put_cmsg(msg, &used, SOL_SOCKET, SO_TIMESTAMPNS, &when, sizeof when);
      } else {
        const timeval tv{when.tv_sec, when.tv_nsec / 1000};
        put_cmsg(msg, &used, SOL_SOCKET, SO_TIMESTAMP, &tv, sizeof tv);
      }
    }
    if (msg->msg_control) msg->msg_controllen = used;
  }
  if (!(flags & MSG_PEEK)) {
    s.rx_packets.fetch_add(1, std::memory_order_relaxed);
    s.rx_bytes.fetch_add(len, std::memory_order_relaxed);
    if (done < len) s.rx_truncated.fetch_add(1, std::memory_order_relaxed);
    rt.api->free_packets(rt.pipeline, &pkt, 1);
  }
  return static_cast<ssize_t>((flags & MSG_TRUNC) ? len : done);
}

}  // namespace

namespace {

// A connected UDP socket receives only what its peer sends (the kernel's socket lookup passes it
// by for other sources). Its rules name the peer (set_peer); when that failed, the rest is
// dropped here.
bool from_peer(const Slot& s, const rawpipe_packet& p) {
  const rawpipe_addr& peer = s.peer;
  const std::size_t bytes = peer.family == 4 ? 4 : 16;
  return p.src.family == peer.family && p.src.port == peer.port && std::memcmp(p.src.addr, peer.addr, bytes) == 0;
}

}  // namespace

unsigned take_burst(Runtime& rt, Slot& s, rawpipe_packet* pkts, unsigned max) {
  unsigned n = 0;
  if (max && s.has_stash) {
    pkts[n++] = s.stash;
    s.has_stash = false;
  }
  for (;;) {
    int k = rt.api->recvfrom_zcopy(rt.pipeline, s.endpoint, pkts + n, max - n);
    // Empty: in no-lcore mode this thread runs a pass of the pipeline and looks again.
    if (k == 0 && n == 0 && drive(rt)) k = rt.api->recvfrom_zcopy(rt.pipeline, s.endpoint, pkts, max);
    if (k <= 0) return n;
    const unsigned end = n + static_cast<unsigned>(k);
    if (!s.filter_peer.load(std::memory_order_acquire)) return end;
    const unsigned before = n;
    for (unsigned i = n; i < end; ++i) {
      if (from_peer(s, pkts[i])) {
        pkts[n++] = pkts[i];
        continue;
      }
      s.rx_not_peer.fetch_add(1, std::memory_order_relaxed);
      rt.api->free_packets(rt.pipeline, &pkts[i], 1);
    }
    // Everything the ring gave was someone else's: look again rather than report empty.
    if (n != before || n == max) return n;
  }
}

void count_taken(Slot& s, const rawpipe_packet* pkts, unsigned n) {
  std::uint64_t bytes = 0;
  for (unsigned i = 0; i < n; ++i) bytes += pkts[i].payload.iov_len;
  s.rx_packets.fetch_add(n, std::memory_order_relaxed);
  s.rx_bytes.fetch_add(bytes, std::memory_order_relaxed);
}

std::int64_t monotonic_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

int sleep_on(Runtime& rt, int fd, int kernel_fd, int wait_ms) {
  pollfd pfd[2 + kMaxQueueFds];
  pfd[0] = {fd, POLLIN, 0};
  nfds_t n = 1;
  if (kernel_fd >= 0) pfd[n++] = {kernel_fd, POLLIN, 0};
  if (rt.drive)
    for (int i = 0; i < rt.n_queue_fds; ++i) pfd[n++] = {rt.queue_fds[i], POLLIN, 0};
  return libc().poll(pfd, n, capped_wait_ms(rt, wait_ms));
}

bool offloaded_ready(Slot& s, std::uint32_t gen, int* len) {
  Runtime* rt = running();
  if (!rt || !consumer_enter(s, gen)) return false;
  rawpipe_packet pkt;
  const bool ok = take(*rt, s, &pkt, true);
  if (ok && len) *len = static_cast<int>(pkt.payload.iov_len);
  consumer_leave(s);
  return ok;
}

ssize_t offloaded_recv(FdEntry& e, const iovec* iov, int iovcnt, int flags, msghdr* msg, std::int64_t deadline_ns) {
  Runtime* rt = running();
  std::uint32_t gen = 0;
  Slot* sp = slot_of(e, &gen);
  if (!rt || !sp) {
    errno = EBADF;
    return -1;
  }
  Slot& s = *sp;
  const bool nonblock = (flags & MSG_DONTWAIT) || e.nonblock.load(std::memory_order_relaxed);
  const long timeout_ms = s.rcvtimeo_ms.load(std::memory_order_relaxed);
  const std::int64_t start = nonblock ? 0 : monotonic_ns();
  const std::int64_t spin_until = start + spin_ns();
  // The kernel side is looked at when the ring is found empty, once per call and after each
  // sleep (which it also ends), not on every turn of the spin: it costs a system call. A ring
  // that never empties gets it looked at every kKernelLookRatio datagrams, ahead of the ring
  // (but never between a MSG_PEEK of the ring and the read that must return the same datagram).
  const int kernel_fd = s.read_kernel.load(std::memory_order_relaxed) ? fd_of(e) : -1;
  bool look_at_kernel = kernel_fd >= 0;
  for (;;) {
    if (!consumer_enter(s, gen)) {
      errno = EBADF;
      return -1;
    }
    if (kernel_fd >= 0 && !s.has_stash && s.since_kernel_look >= kKernelLookRatio) {
      s.since_kernel_look = 0;
      const ssize_t n = kernel_recv(kernel_fd, iov, iovcnt, flags, msg);
      if (n >= 0) {
        if (!(flags & MSG_PEEK)) s.rx_kernel.fetch_add(1, std::memory_order_relaxed);
        consumer_leave(s);
        return n;
      }
    }
    rawpipe_packet pkt;
    if (take(*rt, s, &pkt, flags & MSG_PEEK)) {
      if (!(flags & MSG_PEEK)) ++s.since_kernel_look;
      const ssize_t n = copy_out(*rt, s, pkt, iov, iovcnt, flags, msg);
      consumer_leave(s);
      return n;
    }
    if (look_at_kernel) {
      look_at_kernel = false;
      s.since_kernel_look = 0;
      const ssize_t n = kernel_recv(kernel_fd, iov, iovcnt, flags, msg);
      if (n >= 0 || errno != EAGAIN) {
        if (n >= 0 && !(flags & MSG_PEEK)) s.rx_kernel.fetch_add(1, std::memory_order_relaxed);
        consumer_leave(s);
        return n;
      }
    }
    // Nothing waiting. Spin while the budget lasts, then arm the descriptor: an application
    // that waits in poll/epoll (or this thread, below) is woken by the next packet. arm_fd
    // returns 1 when a packet slipped in between the look and the arming.
    const bool spinning = !nonblock && monotonic_ns() < spin_until;
    int ready = 0;
    if (!spinning) ready = rt->api->arm_fd(rt->pipeline, s.endpoint);
    consumer_leave(s);
    if (spinning || ready == 1) continue;
    if (nonblock) {
      errno = EAGAIN;
      return -1;
    }
    std::int64_t end = deadline_ns;
    if (timeout_ms > 0 && (end < 0 || start + timeout_ms * 1000000ll < end)) end = start + timeout_ms * 1000000ll;
    int wait_ms = -1;
    if (end >= 0) {
      const std::int64_t left = end - monotonic_ns();
      if (left <= 0) {
        errno = EAGAIN;
        return -1;
      }
      wait_ms = static_cast<int>(left / 1000000 + 1);
    }
    const int r = sleep_on(*rt, s.wake_fd, kernel_fd, wait_ms);
    look_at_kernel = kernel_fd >= 0;
    if (r < 0 && errno == EINTR) return -1;  // a signal interrupts a blocking receive, as in the kernel
    if (s.gen.load(std::memory_order_acquire) != gen) {
      errno = EBADF;
      return -1;
    }
  }
}

}  // namespace rawpipe::preload
