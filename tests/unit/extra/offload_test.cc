// Per-endpoint offload on/off (the Extra API's thread_offload analogue): the endpoint's rules
// leave the ports' steering, and what still reaches an lcore for it is counted as
// endpoint_offload_off; switching while lcores run loses and misdelivers nothing.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "pipeline/extra/extra.hh"
#include "pipeline/classify/rule.hh"
#include "tests/unit/extra/plan_util.hh"
#include "pipeline/port/driver.hh"

namespace rawpipe {
namespace {

using namespace extra_test;
using testing::TestPort;

const rawpipe_api_t* api() {
  const rawpipe_api_t* a = rawpipe_get_api(RAWPIPE_EXTRA_ABI_VERSION);
  EXPECT_NE(a, nullptr) << rawpipe_api_error();
  return a;
}

std::vector<std::uint16_t> steered_endpoints(const Pipeline& p) {
  std::vector<std::uint16_t> out;
  for (const SteeringRule& r : static_cast<const TestPort&>(p.port(0)).steering().rules) out.push_back(r.endpoint);
  return out;
}

PlanBuilder two_endpoints(TestPortConfig cfg) {
  PlanBuilder b;
  b.port("p0", std::move(cfg))
      .endpoint("a", EndpointAction::kSink, {"udp dst 239.1.1.1:5000"})
      .endpoint("b", EndpointAction::kSink, {"udp dst 239.1.1.1:6000"})
      .lcore({{0, 0}});
  return b;
}

TEST(Offload, ApiTableHasIt) {
  const rawpipe_api_t* a = api();
  ASSERT_NE(a, nullptr);
  EXPECT_TRUE(a->caps & RAWPIPE_CAP_OFFLOAD);
  EXPECT_TRUE(RAWPIPE_API_HAS(a, set_endpoint_offload));
  EXPECT_EQ(RAWPIPE_EXTRA_ABI_VERSION, 2u);  // part of version 2 from its first table
  ASSERT_NE(a->set_endpoint_offload, nullptr);
}

// A port that cannot pass traffic to the kernel (the test port, like synth and pcap): the
// endpoint's packets are counted, exactly, as endpoint_offload_off; the other endpoint is untouched.
TEST(Offload, OffEndpointIsCountedWhereThePortCannotPass) {
  TestPortConfig cfg;
  std::vector<Frame> frames = md_frames(100);
  for (Frame& f : md_frames(50, 0, 6000)) frames.push_back(f);
  cfg.rx_frames = {frames};
  PlanBuilder b = two_endpoints(cfg);
  auto created = Pipeline::create(b.plan);
  ASSERT_TRUE(created) << created.message();
  Pipeline& p = *created.value();
  rawpipe_pipeline* h = extra_wrap(p);
  EXPECT_EQ(steered_endpoints(p), (std::vector<std::uint16_t>{0, 1}));
  ASSERT_EQ(api()->set_endpoint_offload(h, 0, 0), 0) << api()->last_error(h);
  EXPECT_FALSE(p.endpoint_offloaded(0));
  EXPECT_TRUE(p.endpoint_offloaded(1));
  EXPECT_EQ(steered_endpoints(p), (std::vector<std::uint16_t>{1})) << "its rules left the port's steering";
  ASSERT_TRUE(p.start());
  wait_processed(p, 150);
  ASSERT_TRUE(p.stop());
  Accounting a = p.accounting();
  EXPECT_EQ(drop(a, DropReason::kEndpointOffloadOff), 100u);
  EXPECT_EQ(a.delivered_per_endpoint[0], 0u);
  EXPECT_EQ(a.delivered_per_endpoint[1], 50u);
  EXPECT_EQ(a.dropped(), 100u);
  EXPECT_TRUE(a.balanced());
  // Back on: the rules return to the port.
  ASSERT_EQ(api()->set_endpoint_offload(h, 0, 1), 0);
  EXPECT_EQ(steered_endpoints(p), (std::vector<std::uint16_t>{0, 1}));
  EXPECT_EQ(api()->set_endpoint_offload(h, 7, 0), -1);
  EXPECT_NE(std::string(api()->last_error(h)).find("endpoint id 7 does not exist"), std::string::npos);
  api()->destroy(h);
}

// Filters never see a non-offloaded endpoint's packets (they are not ours).
int count_seen(const rawpipe_packet*, void* ctx) {
  static_cast<std::atomic<unsigned>*>(ctx)->fetch_add(1, std::memory_order_relaxed);
  return RAWPIPE_RECV;
}

TEST(Offload, FiltersDoNotSeeOffEndpointTraffic) {
  TestPortConfig cfg;
  std::vector<Frame> frames = md_frames(40);
  for (Frame& f : md_frames(10, 0, 6000)) frames.push_back(f);
  cfg.rx_frames = {frames};
  PlanBuilder b = two_endpoints(cfg);
  auto created = Pipeline::create(b.plan);
  ASSERT_TRUE(created) << created.message();
  Pipeline& p = *created.value();
  std::atomic<unsigned> seen{0};
  ASSERT_TRUE(p.filters().set_queue_filter(0, 0, {&count_seen, nullptr, &seen}));
  ASSERT_TRUE(p.set_endpoint_offload(0, false));
  ASSERT_TRUE(p.start());
  wait_processed(p, 50);
  ASSERT_TRUE(p.stop());
  EXPECT_EQ(seen.load(), 10u);
  Accounting a = p.accounting();
  EXPECT_EQ(drop(a, DropReason::kEndpointOffloadOff), 40u);
  EXPECT_EQ(a.delivered_per_endpoint[1], 10u);
  EXPECT_TRUE(a.balanced());
}

// Switching while traffic flows: every packet of endpoint a is either delivered to a or counted as
// offload_off, none goes to b, and after the switch returns at most the burst in progress still
// reaches a.
TEST(Offload, SwitchedUnderTrafficLosesNothing) {
  TestPortConfig cfg;
  std::vector<Frame> frames;
  for (int i = 0; i < 32; ++i) {
    frames.push_back(testing::udp_frame("10.0.0.7", 1, "239.1.1.1", 5000));
    frames.push_back(testing::udp_frame("10.0.0.7", 1, "239.1.1.1", 6000));
  }
  cfg.rx_frames = {frames};
  cfg.repeat = 0;
  PlanBuilder b = two_endpoints(cfg);
  auto created = Pipeline::create(b.plan);
  ASSERT_TRUE(created) << created.message();
  Pipeline& p = *created.value();
  ASSERT_TRUE(p.start());
  auto run_for = [&](std::uint64_t packets) {
    const std::uint64_t until = p.snapshot().total.rx_packets + packets;
    while (p.snapshot().total.rx_packets < until) std::this_thread::yield();
  };
  run_for(5000);
  ASSERT_TRUE(p.set_endpoint_offload(0, false));
  const std::uint64_t a_at_off = p.snapshot().delivered_per_endpoint[0];
  run_for(5000);
  EXPECT_LE(p.snapshot().delivered_per_endpoint[0] - a_at_off, kMaxBurst) << "deliveries after offload off";
  ASSERT_TRUE(p.set_endpoint_offload(0, true));
  const std::uint64_t off_at_on = p.snapshot().total.drops[static_cast<unsigned>(DropReason::kEndpointOffloadOff)];
  run_for(5000);
  ASSERT_TRUE(p.stop());
  Accounting a = p.accounting();
  EXPECT_GT(drop(a, DropReason::kEndpointOffloadOff), 0u);
  EXPECT_LE(drop(a, DropReason::kEndpointOffloadOff) - off_at_on, kMaxBurst) << "offload_off after switching back on";
  // The frames alternate a, b (a first): a's share is the odd one out, b's all reach b.
  EXPECT_EQ(a.delivered_per_endpoint[0] + drop(a, DropReason::kEndpointOffloadOff), (a.rx_packets + 1) / 2);
  EXPECT_EQ(a.delivered_per_endpoint[1], a.rx_packets / 2);
  EXPECT_EQ(a.dropped(), drop(a, DropReason::kEndpointOffloadOff));
  EXPECT_TRUE(a.balanced());
}

}  // namespace
}  // namespace rawpipe
