// A test port whose traffic the test lets through in steps, so a fault test can stall a consumer
// or fill a ring at an exact point and then prove recovery with exact counts.
//
// Receive: one UDP frame (10.9.0.1:1000 -> 10.9.0.2:5000) copied into pool buffers, at most
// `allow_rx` frames in total; the test raises the allowance from its own thread. An empty pool
// counts rx_nombuf and hands out nothing (the frames wait). Transmit: takes frames while fewer
// than `allow_tx` were taken in total and refuses the rest (a full transmit ring), freeing what it
// takes. stop() holds no buffers.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>
#include <vector>

#include "pipeline/buf/pool.hh"
#include "rawpipe/plan.hh"
#include "pipeline/wire/builder.hh"
#include "pipeline/port/driver.hh"

namespace rawpipe::fault {

struct Gates {
  std::atomic<std::uint64_t> allow_rx{0};
  std::atomic<std::uint64_t> allow_tx{~std::uint64_t{0}};
};

class GatedPort final : public Port {
 public:
  GatedPort(const PortEnv& env, Gates* gates) : env_(env), gates_(gates) {
    wire::FrameSpec s;
    s.eth.dst = {2, 0, 0, 0, 0, 2};
    s.eth.src = {2, 0, 0, 0, 0, 1};
    s.ipv4.src = wire::ipv4(10, 9, 0, 1);
    s.ipv4.dst = wire::ipv4(10, 9, 0, 2);
    s.udp = {1000, 5000};
    s.payload_len = 32;
    frame_.resize(256);
    frame_.resize(wire::write_frame(s, frame_.data(), frame_.size()));
  }

  std::string_view pmd_name() const noexcept override { return "gated"; }
  std::string path_report() const override { return "gated: test frames released in steps\n"; }
  PortCaps caps() const override {
    PortCaps c;
    c.tx = true;
    return c;
  }
  Status start() override { return Status::ok(); }
  void stop() override {}
  RxQueueHandle rx_queue(std::uint16_t) override { return {&rx_burst, this}; }
  TxQueueHandle tx_queue(std::uint16_t) override { return {&tx_burst, this}; }
  PortStats stats() const override {
    PortStats s;
    QueueCounters q;
    q.rx_packets = rx_.load(std::memory_order_relaxed);
    q.rx_nombuf = nombuf_.load(std::memory_order_relaxed);
    q.tx_packets = tx_.load(std::memory_order_relaxed);
    s.rx_queues.push_back(q);
    s.tx_queues.push_back(q);
    s.extended["tx_refused"] = refused_.load(std::memory_order_relaxed);
    return s;
  }

 private:
  static std::uint16_t rx_burst(void* self, Mbuf** pkts, std::uint16_t n) noexcept {
    auto& p = *static_cast<GatedPort*>(self);
    // Relaxed: the allowance is a plain number the test raises; the frames are ours to make.
    const std::uint64_t done = p.rx_.load(std::memory_order_relaxed);
    const std::uint64_t allow = p.gates_->allow_rx.load(std::memory_order_relaxed);
    const unsigned k = static_cast<unsigned>(std::min<std::uint64_t>(n, allow > done ? allow - done : 0));
    if (k == 0) return 0;
    if (!p.env_.pool->alloc_bulk(pkts, k)) {
      p.nombuf_.store(p.nombuf_.load(std::memory_order_relaxed) + k, std::memory_order_relaxed);
      return 0;
    }
    for (unsigned i = 0; i < k; ++i) {
      std::memcpy(pkts[i]->data(), p.frame_.data(), p.frame_.size());
      pkts[i]->data_len = static_cast<std::uint32_t>(p.frame_.size());
      pkts[i]->port = p.env_.port_id;
    }
    p.rx_.store(done + k, std::memory_order_relaxed);
    return static_cast<std::uint16_t>(k);
  }

  static std::uint16_t tx_burst(void* self, Mbuf** pkts, std::uint16_t n) noexcept {
    auto& p = *static_cast<GatedPort*>(self);
    const std::uint64_t done = p.tx_.load(std::memory_order_relaxed);
    const std::uint64_t allow = p.gates_->allow_tx.load(std::memory_order_relaxed);
    const unsigned k = static_cast<unsigned>(std::min<std::uint64_t>(n, allow > done ? allow - done : 0));
    mbuf_free_bulk(pkts, k);
    p.tx_.store(done + k, std::memory_order_relaxed);
    if (k < n) p.refused_.store(p.refused_.load(std::memory_order_relaxed) + (n - k), std::memory_order_relaxed);
    return static_cast<std::uint16_t>(k);
  }

  PortEnv env_;
  Gates* gates_;
  std::vector<std::uint8_t> frame_;
  // Single writer (the polling lcore), relaxed readers.
  std::atomic<std::uint64_t> rx_{0}, nombuf_{0}, tx_{0}, refused_{0};
};

class GatedPortSpec final : public PortSpec {
 public:
  explicit GatedPortSpec(Gates* gates) : gates_(gates) {}
  Result<std::unique_ptr<Port>> open(const PortEnv& env) const override {
    return std::unique_ptr<Port>(std::make_unique<GatedPort>(env, gates_));
  }

 private:
  Gates* gates_;
};

// A plan with one gated port "g0" (pool "rx" of `pool_count` buffers), the given endpoints and
// one lcore polling g0:0.
inline Plan gated_plan(Gates* gates, std::vector<EndpointPlan> endpoints, std::uint32_t pool_count = 4096) {
  Plan plan;
  plan.source = "gated.toml";
  PoolPlan pool;
  pool.config.name = "rx";
  pool.config.count = pool_count;
  pool.config.huge_pages = HugePages::kNever;
  plan.pools.push_back(pool);
  PortPlan port;
  port.name = "g0";
  port.pmd = "gated";
  port.spec = std::make_shared<GatedPortSpec>(gates);
  port.pool = "rx";
  port.where = {"gated.toml", 1};
  plan.ports.push_back(port);
  for (std::size_t i = 0; i < endpoints.size(); ++i) {
    endpoints[i].id = static_cast<std::uint16_t>(i);
    endpoints[i].where = {"gated.toml", static_cast<int>(10 + i)};
  }
  plan.endpoints = std::move(endpoints);
  LcorePlan lc;
  lc.rx = {{0, 0}};
  lc.where = {"gated.toml", 20};
  plan.lcores.push_back(lc);
  return plan;
}

}  // namespace rawpipe::fault
