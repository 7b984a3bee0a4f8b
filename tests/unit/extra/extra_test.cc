// The Extra API through its C table: version check, zero-copy and copying receive, completion
// polling with user_data and reference counts, HOLD freed from another thread while the lcore
// runs, back-pressure when held buffers drain the pool, rules added and removed under traffic,
// stats dump, and the example filter plugins (including an ABI mismatch).
#include "pipeline/extra/extra.hh"

#include <gtest/gtest.h>

#include <cerrno>
#include <unistd.h>

#include <atomic>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <utility>

#include "pipeline/ring/ring.hh"
#include "tests/unit/extra/plan_util.hh"

namespace rawpipe {
namespace {

using namespace extra_test;
using testing::TestPort;

const rawpipe_api_t* api() {
  const rawpipe_api_t* a = rawpipe_get_api(RAWPIPE_EXTRA_ABI_VERSION);
  EXPECT_NE(a, nullptr) << rawpipe_api_error();
  return a;
}

struct Handle {
  std::unique_ptr<Pipeline> p;
  rawpipe_pipeline* h = nullptr;
  Handle() = default;
  Handle(Handle&& o) noexcept : p(std::move(o.p)), h(std::exchange(o.h, nullptr)) {}
  ~Handle() {
    if (h) {
      if (p) (void)p->stop();
      api()->destroy(h);
    }
  }
};

Handle make(PlanBuilder& b) {
  Handle out;
  auto created = Pipeline::create(b.plan);
  EXPECT_TRUE(created) << created.message();
  if (!created) return out;
  out.p = std::move(created).value();
  out.h = extra_wrap(*out.p);
  return out;
}

std::string plugin_path(const char* name) {
  char exe[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  std::string dir = n > 0 ? std::string(exe, static_cast<std::size_t>(n)) : std::string();
  for (int i = 0; i < 3; ++i) dir = dir.substr(0, dir.rfind('/'));  // <build>/tests/unit/<exe>
  return dir + "/plugins/" + name + ".so";
}

TEST(ExtraApi, VersionAndCapabilities) {
  const rawpipe_api_t* a = rawpipe_get_api(RAWPIPE_EXTRA_ABI_VERSION);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->abi_version, RAWPIPE_EXTRA_ABI_VERSION);
  EXPECT_EQ(a->size, sizeof(rawpipe_api_t));
  EXPECT_TRUE(a->caps & RAWPIPE_CAP_FILTERS);
  EXPECT_TRUE(a->caps & RAWPIPE_CAP_PLUGINS);
  EXPECT_EQ(rawpipe_get_api(RAWPIPE_EXTRA_ABI_VERSION + 1), nullptr);
  std::string why = rawpipe_api_error();
  EXPECT_NE(why.find("version 3"), std::string::npos) << why;
  EXPECT_NE(why.find("version 2"), std::string::npos) << why;
}

TEST(ExtraApi, ZeroCopyReceiveAndFreePackets) {
  TestPortConfig cfg;
  cfg.rx_frames = {md_frames(100)};
  PlanBuilder b;
  b.port("p0", cfg).endpoint("md", EndpointAction::kRing, {"udp dst 239.1.1.1:5000"}).lcore({{0, 0}});
  Handle h = make(b);
  ASSERT_TRUE(h.h);
  ASSERT_EQ(api()->start(h.h), 0) << api()->last_error(h.h);
  std::vector<rawpipe_packet> got;
  rawpipe_packet pk[32];
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (got.size() < 100 && std::chrono::steady_clock::now() < deadline) {
    int n = api()->recvfrom_zcopy(h.h, 0, pk, 32);
    ASSERT_GE(n, 0);
    got.insert(got.end(), pk, pk + n);
  }
  ASSERT_EQ(got.size(), 100u);
  for (std::size_t i = 0; i < got.size(); ++i) {
    const rawpipe_packet& p = got[i];
    EXPECT_EQ(p.src.family, 4);
    EXPECT_EQ(p.dst.addr[0], 239);
    EXPECT_EQ(p.dst.addr[3], 1);
    EXPECT_EQ(p.src.addr[3], 7);
    EXPECT_EQ(p.dst.port, 5000);
    EXPECT_EQ(p.src.port, i);  // one lcore, one ring: order kept
    EXPECT_EQ(p.payload.iov_len, 18u);
    EXPECT_EQ(static_cast<std::uint8_t*>(p.payload.iov_base) - static_cast<std::uint8_t*>(p.frame.iov_base), 42);
    EXPECT_EQ(p.ingress_port, 0);
    EXPECT_EQ(p.endpoint, 0);
  }
  EXPECT_EQ(h.p->accounting().outstanding(), 100u) << "the caller owns received packets";
  api()->free_packets(h.h, got.data(), static_cast<unsigned>(got.size()));
  ASSERT_EQ(api()->stop(h.h), 0);
  Accounting a = h.p->accounting();
  EXPECT_EQ(a.delivered_per_endpoint[0], 100u);
  EXPECT_EQ(a.drained, 0u);
  EXPECT_TRUE(a.balanced());
  EXPECT_EQ(api()->recvfrom_zcopy(h.h, 9, pk, 1), -1);
  EXPECT_NE(std::string(api()->last_error(h.h)).find("endpoint id 9"), std::string::npos);
}

TEST(ExtraApi, CopyingReceiveTruncatesAndFrees) {
  TestPortConfig cfg;
  cfg.rx_frames = {md_frames(3)};
  PlanBuilder b;
  b.port("p0", cfg).endpoint("md", EndpointAction::kRing, {"udp dst 239.1.1.1:5000"}).lcore({{0, 0}});
  Handle h = make(b);
  ASSERT_TRUE(h.h);
  ASSERT_EQ(api()->start(h.h), 0);
  wait_processed(*h.p, 3);
  char buf[64];
  rawpipe_addr src{};
  EXPECT_EQ(api()->recv(h.h, 0, buf, 10, &src), 10);
  EXPECT_EQ(src.port, 0);
  EXPECT_EQ(src.addr[3], 7);
  EXPECT_EQ(api()->recv(h.h, 0, buf, sizeof buf, &src), 18);
  EXPECT_EQ(src.port, 1);
  EXPECT_EQ(api()->recv(h.h, 0, buf, sizeof buf, nullptr), 18);
  errno = 0;
  EXPECT_EQ(api()->recv(h.h, 0, buf, sizeof buf, nullptr), -1);  // nothing waiting (0 is an empty datagram)
  EXPECT_EQ(errno, EAGAIN);
  ASSERT_EQ(api()->stop(h.h), 0);
  EXPECT_TRUE(h.p->accounting().balanced());
}

TEST(ExtraApi, PollCompletionsWithUserDataAndReferenceCounts) {
  TestPortConfig cfg;
  std::vector<Frame> frames = md_frames(20);
  for (Frame& f : md_frames(30, 100, 6000)) frames.push_back(f);
  cfg.rx_frames = {frames};
  PlanBuilder b;
  b.port("p0", cfg)
      .endpoint("a", EndpointAction::kRing, {"udp dst 239.1.1.1:5000"})
      .endpoint("b", EndpointAction::kRing, {"udp dst 239.1.1.1:6000"})
      .lcore({{0, 0}});
  Handle h = make(b);
  ASSERT_TRUE(h.h);
  ASSERT_EQ(api()->set_user_data(h.h, 0, 0xaaaa), 0);
  ASSERT_EQ(api()->set_user_data(h.h, 1, 0xbbbb), 0);
  ASSERT_EQ(api()->start(h.h), 0);
  wait_processed(*h.p, 50);
  rawpipe_completion c[64];
  int n = api()->poll(h.h, RAWPIPE_ANY_ENDPOINT, c, 64);
  ASSERT_EQ(n, 50);
  unsigned a_n = 0, b_n = 0;
  for (int i = 0; i < n; ++i) {
    if (c[i].packet.endpoint == 0) {
      ++a_n;
      EXPECT_EQ(c[i].user_data, 0xaaaau);
      EXPECT_EQ(c[i].packet.dst.port, 5000);
    } else {
      ++b_n;
      EXPECT_EQ(c[i].user_data, 0xbbbbu);
      EXPECT_EQ(c[i].packet.dst.port, 6000);
      EXPECT_GE(c[i].packet.src.port, 100);
    }
  }
  EXPECT_EQ(a_n, 20u);
  EXPECT_EQ(b_n, 30u);
  EXPECT_EQ(api()->poll(h.h, 0, c, 64), 0);
  // One extra reference on the first packet: it survives free_packets and goes with free_buff.
  api()->ref_buff(c[0].packet.handle);
  for (int i = 0; i < n; ++i) api()->free_buff(c[i].packet.handle);
  EXPECT_EQ(h.p->accounting().outstanding(), 1u);
  EXPECT_EQ(static_cast<Mbuf*>(c[0].packet.handle)->refcnt.load(), 1);
  api()->free_buff(c[0].packet.handle);
  ASSERT_EQ(api()->stop(h.h), 0);
  EXPECT_TRUE(h.p->accounting().balanced());
}

// HOLD: the filter hands buffers to a ring that another thread drains and frees while the lcore
// keeps running. With a 512-buffer pool and 20000 packets, the frees must happen concurrently
// for the run to finish at all. (Run under ThreadSanitizer: build-extra-tsan.)
struct HoldQueue {
  std::unique_ptr<SpscRing<void*>> ring;
  std::atomic<std::uint64_t> overflow{0};
};

int hold_all(const rawpipe_packet* p, void* ctx) {
  auto* q = static_cast<HoldQueue*>(ctx);
  if (!q->ring->enqueue(p->handle)) {
    q->overflow.fetch_add(1, std::memory_order_relaxed);
    return RAWPIPE_DROP;
  }
  return RAWPIPE_HOLD;
}

TEST(ExtraApi, HoldThenFreeFromAnotherThreadWhileRunning) {
  TestPortConfig cfg;
  cfg.rx_frames = {md_frames(1000)};
  cfg.repeat = 20;
  PlanBuilder b(512);
  b.plan.pools[0].config.cache_size = 32;
  b.port("p0", cfg).endpoint("md", EndpointAction::kRing, {"udp dst 239.1.1.1:5000"}).lcore({{0, 0}});
  Handle h = make(b);
  ASSERT_TRUE(h.h);
  HoldQueue q;
  q.ring = std::move(SpscRing<void*>::create(1024)).value();
  ASSERT_EQ(api()->endpoint_filter(h.h, 0, &hold_all, nullptr, &q), 0) << api()->last_error(h.h);
  std::atomic<bool> done{false};
  std::uint64_t freed = 0;
  std::thread freer([&] {
    void* batch[64];
    // Relaxed: only ends the loop; the final drain after join covers the rest.
    while (!done.load(std::memory_order_relaxed)) {
      unsigned k = q.ring->dequeue_burst(batch, 64);
      for (unsigned i = 0; i < k; ++i) api()->free_buff(batch[i]);
      freed += k;
      if (k == 0) std::this_thread::yield();
    }
  });
  ASSERT_EQ(api()->start(h.h), 0);
  wait_processed(*h.p, 20000);
  done.store(true, std::memory_order_relaxed);
  freer.join();
  ASSERT_EQ(api()->stop(h.h), 0);
  void* rest[1024];
  unsigned k = q.ring->dequeue_burst(rest, 1024);
  for (unsigned i = 0; i < k; ++i) api()->free_buff(rest[i]);
  freed += k;
  Accounting a = h.p->accounting();
  EXPECT_EQ(a.rx_packets, 20000u);
  EXPECT_EQ(freed + q.overflow.load(), 20000u);
  EXPECT_EQ(a.delivered_per_endpoint[0], freed);
  EXPECT_EQ(drop(a, DropReason::kFilterDrop), q.overflow.load());
  EXPECT_TRUE(a.balanced());
}

// Back-pressure: the application holds every buffer and frees none; the pool runs dry, the port
// counts rx_nombuf, nothing deadlocks, and once the application frees, the rest flows.
TEST(ExtraApi, PoolExhaustionByHeldBuffersAndRecovery) {
  TestPortConfig cfg;
  cfg.rx_frames = {md_frames(1000)};
  PlanBuilder b(256);
  b.plan.pools[0].config.cache_size = 16;
  b.port("p0", cfg).endpoint("md", EndpointAction::kRing, {"udp dst 239.1.1.1:5000"}).lcore({{0, 0}});
  Handle h = make(b);
  ASSERT_TRUE(h.h);
  HoldQueue q;
  q.ring = std::move(SpscRing<void*>::create(2048)).value();
  ASSERT_EQ(api()->endpoint_filter(h.h, 0, &hold_all, nullptr, &q), 0);
  ASSERT_EQ(api()->start(h.h), 0);
  auto nombuf = [&] { return h.p->port(0).stats().rx_queues[0].rx_nombuf; };
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (nombuf() == 0 && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ASSERT_GT(nombuf(), 0u) << "the pool never ran dry";
  const std::uint64_t rx_dry = h.p->snapshot().total.rx_packets;
  EXPECT_LE(rx_dry, 256u);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(h.p->snapshot().total.rx_packets, rx_dry) << "nothing can be received while the pool is dry";
  // Recovery: free what is held, keep freeing until all 1000 went through.
  std::uint64_t freed = 0;
  void* batch[64];
  while (freed < 1000 && std::chrono::steady_clock::now() < deadline) {
    unsigned k = q.ring->dequeue_burst(batch, 64);
    for (unsigned i = 0; i < k; ++i) api()->free_buff(batch[i]);
    freed += k;
  }
  EXPECT_EQ(freed, 1000u);
  ASSERT_EQ(api()->stop(h.h), 0);
  Accounting a = h.p->accounting();
  EXPECT_EQ(a.rx_packets, 1000u);
  EXPECT_EQ(a.delivered, 1000u);
  EXPECT_EQ(q.overflow.load(), 0u);
  EXPECT_TRUE(a.balanced());
}

TEST(ExtraApi, RulesAddedAndRemovedUnderTraffic) {
  TestPortConfig cfg;
  std::vector<Frame> frames;
  for (int i = 0; i < 32; ++i) {
    frames.push_back(testing::udp_frame("10.0.0.7", 1, "239.1.1.1", 5000));
    frames.push_back(testing::udp_frame("10.0.0.7", 1, "239.1.1.2", 5001));
  }
  cfg.rx_frames = {frames};
  cfg.repeat = 0;
  PlanBuilder b;
  b.port("p0", cfg)
      .endpoint("a", EndpointAction::kRing, {"udp dst 239.1.1.1:5000"})
      .endpoint("b", EndpointAction::kRing, {"udp dst 10.9.9.9:1"})
      .lcore({{0, 0}});
  Handle h = make(b);
  ASSERT_TRUE(h.h);
  ASSERT_EQ(api()->start(h.h), 0);
  std::uint64_t got[2] = {0, 0}, wrong = 0;
  auto consume = [&] {
    rawpipe_completion c[64];
    for (std::uint16_t ep = 0; ep < 2; ++ep) {
      int n = api()->poll(h.h, ep, c, 64);
      for (int i = 0; i < n; ++i) {
        if (c[i].packet.dst.port != (ep == 0 ? 5000 : 5001)) ++wrong;
        api()->free_buff(c[i].packet.handle);
      }
      got[ep] += static_cast<std::uint64_t>(n);
    }
  };
  auto run_for = [&](std::uint64_t packets) {
    const std::uint64_t until = h.p->snapshot().total.rx_packets + packets;
    while (h.p->snapshot().total.rx_packets < until) consume();
  };
  run_for(5000);
  EXPECT_EQ(got[1], 0u);
  long id = api()->add_conf_rule(h.h, "b: udp dst 239.1.1.2:5001");
  ASSERT_GT(id, 0) << api()->last_error(h.h);
  run_for(5000);
  const std::uint64_t b_after_add = got[1];
  EXPECT_GT(b_after_add, 0u);
  ASSERT_EQ(api()->remove_rule(h.h, static_cast<std::uint32_t>(id)), 0) << api()->last_error(h.h);
  const std::uint64_t b_at_removal = h.p->snapshot().delivered_per_endpoint[1];
  run_for(5000);
  // remove_rule returns after every lcore passed a quiescent point: the pass that still used the
  // old table has counted its deliveries, and nothing after it reaches b.
  EXPECT_EQ(h.p->snapshot().delivered_per_endpoint[1] - b_at_removal, 0u) << "deliveries after the rule was removed";
  ASSERT_EQ(api()->stop(h.h), 0);
  consume();
  Accounting a = h.p->accounting();
  EXPECT_EQ(wrong, 0u);
  EXPECT_EQ(got[0] + got[1] + a.drained, a.delivered) << "queued packets neither consumed nor drained at stop";
  EXPECT_EQ(a.drops[static_cast<unsigned>(DropReason::kEndpointRingFull)] + drop(a, DropReason::kNoMatch) + a.delivered,
            a.rx_packets);
  EXPECT_TRUE(a.balanced());
}

TEST(ExtraApi, ConfRuleErrorsNameTheProblem) {
  TestPortConfig cfg;
  PlanBuilder b;
  b.port("p0", cfg).endpoint("a", EndpointAction::kSink, {"udp dst 239.1.1.1:5000"}).lcore({{0, 0}});
  Handle h = make(b);
  ASSERT_TRUE(h.h);
  EXPECT_EQ(api()->add_conf_rule(h.h, "nope: udp dst 1.2.3.4:5"), -1);
  EXPECT_NE(std::string(api()->last_error(h.h)).find("no endpoint named 'nope'"), std::string::npos);
  EXPECT_EQ(api()->add_conf_rule(h.h, "udp dst 1.2.3.4"), -1);
  EXPECT_EQ(api()->add_conf_rule(h.h, "a: bogus words"), -1);
  EXPECT_EQ(api()->remove_rule(h.h, 999), -1);
  long id = api()->add_conf_rule(h.h, "a: udp dst [ff02::1]:5000");
  EXPECT_GT(id, 0) << api()->last_error(h.h);
}

TEST(ExtraApi, DumpFdStatsAtALogLevel) {
  TestPortConfig cfg;
  cfg.rx_frames = {md_frames(7)};
  PlanBuilder b;
  b.port("p0", cfg).endpoint("md", EndpointAction::kSink, {"udp dst 239.1.1.1:5000"}).lcore({{0, 0}});
  Handle h = make(b);
  ASSERT_TRUE(h.h);
  ASSERT_EQ(api()->start(h.h), 0);
  wait_processed(*h.p, 7);
  unsetenv("RAWPIPE_LOG_LEVEL");
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(api()->dump_fd_stats(h.h, 0, RAWPIPE_LOG_INFO), 0);
  EXPECT_EQ(api()->dump_fd_stats(h.h, RAWPIPE_ANY_ENDPOINT, RAWPIPE_LOG_DEBUG), 0);  // above the threshold
  std::string out = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(out, "rawpipe: endpoint 0 'md' (sink): delivered 7 queued 0 ring_full 0 rules 1 user_data 0\n");
  EXPECT_EQ(api()->dump_fd_stats(h.h, 3, RAWPIPE_LOG_INFO), -1);
}

// ---- plugins ----

Frame seq_frame(const char* src, std::uint16_t sport, std::uint64_t seq) {
  Frame f = testing::udp_frame(src, sport, "239.1.1.1", 5000);
  for (int i = 0; i < 8; ++i) f[42 + 2 + i] = static_cast<std::uint8_t>(seq >> (56 - 8 * i));
  return f;
}

std::string report(rawpipe_pipeline* h, int plugin) {
  char buf[256];
  EXPECT_GE(api()->plugin_report(h, plugin, buf, sizeof buf), 0) << api()->last_error(h);
  return buf;
}

TEST(FilterPlugins, SeqGapCountsGapsAndReordersPerFlow) {
  TestPortConfig cfg;
  std::vector<Frame> frames;
  for (std::uint64_t s : {1, 2, 3, 5, 4, 6}) frames.push_back(seq_frame("10.0.0.7", 1, s));       // gap 1 missing 1, reorder 1
  for (std::uint64_t s : {10, 11, 14, 15}) frames.push_back(seq_frame("10.0.0.8", 1, s));        // gap 1 missing 2
  for (std::uint64_t s : {7, 7}) frames.push_back(seq_frame("10.0.0.7", 2, s));                  // duplicate: reorder 1
  cfg.rx_frames = {frames};
  PlanBuilder b;
  b.port("p0", cfg).endpoint("md", EndpointAction::kSink, {"udp dst 239.1.1.1:5000"}).lcore({{0, 0}});
  Handle h = make(b);
  ASSERT_TRUE(h.h);
  const char* keys[] = {"offset", "width"};
  const char* values[] = {"2", "8"};
  int id = api()->load_filter_plugin(h.h, plugin_path("rawpipe_seq_gap").c_str(), "queue p0:0", keys, values, 2);
  ASSERT_GE(id, 0) << api()->last_error(h.h);
  ASSERT_EQ(api()->start(h.h), 0);
  wait_processed(*h.p, 12);
  ASSERT_EQ(api()->stop(h.h), 0);
  EXPECT_EQ(report(h.h, id), "flows=3 packets=12 gaps=2 missing=3 reorders=2 short=0 untracked=0");
  EXPECT_EQ(h.p->accounting().delivered, 12u);
}

TEST(FilterPlugins, SeqGapRefusesBadConfig) {
  TestPortConfig cfg;
  PlanBuilder b;
  b.port("p0", cfg).endpoint("md", EndpointAction::kSink, {"udp dst 239.1.1.1:5000"}).lcore({{0, 0}});
  Handle h = make(b);
  ASSERT_TRUE(h.h);
  const char* keys[] = {"width"};
  const char* values[] = {"3"};
  EXPECT_EQ(api()->load_filter_plugin(h.h, plugin_path("rawpipe_seq_gap").c_str(), "endpoint md", keys, values, 1), -1);
  EXPECT_NE(std::string(api()->last_error(h.h)).find("'width': 3 must be 4 or 8"), std::string::npos) << api()->last_error(h.h);
  EXPECT_EQ(api()->load_filter_plugin(h.h, plugin_path("rawpipe_seq_gap").c_str(), "endpoint nope", nullptr, nullptr, 0), -1);
  EXPECT_NE(std::string(api()->last_error(h.h)).find("no endpoint named 'nope'"), std::string::npos);
  EXPECT_EQ(api()->load_filter_plugin(h.h, "/nonexistent/x.so", "endpoint md", nullptr, nullptr, 0), -1);
  EXPECT_NE(std::string(api()->last_error(h.h)).find("'/nonexistent/x.so' is not a file"), std::string::npos)
      << api()->last_error(h.h);
}

TEST(FilterPlugins, AbiMismatchIsRefusedNamingBothVersions) {
  TestPortConfig cfg;
  PlanBuilder b;
  b.port("p0", cfg).endpoint("md", EndpointAction::kSink, {"udp dst 239.1.1.1:5000"}).lcore({{0, 0}});
  Handle h = make(b);
  ASSERT_TRUE(h.h);
  EXPECT_EQ(api()->load_filter_plugin(h.h, plugin_path("rawpipe_test_bad_abi").c_str(), "endpoint md", nullptr, nullptr, 0), -1);
  std::string why = api()->last_error(h.h);
  EXPECT_NE(why.find("built for filter ABI version 43"), std::string::npos) << why;
  EXPECT_NE(why.find("provides version 2"), std::string::npos) << why;
  EXPECT_TRUE(h.p->filters().empty());
}

TEST(FilterPlugins, PrefixDropDropsMatchingPayloads) {
  TestPortConfig cfg;
  std::vector<Frame> frames = md_frames(30);
  for (std::size_t i = 0; i < frames.size(); i += 3) {
    frames[i][42] = 0xde;
    frames[i][43] = 0xad;
  }
  cfg.rx_frames = {frames};
  PlanBuilder b;
  b.port("p0", cfg).endpoint("md", EndpointAction::kSink, {"udp dst 239.1.1.1:5000"}).lcore({{0, 0}});
  Handle h = make(b);
  ASSERT_TRUE(h.h);
  const char* keys[] = {"prefix_hex"};
  const char* values[] = {"DEad"};
  int id = api()->load_filter_plugin(h.h, plugin_path("rawpipe_prefix_drop").c_str(), "endpoint md", keys, values, 1);
  ASSERT_GE(id, 0) << api()->last_error(h.h);
  ASSERT_EQ(api()->start(h.h), 0);
  wait_processed(*h.p, 30);
  ASSERT_EQ(api()->stop(h.h), 0);
  EXPECT_EQ(report(h.h, id), "dropped=10 passed=20");
  Accounting a = h.p->accounting();
  EXPECT_EQ(drop(a, DropReason::kFilterDrop), 10u);
  EXPECT_EQ(a.delivered, 20u);
  EXPECT_TRUE(a.balanced());
}

TEST(FilterPlugins, SamplerHoldsOneInNAndFreesOnItsThread) {
  TestPortConfig cfg;
  cfg.rx_frames = {md_frames(1000)};
  PlanBuilder b;
  b.port("p0", cfg).endpoint("md", EndpointAction::kSink, {"udp dst 239.1.1.1:5000"}).lcore({{0, 0}});
  Handle h = make(b);
  ASSERT_TRUE(h.h);
  const char* keys[] = {"every"};
  const char* values[] = {"10"};
  int id = api()->load_filter_plugin(h.h, plugin_path("rawpipe_sampler").c_str(), "endpoint md", keys, values, 1);
  ASSERT_GE(id, 0) << api()->last_error(h.h);
  ASSERT_EQ(api()->start(h.h), 0);
  wait_processed(*h.p, 1000);
  ASSERT_EQ(api()->stop(h.h), 0);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (report(h.h, id).find("freed=100 ") == std::string::npos && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_EQ(report(h.h, id), "seen=1000 held=100 freed=100 overflow=0");
  Accounting a = h.p->accounting();
  EXPECT_EQ(a.delivered, 1000u);
  EXPECT_TRUE(a.balanced());
}

}  // namespace
}  // namespace rawpipe
