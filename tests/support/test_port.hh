// A test-only port that replays pre-built frames and records what was transmitted (like DPDK's
// net_ring / net_null used as test drivers).
//
// Receive: each rx queue has its own list of frames; rx_burst copies the next frames of the list
// into buffers from the port's pool, `repeat` times over (0 = forever), then returns 0. When the
// pool is empty it takes what it can and counts rx_nombuf. Transmit: each tx queue accepts up to
// `tx_capacity` packets in total (then refuses, so callers can test partial tx_burst), records a
// copy of each frame when `record_tx` is set, and frees the buffers. stop() holds no buffers.
//
// Thread-safety: as any port: one thread per queue. Inspect rx/tx state after the pipeline stops,
// or through the atomic counters while it runs.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "pipeline/buf/pool.hh"
#include "pipeline/classify/rule.hh"
#include "pipeline/port/driver.hh"

namespace rawpipe::testing {

using Frame = std::vector<std::uint8_t>;

struct TestPortConfig {
  std::vector<std::vector<Frame>> rx_frames;  // [rx queue] -> frames in order; missing queues are empty
  std::uint64_t repeat = 1;                   // passes over each list; 0 = forever
  std::uint64_t tx_capacity = ~std::uint64_t{0};  // per tx queue, packets accepted in total
  bool record_tx = true;
  bool flow_rules = true;                     // PortCaps::flow_rules: the pipeline pushes steering to it
  bool every_frame = false;                   // with flow_rules: rules mark flows, every frame arrives (steered_only false)
  std::uint16_t max_queues = 0;               // PortCaps::max_rx/tx_queues; 0: as many as opened
};

class TestPort final : public Port {
 public:
  TestPort(const PortEnv& env, TestPortConfig config);
  ~TestPort() override = default;

  std::string_view pmd_name() const noexcept override { return "test"; }
  std::string path_report() const override;
  PortCaps caps() const override;
  bool steered_only() const override { return config_.flow_rules && !config_.every_frame; }
  Status start() override;
  void stop() override;
  RxQueueHandle rx_queue(std::uint16_t queue) override;
  TxQueueHandle tx_queue(std::uint16_t queue) override;
  PortStats stats() const override;
  Status update_steering(const SteeringRules& rules) override;

  // Frames the rx queues will hand out in total (repeat > 0), and handed out so far.
  std::uint64_t rx_total() const noexcept;
  std::uint64_t rx_done() const noexcept;
  bool rx_exhausted() const noexcept { return config_.repeat != 0 && rx_done() == rx_total(); }
  // Frames transmitted on a tx queue (when record_tx), in order.
  const std::vector<Frame>& transmitted(std::uint16_t tx_queue) const { return tx_.at(tx_queue)->frames; }
  std::uint64_t tx_count(std::uint16_t tx_queue) const { return tx_.at(tx_queue)->accepted.load(std::memory_order_relaxed); }
  std::uint64_t tx_refused(std::uint16_t tx_queue) const { return tx_.at(tx_queue)->refused.load(std::memory_order_relaxed); }
  // The rules the pipeline last asked this port to steer.
  const SteeringRules& steering() const noexcept { return *steering_; }
  bool started() const noexcept { return started_; }

 private:
  struct alignas(128) RxQ {
    TestPort* port = nullptr;
    std::uint16_t id = 0;
    std::vector<Frame> frames;
    std::size_t next = 0;
    std::uint64_t pass = 0;
    std::atomic<std::uint64_t> handed{0};   // single writer (the polling lcore), relaxed
    std::atomic<std::uint64_t> bytes{0};
    std::atomic<std::uint64_t> nombuf{0};
  };
  struct alignas(128) TxQ {
    TestPort* port = nullptr;
    std::uint64_t capacity = 0;
    bool record = true;
    std::vector<Frame> frames;
    std::atomic<std::uint64_t> accepted{0};
    std::atomic<std::uint64_t> refused{0};
    std::atomic<std::uint64_t> bytes{0};
  };
  static std::uint16_t rx_burst(void* q, Mbuf** pkts, std::uint16_t n) noexcept;
  static std::uint16_t tx_burst(void* q, Mbuf** pkts, std::uint16_t n) noexcept;

  PortEnv env_;
  TestPortConfig config_;
  std::vector<std::unique_ptr<RxQ>> rx_;
  std::vector<std::unique_ptr<TxQ>> tx_;
  std::unique_ptr<SteeringRules> steering_;
  bool started_ = false;
};

// Frame helpers for tests. Addresses are text: IPv4 dotted quad, or IPv6 when it contains ':'.
// vlan < 0: untagged. The result is a well-formed Ethernet/[VLAN]/IP/UDP frame with checksums.
Frame udp_frame(std::string_view src, std::uint16_t sport, std::string_view dst, std::uint16_t dport,
                int vlan = -1, std::uint16_t payload_len = 18);
// The same with an ICMP echo instead of UDP (a packet with no ports).
Frame icmp_frame(std::string_view src, std::string_view dst);
// Copies a frame into a fresh buffer (data_len set, port as given); nullptr when the pool is empty.
Mbuf* load_frame(Pool& pool, const Frame& frame, std::uint16_t port = 0);

// Opens TestPorts for a Plan (PortPlan::spec). The config is copied into each port it opens.
class TestPortSpec final : public PortSpec {
 public:
  explicit TestPortSpec(TestPortConfig config) : config_(std::move(config)) {}
  Result<std::unique_ptr<Port>> open(const PortEnv& env) const override;

 private:
  TestPortConfig config_;
};

}  // namespace rawpipe::testing
