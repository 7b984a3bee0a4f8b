// What a pool's ports and lcores hold of it, and the count a pool gets when its config leaves
// `count` out.
//
// A fixed default is wrong for some config whatever its value: four af_xdp queues at libxdp's
// 2048 descriptors keep 8448 buffers posted, more than the 8192 a single queue leaves plenty of
// room in. DPDK's sample applications size their mbuf pool from what will hold buffers instead
// (l3fwd's NB_MBUF: every receive and transmit descriptor, a burst per lcore and port, each
// lcore's mempool cache, and never fewer than 8192), and so does this, with what rawpipe's parts
// hold: a port's receive descriptors (or, for a driver that says, what it keeps posted), its
// transmit descriptors, and for each lcore polling the pool's ports a burst per queue it polls
// plus a full private cache (PoolCache gives back only past twice its size). An l3fwd lcore polls
// one queue per port, so its burst per port is one per queue; a burst per queue is also what a
// driver may hold ready between polls (mlx5's replacement stash). Endpoint rings are left out as
// l3fwd leaves out its software queues: a consumer that falls behind is what they absorb, and a
// pool sized for every slot of them would be gigabytes for a deep ring.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "rawpipe/plan.hh"

namespace rawpipe {

inline constexpr std::uint32_t kMinDefaultPoolCount = 8192;
inline constexpr std::uint32_t kMaxPoolCount = 1u << 30;

struct PoolDemand {
  std::uint64_t kept = 0;         // posted by the ports that say so (PortSpec::buffers_kept)
  std::vector<std::size_t> keepers;  // those ports, by index in plan.ports
  std::uint64_t descriptors = 0;  // every port's receive (or kept, when more) and transmit descriptors
  std::uint64_t lcores = 0;       // bursts and private caches of the lcores polling the pool's ports
};

// What plan.pools[pool]'s ports and lcores hold, by the rule above. Ports and lcores must already
// be in the plan.
PoolDemand pool_demand(const Plan& plan, std::size_t pool);

// descriptors + lcores, at least kMinDefaultPoolCount and at most kMaxPoolCount.
std::uint32_t default_pool_count(const Plan& plan, std::size_t pool);

// plan.pools[pool]'s count, or default_pool_count when it is kPoolSizedFromPlan.
std::uint32_t pool_count(const Plan& plan, std::size_t pool);

// Gives every pool whose count is kPoolSizedFromPlan its default_pool_count: the config loader
// once ports and lcores are read, Pipeline::create for a plan built in code.
void size_pools_from_plan(Plan& plan);

}  // namespace rawpipe
