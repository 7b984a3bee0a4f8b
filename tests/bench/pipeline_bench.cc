// One lcore's whole data path on one core: replayed 64-byte IPv4/UDP frames over 1024 flows ->
// rx (one 64-byte copy per packet, like a NIC's DMA) -> parse -> classify -> dispatch to a ring
// endpoint whose consumer (same thread) dequeues and frees. Reports Mpps.
//
//   ninja -C build tests/bench/bench_pipeline_bench && build/tests/bench/bench_pipeline_bench
//
// BM_PipelineRing: the endpoint is a ring drained after every poll (the configuration).
// BM_PipelineSink: the endpoint is a sink (count and free on the lcore): no ring hop.
#include <benchmark/benchmark.h>

#include <vector>

#include "pipeline/classify/classifier.hh"
#include "pipeline/dispatch/dispatch.hh"
#include "pipeline/lcore/lcore.hh"
#include "tests/support/test_port.hh"
#include "pipeline/port/driver.hh"
#include "pipeline/buf/pool.hh"

namespace rawpipe {
namespace {

constexpr int kFlows = 1024;

void run(benchmark::State& state, EndpointAction action) {
  PoolConfig pc;
  pc.name = "pipeline_bench";
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
  if (frames[0].size() != 60) state.SkipWithError("frames are not 64 bytes on the wire");
  tc.rx_frames = {frames};
  PortEnv env;
  env.name = "replay";
  env.pool = pool.get();
  testing::TestPort port(env, tc);

  auto classifier = std::move(Classifier::create(1, rules, {})).value();
  auto ring = std::move(EndpointRing::create(1024)).value();
  LcorePlan lp;
  lp.burst = static_cast<std::uint16_t>(state.range(0));
  Lcore lcore(lp, 0, 1, 1);
  std::vector<Dispatcher::Route> routes{{action, 0, action == EndpointAction::kRing ? ring.get() : nullptr}};
  lcore.bind({{port.rx_queue(0), 0, 0}},
             std::make_unique<Dispatcher>(std::move(routes), std::vector<TxQueueHandle>{TxQueueHandle{}},
                                          &lcore.counters_mut()),
             classifier.get(), {pool.get()});
  classifier->reader_online(0);

  Mbuf* out[kMaxBurst];
  for (auto _ : state) {
    lcore.poll_once();
    unsigned n = ring->dequeue_burst(out, kMaxBurst);
    mbuf_free_bulk(out, n);
  }
  classifier->reader_offline(0);
  const LcoreCounters& c = lcore.counters();
  std::uint64_t drops = 0;
  for (const Counter& d : c.drops) drops += d.load();
  if (drops != 0 || c.delivered.load() != c.rx_packets.load()) state.SkipWithError("packets were dropped");
  state.SetItemsProcessed(static_cast<std::int64_t>(c.rx_packets.load()));
  state.counters["Mpps"] = benchmark::Counter(static_cast<double>(c.rx_packets.load()) / 1e6, benchmark::Counter::kIsRate);
  while (unsigned n = ring->dequeue_burst(out, kMaxBurst)) mbuf_free_bulk(out, n);
  pool->detach_thread();
}

void BM_PipelineRing(benchmark::State& state) { run(state, EndpointAction::kRing); }
void BM_PipelineSink(benchmark::State& state) { run(state, EndpointAction::kSink); }

BENCHMARK(BM_PipelineRing)->Arg(32)->Arg(64)->Arg(256);
BENCHMARK(BM_PipelineSink)->Arg(32);

}  // namespace
}  // namespace rawpipe

BENCHMARK_MAIN();
