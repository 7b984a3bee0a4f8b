// MANA data path cost per packet, one core, on the device model.
//
//   BM_ManaRx/coalesce   rx_burst(32) draining a receive queue the model has prefilled with 4096
//                        frames (CQEs of `coalesce` packets), including the refill (pool alloc,
//                        WQE writes, one RQ doorbell per burst) and the consumer's free of each
//                        burst. Only the drain is timed; the model's DMA work is not.
//                        Doorbells are HwDoorbell stores (with their sfences) into a plain page;
//                        the last value goes to the model after the timer stops.
//   BM_ManaTx            tx_burst(32): reaping the previous burst's CQE (which frees 32 buffers),
//                        32 WQEs with CQE suppression and one SQ doorbell (HwDoorbell into a plain
//                        page). The model parses the WQEs after the timer stops, as a NIC would in
//                        parallel.
//   BM_PoolBaseline      alloc_bulk(32) + mbuf_free_bulk(32) on the same pool: the buffer
//                        recycling every receive path pays, the floor for BM_ManaRx.
//
// Run: build-X/tests/bench/bench_mana_bench --benchmark_counters_tabular=true
// Figures are ns per packet of this thread's CPU time (counter ns_per_pkt); compare RX against
// BM_PoolBaseline in the same run.
#include <benchmark/benchmark.h>

#include <time.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "pipeline/buf/pool.hh"
#include "pipeline/wire/builder.hh"
#include "pmd/mana/model/device.hh"
#include "pmd/mana/setup.hh"

namespace rawpipe::mana {
namespace {

constexpr std::uint32_t kRing = 4096;
constexpr std::uint16_t kBurst = 32;

// Timing uses this thread's CPU time: build hosts are shared, and wall-clock intervals would count
// the time other processes held the core. One reading costs a system call, so the cost of an
// empty interval (calibrated once) is subtracted.
double thread_seconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
}

double empty_interval() {
  static const double cost = [] {
    std::vector<double> d(2001);
    for (double& x : d) {
      const double a = thread_seconds();
      x = thread_seconds() - a;
    }
    std::nth_element(d.begin(), d.begin() + 1000, d.end());
    return d[1000];
  }();
  return cost;
}

double interval(double from) { return std::max(0.0, thread_seconds() - from - empty_interval()); }

std::unique_ptr<Pool> bench_pool() {
  PoolConfig c;
  c.name = "mana-bench";
  c.count = 3 * kRing;
  c.cache_size = 256;
  auto p = Pool::create(c);
  if (!p) std::abort();
  auto pool = std::move(p).value();
  pool->attach_thread();
  return pool;
}

std::vector<std::uint8_t> frame(std::uint32_t i) {
  wire::FrameSpec s;
  s.ipv4.src = wire::ipv4(10, 0, static_cast<std::uint8_t>(i >> 8), static_cast<std::uint8_t>(i));
  s.ipv4.dst = wire::ipv4(10, 9, 9, 9);
  s.udp = {static_cast<std::uint16_t>(1000 + i % 1000), 9000, true};
  s.payload_len = 18;
  s.min_frame_len = 60;
  std::vector<std::uint8_t> out(128);
  out.resize(wire::write_frame(s, out.data(), out.size()));
  return out;
}

void BM_ManaRx(benchmark::State& state) {
  ModelOptions o;
  o.coalesce = static_cast<unsigned>(state.range(0));
  ManaModel model(o);
  auto pool = bench_pool();
  const std::uint32_t lkey = model.register_mr(pool->region(), pool->region_bytes());
  const std::uint32_t cq = model.create_cq(kRing);
  const std::uint32_t rq = model.create_rq(kRing, cq);
  QueueSetup s;
  model.describe_wq(rq, s.wq);
  model.describe_cq(cq, s.cq);
  // The timed code rings a plain page with the hardware barriers (HwDoorbell); the last RQ
  // doorbell value is handed to the model after the timer stops.
  alignas(4096) static std::uint8_t page[kDoorbellPageSize];
  s.db_page = page;
  s.lkey = lkey;
  s.pool = pool.get();
  RxQueue q;
  if (!setup_rx_queue(q, s)) std::abort();
  auto forward = [&] {
    const rdma::DoorbellSink* sink = model.doorbell_sink();
    std::uint64_t v;
    std::memcpy(&v, page + kDoorbellRq, 8);
    sink->mmio64(sink->ctx, model.db_page(), kDoorbellRq, v);
  };
  rx_refill<rdma::HwDoorbell>(q);
  forward();

  std::vector<std::vector<std::uint8_t>> frames;
  for (std::uint32_t i = 0; i < 64; ++i) frames.push_back(frame(i));
  std::vector<std::span<const std::uint8_t>> wire_frames;
  for (std::uint32_t i = 0; i < kRing; ++i) wire_frames.emplace_back(frames[i % 64]);

  std::uint64_t packets = 0;
  for (auto _ : state) {
    if (model.receive(rq, wire_frames) != kRing) state.SkipWithError("the model found no posted WQEs");
    Mbuf* pkts[kBurst];
    std::uint32_t got = 0;
    const double t0 = thread_seconds();
    while (got < kRing) {
      const auto n = rx_burst<rdma::HwDoorbell>(&q, pkts, kBurst);
      benchmark::DoNotOptimize(pkts[0]);
      mbuf_free_bulk(pkts, n);
      got += n;
    }
    state.SetIterationTime(interval(t0));
    packets += got;
    forward();
  }
  state.counters["ns_per_pkt"] =
      benchmark::Counter(static_cast<double>(packets), benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  state.counters["cqes_per_pkt"] = double(q.counters.cqes.load()) / double(q.counters.packets.load());
  state.SetItemsProcessed(static_cast<std::int64_t>(packets));
  rx_release_all(q);
  pool->detach_thread();
}
BENCHMARK(BM_ManaRx)->Arg(1)->Arg(4)->UseManualTime()->Unit(benchmark::kMicrosecond);

void BM_ManaTx(benchmark::State& state) {
  ManaModel model;
  auto pool = bench_pool();
  const std::uint32_t lkey = model.register_mr(pool->region(), pool->region_bytes());
  const std::uint32_t cq = model.create_cq(kRing);
  const std::uint32_t sq = model.create_sq(kRing, cq);
  QueueSetup s;
  model.describe_wq(sq, s.wq);
  model.describe_cq(cq, s.cq);
  s.lkey = lkey;
  s.mr_begin = pool->region();
  s.mr_end = pool->region() + pool->region_bytes();
  s.vp_offset = model.vp_offset();
  alignas(4096) static std::uint8_t page[kDoorbellPageSize];
  s.db_page = page;
  TxQueue q;
  if (!setup_tx_queue(q, s)) std::abort();
  const auto f = frame(1);

  std::uint64_t packets = 0;
  for (auto _ : state) {
    Mbuf* pkts[kBurst];
    if (!pool->alloc_bulk(pkts, kBurst)) state.SkipWithError("pool empty");
    for (Mbuf* m : pkts) {
      std::memcpy(m->data(), f.data(), f.size());
      m->data_len = static_cast<std::uint32_t>(f.size());
    }
    const double t0 = thread_seconds();
    const auto sent = tx_burst<rdma::HwDoorbell>(&q, pkts, kBurst);
    state.SetIterationTime(interval(t0));
    if (sent != kBurst) state.SkipWithError("the send queue did not take the burst");
    packets += sent;
    // The NIC's side, untimed: the model reads the WQEs the doorbell announced.
    const rdma::DoorbellSink* sink = model.doorbell_sink();
    std::uint64_t v;
    std::memcpy(&v, page + kDoorbellSq, 8);
    sink->mmio64(sink->ctx, model.db_page(), kDoorbellSq, v);
  }
  state.counters["ns_per_pkt"] =
      benchmark::Counter(static_cast<double>(packets), benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  state.counters["cqes_per_pkt"] = double(q.counters.cqes.load()) / double(packets ? packets : 1);
  state.SetItemsProcessed(static_cast<std::int64_t>(packets));
  tx_reap(q);
  tx_release_all(q);
  pool->detach_thread();
}
BENCHMARK(BM_ManaTx)->UseManualTime()->Unit(benchmark::kNanosecond);

void BM_PoolBaseline(benchmark::State& state) {
  auto pool = bench_pool();
  std::uint64_t packets = 0;
  for (auto _ : state) {
    const double t0 = thread_seconds();
    for (int r = 0; r < 128; ++r) {
      Mbuf* pkts[kBurst];
      if (!pool->alloc_bulk(pkts, kBurst)) state.SkipWithError("pool empty");
      benchmark::DoNotOptimize(pkts[0]);
      mbuf_free_bulk(pkts, kBurst);
    }
    state.SetIterationTime(interval(t0));
    packets += 128 * kBurst;
  }
  // Items are packets, so a reader (and tools/bench/run) gets time per packet, not per iteration of 128 bursts.
  state.SetItemsProcessed(static_cast<std::int64_t>(packets));
  state.counters["ns_per_pkt"] =
      benchmark::Counter(static_cast<double>(packets), benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  pool->detach_thread();
}
BENCHMARK(BM_PoolBaseline)->UseManualTime();

}  // namespace
}  // namespace rawpipe::mana

BENCHMARK_MAIN();
