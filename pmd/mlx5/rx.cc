#include "pmd/mlx5/rx.hh"

#include <algorithm>
#include <cstring>

#include "pipeline/buf/pool.hh"
#include "pmd/mlx5/cq.hh"
#include "pmd/mlx5/hw.hh"

namespace rawpipe::mlx5 {
namespace {

using rdma::HwDoorbell;
using rdma::ModelDoorbell;

RAWPIPE_ALWAYS_INLINE void invalidate(Cqe64* cqe) noexcept {
  // Relaxed: the device rewrites this slot only after the CQ doorbell record (a release) passes it.
  std::atomic_ref<std::uint8_t>(cqe->op_own).store(kCqeInvalidOpOwn, std::memory_order_relaxed);
}

// Packet flags the CQE reports (checksums verified by the NIC, stripped VLAN). L3_OK/L4_OK set
// means verified good; clear can mean "not checked" (options, fragments), so a checksum is
// reported good or not verified, never bad, as DPDK's rxq_cq_to_ol_flags does
// (drivers/net/mlx5/mlx5_rx.c); the pipeline verifies what the NIC did not.
RAWPIPE_ALWAYS_INLINE std::uint16_t cqe_flags(const Cqe64* c) noexcept {
  const std::uint8_t hds = c->hds_ip_ext;
  const std::uint8_t t = c->l4_hdr_type_etc;
  std::uint16_t f = 0;
  if ((t & kCqeL3Mask) == kCqeL3Ipv4 && (hds & kCqeL3Ok)) f |= pkt_flag::kL3CsumGood;
  if ((t & kCqeL4Mask) != 0 && !(t & 0x80) && (hds & kCqeL4Ok)) f |= pkt_flag::kL4CsumGood;
  if (t & kCqeVlanStripped) f |= pkt_flag::kVlan;
  if (c->rx_hash_type != 0) f |= pkt_flag::kRssHash;
  return f;
}

RAWPIPE_ALWAYS_INLINE std::uint32_t cqe_flow_tag(RxQueue& q, const Cqe64* c, std::uint16_t& flags) noexcept {
  const std::uint32_t v = be32(c->sop_drop_qpn);
  if (RAWPIPE_UNLIKELY(v >> 24)) count_add(q.hw_drops, v >> 24);
  const std::uint32_t tag = v & kFlowTagMask;
  if (tag) flags |= pkt_flag::kFlowTag;
  return tag;
}

RAWPIPE_ALWAYS_INLINE void fill(RxQueue& q, Mbuf* m, std::uint32_t len, std::uint32_t hash, std::uint16_t flags,
                                std::uint32_t tag, std::uint16_t vlan) noexcept {
  // A length beyond the buffer cannot come from the NIC (it writes at most data_room): a corrupt
  // CQE. Never hand out bytes past the buffer; the frame goes on cut, counted as an rx error.
  const std::uint32_t room = m->buf_len - m->data_off;
  if (len > room) [[unlikely]] {
    len = room;
    count_add(q.stats.rx_errors);
  }
  m->data_len = len;
  m->port = q.port_id;
  m->queue = q.queue_id;
  m->flags = flags;
  m->rss_hash = hash;
  m->flow_tag = tag;
  if (flags & pkt_flag::kVlan) {
    m->vlan_tci[0] = vlan;
    m->vlan_count = 1;
  }
}

// Tops the stash up to the burst being asked for, no further. A queue that stashed more would
// hold spare buffers its neighbours on the same pool need: with many queues a pool sized for its
// rings plus a burst per queue (pool_demand) ran dry while stashes sat full. DPDK's mlx5_rx_burst
// holds nothing per queue either; it takes each replacement from the mempool as it goes.
void refill_stash(RxQueue& q, unsigned burst) noexcept {
  unsigned want = std::min(burst, kMaxBurst) - q.stash_len;
  // All-or-nothing pool: retry in smaller blocks so a nearly empty pool still yields all it has.
  for (unsigned block = want; want != 0 && block != 0;) {
    block = std::min(block, want);
    if (q.pool->alloc_bulk(&q.stash[q.stash_len], block)) {
      q.stash_len += block;
      want -= block;
    } else {
      block /= 2;
    }
  }
}

RAWPIPE_ALWAYS_INLINE WqeDataSeg* rq_wqe(const RxQueue& q, std::uint32_t slot) noexcept {
  return reinterpret_cast<WqeDataSeg*>(q.rq.buf + std::size_t(slot) * q.rq.stride);
}

RAWPIPE_ALWAYS_INLINE std::uint64_t data_addr(Mbuf* m) noexcept {
  return reinterpret_cast<std::uintptr_t>(m->buf_addr() + m->data_off);
}

// Hands the buffer in RQ slot `slot` to the caller and posts a stashed one in its place; with an
// empty stash the frame is dropped and the buffer stays posted (the ring never runs dry).
RAWPIPE_ALWAYS_INLINE bool take_cyclic(RxQueue& q, std::uint32_t slot, Mbuf*& out) noexcept {
  if (RAWPIPE_UNLIKELY(q.stash_len == 0)) {
    count_add(q.stats.rx_nombuf);
    return false;
  }
  out = q.elts[slot];
  Mbuf* fresh = q.stash[--q.stash_len];
  q.elts[slot] = fresh;
  rq_wqe(q, slot)->addr = be64(data_addr(fresh));
  return true;
}

// Only these two opcodes are error CQEs (DPDK check_cqe_error in drivers/common/mlx5/
// mlx5_common.h); any other valid opcode completes a received frame.
RAWPIPE_ALWAYS_INLINE bool is_error_opcode(int op) noexcept {
  const std::uint8_t opcode = cqe_opcode(static_cast<std::uint8_t>(op));
  return opcode == kCqeReqErr || opcode == kCqeRespErr;
}

void count_error(RxQueue& q, const Cqe64* cqe) noexcept {
  const auto* err = reinterpret_cast<const ErrCqe*>(cqe);
  count_add(q.syndromes.count[err->syndrome]);
  if (err->syndrome != kSyndromeWrFlush) count_add(q.stats.rx_errors);
  q.needs_reset = true;
}

// The syndromes after which the RQ is in the error state and must go through RESET, as DPDK's
// mlx5_rx_err_handle decides (drivers/net/mlx5/mlx5_rx.c, DPDK 38f72e50): LOCAL_QP_OP, LOCAL_PROT
// and WR_FLUSH. Any other (LOCAL_LENGTH: a frame longer than the buffer) spoils one WQE only: the
// CQE is skipped and its WQE retired while the queue keeps running.
RAWPIPE_ALWAYS_INLINE bool critical_syndrome(const Cqe64* cqe) noexcept {
  const std::uint8_t s = reinterpret_cast<const ErrCqe*>(cqe)->syndrome;
  return s == kSyndromeLocalQpOp || s == kSyndromeLocalProt || s == kSyndromeWrFlush;
}

// A non-critical error CQE: counted by syndrome and as an rx error; the caller retires the WQE
// (its buffer stays posted in the slot and is reused as is).
RAWPIPE_ALWAYS_INLINE void count_skipped_error(RxQueue& q, const Cqe64* cqe) noexcept {
  count_add(q.syndromes.count[reinterpret_cast<const ErrCqe*>(cqe)->syndrome]);
  count_add(q.stats.rx_errors);
  count_add(q.skipped_error_cqes);
}

void write_all_wqes(RxQueue& q, RxMode mode) noexcept {
  for (std::uint32_t s = 0; s < q.rq.wqe_cnt; ++s) {
    if (mode == RxMode::kCyclic) {
      WqeDataSeg* d = rq_wqe(q, s);
      d->byte_count = be32(q.data_room);
      d->lkey = be32(q.lkey);
      d->addr = be64(data_addr(q.elts[s]));
    } else {
      auto* w = reinterpret_cast<MprqWqe*>(q.rq.buf + std::size_t(s) * q.rq.stride);
      std::memset(&w->next, 0, sizeof(w->next));
      const std::size_t wqe_bytes = std::size_t(q.stride_size) * q.strides_per_wqe;
      w->data.byte_count = be32(static_cast<std::uint32_t>(wqe_bytes));
      w->data.lkey = be32(q.lkey);
      w->data.addr = be64(reinterpret_cast<std::uintptr_t>(q.mprq_buf + s * wqe_bytes));
    }
  }
}

// Error recovery, after an error CQE: the control hook resets the hardware queue (after which
// the device writes no more CQEs for it), the CQEs it left (flush errors) are consumed, and every
// WQE is posted again with the buffers the queue already holds. Nothing is allocated or lost.
template <class Db>
void rx_reset(RxQueue& q, RxMode mode) noexcept {
  if (!q.control.reset || !q.control.reset(q.control.ctx, q.queue_id)) return;  // retried next burst
  std::uint32_t ci = q.cq_ci;
  if (q.zip.left) ci = q.zip.title_ci + q.zip.total;  // the rest of a session is dropped
  for (;;) {
    Cqe64* c = cqe_at(q.cq, ci);
    int op = owned(c, ci, q.cq_log);
    if (op < 0) break;
    if (is_error_opcode(op)) {
      count_add(q.syndromes.count[reinterpret_cast<ErrCqe*>(c)->syndrome]);
      ++ci;
    } else if (cqe_format(static_cast<std::uint8_t>(op)) == kCqeFormatCompressed) {
      // A corrupt title (0 or more minis than the CQ holds) must not stall or lap the walk.
      const std::uint32_t total = std::clamp<std::uint32_t>(be32(c->byte_cnt), 1, q.cq.cqe_cnt);
      for (std::uint32_t i = 0; i < total; ++i) invalidate(cqe_at(q.cq, ci + i));
      count_add(q.stats.rx_errors, total);
      ci += total;
    } else {
      count_add(q.stats.rx_errors);  // completed before the reset but behind the error: dropped
      ++ci;
    }
  }
  q.zip = {};
  q.cq_ci = ci;
  q.rq_ci = 0;
  q.strides_consumed = 0;
  write_all_wqes(q, mode);
  Db db = doorbell<Db>(q);
  db.record(&q.cq.dbrec[0], be32(ci & kCqCiMask));
  db.record(q.rq.dbrec, be32(q.rq.wqe_cnt & kWqeCounterMask));
  q.needs_reset = false;
  count_add(q.resets);
}

template <class Db>
RAWPIPE_ALWAYS_INLINE void publish(RxQueue& q, std::uint32_t ci, std::uint32_t rq_ci) noexcept {
  if (ci == q.cq_ci && rq_ci == q.rq_ci) return;
  q.cq_ci = ci;
  q.rq_ci = rq_ci;
  Db db = doorbell<Db>(q);
  // CQ record first, then the RQ record (DPDK's order): the freed CQ slots are announced before
  // the WQEs that may fill them.
  db.record(&q.cq.dbrec[0], be32(ci & kCqCiMask));
  db.record(q.rq.dbrec, be32((rq_ci + q.rq.wqe_cnt) & kWqeCounterMask));
}

template <class Db, bool kZip>
std::uint16_t rx_burst_cyclic(void* queue, Mbuf** pkts, std::uint16_t n) noexcept {
  RxQueue& q = *static_cast<RxQueue*>(queue);
  if (RAWPIPE_UNLIKELY(q.needs_reset)) {
    rx_reset<Db>(q, RxMode::kCyclic);
    if (q.needs_reset) return 0;
  }
  if (q.stash_len < n) refill_stash(q, n);
  const std::uint32_t rq_mask = q.rq.wqe_cnt - 1;
  std::uint32_t ci = q.cq_ci;
  std::uint32_t rq_ci = q.rq_ci;
  std::uint16_t k = 0;
  std::uint64_t bytes = 0;
  while (k < n) {
    if constexpr (kZip) {
      if (q.zip.left) {
        auto& z = q.zip;
        while (z.left && k < n) {
          const std::uint32_t i = z.next;
          const auto* mini = reinterpret_cast<const MiniCqe8*>(cqe_at(q.cq, z.title_ci + mini_array_slot(i))) + (i & 7);
          const std::uint32_t len = be32(mini->byte_cnt);
          Mbuf* m;
          if (take_cyclic(q, rq_ci & rq_mask, m)) {
            fill(q, m, len, be32(mini->rx_hash_result), z.flags, z.flow_tag, z.vlan);
            prefetch0(m->data());
            bytes += len;
            pkts[k++] = m;
          }
          ++rq_ci;
          ++z.next;
          --z.left;
        }
        if (z.left) break;
        // Session consumed: make every slot it used look hardware-owned again, or a hole would
        // pass the owner test on a later pass with stale contents.
        for (std::uint32_t s = 0; s < z.total; ++s) invalidate(cqe_at(q.cq, z.title_ci + s));
        ci = z.title_ci + z.total;
        z.total = 0;
        continue;
      }
    }
    Cqe64* cqe = cqe_at(q.cq, ci);
    const int op = owned(cqe, ci, q.cq_log);
    if (op < 0) break;
    if (RAWPIPE_UNLIKELY(is_error_opcode(op))) {
      if (critical_syndrome(cqe)) {
        count_error(q, cqe);
        ++ci;
        break;
      }
      count_skipped_error(q, cqe);
      ++ci;
      ++rq_ci;
      continue;
    }
    if constexpr (kZip) {
      if (cqe_format(static_cast<std::uint8_t>(op)) == kCqeFormatCompressed) {
        const std::uint32_t minis = be32(cqe->byte_cnt);
        if (RAWPIPE_UNLIKELY(minis == 0 || minis > (1u << q.cq_log))) {
          // A title announcing no mini-CQEs, or more than the CQ holds, cannot come from a working
          // device; without this the poll would spin on the same title forever. Treat it as an
          // error CQE: counted, and the queue resets.
          count_add(q.stats.rx_errors);
          q.needs_reset = true;
          ++ci;
          break;
        }
        auto& z = q.zip;
        z.total = z.left = minis;
        z.next = 0;
        z.title_ci = ci;
        z.flags = cqe_flags(cqe);
        z.flow_tag = cqe_flow_tag(q, cqe, z.flags);
        // Minis carry no VLAN of their own: every packet of the session has the title's (the
        // kernel's mlx5e_decompress_cqe copies the title's fields into each mini's CQE).
        z.vlan = be16(cqe->vlan_info);
        count_add(q.compressed_sessions);
        continue;
      }
    }
    const std::uint32_t len = be32(cqe->byte_cnt);
    Mbuf* m;
    if (RAWPIPE_LIKELY(take_cyclic(q, rq_ci & rq_mask, m))) {
      std::uint16_t flags = cqe_flags(cqe);
      const std::uint32_t tag = cqe_flow_tag(q, cqe, flags);
      fill(q, m, len, be32(cqe->rx_hash_res), flags, tag, be16(cqe->vlan_info));
      prefetch0(m->data());
      bytes += len;
      pkts[k++] = m;
    }
    ++ci;
    ++rq_ci;
  }
  publish<Db>(q, kZip && q.zip.left ? q.zip.title_ci : ci, rq_ci);
  count_add(q.stats.rx_packets, k);
  count_add(q.stats.rx_bytes, bytes);
  return k;
}

template <class Db>
std::uint16_t rx_burst_striding(void* queue, Mbuf** pkts, std::uint16_t n) noexcept {
  RxQueue& q = *static_cast<RxQueue*>(queue);
  if (RAWPIPE_UNLIKELY(q.needs_reset)) {
    rx_reset<Db>(q, RxMode::kStriding);
    if (q.needs_reset) return 0;
  }
  if (q.stash_len < n) refill_stash(q, n);
  const std::uint32_t rq_mask = q.rq.wqe_cnt - 1;
  const std::size_t wqe_bytes = std::size_t(q.stride_size) * q.strides_per_wqe;
  std::uint32_t ci = q.cq_ci;
  std::uint32_t rq_ci = q.rq_ci;
  std::uint16_t k = 0;
  std::uint64_t bytes = 0;
  while (k < n) {
    Cqe64* cqe = cqe_at(q.cq, ci);
    const int op = owned(cqe, ci, q.cq_log);
    if (op < 0) break;
    if (RAWPIPE_UNLIKELY(is_error_opcode(op))) {
      // The same syndrome rules as the cyclic RQ (critical_syndrome): DPDK's mlx5_rx_err_handle is
      // shared by mlx5_rx_burst and mlx5_rx_burst_mprq (drivers/net/mlx5/mlx5_rx.c, DPDK 38f72e50).
      // Only a critical one stops the queue for a reset. Any other is skipped the way
      // mlx5_rx_burst_mprq skips it: the strides the error CQE's byte_cnt reports are consumed
      // (mlx5_rx_poll_len's skip_cnt), and every WQE they complete is retired and reposted.
      if (critical_syndrome(cqe)) {
        count_error(q, cqe);
        ++ci;
        break;
      }
      count_skipped_error(q, cqe);
      q.strides_consumed += (be32(reinterpret_cast<const ErrCqe*>(cqe)->byte_cnt) >> kMprqStrideShift) & kMprqStrideMask;
      ++ci;
      while (q.strides_consumed >= q.strides_per_wqe) {
        q.strides_consumed -= q.strides_per_wqe;
        ++rq_ci;
      }
      continue;
    }
    const std::uint32_t bc = be32(cqe->byte_cnt);
    if (RAWPIPE_UNLIKELY((be16(cqe->wqe_id) ^ rq_ci) & rq_mask)) count_add(q.wqe_id_mismatch);
    if (RAWPIPE_LIKELY(!(bc & kMprqFiller))) {
      const std::uint32_t len = bc & kMprqLenMask;
      const std::uint32_t stride = be16(cqe->wqe_counter);
      const std::uint8_t* src = q.mprq_buf + (rq_ci & rq_mask) * wqe_bytes + std::size_t(stride) * q.stride_size;
      if (RAWPIPE_UNLIKELY(q.stash_len == 0)) {
        count_add(q.stats.rx_nombuf);
      } else if (RAWPIPE_UNLIKELY(len > q.data_room || stride >= q.strides_per_wqe ||
                                  std::size_t(stride) * q.stride_size + len > wqe_bytes)) {
        // A frame runs over the strides after its first one but never past its WQE's last
        // (DPDK's mlx5_rx_burst_mprq asserts strd_idx + strd_cnt <= strd_n); a CQE that says
        // otherwise would have the copy read past the WQE, or past the whole buffer.
        count_add(q.stats.rx_errors);
      } else {
        // Strides are reused as soon as the WQE's last stride is consumed, so the frame is copied
        // into a pool buffer (DPDK's mprq memcpy path).
        Mbuf* m = q.stash[--q.stash_len];
        std::memcpy(m->data(), src, len);
        std::uint16_t flags = cqe_flags(cqe);
        const std::uint32_t tag = cqe_flow_tag(q, cqe, flags);
        fill(q, m, len, be32(cqe->rx_hash_res), flags, tag, be16(cqe->vlan_info));
        bytes += len;
        pkts[k++] = m;
      }
    } else {
      count_add(q.filler_cqes);
    }
    q.strides_consumed += (bc >> kMprqStrideShift) & kMprqStrideMask;
    ++ci;
    if (q.strides_consumed >= q.strides_per_wqe) {
      // Every stride of this WQE is consumed and copied out: repost it unchanged.
      q.strides_consumed = 0;
      ++rq_ci;
    }
  }
  publish<Db>(q, ci, rq_ci);
  count_add(q.stats.rx_packets, k);
  count_add(q.stats.rx_bytes, bytes);
  return k;
}

}  // namespace

RxBurstFn rx_burst_function(RxMode mode, bool compression, bool model) noexcept {
  if (mode == RxMode::kStriding) return model ? rx_burst_striding<ModelDoorbell> : rx_burst_striding<HwDoorbell>;
  if (compression) return model ? rx_burst_cyclic<ModelDoorbell, true> : rx_burst_cyclic<HwDoorbell, true>;
  return model ? rx_burst_cyclic<ModelDoorbell, false> : rx_burst_cyclic<HwDoorbell, false>;
}

Status rx_setup(RxQueue& q, bool model) {
  const RxMode mode = q.mprq_buf ? RxMode::kStriding : RxMode::kCyclic;
  q.cq_log = static_cast<std::uint32_t>(std::countr_zero(q.cq.cqe_cnt));
  if (mode == RxMode::kCyclic) {
    if (!q.pool->alloc_bulk(q.elts, q.rq.wqe_cnt))
      return Status::errorf("pool '{}' has {} free buffers, fewer than the {} the receive ring needs; raise the pool's count",
                            q.pool->name(), q.pool->available(), q.rq.wqe_cnt);
  }
  q.cq_ci = 0;
  q.rq_ci = 0;
  write_all_wqes(q, mode);
  if (model) {
    ModelDoorbell db{q.sink};
    db.record(q.rq.dbrec, be32(q.rq.wqe_cnt & kWqeCounterMask));
  } else {
    HwDoorbell{}.record(q.rq.dbrec, be32(q.rq.wqe_cnt & kWqeCounterMask));
  }
  return Status::ok();
}

void rx_release(RxQueue& q) {
  if (q.elts && !q.mprq_buf) {
    for (std::uint32_t s = 0; s < q.rq.wqe_cnt; ++s)
      if (q.elts[s]) {
        mbuf_free(q.elts[s]);
        q.elts[s] = nullptr;
      }
  }
  if (q.stash_len) mbuf_free_bulk(q.stash, q.stash_len);
  q.stash_len = 0;
}

}  // namespace rawpipe::mlx5
