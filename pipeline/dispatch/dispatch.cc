#include "pipeline/dispatch/dispatch.hh"

#include "pipeline/dispatch/consumer_distance.hh"
#include "pipeline/dispatch/wake.hh"

#include "pipeline/buf/pool.hh"
#include "pipeline/capture/lcore_taps.hh"
#include "pipeline/dispatch/echo.hh"
#include "pipeline/dispatch/sockperf_echo.hh"

namespace rawpipe {

Dispatcher::Dispatcher(std::vector<Route> routes, std::vector<TxQueueHandle> tx, LcoreCounters* counters)
    : routes_(std::move(routes)),
      tx_(std::move(tx)),
      counters_(counters),
      n_endpoints_(static_cast<std::uint16_t>(routes_.size())),
      slot_of_dest_(routes_.size() + tx_.size(), kUnused) {
  for (std::size_t d = 0; d < routes_.size(); ++d)
    if (routes_[d].action == EndpointAction::kRing && routes_[d].ring) ring_routes_.push_back(static_cast<std::uint16_t>(d));
}

namespace {
// Makes what a route's ring held back visible, and wakes its consumer if it sleeps.
void publish(const Dispatcher::Route& r) noexcept {
  if (r.ring->publish() && r.wake) r.wake->after_enqueue();
}

// The same for a ring whose consumer is far: its tail is streamed (EndpointRing::publish_streaming).
void publish_far(const Dispatcher::Route& r) noexcept {
  if (r.ring->publish_streaming() && r.wake) r.wake->after_enqueue();
}
}  // namespace

void Dispatcher::follow_consumers() noexcept {
  for (const std::uint16_t d : ring_routes_) {
    Route& r = routes_[d];
    const bool far = r.consumer && r.consumer->far();
    if (far == r.held) continue;
    if (!far) publish(r);
    r.held = far;
    held_routes_ = far ? held_routes_ + 1 : held_routes_ - 1;
  }
}

void Dispatcher::publish_held(bool idle) noexcept {
  for (const std::uint16_t d : ring_routes_) {
    if (!routes_[d].held) continue;
    publish_far(routes_[d]);
    // No later publication may come to push the tail out.
    if (idle) routes_[d].ring->settle();
  }
}

void Dispatcher::prefetch_given_back() noexcept {
  for (const std::uint16_t d : ring_routes_) routes_[d].ring->prefetch_given_back();
}

void Dispatcher::reclaim_given_back(unsigned max) noexcept {
  // Freed where they lie in the ring; kept ones are blank, which mbuf_free_bulk skips.
  for (const std::uint16_t d : ring_routes_) (void)routes_[d].ring->reclaim(max, mbuf_free_bulk);
}

void Dispatcher::stop_holding() noexcept {
  for (const std::uint16_t d : ring_routes_) {
    Route& r = routes_[d];
    if (r.held) publish(r);
    // A tail the last publication streamed is out of the write-combining buffer before the lcore
    // ends and stop() drains the rings up to it.
    r.ring->settle();
    r.held = false;
  }
  held_routes_ = 0;
}

// Returns packet m's destination, or kUnused after setting `reason` for a drop. Echo rewrites the
// packet here (the swap decides whether it can be answered at all).
RAWPIPE_ALWAYS_INLINE std::uint16_t Dispatcher::destination(Mbuf* m, std::uint8_t& reason) noexcept {
  const Route& r = routes_[m->endpoint];
  switch (r.action) {
    case EndpointAction::kRing:
    case EndpointAction::kSink:
      return m->endpoint;
    case EndpointAction::kEcho:
      if (!echo_swap(m)) {
        reason = static_cast<std::uint8_t>(DropReason::kNotForUs);
        return kUnused;
      }
      if (r.sockperf && !sockperf_reply(m)) [[unlikely]]
        return m->endpoint;  // a sockperf server takes it without a reply: delivered, freed as a sink's
      return static_cast<std::uint16_t>(n_endpoints_ + m->port);
    case EndpointAction::kForward:
    default:
      return static_cast<std::uint16_t>(n_endpoints_ + r.forward_port);
  }
}

// Hands run[0..k) to destination d; what it does not take is dropped, counted and queued on to_free.
void Dispatcher::deliver_run(std::uint16_t d, Mbuf** run, unsigned k, Mbuf** to_free, unsigned& n_free) noexcept {
  LcoreCounters& c = *counters_;
  unsigned done;
  DropReason fail;
  if (d < n_endpoints_) {
    const Route& r = routes_[d];
    if (r.action == EndpointAction::kRing) {
      fail = DropReason::kEndpointRingFull;
      auto enqueue = [&](Mbuf** from, unsigned count) noexcept {
        if (!r.held) return r.ring->enqueue_burst(from, count);
        const unsigned queued = r.ring->enqueue_burst_unpublished(from, count);
        // Never more than half the ring held back: a small ring would otherwise fill with
        // packets its consumer cannot see yet, and drop the next ones as endpoint_ring_full.
        if (r.ring->unpublished() >= r.ring->capacity() / 2) publish_far(r);
        return queued;
      };
      done = enqueue(run, k);
      // The ring looks full until the lcore reclaims what the consumer gave back since the
      // last look (Lcore::free_returns); before dropping, look now.
      if (done < k && r.ring->reclaim(r.ring->capacity(), mbuf_free_bulk)) [[unlikely]]
        done += enqueue(run + done, k - done);
      if (!r.held && r.wake && done) r.wake->after_enqueue();
      r.ring->write_ahead(k);  // the next run to this endpoint is likely as long
    } else {
      // Sink: delivered, then freed here.
      for (unsigned j = 0; j < k; ++j) to_free[n_free++] = run[j];
      done = k;
      fail = DropReason::kNone;
    }
    c.delivered_per_endpoint[d].add(done);
    c.delivered.add(done);
  } else {
    const std::uint16_t port = static_cast<std::uint16_t>(d - n_endpoints_);
    const TxQueueHandle& tx = tx_[port];
    // Echo and forward ask for nothing special (echo_swap keeps the checksums valid).
    for (unsigned j = 0; j < k; ++j) run[j]->tx_flags = 0;
    done = tx.burst ? tx(run, static_cast<std::uint16_t>(k)) : 0;
    fail = DropReason::kTxFailed;
    c.transmitted_per_port[port].add(done);
    c.transmitted.add(done);
    // Which endpoint sent them: the run may mix echo endpoints that share an ingress port.
    for (unsigned j = 0; j < done; ++j) c.transmitted_per_endpoint[run[j]->endpoint].add(1);
  }
  if (done < k) [[unlikely]] {
    c.drops[static_cast<unsigned>(fail)].add(k - done);
    if (fail == DropReason::kEndpointRingFull) c.ring_full_per_endpoint[d].add(k - done);
    for (unsigned j = done; j < k; ++j) {
      run[j]->drop_reason = static_cast<std::uint8_t>(fail);
      to_free[n_free++] = run[j];
    }
    if (taps_) taps_->on_drops(run + done, k - done);
  }
}

// The common burst, recognised before any per-packet destination: every packet received, alive
// and matched to one endpoint whose action takes buffers as they are (a sink or a ring). Per
// packet that is three loads and one combined test; anything else (a drop, a hold, a second
// endpoint, an action that rewrites or transmits) returns false having changed nothing.
RAWPIPE_ALWAYS_INLINE bool Dispatcher::deliver_whole_burst(Mbuf** pkts, const Verdict* verdicts, unsigned n) noexcept {
  const std::uint16_t e = pkts[0]->endpoint;
  if (!takes_whole_bursts(e)) return false;
  static_assert(static_cast<unsigned>(Verdict::kRecv) == 0);
  unsigned differs = 0;
  for (unsigned i = 0; i < n; ++i)
    differs |= static_cast<unsigned>(verdicts[i]) | pkts[i]->drop_reason | (pkts[i]->endpoint ^ e);
  if (differs != 0) return false;
  deliver_burst_to(e, pkts, n);
  return true;
}

void Dispatcher::deliver_burst_to(std::uint16_t e, Mbuf** pkts, unsigned n) noexcept {
  LcoreCounters& c = *counters_;
  if (routes_[e].action == EndpointAction::kSink) {
    c.delivered_per_endpoint[e].add(n);
    c.delivered.add(n);
    mbuf_free_bulk(pkts, n);
    return;
  }
  Mbuf* to_free[kMaxBurst];
  unsigned n_free = 0;
  deliver_run(e, pkts, n, to_free, n_free);
  if (n_free) mbuf_free_bulk(to_free, n_free);
}

void Dispatcher::dispatch_burst(Mbuf** pkts, const Verdict* verdicts, unsigned n) noexcept {
  if (n != 0 && deliver_whole_burst(pkts, verdicts, n)) [[likely]]
    return;
  // Per packet: its destination, or kUnused for drops and holds.
  std::uint16_t dest[kMaxBurst];
  Mbuf* to_free[kMaxBurst];
  unsigned n_free = 0;
  unsigned n_alive = 0;
  std::uint16_t first = kUnused;
  bool one_dest = true;
  LcoreCounters& c = *counters_;

  for (unsigned i = 0; i < n; ++i) {
    Mbuf* m = pkts[i];
    dest[i] = kUnused;
    if (verdicts[i] == Verdict::kHold) [[unlikely]] {
      c.delivered_per_endpoint[m->endpoint].add(1);
      c.delivered.add(1);
      continue;
    }
    std::uint8_t reason = m->drop_reason;
    if (verdicts[i] == Verdict::kRecv && reason == 0) [[likely]] {
      const std::uint16_t d = destination(m, reason);
      if (d != kUnused) [[likely]] {
        dest[i] = d;
        if (n_alive++ == 0) first = d;
        one_dest &= d == first;
        continue;
      }
    } else if (reason == 0) {
      reason = static_cast<std::uint8_t>(DropReason::kFilterDrop);
    }
    m->drop_reason = reason;
    c.drops[reason].add(1);
    to_free[n_free++] = m;
  }

  if (n_alive == n && n != 0 && one_dest) [[likely]] {
    // The common burst: every packet goes to one place, in order; no grouping needed.
    if (first < n_endpoints_ && routes_[first].action == EndpointAction::kSink) {
      // A sink takes all of it (nothing was dropped, so nothing else is queued to free).
      c.delivered_per_endpoint[first].add(n);
      c.delivered.add(n);
      mbuf_free_bulk(pkts, n);
      return;
    }
    deliver_run(first, pkts, n, to_free, n_free);
  } else if (n_alive != 0) {
    // Counting sort: contiguous runs per destination, order kept within each run.
    std::uint16_t active[kMaxBurst];   // destinations seen in this burst, in first-seen order
    std::uint16_t count[kMaxBurst + 1];
    unsigned n_active = 0;
    for (unsigned i = 0; i < n; ++i) {
      const std::uint16_t d = dest[i];
      if (d == kUnused) continue;
      std::uint16_t s = slot_of_dest_[d];
      if (s == kUnused) {
        s = static_cast<std::uint16_t>(n_active);
        slot_of_dest_[d] = s;
        active[n_active++] = d;
        count[s] = 0;
      }
      ++count[s];
      dest[i] = s;
    }
    Mbuf* sorted[kMaxBurst];
    std::uint16_t start[kMaxBurst + 1];
    std::uint16_t pos = 0;
    for (unsigned s = 0; s < n_active; ++s) {
      start[s] = pos;
      pos = static_cast<std::uint16_t>(pos + count[s]);
    }
    std::uint16_t fill[kMaxBurst];
    for (unsigned s = 0; s < n_active; ++s) fill[s] = start[s];
    for (unsigned i = 0; i < n; ++i)
      if (dest[i] != kUnused) sorted[fill[dest[i]]++] = pkts[i];
    for (unsigned s = 0; s < n_active; ++s) {
      slot_of_dest_[active[s]] = kUnused;
      deliver_run(active[s], &sorted[start[s]], count[s], to_free, n_free);
    }
  }
  if (n_free) mbuf_free_bulk(to_free, n_free);
}

}  // namespace rawpipe
