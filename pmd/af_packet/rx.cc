// AF_PACKET receive: drain TPACKET_V3 blocks into pool buffers.
#include <linux/if_packet.h>

#include <algorithm>
#include <cstring>

#include "pmd/af_packet/af_packet.hh"

namespace rawpipe::af_packet {
namespace {

constexpr std::uint16_t kTpid8021q = 0x8100;

inline tpacket_block_desc* block_at(RxQueue& q, std::uint32_t i) noexcept {
  return reinterpret_cast<tpacket_block_desc*>(q.ring + std::size_t(i) * q.block_size);
}

inline void give_block_back(RxQueue& q, tpacket_block_desc* bd) noexcept {
  // R1: release pairs with the kernel's read of block_status before it refills the block
  // (prb_curr_blk_in_use / smp_rmb in af_packet.c): our reads of its frames happen first.
  __atomic_store_n(&bd->hdr.bh1.block_status, TP_STATUS_KERNEL, __ATOMIC_RELEASE);
  q.block = q.block + 1 == q.block_count ? 0 : q.block + 1;
  q.frames_left = 0;
}

// The per-frame fields both ring versions carry, under one name.
struct FrameView {
  std::uint32_t mac, snaplen, len, status, sec, nsec, rxhash;
  std::uint16_t vlan_tci, vlan_tpid;
};

inline FrameView view(const tpacket3_hdr* h) noexcept {
  return {h->tp_mac, h->tp_snaplen, h->tp_len, h->tp_status, h->tp_sec, h->tp_nsec, h->hv1.tp_rxhash,
          static_cast<std::uint16_t>(h->hv1.tp_vlan_tci), static_cast<std::uint16_t>(h->hv1.tp_vlan_tpid)};
}
inline FrameView view(const tpacket2_hdr* h, std::uint32_t status) noexcept {
  return {h->tp_mac, h->tp_snaplen, h->tp_len, status, h->tp_sec, h->tp_nsec, 0, h->tp_vlan_tci, h->tp_vlan_tpid};
}

// Copies one kernel frame into m. Returns false (m untouched, reusable) for a frame that cannot be
// delivered whole. `base` is the frame's header (tp_mac counts from it).
template <bool kRxHash>
inline bool copy_frame(RxQueue& q, const std::uint8_t* base, const FrameView& fv, Mbuf* m) noexcept {
  const FrameView* h = &fv;
  const std::uint8_t* src = base + h->mac;
  std::uint32_t len = h->snaplen;
  if (RAWPIPE_UNLIKELY(len < h->len)) {
    count_add(q.truncated, 1);
    return false;
  }
  const bool vlan = (h->status & TP_STATUS_VLAN_VALID) != 0;
  const std::uint32_t out_len = len + (vlan ? 4u : 0u);
  if (RAWPIPE_UNLIKELY(out_len > m->buf_len - m->data_off || len < 12)) {
    count_add(q.oversize, 1);
    return false;
  }
  std::uint8_t* dst = m->data();
  if (vlan) [[unlikely]] {
    // The kernel moved the tag into metadata (VLAN acceleration); put it back so parse and the
    // VLAN rules see the frame as it was on the wire.
    std::uint16_t tpid = (h->status & TP_STATUS_VLAN_TPID_VALID) ? h->vlan_tpid : kTpid8021q;
    std::uint16_t tci = h->vlan_tci;
    std::memcpy(dst, src, 12);
    dst[12] = std::uint8_t(tpid >> 8);
    dst[13] = std::uint8_t(tpid);
    dst[14] = std::uint8_t(tci >> 8);
    dst[15] = std::uint8_t(tci);
    std::memcpy(dst + 16, src + 12, len - 12);
    count_add(q.vlan_reinserted, 1);
  } else {
    std::memcpy(dst, src, len);
  }
  m->data_len = out_len;
  m->port = q.port;
  m->queue = q.queue;
  m->timestamp_ns = std::uint64_t(h->sec) * 1000000000ull + h->nsec;
  std::uint16_t flags = pkt_flag::kTimestamp;
  if constexpr (kRxHash) {
    m->rss_hash = h->rxhash;
    flags |= pkt_flag::kRssHash;
  }
  if (h->status & TP_STATUS_CSUMNOTREADY) [[unlikely]] {
    // Generated on this host (e.g. a veth peer's socket): the checksum field holds only the
    // pseudo-header sum. Finish it so an echo or a forward leaves with a valid checksum.
    if (complete_partial_checksum(dst, out_len)) {
      count_add(q.csum_completed, 1);
      flags |= pkt_flag::kL4CsumGood;
    }
  } else if (h->status & TP_STATUS_CSUM_VALID) {
    flags |= pkt_flag::kL4CsumGood;
  }
  m->flags = flags;
  return true;
}

}  // namespace

std::uint16_t rx_burst(void* queue, Mbuf** pkts, std::uint16_t n) noexcept {
  RxQueue& q = *static_cast<RxQueue*>(queue);
  unsigned got = 0;
  std::uint64_t bytes = 0;
  Mbuf* spare[kMaxBurst];
  unsigned spares = 0;
  n = std::min<std::uint16_t>(n, kMaxBurst);
  while (got < n) {
    tpacket_block_desc* bd = block_at(q, q.block);
    if (q.frames_left == 0) {
      // A1: acquire pairs with the kernel's smp_wmb before it sets TP_STATUS_USER
      // (prb_close_block): the frames of the block are visible once the status is.
      std::uint32_t status = __atomic_load_n(&bd->hdr.bh1.block_status, __ATOMIC_ACQUIRE);
      if (!(status & TP_STATUS_USER)) break;
      q.frames_left = bd->hdr.bh1.num_pkts;
      q.next_frame = reinterpret_cast<const std::uint8_t*>(bd) + bd->hdr.bh1.offset_to_first_pkt;
      if (q.frames_left == 0) {
        give_block_back(q, bd);
        continue;
      }
    }
    unsigned want = std::min<unsigned>(n - got, q.frames_left);
    if (spares < want) {
      if (!q.pool->alloc_bulk(&spare[spares], want - spares)) [[unlikely]] {
        // Leave the frames in the ring: the kernel drops (and counts) what no longer fits.
        count_add(q.counters.rx_nombuf, 1);
        break;
      }
      spares = want;
    }
    for (unsigned i = 0; i < want; ++i) {
      const auto* h = reinterpret_cast<const tpacket3_hdr*>(q.next_frame);
      Mbuf* m = spare[spares - 1];
      if (copy_frame<true>(q, q.next_frame, view(h), m)) {
        --spares;
        bytes += m->data_len;
        pkts[got++] = m;
      }
      q.next_frame += h->tp_next_offset;
    }
    q.frames_left -= want;
    if (q.frames_left == 0) give_block_back(q, bd);
  }
  if (spares) mbuf_free_bulk(spare, spares);
  if (got) {
    count_add(q.counters.rx_packets, got);
    count_add(q.counters.rx_bytes, bytes);
  }
  return static_cast<std::uint16_t>(got);
}

std::uint16_t rx_burst_v2(void* queue, Mbuf** pkts, std::uint16_t n) noexcept {
  RxQueue& q = *static_cast<RxQueue*>(queue);
  n = std::min<std::uint16_t>(n, kMaxBurst);
  Mbuf* bufs[kMaxBurst];
  // Peek first: allocating a burst for an empty ring would cost the pool a round trip per poll.
  unsigned ready = 0;
  std::uint32_t slot = q.block;
  while (ready < n) {
    auto* h = reinterpret_cast<tpacket2_hdr*>(q.ring + std::size_t(slot / q.frames_per_block) * q.block_size +
                                              std::size_t(slot % q.frames_per_block) * q.frame_size);
    // A1: acquire pairs with the kernel's smp_wmb before __packet_set_status(TP_STATUS_USER).
    if (!(__atomic_load_n(&h->tp_status, __ATOMIC_ACQUIRE) & TP_STATUS_USER)) break;
    ++ready;
    slot = slot + 1 == q.frame_count ? 0 : slot + 1;
  }
  if (ready == 0) return 0;
  if (!q.pool->alloc_bulk(bufs, ready)) [[unlikely]] {
    count_add(q.counters.rx_nombuf, 1);  // the frames stay in the ring for the next call
    return 0;
  }
  unsigned got = 0, used = 0;
  std::uint64_t bytes = 0;
  for (unsigned i = 0; i < ready; ++i) {
    auto* base = q.ring + std::size_t(q.block / q.frames_per_block) * q.block_size +
                 std::size_t(q.block % q.frames_per_block) * q.frame_size;
    auto* h = reinterpret_cast<tpacket2_hdr*>(base);
    Mbuf* m = bufs[used];
    if (copy_frame<false>(q, base, view(h, h->tp_status), m)) {
      ++used;
      bytes += m->data_len;
      pkts[got++] = m;
    }
    // R1: release pairs with the kernel's read of tp_status before it rewrites the slot.
    __atomic_store_n(&h->tp_status, TP_STATUS_KERNEL, __ATOMIC_RELEASE);
    q.block = q.block + 1 == q.frame_count ? 0 : q.block + 1;
  }
  if (used < ready) mbuf_free_bulk(bufs + used, ready - used);
  count_add(q.counters.rx_packets, got);
  count_add(q.counters.rx_bytes, bytes);
  return static_cast<std::uint16_t>(got);
}

}  // namespace rawpipe::af_packet
