#include "preload/socket_api.hh"

#include <poll.h>
#include <stdio.h>
#include <stdlib.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "preload/fd_table.hh"
#include "preload/libc.hh"
#include "preload/receive.hh"
#include "preload/runtime.hh"
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
    unsigned n = 0;
    if (s->has_stash) {  // a packet recv's MSG_PEEK or poll's check took
      pkts[n++] = s->stash;
      s->has_stash = false;
    }
    int k = rt->api->recvfrom_zcopy(rt->pipeline, s->endpoint, pkts + n, max - n);
    if (k == 0 && n == 0 && drive(*rt)) k = rt->api->recvfrom_zcopy(rt->pipeline, s->endpoint, pkts, max);
    // A connected socket keeps its peer's datagrams only, as recv does (receive.cc).
    for (int i = 0; i < k; ++i) {
      if (from_peer(*s, pkts[n])) {
        ++n;
        continue;
      }
      s->rx_not_peer.fetch_add(1, std::memory_order_relaxed);
      rt->api->free_packets(rt->pipeline, &pkts[n], 1);
      std::memmove(&pkts[n], &pkts[n + 1], sizeof pkts[0] * static_cast<unsigned>(k - i - 1));
    }
    const int ready = n ? 1 : rt->api->arm_fd(rt->pipeline, s->endpoint);
    consumer_leave(*s);
    if (n) {
      s->rx_packets.fetch_add(n, std::memory_order_relaxed);
      return static_cast<int>(n);
    }
    if (ready == 1) continue;
    if (nonblock) {
      errno = EAGAIN;
      return -1;
    }
    if (sleep_on(*rt, s->wake_fd, -1) < 0 && errno == EINTR) return -1;
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
  char line[256];
  const int n = snprintf(line, sizeof line,
                         "rawpipe-preload: fd %d offloaded on endpoint %u: rx %llu packets %llu bytes (%llu truncated, "
                         "%llu dropped: not from the connected peer), tx %llu (%llu through the kernel)\n",
                         fd, s->endpoint, static_cast<unsigned long long>(s->rx_packets.load()),
                         static_cast<unsigned long long>(s->rx_bytes.load()),
                         static_cast<unsigned long long>(s->rx_truncated.load()),
                         static_cast<unsigned long long>(s->rx_not_peer.load()),
                         static_cast<unsigned long long>(s->tx_packets.load()),
                         static_cast<unsigned long long>(s->tx_kernel.load()));
  (void)!libc().write(2, line, static_cast<std::size_t>(n > 0 ? n : 0));
  return rt->api->dump_fd_stats(rt->pipeline, s->endpoint, level);
}

int sa_offload(int fd, int on) {
  Slot* s = socket_slot(fd);
  if (!s) return -1;
  Runtime* rt = running();
  return rt->api->set_endpoint_offload(rt->pipeline, s->endpoint, on);
}

const rawpipe_socket_api g_table = {
    sizeof(rawpipe_socket_api), 0, nullptr, &sa_pipeline, &sa_socket_endpoint, &sa_register_recv_callback,
    &sa_recvfrom_zcopy, &sa_free_packets, &sa_dump_fd_stats, &sa_offload,
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
    return t;
  }();
  const rawpipe_socket_api* p = &table;
  std::memcpy(value, &p, sizeof p);
  *len = sizeof p;
  return 0;
}

}  // namespace rawpipe::preload
