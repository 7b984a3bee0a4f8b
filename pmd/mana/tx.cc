#include "pmd/mana/tx.hh"

#include <cstring>

#include "pmd/rdma/doorbell.hh"

namespace rawpipe::mana {
namespace {

constexpr std::uint32_t kTxWqeFlags = dma_oob_flags(1, kSmallOobBytes);
constexpr std::uint8_t kProtoTcp = 6;
constexpr std::uint8_t kProtoUdp = 17;

RAWPIPE_ALWAYS_INLINE void bump(std::atomic<std::uint64_t>& c, std::uint64_t n) noexcept {
  // Single writer (the queue's lcore); the stats reader only needs an untorn value.
  c.store(c.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
}

RAWPIPE_ALWAYS_INLINE std::uint32_t be16_at(const std::uint8_t* p) noexcept {
  return std::uint32_t(p[0]) << 8 | p[1];
}

RAWPIPE_ALWAYS_INLINE std::uint32_t sum_words(const std::uint8_t* p, unsigned bytes) noexcept {
  std::uint32_t s = 0;
  for (unsigned i = 0; i + 1 < bytes; i += 2) s += be16_at(p + i);
  return s;
}

// Frees retired buffers in bursts.
struct FreeBatch {
  Mbuf* bufs[kMaxBurst];
  unsigned n = 0;
  void add(Mbuf* m) noexcept {
    bufs[n++] = m;
    if (n == kMaxBurst) flush();
  }
  void flush() noexcept {
    if (n) mbuf_free_bulk(bufs, n);
    n = 0;
  }
};

}  // namespace

bool pseudo_header_sum(const Mbuf& m, std::uint16_t& out) noexcept {
  if (m.l4_off == 0 || (m.l4_proto != kProtoUdp && m.l4_proto != kProtoTcp)) return false;
  const std::uint8_t* ip = m.data() + m.l3_off;
  std::uint32_t s;
  std::uint32_t l4_len;
  if (m.l3_type == L3Type::kIpv4) {
    if (m.l3_off + 20u > m.data_len) return false;
    const std::uint32_t ihl = (ip[0] & 0x0f) * 4u;
    const std::uint32_t total = be16_at(ip + 2);
    if (total < ihl) return false;
    l4_len = total - ihl;
    s = sum_words(ip + 12, 8);
  } else if (m.l3_type == L3Type::kIpv6) {
    if (m.l3_off + 40u > m.data_len) return false;
    const std::uint32_t ext = m.l4_off - m.l3_off - 40u;
    const std::uint32_t payload = be16_at(ip + 4);
    if (payload < ext) return false;
    l4_len = payload - ext;
    s = sum_words(ip + 8, 32);
  } else {
    return false;
  }
  s += m.l4_proto + (l4_len >> 16) + (l4_len & 0xffff);
  while (s >> 16) s = (s & 0xffff) + (s >> 16);
  out = static_cast<std::uint16_t>(s);
  return true;
}

unsigned tx_reap(TxQueue& q) noexcept {
  FreeBatch done;
  unsigned retired = 0;
  std::uint64_t ok = 0, ok_bytes = 0, errors = 0, cqes = 0;
  for (;;) {
    const Cqe* e;
    const CqPoll st = cq_peek(q.cq, e);
    if (st == CqPoll::kEmpty) break;
    if (st == CqPoll::kOverflow) [[unlikely]] {
      // Cannot happen with a CQ at least as large as the SQ. If it does, the reap stops at the
      // entry, as DPDK's gdma_poll_completion_queue stops (drivers/net/mana/gdma.c), and the next
      // reap looks again; WQEs not reaped keep their buffers (the NIC may still own them) and
      // their SQ space, so sending goes on only as far as the SQ has room. stop() frees them.
      bump(q.counters.cq_overflow, 1);
      break;
    }
    const auto* oob = reinterpret_cast<const TxCompOob*>(e->client);
    const std::uint32_t type = cqe_header_type(oob->header);
    ++cqes;
    if (type == kCqeTxOkay) [[likely]] {
      // One CQE for the first unsuppressed WQE and every suppressed WQE before it.
      while (q.desc_tail != q.desc_head) {
        const std::uint32_t i = q.desc_tail++ & q.bufs_mask;
        Mbuf* m = q.bufs[i];
        ++ok;
        ok_bytes += m->data_len;
        done.add(m);
        ++q.sq.tail;
        ++retired;
        if (!q.suppressed[i]) break;
      }
    } else {
      // The NIC writes an error CQE for every failing WQE, suppressed or not. Its tx_wqe_offset
      // names the WQE in 32-byte units (unlike rx_wqe_offset, which is in bytes: the kernel's
      // mana_ib cq.c divides only the latter by GDMA_WQE_BU_SIZE); the suppressed WQEs before it
      // succeeded without a CQE of their own. Compared modulo the ring's BU count, which reads
      // both a ring offset and rdma-core's 27-bit free-running queue offset (providers/mana
      // gdma.h GDMA_QUEUE_OFFSET_WIDTH) the same way. Every WQE here is one BU, so descriptor
      // d starts at BU sq.tail + (d - desc_tail).
      const std::uint32_t ring_bu_mask = q.sq.capacity_bu() - 1;
      const std::uint32_t at = tx_comp_wqe_offset(oob->offsets) & ring_bu_mask;
      std::uint32_t j = q.desc_tail;
      while (j != q.desc_head && ((q.sq.tail + (j - q.desc_tail)) & ring_bu_mask) != at) ++j;
      if (j == q.desc_head) j = q.desc_tail;  // offset not recognised: retire one WQE (DPDK's rule)
      while (q.desc_tail != q.desc_head) {
        const std::uint32_t d = q.desc_tail++;
        Mbuf* m = q.bufs[d & q.bufs_mask];
        if (d == j) {
          ++errors;
        } else {
          ++ok;
          ok_bytes += m->data_len;
        }
        done.add(m);
        ++q.sq.tail;
        ++retired;
        if (d == j) break;
      }
      const std::uint32_t slot =
          (type >= kFirstTxError && type <= kLastTxError) ? type - kFirstTxError : kTxErrorTypes;
      bump(q.counters.error_types[slot], 1);
    }
    ++q.cq.head;
  }
  done.flush();
  if (cqes) {
    bump(q.counters.cqes, cqes);
    bump(q.counters.packets, ok);
    bump(q.counters.bytes, ok_bytes);
    if (errors) bump(q.counters.errors, errors);
  }
  return retired;
}

template <class Db>
std::uint16_t tx_burst(void* queue, Mbuf** pkts, std::uint16_t n) noexcept {
  TxQueue& q = *static_cast<TxQueue*>(queue);
  tx_reap(q);

  std::uint32_t room = q.sq.count - q.outstanding();
  const std::uint32_t bu_room = q.sq.capacity_bu() - (q.sq.head - q.sq.tail);
  if (bu_room < room) room = bu_room;
  unsigned k = n < room ? n : room;
  // The NIC can only read registered memory: stop before the first packet outside the region
  // (the caller keeps it and the rest). Decided before posting so the burst's last WQE is the
  // unsuppressed one.
  for (unsigned i = 0; i < k; ++i) {
    const std::uint8_t* data = pkts[i]->data();
    if (data < q.mr_begin || data + pkts[i]->data_len > q.mr_end) [[unlikely]] {
      bump(q.counters.not_registered, 1);
      k = i;
      break;
    }
  }

  unsigned sent = 0;
  std::uint64_t csum = 0;
  for (; sent < k; ++sent) {
    Mbuf* m = pkts[sent];
    const std::uint8_t* data = m->data();
    std::uint32_t flags = tx_oob::kPktFmtShort;
    std::uint32_t trans_off = 0;
    if (m->tx_flags) [[unlikely]] {
      if ((m->tx_flags & tx_flag::kL3Csum) && m->l3_type == L3Type::kIpv4)
        flags |= tx_oob::kOuterIpv4 | tx_oob::kCompIpHdrCsum;
      std::uint16_t phdr;
      if ((m->tx_flags & tx_flag::kL4Csum) && pseudo_header_sum(*m, phdr)) {
        flags |= m->l3_type == L3Type::kIpv4 ? tx_oob::kOuterIpv4 : tx_oob::kOuterIpv6;
        std::uint8_t* l4 = m->data() + m->l4_off;
        const unsigned field = m->l4_proto == kProtoUdp ? 6 : 16;
        l4[field] = static_cast<std::uint8_t>(phdr >> 8);
        l4[field + 1] = static_cast<std::uint8_t>(phdr);
        flags |= m->l4_proto == kProtoUdp ? tx_oob::kCompUdpCsum : tx_oob::kCompTcpCsum;
        trans_off = m->l4_off;
      }
      if (flags & (tx_oob::kCompIpHdrCsum | tx_oob::kCompUdpCsum | tx_oob::kCompTcpCsum)) ++csum;
    }
    // Suppress the CQE on every WQE of the burst but the last.
    const bool suppress = sent + 1 < k;
    if (suppress) flags |= tx_oob::kSuppressCqe;

    auto* w = reinterpret_cast<TxWqe*>(q.sq.at(q.sq.head));
    w->dma.dw0 = 0;
    w->dma.flags = kTxWqeFlags;
    w->oob.dw0 = tx_oob_dw0(flags, q.cq.id);
    w->oob.dw1 = tx_oob_dw1(trans_off, q.vsq_frame, q.vp_offset);
    w->sge.address = reinterpret_cast<std::uintptr_t>(data);
    w->sge.mem_key = q.lkey;
    w->sge.size = m->data_len;
    ++q.sq.head;

    const std::uint32_t d = q.desc_head++ & q.bufs_mask;
    q.bufs[d] = m;
    q.suppressed[d] = suppress;
  }
  if (sent) {
    doorbell_of<Db>(q).mmio64(q.db_page, kDoorbellSq, sq_doorbell(q.sq.id, q.sq.head));
    if (csum) bump(q.counters.csum_offloaded, csum);
  }
  return static_cast<std::uint16_t>(sent);
}

void tx_release_all(TxQueue& q) noexcept {
  FreeBatch b;
  while (q.desc_tail != q.desc_head) b.add(q.bufs[q.desc_tail++ & q.bufs_mask]);
  b.flush();
  q.sq.tail = q.sq.head;
}

template std::uint16_t tx_burst<rdma::HwDoorbell>(void*, Mbuf**, std::uint16_t) noexcept;
template std::uint16_t tx_burst<rdma::ModelDoorbell>(void*, Mbuf**, std::uint16_t) noexcept;

}  // namespace rawpipe::mana
