// End-to-end: test port -> parse -> classify -> dispatch -> endpoints, with lcore threads, exact
// counts per endpoint and per drop reason, and the accounting identity.
#include "rawpipe/pipeline.hh"

#include <poll.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>

#include "pipeline/buf/pool.hh"
#include "pipeline/dispatch/membarrier.hh"
#include "pipeline/dispatch/wake.hh"
#include "pipeline/neigh/stage.hh"
#include "rawpipe/config.hh"
#include "rawpipe/endpoint_wait.hh"
#include "pipeline/wire/wire.hh"
#include "tests/support/test_port.hh"

namespace rawpipe {
namespace {

using testing::Frame;
using testing::TestPort;
using testing::TestPortConfig;
using testing::udp_frame;

std::uint64_t drop(const Accounting& a, DropReason r) { return a.drops[static_cast<unsigned>(r)]; }

struct PlanBuilder {
  Plan plan;
  PlanBuilder() {
    plan.source = "test.toml";
    PoolPlan pp;
    pp.config.name = "rx";
    pp.config.count = 1024;
    pp.config.huge_pages = HugePages::kNever;
    plan.pools.push_back(pp);
  }
  PlanBuilder& port(const std::string& name, TestPortConfig cfg, std::uint16_t rxq = 1, std::uint16_t txq = 1) {
    PortPlan p;
    p.name = name;
    p.id = static_cast<std::uint16_t>(plan.ports.size());
    p.pmd = "test";
    p.spec = std::make_shared<testing::TestPortSpec>(std::move(cfg));
    p.pool = "rx";
    p.rx_queues = rxq;
    p.tx_queues = txq;
    p.where = {"test.toml", 10 + p.id};
    plan.ports.push_back(p);
    return *this;
  }
  PlanBuilder& endpoint(const std::string& name, EndpointAction action, std::vector<std::string> match,
                        std::uint16_t forward_port = 0) {
    EndpointPlan e;
    e.name = name;
    e.id = static_cast<std::uint16_t>(plan.endpoints.size());
    e.action = action;
    e.match = std::move(match);
    e.ring_size = 1024;
    e.forward_port_id = forward_port;
    e.where = {"test.toml", 20 + e.id};
    plan.endpoints.push_back(e);
    return *this;
  }
  PlanBuilder& lcore(std::vector<LcorePlan::RxQueue> rx, int cpu = -1) {
    LcorePlan l;
    l.id = static_cast<std::uint16_t>(plan.lcores.size());
    l.cpu = cpu;
    l.rx = std::move(rx);
    l.where = {"test.toml", 30 + l.id};
    plan.lcores.push_back(l);
    return *this;
  }
};

// Waits until every frame the test ports will produce was received and has an outcome.
void wait_all_processed(Pipeline& p, std::uint64_t expect_rx) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  for (;;) {
    PipelineSnapshot s = p.snapshot();
    if (s.total.rx_packets == expect_rx &&
        s.total.delivered + s.total.transmitted + s.total.dropped() == expect_rx)
      return;
    ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "rx " << s.total.rx_packets << " of " << expect_rx;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

Frame bad_udp_length() {
  Frame f = udp_frame("10.0.0.7", 1, "10.0.0.1", 6000);
  f[14 + 20 + 4] = 0;
  f[14 + 20 + 5] = 200;  // UDP length beyond the IP payload
  return f;
}

TEST(Pipeline, EndToEndExactCountsPerEndpointAndPerDropReason) {
  std::vector<Frame> q0;
  for (int i = 0; i < 10; ++i) q0.push_back(udp_frame("10.0.0.7", static_cast<std::uint16_t>(i), "239.1.1.1", 5000));
  for (int i = 0; i < 7; ++i) q0.push_back(udp_frame("10.0.0.7", 1, "10.0.0.1", 6000));
  for (int i = 0; i < 3; ++i) q0.push_back(udp_frame("10.0.0.7", 1, "10.0.0.9", 7777));
  for (int i = 0; i < 2; ++i) q0.push_back(Frame(10, 0xab));
  q0.push_back(bad_udp_length());
  for (int i = 0; i < 4; ++i) q0.push_back(udp_frame("fe80::7", 1, "ff02::1", 5000));
  TestPortConfig cfg;
  cfg.rx_frames = {q0};
  cfg.repeat = 3;
  PlanBuilder b;
  b.port("p0", cfg)
      .endpoint("md", EndpointAction::kRing, {"udp dst 239.1.1.1:5000", "udp dst [ff02::1]:5000"})
      .endpoint("sink", EndpointAction::kSink, {"udp dst 10.0.0.1:6000 port p0"})
      .lcore({{0, 0}});
  auto created = Pipeline::create(b.plan);
  ASSERT_TRUE(created) << created.message();
  Pipeline& p = *created.value();
  EXPECT_EQ(p.endpoint_id("md"), 0);
  EXPECT_EQ(p.endpoint_id("sink"), 1);
  EXPECT_FALSE(p.endpoint_id("nope"));
  EXPECT_EQ(p.port_id("p0"), 0);
  auto& port = dynamic_cast<TestPort&>(p.port(0));
  EXPECT_EQ(port.steering().rules.size(), 3u);

  ASSERT_TRUE(p.start());
  EXPECT_TRUE(p.running());
  // Consume the ring endpoint while the lcore runs; every packet must be one of md's flows.
  std::uint64_t consumed = 0, misdelivered = 0;
  const std::uint64_t total = q0.size() * 3;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (consumed < 14 * 3 && std::chrono::steady_clock::now() < deadline) {
    Mbuf* out[32];
    unsigned n = p.endpoint_receive(0, out, 32);
    for (unsigned i = 0; i < n; ++i)
      if (wire::load_be16(out[i]->data() + out[i]->l4_off + 2) != 5000) ++misdelivered;
    consumed += n;
    mbuf_free_bulk(out, n);
  }
  wait_all_processed(p, total);
  ASSERT_TRUE(p.stop());
  EXPECT_FALSE(p.running());

  Accounting a = p.accounting();
  EXPECT_EQ(consumed, 14u * 3);
  EXPECT_EQ(misdelivered, 0u);
  EXPECT_EQ(a.rx_packets, total);
  EXPECT_EQ(a.delivered_per_endpoint[0], 14u * 3);
  EXPECT_EQ(a.delivered_per_endpoint[1], 7u * 3);
  EXPECT_EQ(a.delivered, 21u * 3);
  EXPECT_EQ(a.transmitted, 0u);
  EXPECT_EQ(drop(a, DropReason::kNoMatch), 3u * 3);
  EXPECT_EQ(drop(a, DropReason::kRuntEthernet), 2u * 3);
  EXPECT_EQ(drop(a, DropReason::kBadUdpLength), 1u * 3);
  EXPECT_EQ(a.dropped(), 6u * 3);
  EXPECT_EQ(a.drained, 0u);
  ASSERT_EQ(a.pools.size(), 1u);
  EXPECT_EQ(a.pools[0].outstanding, 0u);
  EXPECT_TRUE(a.balanced());
  PipelineSnapshot s = p.snapshot();
  ASSERT_EQ(s.lcores.size(), 1u);
  EXPECT_EQ(s.lcores[0].rx_packets, total);
  EXPECT_GT(s.lcores[0].bursts, 0u);
  EXPECT_GT(s.lcores[0].rx_bytes, total * 10);
}

// The path report ends with what the builder decided from the port's capabilities, so a flow-rule
// port, one that takes rules but receives every frame (mlx5 with steering = "all") and one that
// leaves classification to the lcore read differently.
TEST(Pipeline, PathReportStatesThePortCapabilitiesTheBuilderUsed) {
  struct Case {
    bool flow_rules, every_frame;
    const char* says;
  };
  for (const Case& c : {Case{true, false, "flow rules on the device (only the endpoints' traffic reaches the queues)"},
                        Case{true, true, "flow rules on the device for flow tags and group joins (every frame reaches "
                                         "the queues)"},
                        Case{false, false, "flow rules none (every frame of a queue reaches its lcore"}}) {
    TestPortConfig cfg;
    cfg.rx_frames = {{udp_frame("10.0.0.7", 1, "239.1.1.1", 5000)}};
    cfg.flow_rules = c.flow_rules;
    cfg.every_frame = c.every_frame;
    PlanBuilder b;
    b.port("p0", cfg).endpoint("md", EndpointAction::kSink, {"udp dst 239.1.1.1:5000"}).lcore({{0, 0}});
    auto created = Pipeline::create(b.plan);
    ASSERT_TRUE(created) << created.message();
    const std::string report = created.value()->port_path_report(0);
    EXPECT_NE(report.find("port p0 capabilities: "), std::string::npos) << report;
    EXPECT_NE(report.find(c.says), std::string::npos) << report;
    EXPECT_NE(report.find("transmit to the wire"), std::string::npos) << report;
    EXPECT_NE(report.find("up to 1 rx / 1 tx queues"), std::string::npos) << report;
  }
}

TEST(Pipeline, PacketsLeftInRingsAtStopAreDrainedAndFreed) {
  TestPortConfig cfg;
  cfg.rx_frames = {{udp_frame("10.0.0.7", 1, "10.0.0.1", 5000)}};
  cfg.repeat = 100;
  PlanBuilder b;
  b.port("p0", cfg).endpoint("ep", EndpointAction::kRing, {"udp dst *:5000"}).lcore({{0, 0}});
  auto p = std::move(Pipeline::create(b.plan)).value();
  ASSERT_TRUE(p->start());
  wait_all_processed(*p, 100);
  EXPECT_EQ(p->pool("rx")->in_use(), 100u);
  ASSERT_TRUE(p->stop());
  Accounting a = p->accounting();
  EXPECT_EQ(a.delivered_per_endpoint[0], 100u);
  EXPECT_EQ(a.drained, 100u);
  EXPECT_TRUE(a.balanced());
  Mbuf* out[4];
  EXPECT_EQ(p->endpoint_receive(0, out, 4), 0u);
  ASSERT_TRUE(p->stop());  // idempotent
  auto again = p->start();
  ASSERT_FALSE(again);
  EXPECT_NE(again.message().find("cannot be restarted"), std::string::npos);
}

// The C++ wait calls (rawpipe/endpoint_wait.hh): misuse is an error, arming with packets queued
// says "receive, do not sleep", and an armed descriptor becomes readable when packets come, with
// either kind of fence (kRareSleep arms with membarrier where the kernel has it).
void ring_consumer_waits(WakeFence fence) {
  TestPortConfig cfg;
  cfg.rx_frames = {{udp_frame("10.0.0.7", 1, "10.0.0.1", 5000)}};
  cfg.repeat = 10;
  PlanBuilder b;
  b.port("p0", cfg)
      .endpoint("ep", EndpointAction::kRing, {"udp dst *:5000"})
      .endpoint("count", EndpointAction::kSink, {"udp dst *:6000"})
      .lcore({{0, 0}});
  auto p = std::move(Pipeline::create(b.plan)).value();
  auto not_ring = endpoint_wait_fd(*p, 1);
  ASSERT_FALSE(not_ring);
  EXPECT_NE(not_ring.message().find("not a ring endpoint"), std::string::npos) << not_ring.message();
  auto early = endpoint_arm(*p, 0);
  ASSERT_FALSE(early);
  EXPECT_NE(early.message().find("endpoint_wait_fd first"), std::string::npos) << early.message();
  auto fd = endpoint_wait_fd(*p, 0, fence);
  ASSERT_TRUE(fd) << fd.message();
  EXPECT_EQ(endpoint_wait_fd(*p, 0).value(), fd.value());  // one descriptor per endpoint
  EXPECT_EQ(p->endpoint_wake(0)->asymmetric.load(), fence == WakeFence::kRareSleep && membarrier_register());
  auto armed = endpoint_arm(*p, 0);
  ASSERT_TRUE(armed) << armed.message();
  EXPECT_FALSE(armed.value());  // nothing queued yet: sleep
  ASSERT_TRUE(p->start());
  pollfd pfd{fd.value(), POLLIN, 0};
  ASSERT_EQ(::poll(&pfd, 1, 10000), 1) << "the lcore did not wake the armed descriptor";
  wait_all_processed(*p, 10);
  auto again = endpoint_arm(*p, 0);
  ASSERT_TRUE(again);
  EXPECT_TRUE(again.value());  // packets are waiting: receive instead of sleeping
  Mbuf* out[16];
  EXPECT_EQ(p->endpoint_receive(0, out, 16), 10u);
  mbuf_free_bulk(out, 10);
  ASSERT_TRUE(p->stop());
  EXPECT_TRUE(p->accounting().balanced());
}

TEST(Pipeline, RingConsumerWaitsOnTheEndpointDescriptor) { ring_consumer_waits(WakeFence::kFull); }
TEST(Pipeline, RingConsumerWaitsWithMembarrier) { ring_consumer_waits(WakeFence::kRareSleep); }

TEST(Pipeline, TwoLcoresOnTwoQueuesKeepPerLcoreCountsAndShareARingEndpoint) {
  std::vector<Frame> q0, q1;
  for (int i = 0; i < 50; ++i) q0.push_back(udp_frame("10.0.0.7", static_cast<std::uint16_t>(i), "10.0.0.1", 5000));
  for (int i = 0; i < 5; ++i) q0.push_back(udp_frame("10.0.0.7", 1, "10.0.0.2", 6000));
  for (int i = 0; i < 30; ++i) q1.push_back(udp_frame("10.0.0.8", static_cast<std::uint16_t>(i), "10.0.0.1", 5000));
  for (int i = 0; i < 9; ++i) q1.push_back(udp_frame("10.0.0.8", 1, "10.0.0.3", 6000));
  TestPortConfig cfg;
  cfg.rx_frames = {q0, q1};
  cfg.repeat = 20;
  PlanBuilder b;
  b.port("p0", cfg, 2)
      .endpoint("feed", EndpointAction::kRing, {"udp dst 10.0.0.1:5000"})
      .endpoint("other", EndpointAction::kSink, {"udp dst *:6000"})
      .lcore({{0, 0}})
      .lcore({{0, 1}});
  auto p = std::move(Pipeline::create(b.plan)).value();
  ASSERT_TRUE(p->start());
  std::uint64_t consumed = 0;
  const std::uint64_t feed_total = (50 + 30) * 20;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (consumed < feed_total && std::chrono::steady_clock::now() < deadline) {
    Mbuf* out[64];
    unsigned n = p->endpoint_receive(0, out, 64);
    consumed += n;
    mbuf_free_bulk(out, n);
  }
  wait_all_processed(*p, (55 + 39) * 20);
  ASSERT_TRUE(p->stop());
  Accounting a = p->accounting();
  EXPECT_EQ(consumed, feed_total);
  EXPECT_EQ(a.delivered_per_endpoint[0], feed_total);
  EXPECT_EQ(a.delivered_per_endpoint[1], (5u + 9u) * 20);
  EXPECT_TRUE(a.balanced());
  PipelineSnapshot s = p->snapshot();
  ASSERT_EQ(s.lcores.size(), 2u);
  EXPECT_EQ(s.lcores[0].rx_packets, 55u * 20);
  EXPECT_EQ(s.lcores[1].rx_packets, 39u * 20);
  EXPECT_EQ(s.lcores[0].delivered, 55u * 20);
  EXPECT_EQ(s.lcores[1].delivered, 39u * 20);
}

TEST(Pipeline, ReleasedPacketsGoBackThroughTheirLcoresAndEveryBufferReturns) {
  // Two lcores feeding one ring endpoint; the consumer gives every packet back with
  // endpoint_release, some with an extra reference it drops itself afterwards.
  std::vector<Frame> q0, q1;
  for (int i = 0; i < 40; ++i) q0.push_back(udp_frame("10.0.0.7", static_cast<std::uint16_t>(i), "10.0.0.1", 5000));
  for (int i = 0; i < 25; ++i) q1.push_back(udp_frame("10.0.0.8", static_cast<std::uint16_t>(i), "10.0.0.1", 5000));
  TestPortConfig cfg;
  cfg.rx_frames = {q0, q1};
  cfg.repeat = 100;  // 6500 packets through a 1024-buffer pool: only returned buffers keep it going
  PlanBuilder b;
  b.port("p0", cfg, 2).endpoint("feed", EndpointAction::kRing, {"udp dst 10.0.0.1:5000"}).lcore({{0, 0}}).lcore({{0, 1}});
  auto p = std::move(Pipeline::create(b.plan)).value();
  ASSERT_TRUE(p->start());
  const std::uint64_t total = (40 + 25) * 100;
  std::uint64_t consumed = 0;
  std::vector<Mbuf*> kept;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (consumed < total && std::chrono::steady_clock::now() < deadline) {
    Mbuf* out[64];
    const unsigned n = p->endpoint_receive(0, out, 64);
    if (n && kept.size() < 10) {
      mbuf_ref(out[0]);  // still ours after the release below
      kept.push_back(out[0]);
    }
    p->endpoint_release(0, out, n);
    consumed += n;
  }
  wait_all_processed(*p, total);
  for (Mbuf* m : kept) EXPECT_EQ(m->refcnt.load(), 1) << "the release dropped only its own reference";
  mbuf_free_bulk(kept.data(), static_cast<unsigned>(kept.size()));
  ASSERT_TRUE(p->stop());
  Accounting a = p->accounting();
  EXPECT_EQ(consumed, total);
  EXPECT_EQ(a.delivered_per_endpoint[0], total);
  ASSERT_EQ(a.pools.size(), 1u);
  EXPECT_EQ(a.pools[0].outstanding, 0u);
  EXPECT_TRUE(a.balanced());
}

// A plan built in code that leaves a pool's count alone gets what a config without `count` gets
// (pipeline/plan/pool_sizing.hh), not a fixed 8192 its deep rings would not fit in.
TEST(Pipeline, APlanBuiltInCodeSizesAPoolItLeftUncounted) {
  PlanBuilder b;
  b.port("p0", TestPortConfig{}, 2).endpoint("s", EndpointAction::kSink, {"udp"}).lcore({{0, 0}, {0, 1}});
  b.plan.pools[0].config = PoolConfig{.name = "rx", .huge_pages = HugePages::kNever};
  b.plan.ports[0].rx_ring_size = 4096;
  // Two receive rings of 4096 and a transmit ring of 1024, a burst of 32 per polled queue and
  // twice the cache of 256.
  constexpr std::uint32_t kSized = 2u * 4096 + 1024 + 2 * 32 + 2 * 256;
  EXPECT_NE(describe_plan(b.plan).find(fmt::format("pool rx           {} buffers", kSized)), std::string::npos)
      << describe_plan(b.plan);
  auto p = Pipeline::create(b.plan);
  ASSERT_TRUE(p) << p.message();
  EXPECT_EQ(p.value()->accounting().pools[0].count, kSized);
  // A count the plan gives is kept.
  b.plan.pools[0].config.count = 600;
  auto given = Pipeline::create(b.plan);
  ASSERT_TRUE(given) << given.message();
  EXPECT_EQ(given.value()->accounting().pools[0].count, 600u);
}

// Packets released in order go back through the endpoint ring's own slots; every other pattern
// must still return each buffer once and keep the ring moving: a burst released backwards, one
// freed with mbuf_free_bulk instead of released, and a packet held over into the next receive.
// A pass of 32 always fits the 64-packet ring, which this thread empties before each pass: any
// drop means loans were left in the ring.
TEST(Pipeline, ReleasesInAnyOrderOrNoneAtAllReturnEveryBufferOnce) {
  std::vector<Frame> frames;
  for (int i = 0; i < 50; ++i) frames.push_back(udp_frame("10.0.0.7", static_cast<std::uint16_t>(i), "10.0.0.1", 5000));
  TestPortConfig cfg;
  cfg.rx_frames = {frames};
  cfg.repeat = 200;  // 10000 packets through 512 buffers: only returned buffers keep it going
  PlanBuilder b;
  b.port("p0", cfg).endpoint("feed", EndpointAction::kRing, {"udp dst 10.0.0.1:5000"}).lcore({{0, 0}});
  b.plan.endpoints[0].ring_size = 64;
  b.plan.pools[0].config.count = 512;
  // Passes run here, one whenever the ring is empty, so that every pattern comes round often
  // instead of a free-running lcore filling the small ring while this thread is elsewhere.
  b.plan.lcores[0].thread = false;
  auto p = std::move(Pipeline::create(b.plan)).value();
  const std::uint64_t double_frees_before = frees_of_free_buffers();
  ASSERT_TRUE(p->start());
  const std::uint64_t total = 50 * 200;
  std::uint64_t consumed = 0;
  Mbuf* held = nullptr;
  unsigned round = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  auto processed = [&] {
    const PipelineSnapshot s = p->snapshot();
    return s.total.rx_packets == total && s.total.delivered + s.total.dropped() == total;
  };
  while (!(processed() && p->endpoint_queued(0) == 0) && std::chrono::steady_clock::now() < deadline) {
    if (p->endpoint_queued(0) == 0) (void)p->progress();
    Mbuf* out[8];
    const unsigned n = p->endpoint_receive(0, out, 8);
    if (held) {
      p->endpoint_release(0, &held, 1);
      held = nullptr;
    }
    if (n == 0) continue;
    consumed += n;
    // The second half only frees directly: what such a consumer holds must not fill the ring.
    const bool only_direct_frees = consumed > total / 2;
    switch (only_direct_frees ? 1 : ++round % 4) {
      case 0:
        std::reverse(out, out + n);
        p->endpoint_release(0, out, n);
        break;
      case 1:
        mbuf_free_bulk(out, n);
        break;
      case 2:
        held = out[n - 1];
        p->endpoint_release(0, out, n - 1);
        break;
      default:
        p->endpoint_release(0, out, n);
    }
  }
  if (held) p->endpoint_release(0, &held, 1);
  ASSERT_TRUE(processed()) << "the ring stopped moving";
  ASSERT_TRUE(p->stop());
  const Accounting a = p->accounting();
  EXPECT_EQ(consumed + a.drained, a.delivered_per_endpoint[0]);
  EXPECT_GT(round, 100u);
  EXPECT_EQ(p->snapshot().total.dropped(), 0u) << "loans a consumer never gave back filled the ring";
  EXPECT_EQ(a.pools[0].outstanding, 0u) << "a buffer was lost or freed twice";
  EXPECT_EQ(frees_of_free_buffers(), double_frees_before) << "a buffer was freed twice";
  EXPECT_TRUE(a.balanced());
}

// A consumer that counts as far (here: every consumer, by a zero threshold) gets its lcore's runs
// once per few passes instead of with each; every packet still arrives, and what the lcore held
// back when stop() came is published and drained, not lost.
TEST(Pipeline, AFarConsumerGetsEveryPacketAndStopLosesNoneHeldBack) {
  std::vector<Frame> frames;
  for (int i = 0; i < 64; ++i) frames.push_back(udp_frame("10.0.0.7", static_cast<std::uint16_t>(i), "10.0.0.1", 5000));
  TestPortConfig cfg;
  cfg.rx_frames = {frames};
  cfg.repeat = 0;  // forever: the lcore is busy, holding back runs, when stop() comes
  PlanBuilder b;
  b.port("p0", cfg).endpoint("feed", EndpointAction::kRing, {"udp dst 10.0.0.1:5000"}).lcore({{0, 0}});
  b.plan.endpoints[0].ring_size = 8192;
  b.plan.pools[0].config.count = 16384;
  auto p = std::move(Pipeline::create(b.plan)).value();
  p->set_far_consumer_ns(0);
  ASSERT_TRUE(p->start());
  std::uint64_t consumed = 0;
  bool far = false;
  std::uint64_t consumed_when_far = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  // Past the verdict, long enough for the lcore to follow it (64 passes) and hold many runs.
  while ((!far || consumed < consumed_when_far + 100000) && std::chrono::steady_clock::now() < deadline) {
    Mbuf* out[256];
    const unsigned n = p->endpoint_receive(0, out, 256);
    p->endpoint_release(0, out, n);
    consumed += n;
    if (!far && p->endpoint_consumer_far(0)) {
      far = true;
      consumed_when_far = consumed;
    }
  }
  ASSERT_TRUE(far) << "the consumer's timed looks never made a verdict";
  ASSERT_TRUE(p->stop());
  const Accounting a = p->accounting();
  EXPECT_GE(consumed, consumed_when_far + 100000);
  EXPECT_EQ(consumed + a.drained, a.delivered_per_endpoint[0]) << "held-back packets were lost at stop";
  EXPECT_EQ(a.pools[0].outstanding, 0u);
  EXPECT_TRUE(a.balanced());
  EXPECT_FALSE(p->endpoint_consumer_far(1)) << "not a ring endpoint";
}

TEST(Pipeline, ReleasesAfterStopOrForOtherEndpointsFreeDirectly) {
  std::vector<Frame> q0;
  for (int i = 0; i < 30; ++i) q0.push_back(udp_frame("10.0.0.7", static_cast<std::uint16_t>(i), "10.0.0.1", 5000));
  TestPortConfig cfg;
  cfg.rx_frames = {q0};
  PlanBuilder b;
  b.port("p0", cfg)
      .endpoint("feed", EndpointAction::kRing, {"udp dst 10.0.0.1:5000"})
      .endpoint("count", EndpointAction::kSink, {"udp dst 10.0.0.2:5000"})
      .lcore({{0, 0}});
  auto p = std::move(Pipeline::create(b.plan)).value();
  ASSERT_TRUE(p->start());
  wait_all_processed(*p, 30);
  Mbuf* out[32];
  unsigned got = 0;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (got < 30 && std::chrono::steady_clock::now() < deadline) got += p->endpoint_receive(0, out + got, 32 - got);
  ASSERT_EQ(got, 30u);
  p->endpoint_release(1, out, 5);  // a sink endpoint has no return ring: freed here and now
  EXPECT_EQ(p->accounting().pools[0].outstanding, 25u);
  ASSERT_TRUE(p->stop());
  // The lcores are gone: nobody would ever free a returned buffer, so the release frees it.
  p->endpoint_release(0, out + 5, 25);
  Accounting a = p->accounting();
  EXPECT_EQ(a.pools[0].outstanding, 0u);
  EXPECT_TRUE(a.balanced());
}

TEST(Pipeline, EchoAndForwardTransmitOnTheLcoresOwnTxQueues) {
  TestPortConfig c0;
  c0.rx_frames = {{udp_frame("10.0.0.7", 1111, "10.0.0.1", 7), udp_frame("10.0.0.7", 1, "10.0.0.1", 8)},
                  {udp_frame("10.0.0.8", 2222, "10.0.0.1", 7)}};
  c0.repeat = 10;
  TestPortConfig c1;  // transmit only
  PlanBuilder b;
  b.port("p0", c0, 2, 2).port("p1", c1, 1, 2);
  b.endpoint("echo", EndpointAction::kEcho, {"udp dst *:7"})
      .endpoint("fwd", EndpointAction::kForward, {"udp dst *:8"}, 1)
      .lcore({{0, 0}})
      .lcore({{0, 1}, {1, 0}});  // every rx queue has an owner, p1's receives nothing
  auto p = std::move(Pipeline::create(b.plan)).value();
  ASSERT_TRUE(p->start());
  wait_all_processed(*p, 30);
  ASSERT_TRUE(p->stop());
  Accounting a = p->accounting();
  EXPECT_EQ(a.transmitted, 30u);
  EXPECT_EQ(a.transmitted_per_port[0], 20u);
  EXPECT_EQ(a.transmitted_per_port[1], 10u);
  EXPECT_TRUE(a.balanced());
  auto& p0 = dynamic_cast<TestPort&>(p->port(0));
  auto& p1 = dynamic_cast<TestPort&>(p->port(1));
  // Each lcore used its own tx queue: lcore 0 -> queue 0, lcore 1 -> queue 1.
  ASSERT_EQ(p0.transmitted(0).size(), 10u);
  ASSERT_EQ(p0.transmitted(1).size(), 10u);
  EXPECT_EQ(wire::load_be16(p0.transmitted(0)[0].data() + 34 + 2), 1111);  // dst port is the old src
  EXPECT_EQ(wire::load_be16(p0.transmitted(1)[0].data() + 34 + 2), 2222);
  EXPECT_EQ(p1.transmitted(0).size(), 10u);
  EXPECT_EQ(p1.transmitted(0)[0], udp_frame("10.0.0.7", 1, "10.0.0.1", 8));
}

TEST(Pipeline, CatchAllDefaultEndpoint) {
  TestPortConfig cfg;
  cfg.rx_frames = {{udp_frame("10.0.0.7", 1, "10.0.0.1", 1), udp_frame("10.0.0.7", 1, "10.0.0.1", 2)}};
  cfg.repeat = 5;
  PlanBuilder b;
  b.port("p0", cfg).endpoint("one", EndpointAction::kSink, {"udp dst *:1"}).endpoint("rest", EndpointAction::kSink, {});
  b.lcore({{0, 0}});
  b.plan.default_action = DefaultAction::kEndpoint;
  b.plan.default_endpoint = 1;
  auto p = std::move(Pipeline::create(b.plan)).value();
  ASSERT_TRUE(p->start());
  wait_all_processed(*p, 10);
  ASSERT_TRUE(p->stop());
  Accounting a = p->accounting();
  EXPECT_EQ(a.delivered_per_endpoint[0], 5u);
  EXPECT_EQ(a.delivered_per_endpoint[1], 5u);
  EXPECT_EQ(a.dropped(), 0u);
  EXPECT_TRUE(a.balanced());
}

// Flow A always goes to endpoint 0; the rule for flow B is added and removed by this thread
// while the lcore runs. Frames alternate A, B on one queue, so exactly ceil(rx/2) are A.
TEST(Pipeline, RulesAddedAndRemovedUnderTrafficLoseNothing) {
  TestPortConfig cfg;
  cfg.rx_frames = {{udp_frame("10.0.0.7", 1, "10.0.0.1", 1000), udp_frame("10.0.0.7", 1, "10.0.0.2", 2000)}};
  cfg.repeat = 0;  // forever
  PlanBuilder b;
  b.port("p0", cfg)
      .endpoint("a", EndpointAction::kSink, {"udp dst 10.0.0.1:1000"})
      .endpoint("b", EndpointAction::kSink, {})
      .lcore({{0, 0}});
  auto p = std::move(Pipeline::create(b.plan)).value();
  ASSERT_TRUE(p->start());
  std::uint64_t rules_before = p->rules().size();
  for (int i = 0; i < 200; ++i) {
    auto id = p->add_rule(1, "udp dst 10.0.0.2:2000 port p0");
    ASSERT_TRUE(id) << id.message();
    std::this_thread::sleep_for(std::chrono::microseconds(200));
    ASSERT_TRUE(p->remove_rule(id.value()));
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  auto bad = p->add_rule(1, "udp dst 10.0.0.2:2000 port nosuch");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.message().find("no port named 'nosuch'"), std::string::npos);
  EXPECT_FALSE(p->add_rule(9, "udp"));
  ASSERT_TRUE(p->stop());
  EXPECT_EQ(p->rules().size(), rules_before);
  EXPECT_TRUE(p->rules()[0].from_config);
  Accounting a = p->accounting();
  EXPECT_GT(a.rx_packets, 0u);
  EXPECT_EQ(a.delivered_per_endpoint[0], (a.rx_packets + 1) / 2);
  EXPECT_EQ(a.delivered_per_endpoint[1] + drop(a, DropReason::kNoMatch), a.rx_packets / 2);
  // Both states of the toggled rule really carried traffic.
  EXPECT_GT(a.delivered_per_endpoint[1], 0u);
  EXPECT_GT(drop(a, DropReason::kNoMatch), 0u);
  EXPECT_TRUE(a.balanced());
}

TEST(Pipeline, ErrorsNameTheConfigLocation) {
  // Plans built in code are checked by the config loader's validator (pipeline/plan/validate.hh):
  // the same words, at the element's table line.
  auto make = [](auto edit) {
    TestPortConfig cfg;
    PlanBuilder b;
    b.port("p0", cfg, 2, 1).endpoint("ep", EndpointAction::kSink, {"udp dst *:1"}).lcore({{0, 0}, {0, 1}});
    edit(b);
    auto p = Pipeline::create(b.plan);
    EXPECT_FALSE(p);
    return p ? std::string() : p.message();
  };
  EXPECT_EQ(make([](PlanBuilder& b) { b.lcore({{0, 0}}); }),
            "test.toml:31: lcores[1]: key 'rx': \"p0:0\" is already polled by lcores[0]; each rx queue belongs to exactly "
            "one lcore");
  EXPECT_EQ(make([](PlanBuilder& b) { b.plan.lcores[0].rx[1].queue = 5; }),
            "test.toml:30: lcores[0]: key 'rx': \"p0:5\": port \"p0\" has 2 rx queues (0 to 1) (and 1 more error)");
  EXPECT_EQ(make([](PlanBuilder& b) { b.plan.endpoints[0].match = {"udp dst 1.2.3.4:x"}; })
                .rfind("test.toml:20: endpoints[0] 'ep': key 'match': rule \"udp dst 1.2.3.4:x\": ", 0),
            0u);
  EXPECT_EQ(make([](PlanBuilder& b) { b.plan.endpoints[0].match = {"udp port p9"}; }),
            "test.toml:20: endpoints[0] 'ep': key 'match': rule \"udp port p9\": no [[ports]] table is named \"p9\"");
  EXPECT_EQ(make([](PlanBuilder& b) {
              b.plan.endpoints[0].action = EndpointAction::kEcho;
              b.plan.lcores[0].rx = {{0, 0}};
              b.lcore({{0, 1}});
            }),
            "test.toml:10: ports[0] 'p0': key 'tx_queues': 2 lcores may transmit on port \"p0\" (echo endpoints) but it "
            "has 1 tx queue; set tx_queues = 2 so each lcore owns one");
  EXPECT_EQ(make([](PlanBuilder& b) { b.plan.lcores[0].burst = 1000; }),
            "test.toml:30: lcores[0]: key 'burst': expected an integer from 1 to 256, got 1000");
  EXPECT_EQ(make([](PlanBuilder& b) { b.plan.ports[0].pool = "nopool"; }),
            "test.toml:10: ports[0] 'p0': key 'pool': no [[pools]] table is named \"nopool\"");
  EXPECT_EQ(make([](PlanBuilder& b) { b.plan.endpoints[0].ring_size = 1; b.plan.endpoints[0].action = EndpointAction::kRing; }),
            "test.toml:20: endpoints[0] 'ep': key 'ring_size': expected a power of two from 2 to 1048576, got 1 (try 2)");
}

TEST(Pipeline, SteeringGoesOnlyToPortsThatSteer) {
  TestPortConfig steers, receives_all;
  receives_all.flow_rules = false;  // like AF_PACKET or a pcap file: everything arrives anyway
  PlanBuilder b;
  b.port("p0", steers).port("p1", receives_all);
  b.endpoint("ep", EndpointAction::kSink, {"udp dst *:1", "udp dst *:2 port p1"}).lcore({{0, 0}, {1, 0}});
  auto p = std::move(Pipeline::create(b.plan)).value();
  const auto& p0 = dynamic_cast<const TestPort&>(p->port(0));
  const auto& p1 = dynamic_cast<const TestPort&>(p->port(1));
  EXPECT_TRUE(p->port_caps(0).flow_rules);
  EXPECT_FALSE(p->port_caps(1).flow_rules);
  EXPECT_EQ(p0.steering().rules.size(), 1u);  // its own rule only; p1's stays with p1
  EXPECT_TRUE(p1.steering().rules.empty());
  ASSERT_TRUE(p->add_rule(0, "udp dst *:3"));
  EXPECT_EQ(p0.steering().rules.size(), 2u);
  EXPECT_TRUE(p1.steering().rules.empty());
}

TEST(Pipeline, QueuesBeyondWhatTheDeviceOffersAreRefusedAtCreate) {
  TestPortConfig small;
  small.max_queues = 1;  // the plan's spec allows 2, the opened device has 1 of each
  PlanBuilder b;
  b.port("p0", small, 2, 1).endpoint("ep", EndpointAction::kSink, {"udp"}).lcore({{0, 0}, {0, 1}});
  auto p = Pipeline::create(b.plan);
  ASSERT_FALSE(p);
  EXPECT_EQ(p.message(), "test.toml:10: port 'p0' (pmd test): the device offers 1 rx queue and the plan asks for 2; set "
                         "rx_queues = 1 or fewer");
  PlanBuilder t;
  t.port("p0", small, 1, 2).endpoint("ep", EndpointAction::kSink, {"udp"}).lcore({{0, 0}});
  auto q = Pipeline::create(t.plan);
  ASSERT_FALSE(q);
  EXPECT_EQ(q.message(), "test.toml:10: port 'p0' (pmd test): the device offers 1 tx queue and the plan asks for 2; set "
                         "tx_queues = 1 or fewer");
}

TEST(Pipeline, PinningToACpuThatDoesNotExistFailsStartCleanly) {
  TestPortConfig cfg;
  cfg.rx_frames = {{udp_frame("10.0.0.7", 1, "10.0.0.1", 1)}};
  PlanBuilder b;
  b.port("p0", cfg).endpoint("ep", EndpointAction::kSink, {"udp"}).lcore({{0, 0}}, 1000);
  auto p = std::move(Pipeline::create(b.plan)).value();
  Status s = p->start();
  ASSERT_FALSE(s);
  EXPECT_NE(s.message().find("test.toml:30: lcore 0: cannot pin to cpu 1000"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("this process may use cpus"), std::string::npos);
  EXPECT_FALSE(p->running());
  EXPECT_FALSE(dynamic_cast<TestPort&>(p->port(0)).started());
  EXPECT_TRUE(p->accounting().balanced());
}

TEST(Pipeline, IdleSleepAndRequestStopEndTheLoop) {
  TestPortConfig cfg;  // no frames: every poll is empty
  PlanBuilder b;
  b.port("p0", cfg).endpoint("ep", EndpointAction::kSink, {"udp"}).lcore({{0, 0}}, 0);
  b.plan.lcores[0].idle_sleep_us = 1000;
  auto p = std::move(Pipeline::create(b.plan)).value();
  const auto started = std::chrono::steady_clock::now();
  ASSERT_TRUE(p->start());
  // A loaded machine may not run the lcore (pinned to CPU 0) at once: wait for its first poll.
  while (p->snapshot().lcores[0].empty_polls == 0 && std::chrono::steady_clock::now() - started < std::chrono::seconds(10))
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  p->request_stop();
  EXPECT_TRUE(p->stop_requested());
  ASSERT_TRUE(p->stop());
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started).count();
  std::uint64_t polls = p->snapshot().lcores[0].empty_polls;
  EXPECT_GT(polls, 0u);
  // About one poll per ms with a 1 ms sleep; a busy poll would make millions.
  EXPECT_LT(polls, 200u + 2u * std::uint64_t(ms)) << "in " << ms << " ms";
  EXPECT_TRUE(p->accounting().balanced());
}

// snapshot(), accounting() and running() are documented safe from any thread at any time: the
// stats publisher and the metrics server keep reading while stop() joins, drains and returns
// buffers. Under ThreadSanitizer (suite 'tsan') a plain flag or counter among them is a reported
// race; in every build, the first accounting read after running() turns false must already be
// the final, balanced one (stop() publishes `running = false` only after the drain).
// "No lcore" mode: an lcore with thread = false runs only in the passes application threads run
// with progress(). Two threads driving it at once take turns (a ring keeps one producer, so every
// count stays exact), nothing runs before start or after stop, and a driver without a queue
// descriptor (the test port) is named by progress_fds.
TEST(Pipeline, ThreadlessLcoreRunsOnlyInTheApplicationsPasses) {
  TestPortConfig cfg;
  cfg.rx_frames = {{udp_frame("10.0.0.7", 1, "10.0.0.1", 5000), udp_frame("10.0.0.7", 1, "10.0.0.1", 6000),
                    udp_frame("10.0.0.7", 1, "10.0.0.1", 7000)}};
  constexpr std::uint64_t kRepeat = 3000;
  cfg.repeat = kRepeat;
  PlanBuilder b;
  b.port("p0", cfg)
      .endpoint("ring", EndpointAction::kRing, {"udp dst *:5000"})
      .endpoint("sink", EndpointAction::kSink, {"udp dst *:6000"})
      .lcore({{0, 0}});
  b.plan.lcores[0].thread = false;
  auto p = std::move(Pipeline::create(b.plan)).value();
  EXPECT_TRUE(p->has_threadless_lcores());
  EXPECT_EQ(p->progress(), 0u);  // not started
  ASSERT_TRUE(p->start());
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(p->snapshot().total.rx_packets, 0u) << "a thread polled the threadless lcore";
  const Pipeline::ProgressFds& fds = p->progress_fds();
  EXPECT_TRUE(fds.fds.empty());
  EXPECT_NE(fds.missing.find("port 'p0' (driver test)"), std::string::npos) << fds.missing;

  const std::uint64_t total = 3 * kRepeat;
  std::atomic<bool> done{false};
  std::atomic<std::uint64_t> received_by_helper{0};
  std::thread helper([&] {
    while (!done.load()) received_by_helper += p->progress();
  });
  std::uint64_t consumed = 0, received_here = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < deadline) {
    received_here += p->progress();
    Mbuf* out[32];
    const unsigned n = p->endpoint_receive(0, out, 32);
    consumed += n;
    mbuf_free_bulk(out, n);
    const PipelineSnapshot s = p->snapshot();
    if (consumed == kRepeat && s.total.delivered + s.total.dropped() == total) break;
  }
  done = true;
  helper.join();
  ASSERT_TRUE(p->stop());
  EXPECT_EQ(p->progress(), 0u);  // stopped
  EXPECT_EQ(consumed, kRepeat);
  const Accounting a = p->accounting();
  EXPECT_EQ(a.rx_packets, total);
  EXPECT_EQ(a.delivered_per_endpoint[0], kRepeat);
  EXPECT_EQ(a.delivered_per_endpoint[1], kRepeat);
  EXPECT_EQ(drop(a, DropReason::kNoMatch), kRepeat);
  EXPECT_TRUE(a.balanced());
  // Each packet was received in exactly one pass, whichever thread ran it (which thread wins
  // the passes is up to the scheduler: under TSan the helper may take them all).
  EXPECT_EQ(received_here + received_by_helper.load(), total);
  const PipelineSnapshot s = p->snapshot();
  ASSERT_EQ(s.lcores.size(), 1u);
  EXPECT_EQ(s.lcores[0].rx_packets, total);
}

// The lcore takes released buffers back at the pace it receives, whatever its burst size: a
// consumer that gives every packet back at once never leaves the receive short of buffers. With
// 128-packet bursts the lcore once took back at most 512 per look, half of what it received in
// between, and the pool ran dry within a few hundred passes.
TEST(Pipeline, ReturnsKeepUpWithLargeBursts) {
  constexpr unsigned kBurst = 128;
  std::vector<Frame> frames;
  for (unsigned i = 0; i < kBurst; ++i) frames.push_back(udp_frame("10.0.0.7", static_cast<std::uint16_t>(i), "10.0.0.1", 5000));
  TestPortConfig cfg;
  cfg.rx_frames = {frames};
  cfg.repeat = 0;  // forever: every pass is a busy one
  PlanBuilder b;
  b.port("p0", cfg).endpoint("ring", EndpointAction::kRing, {"udp dst *:5000"}).lcore({{0, 0}});
  b.plan.lcores[0].thread = false;
  b.plan.lcores[0].burst = kBurst;
  // 32 passes' worth: more than the buffers between a release and the look after next at the
  // return ring (at most 16 passes apart), so only a take limit below the receive rate runs it dry.
  b.plan.pools[0].config.count = 32 * kBurst;
  // Deeper than the pool, as in configs/bench-synth.toml: a return ring that filled up would make
  // the consumer free the rest itself and hide an lcore that takes too little back.
  b.plan.endpoints[0].ring_size = 64 * kBurst;
  auto p = std::move(Pipeline::create(b.plan)).value();
  ASSERT_TRUE(p->start());
  constexpr unsigned kPasses = 2000;
  std::uint64_t received = 0;
  for (unsigned pass = 0; pass < kPasses; ++pass) {
    received += p->progress();
    Mbuf* out[kMaxBurst];
    while (const unsigned n = p->endpoint_receive(0, out, kMaxBurst)) p->endpoint_release(0, out, n);
  }
  ASSERT_TRUE(p->stop());
  std::uint64_t nombuf = 0;
  for (const auto& q : p->port_stats(0).rx_queues) nombuf += q.rx_nombuf;
  EXPECT_EQ(nombuf, 0u) << "the receive ran short of buffers while the consumer had released them all";
  EXPECT_EQ(received, std::uint64_t{kPasses} * kBurst);
  const Accounting a = p->accounting();
  EXPECT_EQ(drop(a, DropReason::kEndpointRingFull), 0u);
  EXPECT_TRUE(a.balanced());
}

TEST(Pipeline, SnapshotsAndAccountingAreSafeAcrossStop) {
  TestPortConfig cfg;
  cfg.rx_frames = {{udp_frame("10.0.0.7", 1, "10.0.0.1", 1), udp_frame("10.0.0.7", 1, "10.0.0.1", 2)}};
  cfg.repeat = 0;  // forever: the lcore is busy when stop() comes
  PlanBuilder b;
  b.port("p0", cfg)
      .endpoint("ring", EndpointAction::kRing, {"udp dst *:1"})  // no consumer: the rings hold packets at stop
      .endpoint("sink", EndpointAction::kSink, {"udp dst *:2"})
      .lcore({{0, 0}});
  b.plan.endpoints[0].ring_size = 256;  // a quarter of the pool: the sink keeps receiving once it is full
  auto p = std::move(Pipeline::create(b.plan)).value();
  ASSERT_TRUE(p->start());

  std::atomic<bool> done{false};
  std::atomic<bool> saw_stopped{false};
  std::atomic<std::uint64_t> reads{0};
  std::uint64_t drained_seen = 0;
  std::thread observer([&] {
    while (!done.load(std::memory_order_acquire)) {
      const bool was_running = p->running();
      PipelineSnapshot s = p->snapshot();
      Accounting a = p->accounting();
      (void)p->port(0).stats();
      (void)p->neigh_stats();
      EXPECT_GE(a.rx_packets, s.total.rx_packets);
      if (!was_running && !saw_stopped.load(std::memory_order_relaxed)) {
        EXPECT_TRUE(a.balanced()) << "rx " << a.rx_packets << " delivered " << a.delivered << " dropped " << a.dropped()
                                  << " outstanding " << a.outstanding();
        drained_seen = a.drained;
        saw_stopped.store(true, std::memory_order_relaxed);
      }
      reads.fetch_add(1, std::memory_order_relaxed);
    }
  });
  // Let the ring endpoint's ring fill before stopping, so stop() has a drain to do.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (p->snapshot().total.rx_packets < 4 * 1024 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  const std::uint64_t before = reads.load();
  while (reads.load() < before + 10) std::this_thread::yield();
  ASSERT_TRUE(p->stop());
  while (!saw_stopped.load(std::memory_order_relaxed) && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
  done.store(true, std::memory_order_release);
  observer.join();

  EXPECT_TRUE(saw_stopped.load());
  Accounting a = p->accounting();
  EXPECT_TRUE(a.balanced());
  EXPECT_EQ(a.drained, 256u);  // the one full ring; the rest were dropped as endpoint_ring_full
  EXPECT_EQ(drained_seen, a.drained);
  EXPECT_GT(drop(a, DropReason::kEndpointRingFull), 0u);
}

}  // namespace
}  // namespace rawpipe
