// MANA send queue: one-BU WQEs (DMA OOB, the 8-byte short TX OOB with the CQ number, VSQ frame and
// vPort offset, one SGE over the packet), one SQ doorbell per burst, and completion handling with
// CQE suppression: every WQE of a burst but the last asks the NIC not to write a CQE, so one
// CQE_TX_OKAY retires the run of suppressed WQEs before it. Error CQEs come for every failing WQE
// regardless of suppression and are counted by type.
//
// Checksum offload: the short OOB can ask for the IPv4 header and TCP/UDP checksums. For L4 the
// NIC needs the pseudo-header sum already in the checksum field; tx_burst writes it.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <vector>

#include "pipeline/buf/pool.hh"
#include "pmd/mana/queue.hh"
#include "pmd/rdma/doorbell.hh"

namespace rawpipe::mana {

struct TxCounters {
  std::atomic<std::uint64_t> packets{0};   // WQEs the NIC completed without error
  std::atomic<std::uint64_t> bytes{0};
  std::atomic<std::uint64_t> errors{0};    // WQEs completed with an error CQE
  std::atomic<std::uint64_t> cqes{0};
  std::atomic<std::uint64_t> csum_offloaded{0};
  std::atomic<std::uint64_t> not_registered{0};  // packets refused: buffer outside the registered region
  std::atomic<std::uint64_t> cq_overflow{0};
  std::array<std::atomic<std::uint64_t>, kTxErrorTypes + 1> error_types{};  // by CQE type; last = unknown
};

struct TxQueue {
  WorkQueue sq;
  CompletionQueue cq;
  void* db_page = nullptr;                       // the context's doorbell page
  const rdma::DoorbellSink* db_sink = nullptr;   // the device model (ModelDoorbell only)
  std::uint32_t lkey = 0;
  const std::uint8_t* mr_begin = nullptr;  // the registered region (the pool)
  const std::uint8_t* mr_end = nullptr;
  std::uint32_t vsq_frame = 0;
  std::uint32_t vp_offset = 0;
  // Outstanding WQEs in posting order: free-running indices, power-of-two ring.
  std::vector<Mbuf*> bufs;
  std::vector<std::uint8_t> suppressed;
  std::uint32_t bufs_mask = 0;
  std::uint32_t desc_head = 0;
  std::uint32_t desc_tail = 0;
  TxCounters counters;

  std::uint32_t outstanding() const noexcept { return desc_head - desc_tail; }
};

template <class Db>
std::uint16_t tx_burst(void* queue, Mbuf** pkts, std::uint16_t n) noexcept;

// Retires what the NIC completed (also called by tx_burst). Returns WQEs retired.
unsigned tx_reap(TxQueue& q) noexcept;

// Control path: frees every outstanding buffer (after the hardware queue is gone).
void tx_release_all(TxQueue& q) noexcept;

// The value the NIC expects in the L4 checksum field before it computes the checksum: the folded
// (not inverted) one's-complement sum of the pseudo-header, in network byte order as stored.
// Returns false when the packet's parse results do not describe an IPv4/IPv6 UDP/TCP packet.
bool pseudo_header_sum(const Mbuf& m, std::uint16_t& out) noexcept;

}  // namespace rawpipe::mana
