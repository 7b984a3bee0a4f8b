#include "pipeline/engine/endpoint_queues.hh"

#include <limits>
#include <thread>

#include "pipeline/plan/validate.hh"
#include "pipeline/stats/tsc.hh"
#include "rawpipe/compiler.hh"

namespace rawpipe {
Result<std::unique_ptr<EndpointQueues>> EndpointQueues::create(const Plan& plan) {
  auto q = std::make_unique<EndpointQueues>();
  q->rings_.resize(plan.endpoints.size());
  q->wakes_.resize(plan.endpoints.size());
  for (const EndpointPlan& ep : plan.endpoints) {
    if (ep.action != EndpointAction::kRing) continue;
    auto r = std::make_unique<EndpointRings>();
    for (std::size_t l = 0; l < plan.lcores.size(); ++l) {
      auto ring = EndpointRing::create(ep.ring_size);
      if (!ring) return Status::errorf("{}endpoint '{}': {}", location_prefix(ep.where), ep.name, ring.message());
      r->per_lcore.push_back(std::move(ring).value());
      // Twice the ring: a consumer can hold a whole ring's worth while the lcore is still
      // freeing the previous one.
      auto back = MbufRing::create(2 * ep.ring_size);
      if (!back) return Status::errorf("{}endpoint '{}': {}", location_prefix(ep.where), ep.name, back.message());
      r->returns.push_back(std::move(back).value());
      r->distance.push_back(std::make_unique<ConsumerDistance>());
    }
    q->rings_[ep.id] = std::move(r);
    q->wakes_[ep.id] = std::make_unique<EndpointWake>();
  }
  q->set_far_consumer_ns(ConsumerDistance::kFarNs);
  return q;
}

void EndpointQueues::set_far_consumer_ns(double ns) {
  bool any = false;
  for (const auto& r : rings_) any |= r != nullptr;
  if (!any) return;  // no ring endpoint: no need to measure the TSC (which takes ~20 ms)
  const auto cycles = static_cast<std::uint64_t>(ns / tsc_ns_per_cycle());
  for (auto& r : rings_)
    if (r)
      for (auto& d : r->distance) d->set_far_cycles(cycles);
}

std::vector<MbufRing*> EndpointQueues::returns_of(std::size_t lcore) const {
  std::vector<MbufRing*> out;
  for (const auto& r : rings_)
    if (r) out.push_back(r->returns[lcore].get());
  return out;
}

void EndpointQueues::drain_at_stop() noexcept {
  std::uint64_t drained = 0;
  for (auto& r : rings_) {
    if (!r) continue;
    while (!lock_consumer(r->busy)) std::this_thread::yield();
    Mbuf* batch[kMaxBurst];
    for (auto& ring : r->per_lcore) {
      // Given back in order, not yet freed by their lcore, which is gone: the producer's part
      // is this thread's now.
      (void)ring->reclaim(std::numeric_limits<unsigned>::max(), mbuf_free_bulk);
      // Counted as delivered when queued; nobody will consume them now. What is on loan stays
      // with the application, which frees it directly once the endpoint is closed.
      while (unsigned n = ring->dequeue_burst(batch, kMaxBurst)) {
        mbuf_free_bulk(batch, n);
        drained += n;
      }
    }
    // Released by the consumer, not yet freed by their lcore: no longer counted anywhere.
    for (auto& ring : r->returns)
      while (unsigned n = ring->dequeue_burst(batch, kMaxBurst)) mbuf_free_bulk(batch, n);
    r->closed = true;
    unlock_consumer(r->busy);
  }
  drained_.fetch_add(drained, std::memory_order_relaxed);
}

}  // namespace rawpipe
