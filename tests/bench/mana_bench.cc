// MANA data path cost per packet, one core, on the device model.
//
//   BM_ManaRx/coalesce   rx_burst(32) draining a receive queue the model has prefilled with 4096
//                        frames (CQEs of `coalesce` packets), including the refill (pool alloc,
//                        WQE writes, one RQ doorbell per burst) and the consumer's free of each
//                        burst. Only the drain is timed; the model's DMA work is not.
//   BM_ManaTx            tx_burst(32): reaping the previous burst's CQE (which frees 32 buffers),
//                        32 WQEs with CQE suppression and one SQ doorbell. The model parses the
//                        WQEs after the timer stops (the doorbell is deferred), as a NIC would in
//                        parallel.
//   BM_PoolBaseline      alloc_bulk(32) + mbuf_free_bulk(32) on the same pool: the buffer
//                        recycling every receive path pays, the floor for BM_ManaRx.
//
// Run: build-X/tests/bench/bench_mana_bench --benchmark_counters_tabular=true
// Figures are ns per packet (counter ns_per_pkt); compare RX against BM_PoolBaseline in the same run.
#include <benchmark/benchmark.h>

#include <chrono>
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
  s.db_page = model.db_page();
  s.db_sink = model.doorbell_sink();
  s.lkey = lkey;
  s.pool = pool.get();
  RxQueue q;
  if (!setup_rx_queue(q, s)) std::abort();
  rx_refill<rdma::ModelDoorbell>(q);

  std::vector<std::vector<std::uint8_t>> frames;
  for (std::uint32_t i = 0; i < 64; ++i) frames.push_back(frame(i));
  std::vector<std::span<const std::uint8_t>> wire_frames;
  for (std::uint32_t i = 0; i < kRing; ++i) wire_frames.emplace_back(frames[i % 64]);

  std::uint64_t packets = 0;
  for (auto _ : state) {
    if (model.receive(rq, wire_frames) != kRing) state.SkipWithError("the model found no posted WQEs");
    Mbuf* pkts[kBurst];
    std::uint32_t got = 0;
    const auto t0 = std::chrono::steady_clock::now();
    while (got < kRing) {
      const auto n = rx_burst<rdma::ModelDoorbell>(&q, pkts, kBurst);
      benchmark::DoNotOptimize(pkts[0]);
      mbuf_free_bulk(pkts, n);
      got += n;
    }
    const auto t1 = std::chrono::steady_clock::now();
    state.SetIterationTime(std::chrono::duration<double>(t1 - t0).count());
    packets += got;
  }
  state.counters["ns_per_pkt"] =
      benchmark::Counter(static_cast<double>(packets), benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  state.counters["cqes_per_pkt"] = double(q.counters.cqes.load()) / double(q.counters.packets.load());
  state.SetItemsProcessed(static_cast<std::int64_t>(packets));
  rx_release_all(q);
  pool->detach_thread();
}
BENCHMARK(BM_ManaRx)->Arg(1)->Arg(4)->UseManualTime()->Unit(benchmark::kMicrosecond);

// Holds the SQ doorbell until the timer is stopped, then hands it to the model.
struct DeferredDoorbell {
  const rdma::DoorbellSink* model = nullptr;
  void* base = nullptr;
  std::size_t offset = 0;
  std::uint64_t value = 0;
  bool pending = false;
  rdma::DoorbellSink sink{};

  explicit DeferredDoorbell(const rdma::DoorbellSink* m) : model(m) {
    sink.ctx = this;
    sink.mmio64 = [](void* ctx, void* b, std::size_t off, std::uint64_t v) noexcept {
      auto* self = static_cast<DeferredDoorbell*>(ctx);
      self->base = b;
      self->offset = off;
      self->value = v;
      self->pending = true;
    };
  }
  void flush() {
    if (pending) model->mmio64(model->ctx, base, offset, value);
    pending = false;
  }
};

void BM_ManaTx(benchmark::State& state) {
  ManaModel model;
  auto pool = bench_pool();
  const std::uint32_t lkey = model.register_mr(pool->region(), pool->region_bytes());
  const std::uint32_t cq = model.create_cq(kRing);
  const std::uint32_t sq = model.create_sq(kRing, cq);
  QueueSetup s;
  model.describe_wq(sq, s.wq);
  model.describe_cq(cq, s.cq);
  s.db_page = model.db_page();
  s.lkey = lkey;
  s.mr_begin = pool->region();
  s.mr_end = pool->region() + pool->region_bytes();
  s.vp_offset = model.vp_offset();
  DeferredDoorbell deferred(model.doorbell_sink());
  s.db_sink = &deferred.sink;
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
    const auto t0 = std::chrono::steady_clock::now();
    const auto sent = tx_burst<rdma::ModelDoorbell>(&q, pkts, kBurst);
    const auto t1 = std::chrono::steady_clock::now();
    state.SetIterationTime(std::chrono::duration<double>(t1 - t0).count());
    if (sent != kBurst) state.SkipWithError("the send queue did not take the burst");
    packets += sent;
    deferred.flush();
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
    Mbuf* pkts[kBurst];
    if (!pool->alloc_bulk(pkts, kBurst)) state.SkipWithError("pool empty");
    benchmark::DoNotOptimize(pkts[0]);
    mbuf_free_bulk(pkts, kBurst);
    packets += kBurst;
  }
  state.counters["ns_per_pkt"] =
      benchmark::Counter(static_cast<double>(packets), benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  pool->detach_thread();
}
BENCHMARK(BM_PoolBaseline);

}  // namespace
}  // namespace rawpipe::mana

BENCHMARK_MAIN();
