// The application's transmit path on one port: what the Extra API's send_burst and sendto hand
// frames to (include/rawpipe/extra.h, RAWPIPE_CAP_SEND).
//
// Transmit queues belong to lcores (one thread per queue, as tx_burst demands), so the sending
// thread does not call tx_burst itself: it puts buffers on this port's SPSC hand-off ring, and
// the lcore that owns a tx queue on the port (for echo, forward or ARP replies, or given one for
// this purpose by the builder when nobody else transmits there) drains the ring once per loop
// pass into that queue. Why a ring rather than a tx queue reserved for the application: an AF_XDP
// queue is one socket for receive and transmit whose UMEM bookkeeping only one thread may touch,
// so on a single-queue NIC (veth, many VMs) there is no second queue to reserve; and the lcore
// already pays the transmit system call (AF_XDP kick), not the application. The cost when
// nobody sends is one relaxed load of a flag per loop pass; nothing is allocated, locked or
// system-called on the lcore.
//
// Threading rule: one sending thread per port at a time (as one consumer per endpoint on the
// receive side). A second thread that sends on the port while the first is inside a send call is
// refused (the `busy` flag), not raced.
//
// Accounting: application frames are not rx; they have their own counters. Every buffer handed
// to submit() ends in exactly one of: sent (taken by the tx queue), tx_failed (the queue did not
// take it, or the pipeline stopped before the lcore got to it) or ring_full (the hand-off ring
// had no room: the buffer stays the caller's, as what rte_eth_tx_burst does not take stays the
// application's); dummy sends on a port that cannot post one are counted and freed at once.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "pipeline/dispatch/dispatch.hh"
#include "pipeline/neigh/cache.hh"
#include "pipeline/stats/lcore_counters.hh"
#include "pipeline/wire/wire.hh"
#include "pipeline/port/port.hh"
#include "rawpipe/status.hh"

namespace rawpipe {

class NeighTable;
class Pool;

struct SendStats {
  std::uint64_t submitted = 0;      // buffers the application handed over (dummies included)
  std::uint64_t sent = 0;           // taken by the tx queue (dummies posted to the NIC included)
  std::uint64_t sent_bytes = 0;
  std::uint64_t tx_failed = 0;      // the tx queue did not take them, or the pipeline stopped first
  std::uint64_t ring_full = 0;      // the hand-off ring had no room
  std::uint64_t dummies = 0;        // dummy sends (posted as NOPs where the port can, else counted only)
  std::uint64_t dummies_posted = 0; // of those, handed to a port that posts them (PortCaps::dummy_send)
  std::uint64_t solicitations = 0;  // ARP requests / neighbour solicitations sendto sent
  std::uint64_t unresolved = 0;     // sendto calls refused with EAGAIN (destination not resolved yet)
  std::uint64_t neigh_learned = 0;  // mappings the port's neighbour cache learnt
};

struct SendPort {
  // ---- set by the builder (control path), then read-only ----
  std::uint16_t port = 0;
  int lcore = -1;                    // the lcore that drains the ring; -1: no transmit path
  std::string no_path;               // why there is none, for the error
  bool native_dummy = false;         // the port posts tx_flag::kDummy as a no-op (PortCaps::dummy_send)
  Pool* pool = nullptr;              // where alloc_tx takes buffers (the port's own: no copy on transmit)
  wire::MacAddr mac{};               // source MAC of sendto and solicitations
  std::optional<wire::MacAddr> next_hop;  // [[ports]] next_hop_mac: every sendto goes there
  const NeighTable* addresses = nullptr;  // the port's `addresses` (sendto's source), null: none
  std::unique_ptr<NeighCache> cache;      // learnt by the ARP/ND stage; null without `addresses`
  std::unique_ptr<MbufRing> ring;         // application -> lcore

  // ---- set by run control before the lcores start ----
  TxQueueHandle tx;

  // ---- the sending thread (one at a time, `busy` says who) ----
  alignas(kFalseSharingRange) std::atomic<bool> busy{false};
  std::atomic<bool> used{false};     // set on the first submit; the lcore looks at nothing else before
  Counter submitted, ring_full, dummies, dummies_posted, solicitations, unresolved;
  // When a solicitation for a destination went out, by a hash slot of it (sender only).
  struct Pending {
    std::uint8_t ip[16] = {};
    std::uint64_t at_ns = 0;
  };
  std::array<Pending, 64> pending{};

  // ---- the draining lcore ----
  alignas(kFalseSharingRange) Counter sent, sent_bytes, tx_failed;

  // Sending thread: hands pkts[0..n) to the lcore. Returns k: pkts[0..k) are the lcore's now,
  // pkts[k..n) did not fit in the ring (counted as ring_full) and stay the caller's.
  unsigned submit(Mbuf* const* pkts, unsigned n) noexcept;
  // Lcore, once per loop pass: moves what the ring holds to the tx queue.
  RAWPIPE_ALWAYS_INLINE void drain() noexcept {
    if (!used.load(std::memory_order_relaxed)) [[likely]]
      return;
    drain_ring();
  }
  // Control path, after the lcores stopped: frees what is still in the ring as tx_failed.
  void drain_stopped() noexcept;
  SendStats stats() const noexcept;

 private:
  void drain_ring() noexcept;
};

}  // namespace rawpipe
