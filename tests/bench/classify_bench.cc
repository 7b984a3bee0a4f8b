// Classify cost per packet: 1024 exact 3-tuple flows plus 16 wildcard rules, bursts 8..256.
//
//   ninja -C build tests/bench/bench_classify_bench && build/tests/bench/bench_classify_bench
//
// BM_ClassifyExact: every packet hits an exact flow (one hash lookup).
// BM_ClassifyWildcard: every packet misses the hash and matches the last-but-one wildcard (the
// worst case for a small wildcard list).
// BM_ClassifyServer/0 and /1: a server's table, one service bound as "udp dst *:5000" (0) or as
// "udp dst 198.18.0.1:5000" (1), 1024 sources sending to it (the per-packet memo path).
#include <benchmark/benchmark.h>

#include <vector>

#include "pipeline/classify/table.hh"
#include "pipeline/parse/parse.hh"
#include "tests/support/test_port.hh"
#include "pipeline/port/driver.hh"
#include "pipeline/buf/pool.hh"

namespace rawpipe {
namespace {

constexpr int kFlows = 1024;
constexpr int kWildcards = 16;

std::unique_ptr<ClassifyTable> make_table() {
  std::vector<TableRule> rules;
  std::uint32_t id = 1;
  for (int i = 0; i < kFlows; ++i) {
    auto m = parse_match_rule(fmt::format("udp dst 10.1.{}.{}:{}", i / 256, i % 256, 5000 + i % 7)).value();
    rules.push_back({SteeringRule{m, static_cast<std::uint16_t>(i % 64), 0}, id++});
  }
  for (int w = 0; w < kWildcards; ++w) {
    auto m = parse_match_rule(fmt::format("udp dst 172.{}.0.0/16", 16 + w)).value();
    rules.push_back({SteeringRule{m, 100, 0}, id++});
  }
  return std::move(ClassifyTable::build(rules, {})).value();
}

struct Packets {
  std::unique_ptr<Pool> pool;
  std::vector<Mbuf*> pkts;
  explicit Packets(bool wildcard) {
    PoolConfig pc;
    pc.name = "classify_bench";
    pc.count = 4096;
    pool = std::move(Pool::create(pc)).value();
    for (int i = 0; i < 2048; ++i) {
      int f = (i * 131) % kFlows;
      std::string dst = wildcard ? fmt::format("172.{}.{}.{}", 16 + kWildcards - 2, f / 256, f % 256)
                                 : fmt::format("10.1.{}.{}", f / 256, f % 256);
      pkts.push_back(testing::load_frame(*pool, testing::udp_frame("192.168.0.1", 1234, dst, static_cast<std::uint16_t>(5000 + f % 7))));
    }
    parse_burst(pkts.data(), static_cast<unsigned>(pkts.size()));
  }
  ~Packets() { mbuf_free_bulk(pkts.data(), static_cast<unsigned>(pkts.size())); }
};

void run(benchmark::State& state, bool wildcard) {
  auto table = make_table();
  Packets p(wildcard);
  const unsigned burst = static_cast<unsigned>(state.range(0));
  std::size_t off = 0;
  for (auto _ : state) {
    table->classify_burst(&p.pkts[off], burst);
    benchmark::ClobberMemory();
    off += burst;
    if (off + burst > p.pkts.size()) off = 0;
  }
  if (p.pkts[0]->endpoint == Mbuf::kNoEndpoint) state.SkipWithError("packets did not match");
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()) * burst);
  state.counters["ns_per_pkt"] = benchmark::Counter(static_cast<double>(state.iterations()) * burst,
                                                    benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

// One service, 1024 clients: what configs/bench-synth.toml's lcore classifies.
void BM_ClassifyServer(benchmark::State& state) {
  const char* rule = state.range(0) == 0 ? "udp dst *:5000" : "udp dst 198.18.0.1:5000";
  auto table = std::move(ClassifyTable::build({{SteeringRule{parse_match_rule(rule).value(), 1, 0}, 1}}, {})).value();
  PoolConfig pc;
  pc.name = "classify_bench";
  pc.count = 2048;
  auto pool = std::move(Pool::create(pc)).value();
  std::vector<Mbuf*> pkts;
  for (int i = 0; i < kFlows; ++i)
    pkts.push_back(testing::load_frame(*pool, testing::udp_frame("10.0.0.1", static_cast<std::uint16_t>(1024 + i),
                                                                 "198.18.0.1", 5000)));
  parse_burst(pkts.data(), static_cast<unsigned>(pkts.size()));
  const unsigned burst = 32;
  std::size_t off = 0;
  for (auto _ : state) {
    table->classify_burst(&pkts[off], burst);
    benchmark::ClobberMemory();
    off += burst;
    if (off + burst > pkts.size()) off = 0;
  }
  if (pkts[0]->endpoint != 1) state.SkipWithError("packets did not match");
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()) * burst);
  state.counters["ns_per_pkt"] = benchmark::Counter(static_cast<double>(state.iterations()) * burst,
                                                    benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  mbuf_free_bulk(pkts.data(), static_cast<unsigned>(pkts.size()));
}

void BM_ClassifyExact(benchmark::State& state) { run(state, false); }
void BM_ClassifyWildcard(benchmark::State& state) { run(state, true); }

BENCHMARK(BM_ClassifyExact)->Arg(8)->Arg(16)->Arg(32)->Arg(64)->Arg(128)->Arg(256);
BENCHMARK(BM_ClassifyWildcard)->Arg(8)->Arg(32)->Arg(256);
BENCHMARK(BM_ClassifyServer)->Arg(0)->Arg(1);

}  // namespace
}  // namespace rawpipe

BENCHMARK_MAIN();
