// Per-queue state of a dpdk port and its burst functions (rx.cc, tx.cc).
//
// Two buffer modes, chosen once when the port opens and never tested per packet:
//   zero-copy  the ethdev's mempool is the MbufBridge over the port's rawpipe pool; received
//              DPDK buffers are rawpipe slots already, transmitted slots go out through their
//              shadow rte_mbuf. Buffers from any other mempool (a net_ring fed by another process
//              component, a multi-segment chain) are copied, and counted.
//   copy       the ethdev has its own mempool in DPDK memory; one copy per packet into a rawpipe
//              slot on receive and out of it on transmit.
// Counters are written by the queue's lcore only (relaxed load + store, no read-modify-write) and
// read relaxed by the stats thread: statistics, never a data edge.
#pragma once

#include <atomic>
#include <cstdint>

#include <rte_mbuf.h>

#include "pipeline/buf/pool.hh"
#include "rawpipe/compiler.hh"

namespace rawpipe::dpdk {

class MbufBridge;

inline void counter_add(std::atomic<std::uint64_t>& c, std::uint64_t v) noexcept {
  c.store(c.load(std::memory_order_relaxed) + v, std::memory_order_relaxed);
}

struct alignas(kFalseSharingRange) DpdkRxQueue {
  std::uint16_t eth_port = 0;      // DPDK ethdev port id
  std::uint16_t eth_queue = 0;
  std::uint16_t rp_port = 0;       // rawpipe port id, stamped on every buffer
  rte_mempool* mp = nullptr;       // the mempool the queue was set up with
  rte_mempool* tx_mp = nullptr;    // zero-copy: the bridge's transmit mempool, when it has one
  Pool* pool = nullptr;            // rawpipe pool receive buffers end up in

  std::atomic<std::uint64_t> packets{0};
  std::atomic<std::uint64_t> bytes{0};
  std::atomic<std::uint64_t> nombuf{0};     // a copy needed a rawpipe slot and the pool was empty
  std::atomic<std::uint64_t> too_long{0};   // frame larger than a rawpipe slot's data room
  std::atomic<std::uint64_t> copied{0};     // zero-copy mode: frames that still needed a copy
};

struct alignas(kFalseSharingRange) DpdkTxQueue {
  std::uint16_t eth_port = 0;
  std::uint16_t eth_queue = 0;
  rte_mempool* mp = nullptr;             // where copies come from
  const Pool* pool = nullptr;            // zero-copy: slots of this pool go out without a copy
  rte_mbuf* const* shadows = nullptr;    // zero-copy: shadow of each slot
  rte_mempool* tx_mp = nullptr;          // zero-copy: where the driver frees sent shadows (or mp)

  std::atomic<std::uint64_t> packets{0};
  std::atomic<std::uint64_t> bytes{0};
  std::atomic<std::uint64_t> nombuf{0};     // no DPDK buffer for a copy: the rest of the burst stays with the caller
  std::atomic<std::uint64_t> too_long{0};   // frame larger than a DPDK buffer: left with the caller
  std::atomic<std::uint64_t> copied{0};
  std::atomic<std::uint64_t> refused{0};    // the driver's queue was full: left with the caller
};

// Copy mode's mempool lives in DPDK memory, and DPDK serves its per-lcore caches only to threads
// with an lcore id; rawpipe's lcores are not EAL threads. The first copy-mode burst on a thread
// registers it (rte_thread_register) and thread exit unregisters it. When no lcore id is free the
// thread goes on without a cache, using the mempool's ring directly.
void register_dpdk_thread() noexcept;
inline thread_local bool t_dpdk_thread_checked = false;
RAWPIPE_ALWAYS_INLINE void ensure_dpdk_thread() noexcept {
  if (RAWPIPE_UNLIKELY(!t_dpdk_thread_checked)) register_dpdk_thread();
}

std::uint16_t rx_burst_zero_copy(void* queue, Mbuf** pkts, std::uint16_t n) noexcept;
std::uint16_t rx_burst_copy(void* queue, Mbuf** pkts, std::uint16_t n) noexcept;
std::uint16_t tx_burst_zero_copy(void* queue, Mbuf** pkts, std::uint16_t n) noexcept;
std::uint16_t tx_burst_copy(void* queue, Mbuf** pkts, std::uint16_t n) noexcept;

}  // namespace rawpipe::dpdk
