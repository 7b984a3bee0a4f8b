// The filter stage in a running pipeline: every verdict path (RECV, DROP, HOLD, invalid) for
// per-packet and burst callbacks on endpoints and on (port, queue), with exact counts and the
// accounting identity; filters attached and removed while the lcore runs.
#include "pipeline/filter/filter.hh"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>

#include "pipeline/classify/classifier.hh"
#include "pipeline/wire/wire.hh"

#include "tests/unit/extra/plan_util.hh"

namespace rawpipe {
namespace {

using namespace extra_test;

// Verdict by source port: sport % 4 == 0 DROP, 1 HOLD, 2 RECV, 3 the invalid value 7.
int verdict_of(std::uint16_t sport) {
  switch (sport % 4) {
    case 0: return RAWPIPE_DROP;
    case 1: return RAWPIPE_HOLD;
    case 2: return RAWPIPE_RECV;
    default: return 7;
  }
}

// Written by the lcore only; read after stop() (the join orders it).
struct Seen {
  std::uint64_t calls = 0;
  std::uint64_t packets = 0;
  std::vector<void*> held;
  std::vector<std::uint16_t> sports;
  bool bad_meta = false;
};

int per_packet(const rawpipe_packet* p, void* ctx) {
  auto* s = static_cast<Seen*>(ctx);
  ++s->calls;
  ++s->packets;
  s->sports.push_back(p->src.port);
  if (p->user_ctx != ctx || p->src.family != 4 || (p->dst.port != 5000 && p->dst.port != 6000) || p->dst.addr[0] != 239 || p->handle == nullptr ||
      p->payload.iov_len != 18 || p->frame.iov_len < 60)
    s->bad_meta = true;
  int v = verdict_of(p->src.port);
  if (v == RAWPIPE_HOLD) s->held.push_back(p->handle);
  return v;
}

void burst(const rawpipe_packet* p, int* verdicts, unsigned n, void* ctx) {
  auto* s = static_cast<Seen*>(ctx);
  ++s->calls;
  for (unsigned i = 0; i < n; ++i) {
    ++s->packets;
    s->sports.push_back(p[i].src.port);
    if (verdicts[i] != RAWPIPE_RECV) s->bad_meta = true;  // must start as RECV
    verdicts[i] = verdict_of(p[i].src.port);
    if (verdicts[i] == RAWPIPE_HOLD) s->held.push_back(p[i].handle);
  }
}

struct Outcome {
  Accounting before_free;
  Accounting after;
  std::uint64_t ring_got = 0;
  std::vector<std::uint16_t> ring_sports;
};

// 400 frames (sports 0..399) to endpoint "md" (ring); 50 frames to "other" (sink) not filtered
// by an endpoint filter; runs until all are processed; frees held buffers after stop.
Outcome run_case(bool on_queue, bool burst_form, Seen& seen) {
  TestPortConfig cfg;
  std::vector<Frame> frames = md_frames(400);
  for (Frame& f : md_frames(50, 1000, 6000)) frames.push_back(f);
  cfg.rx_frames = {frames};
  PlanBuilder b;
  b.port("p0", cfg).endpoint("md", EndpointAction::kRing, {"udp dst 239.1.1.1:5000"})
      .endpoint("other", EndpointAction::kSink, {"udp dst 239.1.1.1:6000"}).lcore({{0, 0}});
  auto created = Pipeline::create(b.plan);
  EXPECT_TRUE(created) << created.message();
  Pipeline& p = *created.value();
  seen.held.reserve(1024);
  seen.sports.reserve(1024);
  FilterFn f{burst_form ? nullptr : &per_packet, burst_form ? &burst : nullptr, &seen};
  Status s = on_queue ? p.filters().set_queue_filter(0, 0, f) : p.filters().set_endpoint_filter(0, f);
  EXPECT_TRUE(s) << s.message();
  EXPECT_TRUE(p.start());
  Outcome o;
  Mbuf* got[64];
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < deadline) {
    unsigned k = p.endpoint_receive(0, got, 64);
    for (unsigned i = 0; i < k; ++i) o.ring_sports.push_back(wire::load_be16(got[i]->data() + got[i]->l4_off));
    o.ring_got += k;
    mbuf_free_bulk(got, k);
    PipelineSnapshot snap = p.snapshot();
    if (snap.total.rx_packets == 450 && snap.total.delivered + snap.total.dropped() == 450 && o.ring_got == 100) break;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  EXPECT_TRUE(p.stop());
  o.before_free = p.accounting();
  mbuf_free_bulk(reinterpret_cast<Mbuf* const*>(seen.held.data()), static_cast<unsigned>(seen.held.size()));
  o.after = p.accounting();
  return o;
}

void check(const Outcome& o, const Seen& seen, bool on_queue) {
  // 400 md packets: 100 of each verdict class. A queue filter also sees "other"'s 50
  // (sports 1000..1049: 13 DROP 13 HOLD 12 RECV 12 invalid).
  const std::uint64_t shown = on_queue ? 450 : 400;
  EXPECT_EQ(seen.packets, shown);
  EXPECT_FALSE(seen.bad_meta);
  const std::uint64_t drop_n = 100 + (on_queue ? 13 : 0), hold_n = 100 + (on_queue ? 13 : 0),
                      inval_n = 100 + (on_queue ? 12 : 0);
  EXPECT_EQ(seen.held.size(), hold_n);
  const Accounting& a = o.before_free;
  EXPECT_EQ(a.rx_packets, 450u);
  EXPECT_EQ(drop(a, DropReason::kFilterDrop), drop_n);
  EXPECT_EQ(drop(a, DropReason::kFilterInvalidVerdict), inval_n);
  EXPECT_EQ(a.dropped(), drop_n + inval_n);
  EXPECT_EQ(a.delivered_per_endpoint[0], 200u);  // 100 RECV queued + 100 HOLD
  EXPECT_EQ(a.delivered_per_endpoint[1], on_queue ? 25u : 50u);
  EXPECT_EQ(o.ring_got, 100u);
  for (std::uint16_t sp : o.ring_sports) EXPECT_EQ(sp % 4, 2) << "a non-RECV packet reached the ring: sport " << sp;
  EXPECT_EQ(a.rx_packets, a.delivered + a.transmitted + a.dropped());
  EXPECT_EQ(a.outstanding(), hold_n) << "held buffers are owned by the filter until freed";
  EXPECT_TRUE(o.after.balanced());
}

TEST(FilterStage, EndpointPerPacketEveryVerdict) {
  Seen seen;
  Outcome o = run_case(false, false, seen);
  check(o, seen, false);
  EXPECT_EQ(seen.calls, 400u);
}

TEST(FilterStage, EndpointBurstEveryVerdict) {
  Seen seen;
  Outcome o = run_case(false, true, seen);
  check(o, seen, false);
  EXPECT_LT(seen.calls, 400u) << "burst form is called once per burst";
  EXPECT_GT(seen.calls, 0u);
}

TEST(FilterStage, QueuePerPacketEveryVerdict) {
  Seen seen;
  Outcome o = run_case(true, false, seen);
  check(o, seen, true);
}

TEST(FilterStage, QueueBurstEveryVerdict) {
  Seen seen;
  Outcome o = run_case(true, true, seen);
  check(o, seen, true);
}

TEST(FilterStage, PacketsAlreadyDroppedAreNotShown) {
  TestPortConfig cfg;
  std::vector<Frame> frames = md_frames(20);
  for (int i = 0; i < 5; ++i) frames.push_back(Frame(10, 0xab));                          // runt
  for (int i = 0; i < 7; ++i) frames.push_back(testing::udp_frame("10.0.0.7", 1, "10.9.9.9", 1));  // no match
  cfg.rx_frames = {frames};
  PlanBuilder b;
  b.port("p0", cfg).endpoint("md", EndpointAction::kSink, {"udp dst 239.1.1.1:5000"}).lcore({{0, 0}});
  auto created = Pipeline::create(b.plan);
  ASSERT_TRUE(created) << created.message();
  Pipeline& p = *created.value();
  Seen seen;
  seen.sports.reserve(64);
  ASSERT_TRUE(p.filters().set_queue_filter(0, 0, {nullptr, &burst, &seen}));
  ASSERT_TRUE(p.start());
  wait_processed(p, 32);
  ASSERT_TRUE(p.stop());
  mbuf_free_bulk(reinterpret_cast<Mbuf* const*>(seen.held.data()), static_cast<unsigned>(seen.held.size()));
  Accounting a = p.accounting();
  EXPECT_EQ(seen.packets, 20u);
  EXPECT_EQ(drop(a, DropReason::kRuntEthernet), 5u);
  EXPECT_EQ(drop(a, DropReason::kNoMatch), 7u);
  EXPECT_TRUE(a.balanced());
}

// Drops everything it sees; counts calls atomically because the test reads while it runs.
std::atomic<std::uint64_t> g_dropper_calls{0};
int dropper(const rawpipe_packet*, void*) {
  g_dropper_calls.fetch_add(1, std::memory_order_relaxed);
  return RAWPIPE_DROP;
}

TEST(FilterStage, AttachAndRemoveWhileRunning) {
  TestPortConfig cfg;
  cfg.rx_frames = {md_frames(64)};
  cfg.repeat = 0;  // forever
  PlanBuilder b;
  b.port("p0", cfg).endpoint("md", EndpointAction::kSink, {"udp dst 239.1.1.1:5000"}).lcore({{0, 0}});
  auto created = Pipeline::create(b.plan);
  ASSERT_TRUE(created) << created.message();
  Pipeline& p = *created.value();
  ASSERT_TRUE(p.start());
  auto wait_rx = [&](std::uint64_t more) {
    std::uint64_t base = p.snapshot().total.rx_packets;
    while (p.snapshot().total.rx_packets < base + more) std::this_thread::yield();
  };
  wait_rx(1000);
  EXPECT_EQ(p.snapshot().total.drops[static_cast<unsigned>(DropReason::kFilterDrop)], 0u);
  ASSERT_TRUE(p.filters().set_endpoint_filter(0, {&dropper, nullptr, nullptr}));
  wait_rx(1000);
  ASSERT_TRUE(p.filters().set_endpoint_filter(0, {}));
  EXPECT_TRUE(p.filters().empty());
  const std::uint64_t calls_at_removal = g_dropper_calls.load();
  wait_rx(5000);
  ASSERT_TRUE(p.stop());
  Accounting a = p.accounting();
  // Attaching does not wait for the lcore: the burst it was working on when the set was replaced
  // may be counted as received after `base` and still go through the set before, unfiltered.
  EXPECT_GE(calls_at_removal, 1000u - kMaxBurst);
  // At most the burst in flight at removal still went through the filter.
  EXPECT_LE(g_dropper_calls.load() - calls_at_removal, kMaxBurst);
  EXPECT_EQ(drop(a, DropReason::kFilterDrop), g_dropper_calls.load());
  EXPECT_GT(a.delivered, 0u);
  EXPECT_TRUE(a.balanced());
}

TEST(FilterStage, BadAttachmentsAreRefused) {
  FilterStage st(2, {2, 1});
  Status s = st.set_endpoint_filter(5, {&dropper, nullptr, nullptr});
  EXPECT_FALSE(s);
  EXPECT_NE(s.message().find("endpoint id 5"), std::string::npos) << s.message();
  s = st.set_queue_filter(1, 1, {&dropper, nullptr, nullptr});
  EXPECT_NE(s.message().find("queue 1 does not exist"), std::string::npos) << s.message();
  s = st.set_queue_filter(2, 0, {&dropper, nullptr, nullptr});
  EXPECT_NE(s.message().find("port id 2"), std::string::npos) << s.message();
  s = st.set_endpoint_filter(0, {&dropper, &burst, nullptr});
  EXPECT_FALSE(s);
  EXPECT_TRUE(st.empty());
  EXPECT_TRUE(st.set_queue_filter(0, 1, {&dropper, nullptr, nullptr}));
  EXPECT_FALSE(st.empty());
}

// A control thread that replaces filters while an lcore is away from its quiescent points (kept
// off its CPU on a busy host) must not pile replaced sets up for as long as it is away: past
// kMaxRetired it waits for the lcore, and goes on as soon as the lcore passes one.
TEST(FilterStage, ReplacedSetsWaitingForAnLcoreAreBounded) {
  auto classifier = std::move(Classifier::create(1, {}, {})).value();
  FilterStage st(1, {1});
  st.set_quiescence(classifier.get(), [] { return true; });
  classifier->reader_online(0);  // an lcore inside a pass, which does not end until we say
  constexpr unsigned kCalls = FilterStage::kMaxRetired + 40;
  std::atomic<unsigned> done{0};
  std::thread control([&] {
    for (unsigned i = 0; i < kCalls; ++i) {
      ASSERT_TRUE(st.set_endpoint_filter(0, {i % 2 ? nullptr : &dropper, nullptr, nullptr}));
      done.fetch_add(1);
    }
  });
  // It goes on until its call leaves one set past the bound, and that call does not return while
  // the lcore is away.
  while (done.load() < FilterStage::kMaxRetired) std::this_thread::yield();
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(done.load(), FilterStage::kMaxRetired);
  EXPECT_EQ(st.retired_count(), FilterStage::kMaxRetired + 1);
  // The lcore passes a quiescent point: everything retired before it goes, and the calls go on.
  classifier->quiesce(0);
  control.join();
  EXPECT_EQ(done.load(), kCalls);
  EXPECT_LE(st.retired_count(), FilterStage::kMaxRetired + 1);
  classifier->reader_offline(0);
}

// From a filter callback the caller is the lcore the sets wait for: it never waits.
TEST(FilterStage, ACallerThatMayNotWaitIsNeverHeld) {
  auto classifier = std::move(Classifier::create(1, {}, {})).value();
  FilterStage st(1, {1});
  st.set_quiescence(classifier.get(), [] { return false; });
  classifier->reader_online(0);
  constexpr unsigned kCalls = FilterStage::kMaxRetired + 40;
  for (unsigned i = 0; i < kCalls; ++i)
    ASSERT_TRUE(st.set_endpoint_filter(0, {i % 2 ? nullptr : &dropper, nullptr, nullptr}));
  EXPECT_EQ(st.retired_count(), kCalls);
  classifier->reader_offline(0);
  // The next call finds every set free to go.
  ASSERT_TRUE(st.set_endpoint_filter(0, {}));
  EXPECT_EQ(st.retired_count(), 0u);
}

}  // namespace
}  // namespace rawpipe
