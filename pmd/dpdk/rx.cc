// Receive: one rte_eth_rx_burst per call, then each DPDK buffer becomes a rawpipe buffer.
#include <cstring>

#include <rte_ethdev.h>
#include <rte_lcore.h>

#include "pmd/dpdk/bridge.hh"
#include "pmd/dpdk/queue.hh"

namespace rawpipe::dpdk {
namespace {

struct DpdkThreadRegistration {
  bool registered = false;
  ~DpdkThreadRegistration() {
    if (!registered) return;
    // The lcore id is given up: what its transmit caches hold goes back first.
    flush_transmit_caches(rte_lcore_id());
    rte_thread_unregister();
  }
};
thread_local DpdkThreadRegistration t_registration;

// What the device told us about the frame, in rawpipe's flag bits.
RAWPIPE_ALWAYS_INLINE void take_offload_facts(Mbuf* s, const rte_mbuf* m) noexcept {
  const std::uint64_t ol = m->ol_flags;
  // A device that checks no checksum and computes no hash (every virtual one) says nothing: one
  // test instead of four per packet.
  constexpr std::uint64_t kFacts = RTE_MBUF_F_RX_IP_CKSUM_MASK | RTE_MBUF_F_RX_L4_CKSUM_MASK | RTE_MBUF_F_RX_RSS_HASH;
  if ((ol & kFacts) == 0) {
    s->flags = 0;
    return;
  }
  std::uint16_t flags = 0;
  const std::uint64_t ip = ol & RTE_MBUF_F_RX_IP_CKSUM_MASK;
  const std::uint64_t l4 = ol & RTE_MBUF_F_RX_L4_CKSUM_MASK;
  flags |= ip == RTE_MBUF_F_RX_IP_CKSUM_GOOD ? pkt_flag::kL3CsumGood : 0;
  flags |= ip == RTE_MBUF_F_RX_IP_CKSUM_BAD ? pkt_flag::kL3CsumBad : 0;
  flags |= l4 == RTE_MBUF_F_RX_L4_CKSUM_GOOD ? pkt_flag::kL4CsumGood : 0;
  flags |= l4 == RTE_MBUF_F_RX_L4_CKSUM_BAD ? pkt_flag::kL4CsumBad : 0;
  if (ol & RTE_MBUF_F_RX_RSS_HASH) {
    flags |= pkt_flag::kRssHash;
    s->rss_hash = m->hash.rss;
  }
  s->flags = flags;
}

// Copies a (possibly chained) DPDK frame into a fresh rawpipe slot; the caller frees the DPDK
// buffer (in bulk, once per burst). Returns the slot, or nullptr when the frame was too long for
// it (counted, slot returned).
Mbuf* copy_in(DpdkRxQueue* q, const rte_mbuf* m, Mbuf* s) noexcept {
  const std::uint32_t len = rte_pktmbuf_pkt_len(m);
  if (RAWPIPE_UNLIKELY(len > s->buf_len - s->data_off)) {
    counter_add(q->too_long, 1);
    mbuf_free(s);
    return nullptr;
  }
  std::uint8_t* dst = s->data();
  for (const rte_mbuf* seg = m; seg; seg = seg->next) {
    std::memcpy(dst, rte_pktmbuf_mtod(seg, const void*), seg->data_len);
    dst += seg->data_len;
  }
  s->data_len = len;
  take_offload_facts(s, m);
  return s;
}

}  // namespace

void register_dpdk_thread() noexcept {
  t_dpdk_thread_checked = true;
  if (rte_lcore_id() == LCORE_ID_ANY && rte_thread_register() == 0) t_registration.registered = true;
}

std::uint16_t rx_burst_zero_copy(void* queue, Mbuf** pkts, std::uint16_t n) noexcept {
  auto* q = static_cast<DpdkRxQueue*>(queue);
  rte_mbuf* ms[kMaxBurst];
  if (n > kMaxBurst) n = kMaxBurst;
  const std::uint16_t got = rte_eth_rx_burst(q->eth_port, q->eth_queue, ms, n);
  rte_mbuf* spent[kMaxBurst];  // DPDK buffers whose frames were copied (or dropped)
  unsigned nspent = 0;
  std::uint16_t out = 0;
  std::uint64_t bytes = 0;
  std::uint64_t copied = 0;
  // Read once: the stores into the slots below could otherwise alias the queue.
  rte_mempool* const mp = q->mp;
  const rte_mempool* const tx_mp = q->tx_mp;
  const std::uint16_t rp_port = q->rp_port;
  const std::uint16_t eth_queue = q->eth_queue;
  for (std::uint16_t i = 0; i < got; ++i) {
    rte_mbuf* m = ms[i];
    Mbuf* s;
    // A shadow this port transmitted points at the transmit mempool until it is freed; a loopback
    // device (net_ring) hands it back like that.
    if (RAWPIPE_LIKELY((m->pool == mp || m->pool == tx_mp) && m->nb_segs == 1)) {
      // The shadow's data lies inside its slot: the slot is the packet, no copy. The slot's header
      // was reset when the driver took it from the mempool.
      s = MbufBridge::slot_of(m);
      // The device may have written the frame by DMA; a software one (net_pcap) that copied it on
      // this core makes this a prefetch of a line in L1, which costs next to nothing.
      prefetch0(rte_pktmbuf_mtod(m, const void*));
      s->data_off = kMbufHeaderSize + m->data_off;
      s->data_len = m->data_len;
      take_offload_facts(s, m);
      // The shadow goes idle with its lines still in this core's cache (bridge.hh).
      shadow_make_raw_after_receive(m, mp);
    } else {
      spent[nspent++] = m;
      s = q->pool->alloc();
      if (RAWPIPE_UNLIKELY(s == nullptr)) {
        counter_add(q->nombuf, 1);
        continue;
      }
      s = copy_in(q, m, s);
      if (s == nullptr) continue;
      ++copied;
    }
    s->port = rp_port;
    s->queue = eth_queue;
    bytes += s->data_len;
    pkts[out++] = s;
  }
  if (RAWPIPE_UNLIKELY(nspent != 0)) rte_pktmbuf_free_bulk(spent, nspent);
  counter_add(q->packets, out);
  counter_add(q->bytes, bytes);
  if (copied) counter_add(q->copied, copied);
  return out;
}

std::uint16_t rx_burst_copy(void* queue, Mbuf** pkts, std::uint16_t n) noexcept {
  auto* q = static_cast<DpdkRxQueue*>(queue);
  ensure_dpdk_thread();
  rte_mbuf* ms[kMaxBurst];
  Mbuf* slots[kMaxBurst];
  if (n > kMaxBurst) n = kMaxBurst;
  const std::uint16_t got = rte_eth_rx_burst(q->eth_port, q->eth_queue, ms, n);
  if (got == 0) return 0;
  unsigned have = got;
  if (!q->pool->alloc_bulk(slots, got)) {
    // Not enough for the whole burst: take what single allocations give, drop the rest (counted).
    have = 0;
    while (have < got && (slots[have] = q->pool->alloc()) != nullptr) ++have;
  }
  std::uint16_t out = 0;
  std::uint64_t bytes = 0;
  for (unsigned i = 0; i < got; ++i) {
    if (RAWPIPE_UNLIKELY(i >= have)) {
      counter_add(q->nombuf, 1);
      continue;
    }
    Mbuf* s = copy_in(q, ms[i], slots[i]);
    if (s == nullptr) continue;
    s->port = q->rp_port;
    s->queue = q->eth_queue;
    bytes += s->data_len;
    pkts[out++] = s;
  }
  rte_pktmbuf_free_bulk(ms, got);
  counter_add(q->packets, out);
  counter_add(q->bytes, bytes);
  counter_add(q->copied, out);
  return out;
}

}  // namespace rawpipe::dpdk
