// The latency histogram's bucket math and quantiles, and sampled latency measured against known
// delays: filter callbacks that spin a known time per packet must show at least that time in their
// own histogram and in the filter stage's (lower bounds only: a loaded machine only adds time).
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include <nlohmann/json.hpp>

#include "rawpipe/config.hh"
#include "rawpipe/pipeline.hh"
#include "pipeline/filter/filter.hh"
#include "pipeline/ops/publisher.hh"
#include "pipeline/stats/histogram.hh"
#include "pipeline/stats/stage_latency.hh"
#include "pipeline/stats/tsc.hh"
#include "pipeline/port/registry.hh"

namespace rawpipe {
namespace {

using L = HistogramLayout;

TEST(Histogram, BucketsTileTheRangeWithBoundedWidth) {
  for (unsigned b = 0; b + 1 < L::kBuckets; ++b) {
    ASSERT_EQ(L::upper(b) + 1, L::lower(b + 1)) << "bucket " << b;
    ASSERT_EQ(L::bucket_of(L::lower(b)), b);
    ASSERT_EQ(L::bucket_of(L::upper(b)), b);
    // Relative width at most 1/16 above the exact range.
    if (b >= L::kSub) {
      ASSERT_LE((L::upper(b) - L::lower(b) + 1) * L::kSub, L::lower(b)) << "bucket " << b;
    }
  }
  EXPECT_EQ(L::bucket_of(0), 0u);
  EXPECT_EQ(L::bucket_of(std::uint64_t{1} << 50), L::kBuckets - 1);
  for (std::uint64_t v : {17ull, 100ull, 1000ull, 123456ull, 987654321ull}) {
    const unsigned b = L::bucket_of(v);
    EXPECT_LE(L::lower(b), v);
    EXPECT_GE(L::upper(b), v);
  }
}

TEST(Histogram, QuantilesAreUpperBoundsWithinOneSixteenth) {
  LatencyHistogram h;
  for (std::uint64_t v = 1; v <= 10000; ++v) h.record(v);
  const HistogramSnapshot s = h.snapshot();
  EXPECT_EQ(s.count, 10000u);
  EXPECT_EQ(s.sum, 10000u * 10001u / 2);
  EXPECT_EQ(s.max, 10000u);
  const std::pair<double, std::uint64_t> exact[] = {{0.5, 5000}, {0.99, 9900}, {0.999, 9990}, {1.0, 10000}};
  for (auto [q, v] : exact) {
    EXPECT_GE(s.quantile(q), v) << q;
    EXPECT_LE(s.quantile(q), v + v / 16) << q;
  }
  EXPECT_EQ(s.quantile(1.0), 10000u);  // capped at max
  EXPECT_EQ(HistogramSnapshot{}.quantile(0.5), 0u);
}

TEST(Histogram, SnapshotsMerge) {
  LatencyHistogram a, b;
  for (int i = 0; i < 900; ++i) a.record(100);
  for (int i = 0; i < 100; ++i) b.record(100000);
  HistogramSnapshot m = a.snapshot();
  m.merge(b.snapshot());
  EXPECT_EQ(m.count, 1000u);
  EXPECT_EQ(m.max, 100000u);
  EXPECT_LE(m.quantile(0.5), 100u + 100u / 16);
  EXPECT_GE(m.quantile(0.95), 100000u);
}

TEST(Histogram, SamplingCountdownTimesOnePollInN) {
  StageLatency lat(4);
  int due = 0;
  for (int i = 0; i < 400; ++i) due += lat.due();
  EXPECT_EQ(due, 100);
}

TEST(Tsc, CalibrationAgreesWithTheMonotonicClock) {
  const double k = tsc_ns_per_cycle();
  ASSERT_GT(k, 0.0);
  const auto t0 = std::chrono::steady_clock::now();
  const std::uint64_t c0 = tsc_now();
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  const std::uint64_t c1 = tsc_now();
  const double ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
  // Both clocks measured the same sleep (the steady clock's bracket is slightly wider).
  EXPECT_NEAR(tsc_to_ns(c1 - c0), ns, ns * 0.05);
}

void spin_ns(std::uint64_t ns) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::nanoseconds(ns);
  while (std::chrono::steady_clock::now() < end) {
  }
}

constexpr std::uint64_t kSpinNs = 20000;
int spin_recv(const rawpipe_packet*, void*) {
  spin_ns(kSpinNs);
  return RAWPIPE_RECV;
}
// Every third packet dropped, the rest received; each packet costs kSpinNs / 4.
void spin_burst(const rawpipe_packet*, int* verdicts, unsigned n, void* ctx) {
  auto* calls = static_cast<std::uint64_t*>(ctx);
  for (unsigned i = 0; i < n; ++i) {
    spin_ns(kSpinNs / 4);
    verdicts[i] = (*calls)++ % 3 == 0 ? RAWPIPE_DROP : RAWPIPE_RECV;
  }
}

const char* kConfig = R"(
[metrics]
latency_sample = 1

[[pools]]
name = "rx"
count = 2048

[[ports]]
name = "gen"
pmd = "synth"
packets = 3000
ipv4_dst = "239.1.1.1"
dst_addrs = 2

[[endpoints]]
name = "a"
action = "sink"
match = ["udp dst 239.1.1.1:5000"]

[[endpoints]]
name = "b"
action = "sink"
match = ["udp dst 239.1.1.2:5000"]

[[lcores]]
rx = ["gen:0"]
burst = 8
)";

TEST(LatencyHistograms, KnownDelaysShowAsLowerBounds) {
  LoadOptions o;
  o.find_pmd = &find_pmd;
  o.cpu_count = 2;
  auto loaded = load_config_string(kConfig, "latency.toml", o);
  ASSERT_TRUE(loaded) << loaded.message();
  EXPECT_EQ(loaded->plan.metrics.latency_sample, 1u);
  auto created = Pipeline::create(loaded->plan);
  ASSERT_TRUE(created) << created.message();
  Pipeline& pipe = *created.value();
  std::uint64_t calls = 0;
  FilterFn slow{&spin_recv, nullptr, nullptr, "spin_recv"};
  ASSERT_TRUE(pipe.filters().set_endpoint_filter(0, slow));
  ASSERT_TRUE(pipe.filters().set_endpoint_filter(1, {nullptr, &spin_burst, &calls}));
  ASSERT_TRUE(pipe.start());
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (pipe.accounting().rx_packets < 3000 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  ASSERT_TRUE(pipe.stop());
  const Accounting acc = pipe.accounting();
  ASSERT_EQ(acc.rx_packets, 3000u);
  ASSERT_TRUE(acc.balanced());

  // Counters: every packet seen by its endpoint's filter, verdicts as the callbacks returned.
  const std::vector<FilterStats> fs = pipe.filters().stats();
  ASSERT_EQ(fs.size(), 2u);
  EXPECT_EQ(fs[0].name, "spin_recv");
  EXPECT_FALSE(fs[1].name.empty());  // symbol or address of spin_burst
  EXPECT_EQ(fs[0].seen + fs[1].seen, 3000u);
  EXPECT_EQ(fs[0].seen, fs[0].recv);
  EXPECT_EQ(fs[1].seen, calls);
  EXPECT_EQ(fs[1].drop, (calls + 2) / 3);
  EXPECT_EQ(fs[1].recv + fs[1].drop, fs[1].seen);
  EXPECT_EQ(fs[1].drop, acc.drops[static_cast<std::size_t>(DropReason::kFilterDrop)]);
  EXPECT_TRUE(fs[0].attached && fs[1].attached);

  // Per-callback latency (every poll timed): at least the spin, in ns.
  const double k = tsc_ns_per_cycle();
  auto ns = [k](std::uint64_t cycles) { return double(cycles) * k; };
  EXPECT_EQ(fs[0].latency.count, fs[0].seen);  // per-packet callback: one sample per call
  EXPECT_GE(ns(fs[0].latency.quantile(0.5)), 0.95 * kSpinNs);
  EXPECT_GE(ns(fs[0].latency.quantile(0.01)), 0.95 * kSpinNs);
  EXPECT_GT(fs[1].latency.count, 0u);
  EXPECT_GE(ns(fs[1].latency.quantile(0.5)), 0.95 * kSpinNs / 4);

  // The filter stage of each timed burst costs at least the cheaper callback per packet, and
  // the whole burst at least that plus the other stages.
  const StageLatency* lat = pipe.lcore_latency(0);
  ASSERT_NE(lat, nullptr);
  const HistogramSnapshot filter = lat->stage[static_cast<std::size_t>(Stage::kFilter)].snapshot();
  const HistogramSnapshot burst = lat->stage[static_cast<std::size_t>(Stage::kBurst)].snapshot();
  ASSERT_GT(filter.count, 0u);
  EXPECT_EQ(filter.count, burst.count);
  EXPECT_GE(ns(filter.quantile(0.01)), 0.95 * kSpinNs / 4);
  EXPECT_GE(burst.quantile(0.5), filter.quantile(0.5) - filter.quantile(0.5) / 16);

  // The stats document carries the same figures in ns.
  const nlohmann::json doc = ops::stats_document(pipe, "latency-test");
  ASSERT_EQ(doc["filters"].size(), 2u);
  EXPECT_EQ(doc["filters"][0]["name"], "spin_recv");
  EXPECT_EQ(doc["filters"][0]["endpoint"], "a");
  EXPECT_EQ(doc["filters"][0]["seen"].get<std::uint64_t>(), fs[0].seen);
  EXPECT_GE(doc["filters"][0]["latency"]["p50_ns"].get<double>(), 0.95 * kSpinNs);
  EXPECT_EQ(doc["latency"]["sample_every"], 1);
  EXPECT_GE(doc["latency"]["stages"]["filter"]["p50_ns"].get<double>(), 0.95 * kSpinNs / 4);
  EXPECT_EQ(doc["latency"]["stages"]["burst"]["samples"].get<std::uint64_t>(), burst.count);
}

TEST(LatencyHistograms, OffMeansNoTimingAndNoBlock) {
  LoadOptions o;
  o.find_pmd = &find_pmd;
  o.cpu_count = 2;
  std::string text = kConfig;
  text.replace(text.find("latency_sample = 1"), 18, "latency_sample = 0");
  auto loaded = load_config_string(text, "latency.toml", o);
  ASSERT_TRUE(loaded) << loaded.message();
  auto created = Pipeline::create(loaded->plan);
  ASSERT_TRUE(created) << created.message();
  EXPECT_EQ(created.value()->lcore_latency(0), nullptr);
  const nlohmann::json doc = ops::stats_document(*created.value(), "latency-off");
  EXPECT_EQ(doc["latency"]["sample_every"], 0);
  EXPECT_TRUE(doc["latency"]["lcores"].empty());
}

}  // namespace
}  // namespace rawpipe
