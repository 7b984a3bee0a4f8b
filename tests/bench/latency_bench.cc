// What sampled stage timing costs: one lcore's data path (replayed 64-byte IPv4/UDP frames over
// 1024 flows -> rx -> parse -> classify -> filter stage -> sink) with stage timing off and with one
// queue poll in N timed. Compare the time per packet ("time_per_pkt", s; 10n = 10 ns) of sample:0 against the others.
//
//   ninja -C build tests/bench/bench_latency_bench && build/tests/bench/bench_latency_bench
//
// BM_HistogramRecord: one record() into a warm histogram (the per-stage cost inside a timed poll).
#include <benchmark/benchmark.h>

#include <vector>

#include "pipeline/classify/classifier.hh"
#include "pipeline/dispatch/dispatch.hh"
#include "pipeline/lcore/lcore.hh"
#include "pipeline/stats/histogram.hh"
#include "tests/support/test_port.hh"
#include "pipeline/port/driver.hh"
#include "pipeline/buf/pool.hh"

namespace rawpipe {
namespace {

constexpr int kFlows = 1024;

void BM_LcoreWithSampling(benchmark::State& state) {
  PoolConfig pc;
  pc.name = "latency_bench";
  pc.count = 8192;
  auto pool = std::move(Pool::create(pc)).value();
  pool->attach_thread();

  testing::TestPortConfig tc;
  tc.repeat = 0;
  tc.record_tx = false;
  std::vector<testing::Frame> frames;
  std::vector<TableRule> rules;
  for (int i = 0; i < kFlows; ++i) {
    std::string dst = fmt::format("10.1.{}.{}", i / 256, i % 256);
    frames.push_back(testing::udp_frame("192.168.0.1", static_cast<std::uint16_t>(1000 + i), dst, 5000, -1, 18));
    rules.push_back({SteeringRule{parse_match_rule(fmt::format("udp dst {}:5000", dst)).value(), 0, 0}, 0});
  }
  tc.rx_frames = {frames};
  PortEnv env;
  env.name = "replay";
  env.pool = pool.get();
  testing::TestPort port(env, tc);

  auto classifier = std::move(Classifier::create(1, rules, {})).value();
  LcorePlan lp;
  lp.burst = 32;
  Lcore lcore(lp, 0, 1, 1);
  std::vector<Dispatcher::Route> routes{{EndpointAction::kSink, 0, nullptr}};
  lcore.bind({{port.rx_queue(0), 0, 0}},
             std::make_unique<Dispatcher>(std::move(routes), std::vector<TxQueueHandle>{TxQueueHandle{}},
                                          &lcore.counters_mut()),
             classifier.get(), {pool.get()});
  lcore.enable_latency(static_cast<std::uint32_t>(state.range(0)));
  classifier->reader_online(0);
  for (auto _ : state) lcore.poll_once();
  classifier->reader_offline(0);
  const LcoreCounters& c = lcore.counters();
  if (c.delivered.load() != c.rx_packets.load()) state.SkipWithError("packets were dropped");
  // (Google Benchmark's first, one-iteration run may poll fewer times than one sampling period.)
  if (state.range(0) && state.iterations() >= 4 * state.range(0) &&
      (!lcore.latency() || lcore.latency()->stage[0].snapshot().count == 0))
    state.SkipWithError("nothing was timed");
  state.SetItemsProcessed(static_cast<std::int64_t>(c.rx_packets.load()));
  state.counters["time_per_pkt"] = benchmark::Counter(double(c.rx_packets.load()), benchmark::Counter::kIsRate |
                                                                                     benchmark::Counter::kInvert);
  pool->detach_thread();
}
// Arg: one poll in N timed; 0 = off.
BENCHMARK(BM_LcoreWithSampling)->Arg(0)->Arg(64)->Arg(16)->Arg(1)->Repetitions(5)->ReportAggregatesOnly(true);

void BM_HistogramRecord(benchmark::State& state) {
  static LatencyHistogram h;
  std::uint64_t v = 100;
  for (auto _ : state) {
    h.record(v);
    v = (v * 13 + 7) & 0xfff;
  }
  benchmark::DoNotOptimize(h.snapshot().count);
}
BENCHMARK(BM_HistogramRecord);

}  // namespace
}  // namespace rawpipe

BENCHMARK_MAIN();
