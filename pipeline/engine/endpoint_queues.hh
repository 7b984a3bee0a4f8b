// The consumer transport of "ring" endpoints: per (endpoint, lcore) a lending ring the lcore fills
// and the consumer receives from (endpoint_receive), and a return ring. Packets released in the
// order they were received (endpoint_release), which is what a receive-process-release loop does,
// are given back on the lending ring itself: the consumer moves its tail past them and the lcore
// frees them from the slots it wrote, which are still in its cache. Packets released in any other
// order go back on the return ring, which the lcore drains between its polls. At stop, what is
// still queued is drained and freed here.
//
// receive() and release() are on the consumer's hot path: defined here so the facade's calls
// inline them, with no allocation, system call or lock beyond the per-endpoint `busy` flag.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "pipeline/dispatch/consumer_distance.hh"
#include "pipeline/dispatch/wake.hh"
#include "pipeline/buf/audit.hh"
#include "rawpipe/mbuf.hh"
#include "rawpipe/status.hh"
#include "pipeline/dispatch/dispatch.hh"
#include "rawpipe/plan.hh"

namespace rawpipe {

// The rings of one kRing endpoint, one pair per lcore. Each lcore is the only producer of its
// ring and the only consumer of its return ring; whoever holds `busy` is the only consumer of the
// rings and the only producer of the return rings.
struct EndpointRings {
  std::vector<std::unique_ptr<EndpointRing>> per_lcore;
  std::vector<std::unique_ptr<MbufRing>> returns;  // by lcore: out-of-order releases -> that lcore
  // Consumer side. `busy` makes a second consumer (or the drain at stop) back off instead of
  // breaking the single-consumer rule; `next` rotates the first ring read for fairness; `last`
  // is the lcore whose ring gave the latest packets (where their release goes); `closed` is set
  // once the lcores are gone, after which releases free directly. All three are guarded by busy.
  std::atomic<bool> busy{false};
  unsigned next = 0;
  unsigned last = 0;
  bool closed = false;
  // By lcore: how far the consumer is from it (consumer_distance.hh), measured on the looks that
  // find a plainly stored tail (receive()). Guarded by busy, but for the verdict the lcore reads.
  std::vector<std::unique_ptr<ConsumerDistance>> distance;
};

class EndpointQueues {
 public:
  // One ring pair per lcore for each kRing endpoint of the plan; errors name the endpoint.
  static Result<std::unique_ptr<EndpointQueues>> create(const Plan& plan);

  // The ring lcore `lcore` queues endpoint `endpoint`'s packets to; null for other endpoints.
  EndpointRing* ring(std::uint16_t endpoint, std::size_t lcore) const noexcept {
    return endpoint < rings_.size() && rings_[endpoint] ? rings_[endpoint]->per_lcore[lcore].get() : nullptr;
  }
  // How far endpoint `endpoint`'s consumer is from lcore `lcore`; null for other endpoints.
  const ConsumerDistance* distance(std::uint16_t endpoint, std::size_t lcore) const noexcept {
    return endpoint < rings_.size() && rings_[endpoint] ? rings_[endpoint]->distance[lcore].get() : nullptr;
  }
  // Control path, before start: the one-way crossing time from which consumers count as far
  // (ConsumerDistance::kFarNs unless a test asks for another).
  void set_far_consumer_ns(double ns);
  // The return rings lcore `lcore` frees from, one per ring endpoint.
  std::vector<MbufRing*> returns_of(std::size_t lcore) const;
  // The wake-up state of a ring endpoint's consumer (pipeline/dispatch/wake.hh); null for other
  // endpoints. Lives as long as the queues.
  EndpointWake* wake(std::uint16_t endpoint) const noexcept {
    return endpoint < wakes_.size() ? wakes_[endpoint].get() : nullptr;
  }
  // Packets queued to a ring endpoint and not yet received; 0 for other endpoints. Any thread;
  // exact only when nobody enqueues or dequeues.
  std::size_t queued(std::uint16_t endpoint) const noexcept {
    if (endpoint >= rings_.size() || !rings_[endpoint]) return 0;
    std::size_t n = 0;
    for (const auto& ring : rings_[endpoint]->per_lcore) n += ring->size();
    return n;
  }

  // Pipeline::endpoint_receive / endpoint_release (pipeline/engine/pipeline.hh has the contract).
  unsigned receive(std::uint16_t endpoint, Mbuf** out, unsigned n) noexcept {
    if (endpoint >= rings_.size() || !rings_[endpoint]) return 0;
    EndpointRings& r = *rings_[endpoint];
    if (!lock_consumer(r.busy)) return 0;
    const unsigned rings = static_cast<unsigned>(r.per_lcore.size());
    unsigned got = 0;
    for (unsigned i = 0; i < rings && got < n; ++i) {
      unsigned idx = r.next + i;
      if (idx >= rings) idx -= rings;
      EndpointRing& ring = *r.per_lcore[idx];
      // Only a tail stored plainly was fetched from the lcore's core; a streamed one
      // (EndpointRing::publish_streaming) comes from memory, or from a line the hardware
      // prefetcher has already brought, and says nothing about the distance. The lcore stores
      // plainly every tail that crosses a multiple of kPlainTailEvery, so the looks that may
      // find one are timed, and those that did are the samples.
      const std::uint32_t before = ring.tail_seen();
      if (EndpointRing::near_plain_mark(before, kTimedLookLead)) [[unlikely]] {
        const std::uint64_t t0 = ConsumerDistance::tsc_before();
        (void)ring.look_readable();
        const std::uint64_t t1 = ConsumerDistance::tsc_after();
        if (EndpointRing::crosses_plain_mark(before, ring.tail_seen())) r.distance[idx]->sample(t1 - t0);
      }
      // An application that holds what it received, or frees it without endpoint_release,
      // gives nothing back. Loans take no queue room, but they take slots: past a quarter of
      // the ring, what it holds becomes its own and the slots go back to the lcore.
      if (ring.lent() > ring.capacity() / 4) [[unlikely]]
        ring.keep_lent();
      const unsigned took = ring.lend_burst(out + got, n - got);
      // The ownership auditor must see each free where the application makes it (release()).
      if constexpr (kMbufAudit) ring.keep_lent();
      if (took) r.last = idx;
      got += took;
    }
    if (++r.next >= rings) r.next = 0;
    unlock_consumer(r.busy);
    audit_handout(out, got, AuditOwner::kApp, endpoint, AuditSite::kEndpointReceive);
    return got;
  }

  void release(std::uint16_t endpoint, Mbuf* const* bufs, unsigned n) noexcept {
    if constexpr (kMbufAudit) {
      // The ownership auditor must see each free where the application makes it: a buffer parked
      // on a return ring would still look held, and a second free of it would pass unnoticed.
      mbuf_free_bulk(bufs, n);
      return;
    }
    unsigned queued = 0;
    if (endpoint < rings_.size() && rings_[endpoint]) {
      EndpointRings& r = *rings_[endpoint];
      if (lock_consumer(r.busy)) {
        if (!r.closed) {
          queued = give_back(r, bufs, n);
          if (queued < n) [[unlikely]]
            queued += return_out_of_order(r, bufs + queued, n - queued);
        }
        unlock_consumer(r.busy);
      }
    }
    if (queued < n) mbuf_free_bulk(bufs + queued, n - queued);
  }

  // After the lcores are joined: frees what is still queued either way and closes every endpoint,
  // so later releases free directly. Waits for a consumer inside receive/release to leave.
  void drain_at_stop() noexcept;
  // Delivered packets drain_at_stop() freed (they were counted as delivered when queued). Any
  // thread: the value is final once stop() has returned or running() reads false.
  std::uint64_t drained() const noexcept { return drained_.load(std::memory_order_relaxed); }

 private:
  static bool lock_consumer(std::atomic<bool>& busy) noexcept {
    // Acquire pairs with the release in unlock_consumer(): the previous consumer's ring reads and
    // index updates are visible to us.
    return !busy.exchange(true, std::memory_order_acquire);
  }
  static void unlock_consumer(std::atomic<bool>& busy) noexcept { busy.store(false, std::memory_order_release); }

  // Gives back the longest prefix of bufs that the rings lent in order, starting with the ring
  // that lent last; with several lcores a release may run across their rings in turn.
  static unsigned give_back(EndpointRings& r, Mbuf* const* bufs, unsigned n) noexcept {
    unsigned done = 0;
    unsigned idx = r.last;
    const unsigned rings = static_cast<unsigned>(r.per_lcore.size());
    while (done < n) {
      unsigned k = r.per_lcore[idx]->give_back(bufs + done, n - done);
      for (unsigned i = 0; k == 0 && i < rings; ++i)
        if (i != idx && (k = r.per_lcore[i]->give_back(bufs + done, n - done))) idx = i;
      if (k == 0) break;
      done += k;
    }
    return done;
  }

  // A release out of order: every loan becomes the application's own (what it still holds comes
  // back this way too, later), and bufs go to the lcore on the return ring. Returns how many.
  static unsigned return_out_of_order(EndpointRings& r, Mbuf* const* bufs, unsigned n) noexcept {
    for (auto& ring : r.per_lcore) ring->keep_lent();
    MbufRing& back = *r.returns[r.last];
    const unsigned queued = back.enqueue_burst(bufs, n);
    back.write_ahead(n);
    return queued;
  }

  // The fences of a timed look cost the consumer tens of cycles, so only the looks whose tail
  // is within this many packets of the next plainly stored one pay them. A publication held back
  // for a far consumer carries about 256 packets at 32-packet bursts, a near one a burst.
  static constexpr std::uint32_t kTimedLookLead = 512;

  std::vector<std::unique_ptr<EndpointRings>> rings_;  // by endpoint id; null for non-ring endpoints
  std::vector<std::unique_ptr<EndpointWake>> wakes_;   // by endpoint id; null for non-ring endpoints
  // Written by the control thread in drain_at_stop(), read by stats threads in accounting():
  // relaxed, ordered for readers by RunControl's `running` (store release after the drain).
  std::atomic<std::uint64_t> drained_{0};
};

}  // namespace rawpipe
