#include "pmd/mlx5/tx.hh"

#include <algorithm>
#include <cstring>
#include <utility>

#include "pipeline/buf/pool.hh"
#include "pmd/mlx5/cq.hh"
#include "pmd/mlx5/hw.hh"

namespace rawpipe::mlx5 {
namespace {

using rdma::HwDoorbell;
using rdma::ModelDoorbell;

// The inline header of a frame: the queue's minimum, or the whole frame when it is shorter (a
// frame shorter than the L3/L4 header the device needs inline goes entirely inline, as DPDK
// sends it).
RAWPIPE_ALWAYS_INLINE std::uint16_t inline_len(std::uint16_t min_inline, std::uint32_t len) noexcept {
  return static_cast<std::uint16_t>(len < min_inline ? len : min_inline);
}

// The WQE's size in 16-byte units, for a frame of `len` bytes with `inl` of them inline.
RAWPIPE_ALWAYS_INLINE std::uint32_t wqe_ds(std::uint16_t inl, std::uint32_t len) noexcept {
  return 1 + eth_seg_ds(inl) + (len > inl ? 1 : 0);
}

// Writes the WQE at `w`, which the caller guarantees does not cross the end of the ring.
RAWPIPE_ALWAYS_INLINE void write_wqe(SendWqe* w, std::uint32_t pi, std::uint32_t qpn, std::uint32_t lkey,
                                     std::uint16_t min_inline, bool comp, const Mbuf* m) noexcept {
  const std::uint32_t len = m->data_len;
  const std::uint8_t* data = m->data();
  const std::uint16_t inl = inline_len(min_inline, len);
  const bool has_data = len > inl;
  const std::uint8_t opcode = (m->tx_flags & tx_flag::kDummy) ? kOpcodeNop : kOpcodeSend;
  const std::uint32_t ds = wqe_ds(inl, len);
  w->ctrl.opmod_idx_opcode = be32(((pi & kWqeCounterMask) << 8) | opcode);
  w->ctrl.qpn_ds = be32((qpn << 8) | ds);
  w->ctrl.signature = 0;
  w->ctrl.dci_stream_channel_id[0] = 0;
  w->ctrl.dci_stream_channel_id[1] = 0;
  w->ctrl.fm_ce_se = comp ? kCtrlCqUpdate : 0;
  w->ctrl.imm = 0;
  WqeEthSeg& e = w->eth;
  e.swp_offs = 0;
  e.cs_flags = static_cast<std::uint8_t>(((m->tx_flags & tx_flag::kL3Csum) ? kEthL3Csum : 0) |
                                         ((m->tx_flags & tx_flag::kL4Csum) ? kEthL4Csum : 0));
  e.swp_flags = 0;
  e.mss = 0;
  e.metadata = 0;
  e.inline_hdr_sz = be16(inl);
  if (inl) {
    // The first two bytes fill the segment's inline_hdr_start; the rest run on into the WQE.
    std::memcpy(reinterpret_cast<std::uint8_t*>(w) + offsetof(SendWqe, eth) + offsetof(WqeEthSeg, inline_hdr_start),
                data, inl);
  }
  if (has_data) {
    // The data segment follows the eth segment and its inline bytes.
    auto* d = reinterpret_cast<WqeDataSeg*>(reinterpret_cast<std::uint8_t*>(w) + kDsSize * (1 + eth_seg_ds(inl)));
    d->byte_count = be32(len - inl);
    d->lkey = be32(lkey);
    d->addr = be64(reinterpret_cast<std::uintptr_t>(data + inl));
  }
}

// WQEBBs of the WQE that starts at WQEBB `index`, read back from the ring (its ctrl segment's DS
// count), so a completion retires a multi-WQEBB WQE whole.
RAWPIPE_ALWAYS_INLINE std::uint32_t wqe_bbs_at(const TxQueue& q, std::uint32_t index) noexcept {
  const auto* w = reinterpret_cast<const SendWqe*>(q.sq.buf + std::size_t(index & (q.sq.wqe_cnt - 1)) * kWqeBb);
  return wqe_bbs(be32(w->ctrl.qpn_ds) & 0x3f);
}

// Frees the buffers of WQEBBs [q.sq_ci, upto); padding NOPs and the second WQEBB of a WQE hold none.
void free_completed(TxQueue& q, std::uint32_t upto) noexcept {
  const std::uint32_t mask = q.sq.wqe_cnt - 1;
  Mbuf* batch[kMaxBurst];
  unsigned nb = 0;
  for (std::uint32_t i = q.sq_ci; i != upto; ++i) {
    Mbuf* m = std::exchange(q.elts[i & mask], nullptr);
    if (!m) continue;
    batch[nb++] = m;
    if (nb == kMaxBurst) {
      mbuf_free_bulk(batch, nb);
      nb = 0;
    }
  }
  if (nb) mbuf_free_bulk(batch, nb);
  q.sq_ci = upto;
}

template <class Db>
void complete(TxQueue& q) noexcept {
  std::uint32_t ci = q.cq_ci;
  for (;;) {
    Cqe64* cqe = cqe_at(q.cq, ci);
    const int op = owned(cqe, ci, q.cq_log);
    if (op < 0) break;
    ++ci;
    // Only REQ_ERR/RESP_ERR are errors (DPDK check_cqe_error); any other opcode completes.
    const std::uint8_t opcode = cqe_opcode(static_cast<std::uint8_t>(op));
    if (RAWPIPE_UNLIKELY(opcode == kCqeReqErr || opcode == kCqeRespErr)) {
      const auto* err = reinterpret_cast<const ErrCqe*>(cqe);
      count_add(q.syndromes.count[err->syndrome]);
      q.needs_reset = true;
      // WQEs before the failed one completed; the failed one and the rest are discarded in reset.
      const std::uint16_t failed = be16(err->wqe_counter);
      const std::uint32_t done = static_cast<std::uint16_t>(failed - static_cast<std::uint16_t>(q.sq_ci));
      if (done <= q.sq_pi - q.sq_ci) free_completed(q, q.sq_ci + done);
      break;
    }
    // The completed WQE and every one before it are done (completions are in order).
    const std::uint16_t wc = be16(cqe->wqe_counter);
    const std::uint32_t done = static_cast<std::uint16_t>(wc - static_cast<std::uint16_t>(q.sq_ci)) + wqe_bbs_at(q, wc);
    if (RAWPIPE_LIKELY(done <= q.sq_pi - q.sq_ci)) free_completed(q, q.sq_ci + done);
  }
  if (ci != q.cq_ci) {
    q.cq_ci = ci;
    doorbell<Db>(q).record(&q.cq.dbrec[0], be32(ci & kCqCiMask));
  }
}

template <class Db>
void tx_reset(TxQueue& q) noexcept {
  if (!q.control.reset || !q.control.reset(q.control.ctx, q.queue_id)) return;  // retried next burst
  // The device writes nothing for this SQ any more; consume what it wrote.
  std::uint32_t ci = q.cq_ci;
  for (;;) {
    Cqe64* cqe = cqe_at(q.cq, ci);
    const int op = owned(cqe, ci, q.cq_log);
    if (op < 0) break;
    const std::uint8_t opcode = cqe_opcode(static_cast<std::uint8_t>(op));
    if (opcode == kCqeReqErr || opcode == kCqeRespErr) {
      count_add(q.syndromes.count[reinterpret_cast<ErrCqe*>(cqe)->syndrome]);
    } else {
      // Completed before the error: those frames left.
      const std::uint16_t wc = be16(cqe->wqe_counter);
      const std::uint32_t done = static_cast<std::uint16_t>(wc - static_cast<std::uint16_t>(q.sq_ci)) + wqe_bbs_at(q, wc);
      if (done <= q.sq_pi - q.sq_ci) free_completed(q, q.sq_ci + done);
    }
    ++ci;
  }
  const std::uint32_t lost = q.sq_pi - q.sq_ci;
  count_add(q.stats.tx_errors, lost);
  free_completed(q, q.sq_pi);
  q.cq_ci = ci;
  q.sq_pi = q.sq_ci = 0;
  q.since_comp = 0;
  q.bf_offset = 0;
  Db db = doorbell<Db>(q);
  db.record(&q.cq.dbrec[0], be32(ci & kCqCiMask));
  db.record(q.sq.dbrec, 0);
  q.needs_reset = false;
  count_add(q.resets);
}

// A buffer from a pool this queue did not register is copied into one that is (the NIC would
// reject its lkey). Returns null when the pool is empty.
Mbuf* adopt(TxQueue& q, Mbuf* m) noexcept {
  Mbuf* c = q.pool->alloc();
  if (!c) return nullptr;
  if (m->data_len > q.pool->data_room()) {
    mbuf_free(c);
    return nullptr;
  }
  std::memcpy(c->data(), m->data(), m->data_len);
  c->data_len = m->data_len;
  c->tx_flags = m->tx_flags;
  mbuf_free(m);
  count_add(q.foreign_copies);
  return c;
}

template <class Db>
std::uint16_t tx_burst(void* queue, Mbuf** pkts, std::uint16_t n) noexcept {
  TxQueue& q = *static_cast<TxQueue*>(queue);
  if (q.sq_pi != q.sq_ci) complete<Db>(q);
  if (RAWPIPE_UNLIKELY(q.needs_reset)) {
    tx_reset<Db>(q);
    if (q.needs_reset) return 0;
  }
  const std::uint32_t mask = q.sq.wqe_cnt - 1;
  std::uint32_t room = q.sq.wqe_cnt - (q.sq_pi - q.sq_ci);
  std::uint32_t pi = q.sq_pi;
  SendWqe* last = nullptr;
  std::uint16_t k = 0;
  std::uint64_t bytes = 0;
  std::uint64_t sent = 0;
  while (k < n && room) {
    Mbuf* m = pkts[k];
    if (RAWPIPE_UNLIKELY(m->data_len < std::min<std::uint32_t>(q.inline_bytes, kEthL2InlineHeader) || m->data_len == 0)) {
      // Shorter than the header the device must see: not sendable. Taken and counted.
      count_add(q.runts);
      count_add(q.stats.tx_errors);
      mbuf_free(m);
      ++k;
      continue;
    }
    if (RAWPIPE_UNLIKELY(m->pool != q.pool)) {
      Mbuf* c = adopt(q, m);
      if (!c) break;  // the caller keeps pkts[k..n)
      m = pkts[k] = c;
    }
    const std::uint32_t bbs = wqe_bbs(wqe_ds(inline_len(q.inline_bytes, m->data_len), m->data_len));
    if (RAWPIPE_UNLIKELY((pi & mask) + bbs > q.sq.wqe_cnt)) {
      // A multi-WQEBB WQE may not run past the end of the ring here: a one-WQEBB NOP takes the
      // last slot and the WQE starts at the ring's beginning.
      if (room < 1 + bbs) break;
      auto* pad = reinterpret_cast<SendWqe*>(q.sq.buf + std::size_t(pi & mask) * kWqeBb);
      pad->ctrl.opmod_idx_opcode = be32(((pi & kWqeCounterMask) << 8) | kOpcodeNop);
      pad->ctrl.qpn_ds = be32((q.sq.qpn << 8) | 1);
      pad->ctrl.signature = 0;
      pad->ctrl.fm_ce_se = 0;
      pad->ctrl.imm = 0;
      q.elts[pi & mask] = nullptr;
      last = pad;
      ++pi;
      --room;
      count_add(q.ring_pads);
    }
    if (RAWPIPE_UNLIKELY(room < bbs)) break;
    auto* w = reinterpret_cast<SendWqe*>(q.sq.buf + std::size_t(pi & mask) * kWqeBb);
    const bool comp = ++q.since_comp >= q.comp_every;
    if (comp) q.since_comp = 0;
    write_wqe(w, pi, q.sq.qpn, q.lkey, q.inline_bytes, comp, m);
    if (RAWPIPE_UNLIKELY(m->tx_flags & tx_flag::kDummy)) {
      count_add(q.dummy_sends);
    } else {
      bytes += m->data_len;
      ++sent;
    }
    q.elts[pi & mask] = m;
    for (std::uint32_t b = 1; b < bbs; ++b) q.elts[(pi + b) & mask] = nullptr;
    last = w;
    pi += bbs;
    room -= bbs;
    ++k;
  }
  if (last) {
    q.sq_pi = pi;
    Db db = doorbell<Db>(q);
    // WQEs, then the SQ record, then the UAR write of the last WQE's first 8 bytes (rdma-core's
    // post_send_db order); the policy supplies the barriers between them.
    db.record(q.sq.dbrec, be32(pi & kWqeCounterMask));
    std::uint64_t ctrl8;
    std::memcpy(&ctrl8, &last->ctrl, sizeof(ctrl8));
    db.mmio64(q.sq.bf_reg, q.bf_offset, ctrl8);
    q.bf_offset ^= q.sq.bf_size;
  }
  count_add(q.stats.tx_packets, sent);
  count_add(q.stats.tx_bytes, bytes);
  return k;
}

}  // namespace

void build_send_wqe(void* wqe, std::uint32_t pi, std::uint32_t qpn, std::uint32_t lkey, std::uint16_t inline_bytes,
                    bool request_completion, const Mbuf* m) noexcept {
  write_wqe(static_cast<SendWqe*>(wqe), pi, qpn, lkey, inline_bytes, request_completion, m);
}

TxBurstFn tx_burst_function(bool model) noexcept { return model ? tx_burst<ModelDoorbell> : tx_burst<HwDoorbell>; }

Status tx_setup(TxQueue& q) {
  if (q.comp_every == 0 || q.comp_every > q.sq.wqe_cnt / 2)
    return Status::errorf("tx completion interval {} must be between 1 and half the send ring ({})", q.comp_every,
                          q.sq.wqe_cnt / 2);
  if (q.inline_bytes != 0 && q.inline_bytes != kEthL2InlineHeader && q.inline_bytes != kInlineL3 &&
      q.inline_bytes != kInlineL4)
    return Status::errorf("minimum inline header {} is not supported (rawpipe inlines 0, 18 (L2), 58 (L3) or 78 (L4) "
                          "bytes)",
                          q.inline_bytes);
  q.cq_log = static_cast<std::uint32_t>(std::countr_zero(q.cq.cqe_cnt));
  q.sq_pi = q.sq_ci = q.cq_ci = 0;
  q.since_comp = 0;
  q.bf_offset = 0;
  return Status::ok();
}

void tx_release(TxQueue& q) {
  if (q.elts) free_completed(q, q.sq_pi);
}

}  // namespace rawpipe::mlx5
