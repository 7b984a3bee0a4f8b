#include "preload/socket_api.hh"

#include <poll.h>
#include <stdio.h>
#include <stdlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>

#include "preload/fd_table.hh"
#include "preload/kernel_side.hh"
#include "preload/libc.hh"
#include "preload/receive.hh"
#include "preload/runtime.hh"
#include "preload/socket_stats.hh"
#include "rawpipe/socket_extra.h"

namespace rawpipe::preload {
namespace {

// The slot of an offloaded fd, or nullptr with errno EBADF.
Slot* socket_slot(int fd, std::uint32_t* gen = nullptr) {
  FdEntry* e = fd_entry(fd);
  Slot* s = e && running() ? slot_of(*e, gen) : nullptr;
  if (!s) errno = EBADF;
  return s;
}

rawpipe_pipeline* sa_pipeline() {
  Runtime* rt = running();
  return rt ? rt->pipeline : nullptr;
}

int sa_socket_endpoint(int fd) {
  Slot* s = socket_slot(fd);
  return s ? s->endpoint : -1;
}

int sa_register_recv_callback(int fd, rawpipe_filter_fn cb, void* ctx) {
  Slot* s = socket_slot(fd);
  if (!s) return -1;
  Runtime* rt = running();
  return rt->api->endpoint_filter(rt->pipeline, s->endpoint, cb, nullptr, ctx);
}

int sa_recvfrom_zcopy(int fd, rawpipe_packet* pkts, unsigned max, int flags) {
  std::uint32_t gen = 0;
  Slot* s = socket_slot(fd, &gen);
  if (!s) return -1;
  if (!pkts || max == 0) {
    errno = EINVAL;
    return -1;
  }
  Runtime* rt = running();
  const bool nonblock = (flags & MSG_DONTWAIT) || fd_entry(fd)->nonblock.load(std::memory_order_relaxed);
  for (;;) {
    if (!consumer_enter(*s, gen)) {
      errno = EBADF;
      return -1;
    }
    const unsigned n = take_burst(*rt, *s, pkts, max);
    const int ready = n ? 1 : rt->api->arm_fd(rt->pipeline, s->endpoint);
    consumer_leave(*s);
    if (n) {
      count_taken(*s, pkts, n);
      return static_cast<int>(n);
    }
    if (ready == 1) continue;
    if (nonblock) {
      errno = EAGAIN;
      return -1;
    }
    if (sleep_on(*rt, s->wake_fd, -1, -1) < 0 && errno == EINTR) return -1;
  }
}

int sa_free_packets(int fd, const rawpipe_packet* pkts, unsigned n) {
  if (!socket_slot(fd)) return -1;
  Runtime* rt = running();
  return rt->api->free_packets(rt->pipeline, pkts, n);
}

int sa_dump_fd_stats(int fd, int level) {
  Slot* s = socket_slot(fd);
  if (!s) return -1;
  const char* env = getenv("RAWPIPE_LOG_LEVEL");
  if (level > (env ? atoi(env) : RAWPIPE_LOG_INFO)) return 0;
  Runtime* rt = running();
  char line[320];
  const int n = snprintf(line, sizeof line,
                         "rawpipe-preload: fd %d offloaded on endpoint %u: rx %llu packets %llu bytes (%llu truncated; "
                         "%llu more from the kernel side; dropped: %llu ring full, %llu not from the connected peer), "
                         "tx %llu (%llu through the kernel)\n",
                         fd, s->endpoint, static_cast<unsigned long long>(s->rx_packets.load()),
                         static_cast<unsigned long long>(s->rx_bytes.load()),
                         static_cast<unsigned long long>(s->rx_truncated.load()),
                         static_cast<unsigned long long>(s->rx_kernel.load()),
                         static_cast<unsigned long long>(ring_full_since_bind(*s, endpoint_figures(*rt, s->endpoint))),
                         static_cast<unsigned long long>(s->rx_not_peer.load()),
                         static_cast<unsigned long long>(s->tx_packets.load()),
                         static_cast<unsigned long long>(s->tx_kernel.load()));
  (void)!libc().write(2, line, static_cast<std::size_t>(n > 0 ? n : 0));
  return rt->api->dump_fd_stats(rt->pipeline, s->endpoint, level);
}

// The slot whose ring descriptor (Slot::ring_fd) is ring_fd, or nullptr with EBADF.
Slot* ring_slot(int ring_fd, std::uint32_t* gen) {
  Runtime* rt = running();
  if (rt && ring_fd >= 0)
    for (unsigned i = 0; i < rt->n_slots; ++i) {
      Slot& s = rt->slots[i];
      if (s.ring_fd != ring_fd) continue;
      *gen = s.gen.load(std::memory_order_acquire);
      if (s.in_use.load(std::memory_order_acquire)) return &s;
      break;
    }
  errno = EBADF;
  return nullptr;
}

int sa_get_socket_rings_fds(int fd, int* ring_fds, int n) {
  Slot* s = socket_slot(fd);
  if (!s) return -1;
  if (n < 0 || (n > 0 && !ring_fds)) {
    errno = EINVAL;
    return -1;
  }
  if (n > 0) ring_fds[0] = s->ring_fd;
  return 1;
}

int sa_socketxtreme_poll(int ring_fd, rawpipe_completion* out, unsigned n, int flags) {
  std::uint32_t gen = 0;
  Slot* s = ring_slot(ring_fd, &gen);
  if (!s) return -1;
  if (!out || n == 0 || flags != 0) {
    errno = EINVAL;
    return -1;
  }
  Runtime* rt = running();
  rawpipe_packet pkts[64];
  for (;;) {
    if (!consumer_enter(*s, gen)) {
      errno = EBADF;
      return -1;
    }
    const unsigned done = take_burst(*rt, *s, pkts, std::min<unsigned>(n, std::size(pkts)));
    for (unsigned i = 0; i < done; ++i) {
      out[i].packet = pkts[i];
      out[i].user_data = static_cast<std::uint64_t>(s->first_fd);
    }
    // Nothing: arm the ring descriptor so that a wait on it ends with the next packet (1: one
    // slipped in meanwhile; look again).
    const int armed = done ? 0 : rt->api->arm_fd(rt->pipeline, s->endpoint);
    consumer_leave(*s);
    if (done) {
      count_taken(*s, pkts, done);
      return static_cast<int>(done);
    }
    if (armed != 1) return 0;
  }
}

int sa_add_conf_rule(const char* line) {
  std::string error;
  if (add_offload_rule(line, &error)) return 0;
  const std::string msg = "rawpipe-preload: add_conf_rule: " + error + "\n";
  (void)!libc().write(2, msg.data(), msg.size());
  errno = EINVAL;
  return -1;
}

int sa_offload(int fd, int on) {
  Slot* s = socket_slot(fd);
  if (!s) return -1;
  Runtime* rt = running();
  const int r = rt->api->set_endpoint_offload(rt->pipeline, s->endpoint, on);
  // Off, the kernel serves the socket: its side must take every datagram again, copies of what
  // the port sees included (and the receive calls read it once the ring is empty).
  if (r == 0 && s->read_kernel.load(std::memory_order_relaxed) && rt->copies.n) {
    if (on) (void)drop_copies_from(fd, rt->copies);
    else keep_copies(fd);
  }
  return r;
}

const rawpipe_socket_api g_table = {
    sizeof(rawpipe_socket_api), 0, nullptr, &sa_pipeline, &sa_socket_endpoint, &sa_register_recv_callback,
    &sa_recvfrom_zcopy, &sa_free_packets, &sa_dump_fd_stats, &sa_offload, &sa_get_socket_rings_fds,
    &sa_socketxtreme_poll, nullptr, nullptr, &sa_add_conf_rule,
};

}  // namespace

int get_socket_api(void* value, socklen_t* len) {
  if (!value || !len || *len < sizeof(void*)) {
    errno = EINVAL;
    return -1;
  }
  static rawpipe_socket_api table = [] {
    rawpipe_socket_api t = g_table;
    t.api = rawpipe_get_api(RAWPIPE_EXTRA_ABI_VERSION);
    t.socketxtreme_ref_buff = t.api ? t.api->ref_buff : nullptr;
    t.socketxtreme_free_buff = t.api ? t.api->free_buff : nullptr;
    return t;
  }();
  const rawpipe_socket_api* p = &table;
  std::memcpy(value, &p, sizeof p);
  *len = sizeof p;
  return 0;
}

}  // namespace rawpipe::preload
