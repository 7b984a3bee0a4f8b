#include "pmd/mana/setup.hh"

#include <bit>

namespace rawpipe::mana {
namespace {

Status check_common(const QueueSetup& s, std::string_view what) {
  if (!s.wq.buf || !is_power_of_two(s.wq.size) || s.wq.size < kWqeBu)
    return Status::errorf("{} queue {:#x}: ring of {} bytes is not a power of two", what, s.wq.id, s.wq.size);
  if (s.wq.count == 0 || s.wq.count > s.wq.capacity_bu())
    return Status::errorf("{} queue {:#x}: {} WQEs do not fit a {}-byte ring", what, s.wq.id, s.wq.count, s.wq.size);
  if (!s.cq.buf || !is_power_of_two(s.cq.count))
    return Status::errorf("{} queue {:#x}: completion queue of {} entries is not a power of two", what, s.wq.id,
                          s.cq.count);
  if (s.require_cq_covers_wq && s.cq.count < s.wq.count)
    return Status::errorf("{} queue {:#x}: completion queue of {} entries is smaller than its {} WQEs and could overflow",
                          what, s.wq.id, s.cq.count, s.wq.count);
  if (!s.db_page) return Status::errorf("{} queue {:#x}: no doorbell page", what, s.wq.id);
  return Status::ok();
}

}  // namespace

Status setup_rx_queue(RxQueue& q, const QueueSetup& s) {
  RAWPIPE_TRY(check_common(s, "receive"));
  if (!s.pool) return Status::error("receive queue: no pool");
  q.rq = s.wq;
  q.rq.head = q.rq.tail = 0;
  q.cq = s.cq;
  q.db_page = s.db_page;
  q.db_sink = s.db_sink;
  q.pool = s.pool;
  q.lkey = s.lkey;
  q.port_id = s.port_id;
  q.queue_id = s.queue_id;
  q.target_posted = s.wq.count;
  q.ppi_next = 0;
  const std::uint32_t slots = static_cast<std::uint32_t>(std::bit_ceil(q.rq.capacity_bu()));
  q.bufs.assign(slots, nullptr);
  q.bufs_mask = slots - 1;
  return Status::ok();
}

Status setup_tx_queue(TxQueue& q, const QueueSetup& s) {
  RAWPIPE_TRY(check_common(s, "send"));
  if (!s.mr_begin || s.mr_end <= s.mr_begin) return Status::error("send queue: no registered region");
  q.sq = s.wq;
  q.sq.head = q.sq.tail = 0;
  q.cq = s.cq;
  q.db_page = s.db_page;
  q.db_sink = s.db_sink;
  q.lkey = s.lkey;
  q.mr_begin = s.mr_begin;
  q.mr_end = s.mr_end;
  q.vsq_frame = vsq_frame_of(s.wq.id);
  q.vp_offset = s.vp_offset;
  const std::uint32_t slots = static_cast<std::uint32_t>(std::bit_ceil(q.sq.capacity_bu()));
  q.bufs.assign(slots, nullptr);
  q.suppressed.assign(slots, 0);
  q.bufs_mask = slots - 1;
  q.desc_head = q.desc_tail = 0;
  return Status::ok();
}

}  // namespace rawpipe::mana
