// Dispatch actions with exact counts: ring, sink, echo (golden bytes), forward, tx failure,
// ring full, verdicts.
#include "pipeline/dispatch/dispatch.hh"

#include <limits>

#include <gtest/gtest.h>

#include "pipeline/classify/table.hh"
#include "pipeline/dispatch/consumer_distance.hh"
#include "pipeline/parse/parse.hh"
#include "tests/support/test_port.hh"
#include "pipeline/port/driver.hh"
#include "pipeline/buf/pool.hh"

namespace rawpipe {
namespace {

using testing::Frame;
using testing::udp_frame;

enum : std::uint16_t { kEpRing, kEpSink, kEpEcho, kEpForward, kEndpoints };

class DispatchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    PoolConfig pc;
    pc.name = "dispatch_test";
    pc.count = 256;
    pc.huge_pages = HugePages::kNever;
    pool_ = std::move(Pool::create(pc)).value();
    ring_ = std::move(EndpointRing::create(8)).value();
    for (std::uint16_t p = 0; p < 2; ++p) {
      PortEnv env;
      env.port_id = p;
      env.name = fmt::format("p{}", p);
      env.pool = pool_.get();
      testing::TestPortConfig tc;
      tc.tx_capacity = p == 1 ? 3 : ~std::uint64_t{0};  // port 1 refuses after 3 packets
      ports_.push_back(std::make_unique<testing::TestPort>(env, tc));
    }
    counters_ = std::make_unique<LcoreCounters>(kEndpoints, 2);
    std::vector<Dispatcher::Route> routes(kEndpoints);
    routes[kEpRing] = {EndpointAction::kRing, 0, ring_.get()};
    routes[kEpRing].consumer = &consumer_;
    routes[kEpSink] = {EndpointAction::kSink, 0, nullptr};
    routes[kEpEcho] = {EndpointAction::kEcho, 0, nullptr};
    routes[kEpForward] = {EndpointAction::kForward, 1, nullptr};
    dispatcher_ = std::make_unique<Dispatcher>(std::move(routes),
                                               std::vector<TxQueueHandle>{ports_[0]->tx_queue(0), ports_[1]->tx_queue(0)},
                                               counters_.get());
  }

  // Loads, parses and assigns frames to endpoints (kNoEndpoint = leave unclassified, no_match).
  std::vector<Mbuf*> burst(const std::vector<std::pair<Frame, std::uint16_t>>& spec) {
    std::vector<Mbuf*> out;
    for (const auto& [f, ep] : spec) {
      Mbuf* m = testing::load_frame(*pool_, f, 0);
      out.push_back(m);
    }
    parse_burst(out.data(), static_cast<unsigned>(out.size()));
    for (std::size_t i = 0; i < out.size(); ++i) {
      out[i]->endpoint = spec[i].second;
      if (spec[i].second == Mbuf::kNoEndpoint && out[i]->drop_reason == 0)
        out[i]->drop_reason = static_cast<std::uint8_t>(DropReason::kNoMatch);
    }
    return out;
  }

  void run(std::vector<Mbuf*>& pkts, std::vector<Verdict> verdicts = {}) {
    if (verdicts.empty()) {
      verdicts.resize(pkts.size());
      make_verdicts(pkts.data(), verdicts.data(), static_cast<unsigned>(pkts.size()));
    }
    dispatcher_->dispatch_burst(pkts.data(), verdicts.data(), static_cast<unsigned>(pkts.size()));
  }

  std::uint64_t drops(DropReason r) const { return counters_->drops[static_cast<unsigned>(r)].load(); }
  std::uint64_t all_drops() const {
    std::uint64_t s = 0;
    for (const Counter& c : counters_->drops) s += c.load();
    return s;
  }

  // One window of the ring consumer's timed loads, all slower than the far threshold or not.
  void consumer_window(bool far) {
    consumer_.set_far_cycles(far ? 0 : std::numeric_limits<std::uint64_t>::max());
    for (unsigned i = 0; i < ConsumerDistance::kSamplesPerVerdict; ++i) consumer_.sample(1000);
  }

  std::unique_ptr<Pool> pool_;
  std::unique_ptr<EndpointRing> ring_;
  ConsumerDistance consumer_;
  std::vector<std::unique_ptr<testing::TestPort>> ports_;
  std::unique_ptr<LcoreCounters> counters_;
  std::unique_ptr<Dispatcher> dispatcher_;
};

TEST_F(DispatchTest, MixedBurstReachesEveryDestinationWithExactCounts) {
  Frame f = udp_frame("10.0.0.1", 1000, "10.0.0.2", 2000);
  std::vector<std::pair<Frame, std::uint16_t>> spec;
  for (int i = 0; i < 12; ++i) spec.push_back({udp_frame("10.0.0.1", static_cast<std::uint16_t>(i), "10.0.0.2", 2000),
                                               static_cast<std::uint16_t>(i % 4)});
  spec.push_back({f, Mbuf::kNoEndpoint});
  auto pkts = burst(spec);
  run(pkts);
  EXPECT_EQ(ring_->size(), 3u);
  EXPECT_EQ(counters_->delivered_per_endpoint[kEpRing].load(), 3u);
  EXPECT_EQ(counters_->delivered_per_endpoint[kEpSink].load(), 3u);
  EXPECT_EQ(counters_->delivered.load(), 6u);
  EXPECT_EQ(ports_[0]->tx_count(0), 3u);  // echo on the ingress port
  EXPECT_EQ(ports_[1]->tx_count(0), 3u);  // forward
  EXPECT_EQ(counters_->transmitted.load(), 6u);
  EXPECT_EQ(counters_->transmitted_per_port[0].load(), 3u);
  EXPECT_EQ(drops(DropReason::kNoMatch), 1u);
  EXPECT_EQ(all_drops(), 1u);
  // Order within a destination is the burst order.
  Mbuf* out[8];
  ASSERT_EQ(ring_->dequeue_burst(out, 8), 3u);
  for (int k = 0; k < 3; ++k) EXPECT_EQ(wire::load_be16(out[k]->data() + out[k]->l4_off), 4 * k);
  mbuf_free_bulk(out, 3);
  EXPECT_EQ(pool_->in_use(), 0u);
}

// Runs for a far consumer are published when the lcore says (once per few passes), not as they
// are queued; they are counted as delivered at once, and none stays held back once the consumer
// comes near or the lcore stops.
TEST_F(DispatchTest, RunsToAFarConsumerWaitForTheLcoresPublication) {
  auto frames = [&](int n) {
    std::vector<std::pair<Frame, std::uint16_t>> spec;
    for (int i = 0; i < n; ++i) spec.push_back({udp_frame("10.0.0.1", static_cast<std::uint16_t>(i), "10.0.0.2", 2000), kEpRing});
    return burst(spec);
  };
  Mbuf* out[8];
  dispatcher_->follow_consumers();
  EXPECT_FALSE(dispatcher_->holding()) << "no verdict yet: near";
  consumer_window(true);
  EXPECT_FALSE(dispatcher_->holding()) << "the verdict counts from the lcore's next look at it";
  dispatcher_->follow_consumers();
  EXPECT_TRUE(dispatcher_->holding());

  auto first = frames(3);
  run(first);
  EXPECT_EQ(counters_->delivered_per_endpoint[kEpRing].load(), 3u);
  EXPECT_EQ(ring_->dequeue_burst(out, 8), 0u) << "held back until the lcore publishes";
  dispatcher_->publish_held(false);
  ASSERT_EQ(ring_->dequeue_burst(out, 8), 3u);
  mbuf_free_bulk(out, 3);

  auto second = frames(2);
  run(second);
  EXPECT_EQ(ring_->dequeue_burst(out, 8), 0u);
  consumer_window(false);
  dispatcher_->follow_consumers();
  EXPECT_FALSE(dispatcher_->holding());
  ASSERT_EQ(ring_->dequeue_burst(out, 8), 2u) << "a consumer that comes near gets what was held";
  mbuf_free_bulk(out, 2);
  auto third = frames(1);
  run(third);
  ASSERT_EQ(ring_->dequeue_burst(out, 8), 1u) << "near: published as queued";
  mbuf_free_bulk(out, 1);

  consumer_window(true);
  dispatcher_->follow_consumers();
  auto fourth = frames(3);
  run(fourth);
  EXPECT_EQ(ring_->dequeue_burst(out, 8), 0u);
  dispatcher_->stop_holding();
  EXPECT_FALSE(dispatcher_->holding());
  ASSERT_EQ(ring_->dequeue_burst(out, 8), 3u) << "the lcore's stop publishes what was held";
  mbuf_free_bulk(out, 3);

  // Half the ring (4 of 8 slots) is the most held back: then the run is published at once, so a
  // small ring never fills with packets its consumer cannot see.
  consumer_window(true);
  dispatcher_->follow_consumers();
  auto fifth = frames(2);
  run(fifth);
  EXPECT_EQ(ring_->dequeue_burst(out, 8), 0u);
  auto sixth = frames(2);
  run(sixth);
  ASSERT_EQ(ring_->dequeue_burst(out, 8), 4u);
  mbuf_free_bulk(out, 4);
  dispatcher_->stop_holding();
  EXPECT_EQ(counters_->delivered.load(), 13u);
  EXPECT_EQ(all_drops(), 0u);
  EXPECT_EQ(pool_->in_use(), 0u);
}

// Each window of samples decides alone, on its fastest load: one uncontended crossing under the
// threshold makes the window near, however slow the others were.
TEST(ConsumerDistance, TheFastestLoadOfEachWindowDecides) {
  constexpr unsigned k = ConsumerDistance::kSamplesPerVerdict;
  ConsumerDistance d;
  d.set_far_cycles(100);
  EXPECT_FALSE(d.far());
  for (unsigned i = 0; i + 1 < k; ++i) d.sample(500);
  EXPECT_FALSE(d.far()) << "no verdict before a whole window";
  d.sample(500);
  EXPECT_TRUE(d.far());
  for (unsigned i = 0; i + 1 < k; ++i) d.sample(500);
  d.sample(99);
  EXPECT_FALSE(d.far());
  for (unsigned i = 0; i < k; ++i) d.sample(100);
  EXPECT_TRUE(d.far()) << "the threshold itself is far";
}

TEST_F(DispatchTest, BurstToOneEndpointKeepsItsOrderAndAnEmptyBurstDoesNothing) {
  std::vector<std::pair<Frame, std::uint16_t>> spec;
  for (int i = 0; i < 6; ++i)
    spec.push_back({udp_frame("10.0.0.1", static_cast<std::uint16_t>(i), "10.0.0.2", 2000), kEpRing});
  auto pkts = burst(spec);
  run(pkts);
  EXPECT_EQ(counters_->delivered_per_endpoint[kEpRing].load(), 6u);
  std::vector<Mbuf*> none;
  run(none);  // a stage before dispatch (ARP/ND answers) may leave nothing
  EXPECT_EQ(counters_->delivered.load(), 6u);
  EXPECT_EQ(all_drops(), 0u);
  auto more = burst({{udp_frame("10.0.0.1", 6, "10.0.0.2", 2000), kEpRing},
                     {udp_frame("10.0.0.1", 7, "10.0.0.2", 2000), kEpRing},
                     {udp_frame("10.0.0.1", 8, "10.0.0.2", 2000), kEpRing},
                     {udp_frame("10.0.0.1", 9, "10.0.0.2", 2000), kEpRing}});
  run(more);  // the ring holds 8: the last two of these do not fit
  EXPECT_EQ(counters_->delivered_per_endpoint[kEpRing].load(), 8u);
  EXPECT_EQ(drops(DropReason::kEndpointRingFull), 2u);
  Mbuf* out[8];
  ASSERT_EQ(ring_->dequeue_burst(out, 8), 8u);
  for (int k = 0; k < 8; ++k) EXPECT_EQ(wire::load_be16(out[k]->data() + out[k]->l4_off), k);
  mbuf_free_bulk(out, 8);
  EXPECT_EQ(pool_->in_use(), 0u);
}

TEST_F(DispatchTest, EchoSwapsAddressesAndPortsIntoTheExactReplyFrame) {
  for (bool v6 : {false, true}) {
    std::string a = v6 ? "2001:db8::1" : "192.0.2.1", b = v6 ? "2001:db8::2" : "198.51.100.7";
    Frame in = udp_frame(a, 1111, b, 2222, 100, 32);
    Frame reply = udp_frame(b, 2222, a, 1111, 100, 32);
    // The builder's MACs are fixed; the reply has them swapped too.
    std::swap_ranges(reply.begin(), reply.begin() + 6, reply.begin() + 6);
    auto pkts = burst({{in, kEpEcho}});
    run(pkts);
    ASSERT_FALSE(ports_[0]->transmitted(0).empty());
    EXPECT_EQ(ports_[0]->transmitted(0).back(), reply) << (v6 ? "IPv6" : "IPv4");
  }
  EXPECT_EQ(counters_->transmitted.load(), 2u);
}

TEST_F(DispatchTest, EchoOfANonUdpPacketIsNotForUs) {
  auto pkts = burst({{testing::icmp_frame("10.0.0.1", "10.0.0.2"), kEpEcho},
                     {udp_frame("10.0.0.1", 1, "10.0.0.2", 2), kEpEcho}});
  run(pkts);
  EXPECT_EQ(drops(DropReason::kNotForUs), 1u);
  EXPECT_EQ(ports_[0]->tx_count(0), 1u);
  EXPECT_EQ(pool_->in_use(), 0u);
}

TEST_F(DispatchTest, ForwardSendsUnchangedAndUnsentBuffersDropAsTxFailed) {
  std::vector<std::pair<Frame, std::uint16_t>> spec;
  for (int i = 0; i < 5; ++i) spec.push_back({udp_frame("10.0.0.1", static_cast<std::uint16_t>(i), "10.0.0.2", 9), kEpForward});
  auto pkts = burst(spec);
  run(pkts);
  EXPECT_EQ(ports_[1]->tx_count(0), 3u);
  EXPECT_EQ(ports_[1]->tx_refused(0), 2u);
  ASSERT_EQ(ports_[1]->transmitted(0).size(), 3u);
  EXPECT_EQ(ports_[1]->transmitted(0)[2], spec[2].first);
  EXPECT_EQ(counters_->transmitted_per_port[1].load(), 3u);
  EXPECT_EQ(drops(DropReason::kTxFailed), 2u);
  EXPECT_EQ(pool_->in_use(), 0u);  // the refused buffers were freed
}

TEST_F(DispatchTest, FullRingDropsTheRestAsEndpointRingFull) {
  std::vector<std::pair<Frame, std::uint16_t>> spec(11, {udp_frame("10.0.0.1", 1, "10.0.0.2", 2), kEpRing});
  auto pkts = burst(spec);
  run(pkts);
  EXPECT_EQ(ring_->size(), 8u);
  EXPECT_EQ(counters_->delivered_per_endpoint[kEpRing].load(), 8u);
  EXPECT_EQ(drops(DropReason::kEndpointRingFull), 3u);
  EXPECT_EQ(pool_->in_use(), 8u);
  Mbuf* out[8];
  ASSERT_EQ(ring_->dequeue_burst(out, 8), 8u);
  mbuf_free_bulk(out, 8);
  EXPECT_EQ(pool_->in_use(), 0u);
}

TEST_F(DispatchTest, FilterVerdictsDropAndHold) {
  auto pkts = burst({{udp_frame("10.0.0.1", 1, "10.0.0.2", 2), kEpSink},
                     {udp_frame("10.0.0.1", 1, "10.0.0.2", 2), kEpSink},
                     {udp_frame("10.0.0.1", 1, "10.0.0.2", 2), kEpRing},
                     {udp_frame("10.0.0.1", 1, "10.0.0.2", 2), kEpSink}});
  Mbuf* held = pkts[2];
  pkts[1]->drop_reason = 0;
  run(pkts, {Verdict::kRecv, Verdict::kDrop, Verdict::kHold, Verdict::kRecv});
  EXPECT_EQ(drops(DropReason::kFilterDrop), 1u);
  EXPECT_EQ(counters_->delivered_per_endpoint[kEpSink].load(), 2u);
  EXPECT_EQ(counters_->delivered_per_endpoint[kEpRing].load(), 1u);  // the hold counts as delivered
  EXPECT_EQ(ring_->size(), 0u);                                      // but is not queued
  EXPECT_EQ(pool_->in_use(), 1u);                                    // the holder owns it
  EXPECT_EQ(held->refcnt.load(), 1);
  mbuf_free(held);
  EXPECT_EQ(pool_->in_use(), 0u);
}

TEST_F(DispatchTest, ParseDropsKeepTheirReason) {
  Frame runt(10, 0);
  auto pkts = burst({{runt, Mbuf::kNoEndpoint}});
  run(pkts);
  EXPECT_EQ(drops(DropReason::kRuntEthernet), 1u);
  EXPECT_EQ(all_drops(), 1u);
}

TEST_F(DispatchTest, FullBurstOfTheMaximumSize) {
  std::vector<std::pair<Frame, std::uint16_t>> spec;
  for (unsigned i = 0; i < kMaxBurst; ++i) spec.push_back({udp_frame("10.0.0.1", 1, "10.0.0.2", 2), i % 2 ? kEpSink : kEpEcho});
  auto pkts = burst(spec);
  run(pkts);
  EXPECT_EQ(counters_->delivered.load() + counters_->transmitted.load(), kMaxBurst);
  EXPECT_EQ(pool_->in_use(), 0u);
}

}  // namespace
}  // namespace rawpipe
