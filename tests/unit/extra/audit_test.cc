// The ownership auditor (pipeline/buf/audit.hh), in a build with -Dmbuf_debug=true only: a double
// free and foreign frees are refused with a message and counted instead of corrupting the pool;
// buffers still out at stop are reported per consumer with the endpoint's name and the call site.
#include "pipeline/buf/audit.hh"

#include <gtest/gtest.h>

#include <thread>

#include "pipeline/buf/pool.hh"
#include "pipeline/extra/extra.hh"
#include "tests/unit/extra/plan_util.hh"

namespace rawpipe {
namespace {

using namespace extra_test;

static_assert(kMbufAudit, "this test is registered only in builds with -Dmbuf_debug=true");

#define EXPECT_HAS(text, part) EXPECT_NE((text).find(part), std::string::npos) << (text)

std::unique_ptr<Pool> make_pool(const char* name, std::uint32_t count = 64) {
  PoolConfig c;
  c.name = name;
  c.count = count;
  c.cache_size = 0;
  c.huge_pages = HugePages::kNever;
  auto p = Pool::create(c);
  EXPECT_TRUE(p) << p.message();
  return std::move(p).value();
}

TEST(MbufAudit, DoubleFreeIsRefusedCountedAndReported) {
  audit_reset_counts();
  auto pool = make_pool("dbl");
  Mbuf* m = pool->alloc();
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(pool->in_use(), 1u);
  mbuf_free(m);
  EXPECT_EQ(pool->available(), 64u);
  ::testing::internal::CaptureStderr();
  mbuf_free(m);
  std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(audit_counts().double_frees, 1u);
  EXPECT_EQ(audit_counts().foreign_frees, 0u);
  EXPECT_EQ(pool->available(), 64u) << "the second free must not put the slot on the free list twice";
  ASSERT_EQ(audit_errors().size(), 1u);
  EXPECT_HAS(audit_errors()[0], "double free of buffer " + std::to_string(m->index) + " of pool 'dbl'");
  EXPECT_HAS(audit_errors()[0], "handed out by pool alloc");
  EXPECT_HAS(err, "rawpipe: mbuf audit: double free");
  // Two distinct buffers come out afterwards: the slot is in the free list once.
  Mbuf* a = pool->alloc();
  Mbuf* b = pool->alloc();
  EXPECT_NE(a, b);
  mbuf_free(a);
  mbuf_free(b);
  EXPECT_EQ(pool->available(), 64u);
}

TEST(MbufAudit, ForeignFreesAreRefused) {
  audit_reset_counts();
  auto pool = make_pool("mine");
  auto other = make_pool("other");
  // Not a buffer of any pool.
  alignas(64) static Mbuf stray{};
  ::testing::internal::CaptureStderr();
  mbuf_free(&stray);
  // Inside a buffer but not at its start.
  Mbuf* m = pool->alloc();
  ASSERT_NE(m, nullptr);
  mbuf_free(reinterpret_cast<Mbuf*>(m->buf_addr() + 256));
  // A header naming another pool (overwritten, or built by someone else).
  m->pool = other.get();
  mbuf_free(m);
  (void)::testing::internal::GetCapturedStderr();
  EXPECT_EQ(audit_counts().foreign_frees, 3u);
  EXPECT_EQ(audit_counts().double_frees, 0u);
  const std::vector<std::string> errs = audit_errors();
  ASSERT_EQ(errs.size(), 3u);
  EXPECT_HAS(errs[0], "which is no buffer of any pool");
  EXPECT_HAS(errs[1], "points 256 bytes into buffer " + std::to_string(m->index) + " of pool 'mine'");
  EXPECT_HAS(errs[2], "whose header names another pool");
  EXPECT_EQ(pool->in_use(), 1u);
  EXPECT_EQ(other->in_use(), 0u) << "nothing went to the wrong pool";
  m->pool = pool.get();
  mbuf_free(m);
  EXPECT_EQ(pool->in_use(), 0u);
}

std::atomic<unsigned> g_to_hold{0};
std::vector<void*> g_held;  // written by the lcore, read after stop

int hold_some(const rawpipe_packet* p, void*) {
  if (g_to_hold.load(std::memory_order_relaxed) == 0) return RAWPIPE_RECV;
  g_to_hold.fetch_sub(1, std::memory_order_relaxed);
  g_held.push_back(p->handle);
  return RAWPIPE_HOLD;
}

// Buffers held at stop, per consumer: the application of 'md' after recvfrom_zcopy and after
// poll, and a filter's owner after HOLD on 'tm'; named in the report with their call sites, and
// gone from it once freed.
TEST(MbufAudit, OutstandingPerConsumerAndLeaksAtStop) {
  audit_reset_counts();
  TestPortConfig cfg;
  std::vector<Frame> frames = md_frames(10);
  for (Frame& f : md_frames(6, 0, 6000)) frames.push_back(f);
  cfg.rx_frames = {frames};
  PlanBuilder b;
  b.port("p0", cfg)
      .endpoint("md", EndpointAction::kRing, {"udp dst 239.1.1.1:5000"})
      .endpoint("tm", EndpointAction::kSink, {"udp dst 239.1.1.1:6000"})
      .lcore({{0, 0}});
  auto created = Pipeline::create(b.plan);
  ASSERT_TRUE(created) << created.message();
  Pipeline& p = *created.value();
  rawpipe_pipeline* h = extra_wrap(p);
  const rawpipe_api_t* api = rawpipe_get_api(RAWPIPE_EXTRA_ABI_VERSION);
  g_to_hold = 2;
  g_held.clear();
  ASSERT_EQ(api->endpoint_filter(h, 1, &hold_some, nullptr, nullptr), 0);
  ASSERT_EQ(api->start(h), 0);
  wait_processed(p, 16);
  rawpipe_packet pk[8];
  ASSERT_EQ(api->recvfrom_zcopy(h, 0, pk, 7), 7);
  rawpipe_completion c[8];
  ASSERT_EQ(api->poll(h, 0, c, 8), 3);
  api->free_packets(h, pk, 4);  // 3 of the zero-copy ones stay out
  api->free_buff(c[0].packet.handle);  // 2 of the polled ones stay out
  ::testing::internal::CaptureStderr();
  ASSERT_EQ(api->stop(h), 0);
  ASSERT_EQ(api->stop(h), 0);  // stop is idempotent; the report belongs to the stop that ended the run
  ASSERT_TRUE(p.stop());
  std::string at_stop = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(at_stop.find("mbuf audit at stop"), at_stop.rfind("mbuf audit at stop")) << "reported more than once";

  const Pool& pool = *p.pool("rx");
  std::vector<AuditConsumer> out = audit_outstanding(pool);
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0].owner, AuditOwner::kApp);
  EXPECT_EQ(out[0].endpoint, 0);
  EXPECT_EQ(out[0].site, AuditSite::kRecvfromZcopy);
  EXPECT_EQ(out[0].count, 3u);
  EXPECT_EQ(out[1].count + out[2].count, 4u);
  std::string report = audit_report(pool);
  EXPECT_HAS(report, "pool 'rx': 7 buffers outstanding:");
  EXPECT_HAS(report, "3 held by the application of endpoint 'md' (last handed out by recvfrom_zcopy; slots ");
  EXPECT_HAS(report, "2 held by the application of endpoint 'md' (last handed out by poll; slots ");
  EXPECT_HAS(report, "2 held by a filter's owner after a HOLD on endpoint 'tm' (last handed out by hold verdict; slots ");
  EXPECT_HAS(at_stop, "rawpipe: mbuf audit at stop: " + report);
  EXPECT_EQ(p.accounting().outstanding(), 7u);

  api->free_packets(h, pk + 4, 3);
  api->free_buff(c[1].packet.handle);
  api->free_buff(c[2].packet.handle);
  for (void* held : g_held) api->free_buff(held);
  EXPECT_EQ(audit_report(pool), "");
  EXPECT_TRUE(audit_outstanding(pool).empty());
  Accounting a = p.accounting();
  EXPECT_TRUE(a.balanced());
  EXPECT_EQ(a.delivered, 16u);
  EXPECT_EQ(audit_counts().double_frees + audit_counts().foreign_frees, 0u);
  api->destroy(h);
}

// A double free through the Extra API from another thread while the lcore runs: the API's own
// check (pipeline/buf/checked_free.hh, in every build) refuses it before the auditor would see
// it, and the pipeline's accounting stays exact.
TEST(MbufAudit, DoubleFreeFromAnApplicationThread) {
  audit_reset_counts();
  TestPortConfig cfg;
  cfg.rx_frames = {md_frames(20)};
  PlanBuilder b;
  b.port("p0", cfg).endpoint("md", EndpointAction::kRing, {"udp dst 239.1.1.1:5000"}).lcore({{0, 0}});
  auto created = Pipeline::create(b.plan);
  ASSERT_TRUE(created) << created.message();
  Pipeline& p = *created.value();
  rawpipe_pipeline* h = extra_wrap(p);
  const rawpipe_api_t* api = rawpipe_get_api(RAWPIPE_EXTRA_ABI_VERSION);
  ASSERT_EQ(api->start(h), 0);
  wait_processed(p, 20);
  rawpipe_packet pk[20];
  ASSERT_EQ(api->recvfrom_zcopy(h, 0, pk, 20), 20);
  int second = 0;
  std::string err;
  std::thread app([&] {
    EXPECT_EQ(api->free_packets(h, pk, 20), 0);
    second = api->free_buff(pk[5].handle);
    err = api->last_error(nullptr);
  });
  app.join();
  ASSERT_EQ(api->stop(h), 0);
  EXPECT_EQ(second, -1);
  EXPECT_HAS(err, "already free");
  EXPECT_EQ(audit_counts().double_frees, 0u);
  EXPECT_TRUE(p.accounting().balanced());
  api->destroy(h);
}

}  // namespace
}  // namespace rawpipe
