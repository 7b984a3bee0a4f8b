// Plans for the Extra API and filter tests: test ports, endpoints and lcores built in code.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "rawpipe/pipeline.hh"
#include "tests/support/test_port.hh"

namespace rawpipe::extra_test {

using testing::Frame;
using testing::TestPortConfig;

inline std::uint64_t drop(const Accounting& a, DropReason r) { return a.drops[static_cast<unsigned>(r)]; }

struct PlanBuilder {
  Plan plan;
  explicit PlanBuilder(std::uint32_t pool_count = 1024) {
    plan.source = "test.toml";
    PoolPlan pp;
    pp.config.name = "rx";
    pp.config.count = pool_count;
    pp.config.huge_pages = HugePages::kNever;
    plan.pools.push_back(pp);
  }
  PlanBuilder& port(const std::string& name, TestPortConfig cfg, std::uint16_t rxq = 1) {
    PortPlan p;
    p.name = name;
    p.id = static_cast<std::uint16_t>(plan.ports.size());
    p.pmd = "test";
    p.spec = std::make_shared<testing::TestPortSpec>(std::move(cfg));
    p.pool = "rx";
    p.rx_queues = rxq;
    p.tx_queues = 1;
    plan.ports.push_back(p);
    return *this;
  }
  PlanBuilder& endpoint(const std::string& name, EndpointAction action, std::vector<std::string> match,
                        std::uint32_t ring_size = 1024) {
    EndpointPlan e;
    e.name = name;
    e.id = static_cast<std::uint16_t>(plan.endpoints.size());
    e.action = action;
    e.match = std::move(match);
    e.ring_size = ring_size;
    plan.endpoints.push_back(e);
    return *this;
  }
  PlanBuilder& lcore(std::vector<LcorePlan::RxQueue> rx) {
    LcorePlan l;
    l.id = static_cast<std::uint16_t>(plan.lcores.size());
    l.rx = std::move(rx);
    plan.lcores.push_back(l);
    return *this;
  }
};

// Waits until `expect_rx` packets were received and each has an outcome.
inline void wait_processed(Pipeline& p, std::uint64_t expect_rx) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  for (;;) {
    PipelineSnapshot s = p.snapshot();
    if (s.total.rx_packets == expect_rx && s.total.delivered + s.total.transmitted + s.total.dropped() == expect_rx) return;
    ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "rx " << s.total.rx_packets << " of " << expect_rx;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

// UDP frames 10.0.0.7:sport -> 239.1.1.1:5000 with sport = first, first+1, ...
inline std::vector<Frame> md_frames(unsigned n, std::uint16_t first = 0, std::uint16_t dport = 5000) {
  std::vector<Frame> out;
  for (unsigned i = 0; i < n; ++i)
    out.push_back(testing::udp_frame("10.0.0.7", static_cast<std::uint16_t>(first + i), "239.1.1.1", dport));
  return out;
}

}  // namespace rawpipe::extra_test
