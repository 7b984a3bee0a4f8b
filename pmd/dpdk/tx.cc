// Transmit: rawpipe buffers become DPDK buffers, one rte_eth_tx_burst per call.
//
// Ownership follows port.hh: the driver takes ms[0..sent); for those the rawpipe buffer is either
// carried by its shadow (DPDK frees the slot when the device is done) or was copied (we release the
// original now). Buffers from `sent` on stay with the caller; copies made for them are freed here.
#include <cstring>

#include <rte_ethdev.h>

#include "pmd/dpdk/bridge.hh"
#include "pmd/dpdk/queue.hh"

namespace rawpipe::dpdk {
namespace {

RAWPIPE_ALWAYS_INLINE void copy_out(rte_mbuf* m, const Mbuf* s) noexcept {
  std::memcpy(rte_pktmbuf_mtod(m, void*), s->data(), s->data_len);
  m->data_len = static_cast<std::uint16_t>(s->data_len);
  m->pkt_len = s->data_len;
}

// Counts what went out and settles the copies. lens[] was read before the driver could free.
RAWPIPE_ALWAYS_INLINE void settle(DpdkTxQueue* q, Mbuf** pkts, rte_mbuf** ms, const bool* copied,
                                  const std::uint32_t* lens, std::uint16_t ready, std::uint16_t sent) noexcept {
  Mbuf* release[kMaxBurst];
  unsigned r = 0;
  std::uint64_t bytes = 0;
  std::uint64_t ncopied = 0;
  for (std::uint16_t i = 0; i < sent; ++i) {
    bytes += lens[i];
    if (copied[i]) {
      release[r++] = pkts[i];
      ++ncopied;
    }
  }
  if (r) mbuf_free_bulk(release, r);
  for (std::uint16_t i = sent; i < ready; ++i) {
    if (copied[i])
      rte_pktmbuf_free(ms[i]);
    else
      shadow_make_raw(ms[i], q->mp);  // the slot stays with the caller: its shadow goes idle again
  }
  if (sent < ready) counter_add(q->refused, ready - sent);
  counter_add(q->packets, sent);
  counter_add(q->bytes, bytes);
  if (ncopied) counter_add(q->copied, ncopied);
}

}  // namespace

std::uint16_t tx_burst_zero_copy(void* queue, Mbuf** pkts, std::uint16_t n) noexcept {
  auto* q = static_cast<DpdkTxQueue*>(queue);
  ensure_dpdk_thread();  // an lcore id gives the thread its transmit cache (bridge.cc)
  rte_mbuf* ms[kMaxBurst];
  bool copied[kMaxBurst];
  std::uint32_t lens[kMaxBurst];
  if (n > kMaxBurst) n = kMaxBurst;
  std::uint16_t ready = 0;
  for (; ready < n; ++ready) {
    Mbuf* s = pkts[ready];
    const std::uint32_t len = s->data_len;
    lens[ready] = len;
    // Relaxed: the caller owns this reference; a count of 1 means nobody else can take one now.
    if (RAWPIPE_LIKELY(s->pool == q->pool && s->refcnt.load(std::memory_order_relaxed) == 1)) {
      rte_mbuf* m = q->shadows[s->index];  // raw while idle (bridge.hh): only the packet's fields to set
      m->data_off = static_cast<std::uint16_t>(s->data_off - kMbufHeaderSize);
      m->data_len = static_cast<std::uint16_t>(len);
      m->pkt_len = len;
      m->port = q->eth_port;
      m->packet_type = 0;
      m->tx_offload = 0;
      m->pool = q->tx_mp;
      ms[ready] = m;
      copied[ready] = false;
      continue;
    }
    // Another pool's buffer, or one with other holders (its shadow could be in flight already).
    rte_mbuf* m = rte_pktmbuf_alloc(q->mp);
    if (RAWPIPE_UNLIKELY(m == nullptr)) {
      counter_add(q->nombuf, 1);
      break;
    }
    if (RAWPIPE_UNLIKELY(len > rte_pktmbuf_tailroom(m))) {
      counter_add(q->too_long, 1);
      rte_pktmbuf_free(m);
      break;
    }
    copy_out(m, s);
    ms[ready] = m;
    copied[ready] = true;
  }
  const std::uint16_t sent = ready ? rte_eth_tx_burst(q->eth_port, q->eth_queue, ms, ready) : 0;
  settle(q, pkts, ms, copied, lens, ready, sent);
  return sent;
}

std::uint16_t tx_burst_copy(void* queue, Mbuf** pkts, std::uint16_t n) noexcept {
  auto* q = static_cast<DpdkTxQueue*>(queue);
  ensure_dpdk_thread();
  rte_mbuf* ms[kMaxBurst];
  bool copied[kMaxBurst];
  std::uint32_t lens[kMaxBurst];
  if (n > kMaxBurst) n = kMaxBurst;
  if (n == 0) return 0;
  if (RAWPIPE_UNLIKELY(rte_pktmbuf_alloc_bulk(q->mp, ms, n) != 0)) {
    counter_add(q->nombuf, 1);
    return 0;
  }
  std::uint16_t ready = 0;
  for (; ready < n; ++ready) {
    const Mbuf* s = pkts[ready];
    if (RAWPIPE_UNLIKELY(s->data_len > rte_pktmbuf_tailroom(ms[ready]))) {
      counter_add(q->too_long, 1);
      break;
    }
    copy_out(ms[ready], s);
    lens[ready] = s->data_len;
    copied[ready] = true;
  }
  if (ready < n) rte_pktmbuf_free_bulk(ms + ready, n - ready);
  const std::uint16_t sent = ready ? rte_eth_tx_burst(q->eth_port, q->eth_queue, ms, ready) : 0;
  settle(q, pkts, ms, copied, lens, ready, sent);
  return sent;
}

}  // namespace rawpipe::dpdk
