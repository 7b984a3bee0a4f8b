#include "pipeline/plan/pool_sizing.hh"

#include <algorithm>
#include <vector>

#include "pipeline/port/driver.hh"

namespace rawpipe {

PoolDemand pool_demand(const Plan& plan, std::size_t pool) {
  const PoolPlan& pp = plan.pools[pool];
  PoolDemand d;
  std::vector<bool> on_pool(plan.ports.size(), false);
  for (std::size_t i = 0; i < plan.ports.size(); ++i) {
    const PortPlan& p = plan.ports[i];
    if (p.pool != pp.config.name) continue;
    on_pool[i] = true;
    const std::uint64_t kept = p.spec ? p.spec->buffers_kept(p.rx_queues, p.tx_queues, p.rx_ring_size) : 0;
    d.kept += kept;
    if (kept != 0) d.keepers.push_back(i);
    d.descriptors += std::max(std::uint64_t(p.rx_queues) * p.rx_ring_size, kept) + std::uint64_t(p.tx_queues) * p.tx_ring_size;
  }
  for (const LcorePlan& l : plan.lcores) {
    const auto queues = std::count_if(l.rx.begin(), l.rx.end(), [&](const LcorePlan::RxQueue& q) {
      return q.port < on_pool.size() && on_pool[q.port];
    });
    if (queues == 0) continue;
    d.lcores += std::uint64_t(queues) * l.burst + 2ull * pp.config.cache_size;
  }
  return d;
}

std::uint32_t default_pool_count(const Plan& plan, std::size_t pool) {
  const PoolDemand d = pool_demand(plan, pool);
  return static_cast<std::uint32_t>(std::clamp<std::uint64_t>(d.descriptors + d.lcores, kMinDefaultPoolCount, kMaxPoolCount));
}

std::uint32_t pool_count(const Plan& plan, std::size_t pool) {
  const std::uint32_t count = plan.pools[pool].config.count;
  return count == kPoolSizedFromPlan ? default_pool_count(plan, pool) : count;
}

void size_pools_from_plan(Plan& plan) {
  for (std::size_t i = 0; i < plan.pools.size(); ++i) plan.pools[i].config.count = pool_count(plan, i);
}

}  // namespace rawpipe
