#include "pipeline/plan/pool_sizing.hh"

#include <algorithm>
#include <vector>

#include "pipeline/port/driver.hh"

namespace rawpipe {

std::uint32_t default_pool_count(const Plan& plan, std::size_t pool) {
  const PoolPlan& pp = plan.pools[pool];
  std::vector<bool> on_pool(plan.ports.size(), false);
  std::uint64_t need = 0;
  for (std::size_t i = 0; i < plan.ports.size(); ++i) {
    const PortPlan& p = plan.ports[i];
    if (p.pool != pp.config.name) continue;
    on_pool[i] = true;
    const std::uint64_t descriptors = std::uint64_t(p.rx_queues) * p.rx_ring_size;
    const std::uint64_t kept = p.spec ? p.spec->buffers_kept(p.rx_queues, p.tx_queues, p.rx_ring_size) : 0;
    need += std::max(descriptors, kept) + std::uint64_t(p.tx_queues) * p.tx_ring_size;
  }
  for (const LcorePlan& l : plan.lcores) {
    std::vector<std::uint16_t> ports;
    for (const LcorePlan::RxQueue& q : l.rx)
      if (q.port < on_pool.size() && on_pool[q.port] && std::find(ports.begin(), ports.end(), q.port) == ports.end())
        ports.push_back(q.port);
    if (ports.empty()) continue;
    need += std::uint64_t(ports.size()) * l.burst + 2ull * pp.config.cache_size;
  }
  return static_cast<std::uint32_t>(std::clamp<std::uint64_t>(need, kMinDefaultPoolCount, kMaxPoolCount));
}

}  // namespace rawpipe
