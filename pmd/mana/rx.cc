#include "pmd/mana/rx.hh"

#include <cstring>

#include "pmd/rdma/doorbell.hh"

namespace rawpipe::mana {
namespace {

constexpr std::uint32_t kRxWqeFlags = dma_oob_flags(1, kSmallOobBytes);
constexpr std::uint16_t kTpidVlan = 0x8100;

RAWPIPE_ALWAYS_INLINE void bump(std::atomic<std::uint64_t>& c, std::uint64_t n) noexcept {
  // Single writer (the polling lcore); the stats reader only needs an untorn value.
  c.store(c.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
}

// Metadata flags one receive CQE gives every packet it carries.
RAWPIPE_ALWAYS_INLINE std::uint16_t rx_pkt_flags(std::uint32_t f) noexcept {
  std::uint16_t out = 0;
  if (f & rx_flag::kIpCsumOk) out |= pkt_flag::kL3CsumGood;
  if (f & rx_flag::kIpCsumFail) out |= pkt_flag::kL3CsumBad;
  if (f & (rx_flag::kTcpCsumOk | rx_flag::kUdpCsumOk)) out |= pkt_flag::kL4CsumGood;
  if (f & (rx_flag::kTcpCsumFail | rx_flag::kUdpCsumFail)) out |= pkt_flag::kL4CsumBad;
  // Any NDIS hash type means the NIC hashed the packet (the kernel driver's test).
  if (f & rx_flag::kHashTypeMask) out |= pkt_flag::kRssHash;
  return out;
}

// MANA always strips the outer 802.1Q tag and reports its 12-bit VLAN id; put it back in front of
// the payload so parse and classify see the frame as it was sent (PCP and DEI are not reported
// and come back as 0).
RAWPIPE_ALWAYS_INLINE void reinsert_vlan(RxQueue& q, Mbuf* m, std::uint32_t flags, std::uint64_t& no_room,
                                         std::uint64_t& done) noexcept {
  if (m->data_off < kMbufHeaderSize + 4 || m->data_len < 12) {
    ++no_room;
    return;
  }
  (void)q;
  m->data_off -= 4;
  m->data_len += 4;
  std::uint8_t* d = m->data();
  std::memmove(d, d + 4, 12);
  const std::uint16_t tci = static_cast<std::uint16_t>(flags & rx_flag::kVlanIdMask);
  d[12] = kTpidVlan >> 8;
  d[13] = kTpidVlan & 0xff;
  d[14] = static_cast<std::uint8_t>(tci >> 8);
  d[15] = static_cast<std::uint8_t>(tci);
  ++done;
}

}  // namespace

void rx_post_one(RxQueue& q, Mbuf* m) noexcept {
  auto* w = reinterpret_cast<RxWqe*>(q.rq.at(q.rq.head));
  w->dma.dw0 = 0;
  w->dma.flags = kRxWqeFlags;
  std::memset(w->oob, 0, sizeof(w->oob));
  w->sge.address = reinterpret_cast<std::uintptr_t>(m->data());
  w->sge.mem_key = q.lkey;
  w->sge.size = m->buf_len - m->data_off;
  q.bufs[q.rq.head & q.bufs_mask] = m;
  ++q.rq.head;
}

template <class Db>
void rx_refill(RxQueue& q) noexcept {
  std::uint32_t need = q.target_posted - q.posted();
  if (need == 0) return;
  bool posted = false;
  while (need) {
    Mbuf* fresh[kDefaultBurst];
    const unsigned take = need < kDefaultBurst ? need : kDefaultBurst;
    if (!q.pool->alloc_bulk(fresh, take)) [[unlikely]] {
      // The RQ runs short until a later burst finds buffers; the NIC drops what it cannot place.
      bump(q.counters.refill_failed, 1);
      break;
    }
    for (unsigned i = 0; i < take; ++i) rx_post_one(q, fresh[i]);
    need -= take;
    posted = true;
  }
  if (posted) doorbell_of<Db>(q).mmio64(q.db_page, kDoorbellRq, rq_doorbell(q.rq.id, q.rq.head));
}

template <class Db>
std::uint16_t rx_burst(void* queue, Mbuf** pkts, std::uint16_t n) noexcept {
  RxQueue& q = *static_cast<RxQueue*>(queue);

  std::uint16_t got = 0;
  std::uint64_t bytes = 0, cqes = 0, coalesced = 0, truncated = 0, fences = 0, bad = 0;
  std::uint64_t vlan_done = 0, vlan_no_room = 0;
  Mbuf* dead[kMaxBurst];
  unsigned ndead = 0;

  while (got < n) {
    const Cqe* e;
    const CqPoll st = cq_peek(q.cq, e);
    if (st == CqPoll::kEmpty) break;
    if (st == CqPoll::kOverflow) [[unlikely]] {
      // The burst ends here with what it has; the next one polls the same entry again. That is
      // what DPDK's gdma_poll_completion_queue does (drivers/net/mana/gdma.c: log "CQ overflowed"
      // and break, nothing latched) and, within one poll, the kernel's mana_gd_poll_cq
      // (drivers/net/ethernet/microsoft/mana/gdma_main.c: mana_gd_read_cqe returns -1). Neither
      // gives the queue up for good, so neither does rawpipe: a stop/start resynchronises it.
      bump(q.counters.cq_overflow, 1);
      break;
    }
    const auto* oob = reinterpret_cast<const RxCompOob*>(e->client);
    const std::uint32_t type = cqe_header_type(oob->header);
    if (type == kCqeRxOkay || type == kCqeRxCoalesced4) [[likely]] {
      const std::uint32_t f = oob->flags;
      const std::uint16_t mflags = rx_pkt_flags(f);
      unsigned i = q.ppi_next;
      bool stopped = false;
      for (; i < kRxPacketsPerCqe; ++i) {
        const std::uint32_t len = oob->ppi[i].len & 0xffff;
        if (len == 0) break;
        if (got == n) {
          // The burst is full in the middle of a coalesced CQE: resume at packet i next time.
          // The CQE stays valid: the NIC cannot lap a CQ that holds every posted WQE.
          q.ppi_next = static_cast<std::uint8_t>(i);
          stopped = true;
          break;
        }
        if (!q.posted()) [[unlikely]] {
          // More packets than posted WQEs (refill found the pool empty, or a corrupt CQE):
          // handing out a slot again would give one buffer to two owners.
          ++bad;
          break;
        }
        Mbuf* m = q.bufs[q.rq.tail & q.bufs_mask];
        ++q.rq.tail;
        if (len > m->buf_len - m->data_off) [[unlikely]] {
          // Longer than the SGE we posted: the NIC cannot have written it, so the length is
          // corrupt; never hand out bytes past the buffer.
          ++truncated;
          dead[ndead++] = m;
          if (ndead == kMaxBurst) {
            mbuf_free_bulk(dead, ndead);
            ndead = 0;
          }
          continue;
        }
        m->data_len = len;
        m->port = q.port_id;
        m->queue = q.queue_id;
        m->flags = mflags;
        m->rss_hash = oob->ppi[i].hash;
        if (f & rx_flag::kVlanPresent) [[unlikely]] reinsert_vlan(q, m, f, vlan_no_room, vlan_done);
        prefetch0(m->data());  // written by the NIC's DMA
        bytes += m->data_len;
        pkts[got++] = m;
      }
      if (stopped) break;
      if (i > 1) ++coalesced;
      q.ppi_next = 0;
    } else if (type == kCqeRxObjectFence) {
      ++fences;  // marks a queue-object change; consumes no WQE (Linux mana_process_rx_cqe)
    } else {
      // Truncated or unknown: one WQE is retired with no packet for us.
      if (type == kCqeRxTruncated) ++truncated;
      else ++bad;
      if (q.posted()) {
        dead[ndead++] = q.bufs[q.rq.tail & q.bufs_mask];
        ++q.rq.tail;
        if (ndead == kMaxBurst) {
          mbuf_free_bulk(dead, ndead);
          ndead = 0;
        }
      }
    }
    ++cqes;
    ++q.cq.head;
  }
  if (ndead) mbuf_free_bulk(dead, ndead);

  rx_refill<Db>(q);

  if (got) {
    bump(q.counters.packets, got);
    bump(q.counters.bytes, bytes);
  }
  if (cqes) bump(q.counters.cqes, cqes);
  if (coalesced) bump(q.counters.coalesced_cqes, coalesced);
  if (truncated | fences | bad | vlan_done | vlan_no_room) [[unlikely]] {
    bump(q.counters.truncated, truncated);
    bump(q.counters.fences, fences);
    bump(q.counters.bad_cqes, bad);
    bump(q.counters.vlan_reinserted, vlan_done);
    bump(q.counters.vlan_no_headroom, vlan_no_room);
  }
  return got;
}

void rx_release_all(RxQueue& q) noexcept {
  while (q.rq.tail != q.rq.head) {
    mbuf_free(q.bufs[q.rq.tail & q.bufs_mask]);
    ++q.rq.tail;
  }
}

template void rx_refill<rdma::HwDoorbell>(RxQueue&) noexcept;
template void rx_refill<rdma::ModelDoorbell>(RxQueue&) noexcept;
template std::uint16_t rx_burst<rdma::HwDoorbell>(void*, Mbuf**, std::uint16_t) noexcept;
template std::uint16_t rx_burst<rdma::ModelDoorbell>(void*, Mbuf**, std::uint16_t) noexcept;

}  // namespace rawpipe::mana
