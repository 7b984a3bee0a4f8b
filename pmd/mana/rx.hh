// MANA receive queue: one-BU WQEs (DMA OOB, zeroed small OOB, one SGE over a pool buffer's data
// room), the RQ doorbell with the free-running byte offset, and CQ polling by owner bits. One CQE
// may carry up to four packets (CQE_RX_COALESCED_4), one per consumed WQE in posting order.
//
// The burst function is a template over the doorbell policy (pmd/rdma/doorbell.hh): the same code
// rings the hardware page or the device model; the port picks the instance once at setup.
// A queue is used by one thread at a time (the lcore that polls it).
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <vector>

#include "pipeline/buf/pool.hh"
#include "pmd/mana/queue.hh"
#include "pmd/rdma/doorbell.hh"

namespace rawpipe::mana {

// Counters written by the polling lcore with relaxed stores, read by the stats thread.
struct RxCounters {
  std::atomic<std::uint64_t> packets{0};
  std::atomic<std::uint64_t> bytes{0};
  std::atomic<std::uint64_t> cqes{0};
  std::atomic<std::uint64_t> coalesced_cqes{0};  // CQEs that carried more than one packet
  std::atomic<std::uint64_t> truncated{0};       // CQE_RX_TRUNCATED: frame longer than the buffer
  std::atomic<std::uint64_t> fences{0};          // CQE_RX_OBJECT_FENCE
  std::atomic<std::uint64_t> bad_cqes{0};        // unknown CQE types (one WQE retired each)
  std::atomic<std::uint64_t> cq_overflow{0};     // bursts stopped by an overflowed CQE (completions lost)
  std::atomic<std::uint64_t> refill_failed{0};   // bursts whose refill found the pool empty
  std::atomic<std::uint64_t> vlan_reinserted{0};
  std::atomic<std::uint64_t> vlan_no_headroom{0};// stripped tag could not be put back
};

struct RxQueue {
  WorkQueue rq;
  CompletionQueue cq;
  void* db_page = nullptr;                       // the context's doorbell page
  const rdma::DoorbellSink* db_sink = nullptr;   // the device model (ModelDoorbell only)
  Pool* pool = nullptr;
  std::uint32_t lkey = 0;
  std::uint16_t port_id = 0;
  std::uint16_t queue_id = 0;
  std::uint32_t target_posted = 0; // WQEs kept posted: rq.count
  std::uint8_t ppi_next = 0;       // packets of the CQE at cq.head already handed out
  std::vector<Mbuf*> bufs;         // posted buffers by WQE index (power-of-two size)
  std::uint32_t bufs_mask = 0;
  RxCounters counters;

  std::uint32_t posted() const noexcept { return rq.head - rq.tail; }  // one BU per WQE
};

// Writes one receive WQE for `m` at rq.head and advances head (no doorbell).
void rx_post_one(RxQueue& q, Mbuf* m) noexcept;

// Fills the RQ up to target_posted and rings the RQ doorbell once if anything was posted.
template <class Db>
void rx_refill(RxQueue& q) noexcept;

template <class Db>
std::uint16_t rx_burst(void* queue, Mbuf** pkts, std::uint16_t n) noexcept;

// Control path: returns every posted buffer to its pool (after the hardware queue is gone).
void rx_release_all(RxQueue& q) noexcept;

}  // namespace rawpipe::mana
