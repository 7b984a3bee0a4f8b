// mlx5 data-path cost per packet on one core, with the device model's own cost excluded.
//
// RX: the model fills the CQ (and the packet buffers) while timing is paused; the timed region
// is rx_burst (CQE polling, metadata, RQ refill, both doorbell records) plus freeing the buffers
// back to the pool, as a drop application does (DPDK's 43.5 Mpps / 23 ns per packet on one
// ConnectX-5 core is for this kind of drop loop). Plain CQEs, compressed sessions and a
// striding RQ (which copies each frame into a pool buffer).
// TX: tx_burst building WQEs, the SQ doorbell record and the UAR write with the hardware
// barriers (HwDoorbell, sfence around the register store) into a plain page standing in for the
// UAR; the model parses the WQEs and writes the completions while timing is paused.
//
//   build-*/tests/bench/bench_mlx5_bench --benchmark_counters_tabular=true
#include <benchmark/benchmark.h>

#include <cstring>
#include <memory>
#include <vector>

#include "pipeline/buf/pool.hh"
#include "pipeline/wire/builder.hh"
#include "pmd/mlx5/flow.hh"
#include "pmd/mlx5/hw.hh"
#include "pmd/mlx5/model/device.hh"
#include "pmd/mlx5/rx.hh"
#include "pmd/mlx5/tx.hh"

namespace rawpipe::mlx5 {
namespace {

constexpr std::array<std::uint8_t, 6> kMac = {0x02, 0, 0, 0, 0, 0x02};

std::vector<std::uint8_t> frame64(std::uint16_t sport) {
  wire::FrameSpec s;
  s.eth.dst = kMac;
  s.eth.src = {0x02, 0, 0, 0, 0, 0x01};
  s.ipv4.src = wire::ipv4(10, 0, 0, 1);
  s.ipv4.dst = wire::ipv4(10, 0, 0, 2);
  s.udp = {sport, 5000};
  s.payload_len = 18;
  s.min_frame_len = 60;
  std::vector<std::uint8_t> f(128);
  f.resize(wire::write_frame(s, f.data(), f.size()));
  return f;
}

std::unique_ptr<Pool> make_pool(std::uint32_t count) {
  PoolConfig c;
  c.name = "bench";
  c.count = count;
  c.cache_size = 256;
  auto p = Pool::create(c);
  if (!p) std::abort();
  return std::move(p).value();
}

enum class RxKind { kPlain, kCompressed, kStriding };

void BM_RxPollRefill(benchmark::State& state) {
  const auto kind = static_cast<RxKind>(state.range(0));
  const std::uint16_t burst = static_cast<std::uint16_t>(state.range(1));
  constexpr std::uint32_t kRing = 512;
  auto pool = make_pool(8192);
  pool->attach_thread();
  model::Device dev;
  auto q = std::make_unique<RxQueue>();
  model::RqOptions o;
  o.wqe_cnt = kind == RxKind::kStriding ? 4 : kRing;
  o.cqe_cnt = kind == RxKind::kStriding ? 4 * 128 : kRing;
  o.compression = kind == RxKind::kCompressed;
  o.striding = kind == RxKind::kStriding;
  o.log_stride_size = 6;
  o.log_strides = 7;  // 128 strides of 64 B per WQE
  dev.create_rq(o, q->rq, q->cq);
  std::vector<Mbuf*> elts(o.wqe_cnt);
  std::unique_ptr<std::uint8_t[]> mprq;
  q->pool = pool.get();
  q->data_room = pool->data_room();
  q->lkey = dev.reg_mr(pool->region(), pool->region_bytes());
  if (o.striding) {
    const std::size_t bytes = std::size_t(o.wqe_cnt) << (o.log_strides + o.log_stride_size);
    mprq.reset(new std::uint8_t[bytes]);
    q->mprq_buf = mprq.get();
    q->lkey = dev.reg_mr(mprq.get(), bytes);
    q->stride_size = 1u << o.log_stride_size;
    q->strides_per_wqe = 1u << o.log_strides;
  } else {
    q->elts = elts.data();
  }
  if (!rx_setup(*q, false).is_ok()) std::abort();
  FlowTarget t;
  t.port_mac = kMac;
  auto all = build_catch_all_attr(t);
  dev.create_flow(0, flow_attr(all));
  // The hardware instantiation: record stores with the NIC's barriers, no model callbacks.
  const RxBurstFn rx = rx_burst_function(o.striding ? RxMode::kStriding : RxMode::kCyclic, o.compression, false);
  std::vector<std::vector<std::uint8_t>> frames;
  for (std::uint16_t i = 0; i < 64; ++i) frames.push_back(frame64(static_cast<std::uint16_t>(1000 + (o.compression ? 0 : i))));
  const std::uint32_t per_fill = kind == RxKind::kStriding ? 4 * 128 - 8 : kRing;
  std::uint64_t packets = 0;
  Mbuf* pkts[kMaxBurst];
  for (auto _ : state) {
    state.PauseTiming();
    std::uint32_t filled = 0;
    while (filled < per_fill) {
      const std::size_t n = dev.receive_burst(std::span(frames).subspan(0, std::min<std::size_t>(64, per_fill - filled)), true);
      if (n == 0) break;
      filled += static_cast<std::uint32_t>(n);
    }
    state.ResumeTiming();
    std::uint32_t got = 0;
    while (got < filled) {
      const std::uint16_t n = rx(q.get(), pkts, burst);
      mbuf_free_bulk(pkts, n);
      got += n;
    }
    packets += got;
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(packets));
  state.counters["ns_per_pkt"] = benchmark::Counter(static_cast<double>(packets), benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  rx_release(*q);
  pool->detach_thread();
}
BENCHMARK(BM_RxPollRefill)
    ->ArgNames({"kind", "burst"})
    ->ArgsProduct({{static_cast<long>(RxKind::kPlain), static_cast<long>(RxKind::kCompressed), static_cast<long>(RxKind::kStriding)},
                   {32, 64}});

void BM_Tx(benchmark::State& state) {
  const std::uint16_t burst = static_cast<std::uint16_t>(state.range(0));
  const std::uint16_t inl = static_cast<std::uint16_t>(state.range(1));
  auto pool = make_pool(8192);
  pool->attach_thread();
  model::Device dev;
  dev.keep_sent(false);
  auto q = std::make_unique<TxQueue>();
  model::SqOptions o;
  o.wqe_cnt = 1024;
  o.cqe_cnt = 64;
  o.min_inline = inl;
  dev.create_sq(o, q->sq, q->cq);
  std::vector<Mbuf*> elts(o.wqe_cnt);
  q->elts = elts.data();
  q->pool = pool.get();
  q->lkey = dev.reg_mr(pool->region(), pool->region_bytes());
  q->inline_bytes = inl;
  q->comp_every = 32;
  if (!tx_setup(*q).is_ok()) std::abort();
  const TxBurstFn tx = tx_burst_function(false);
  const auto f = frame64(1000);
  for (std::uint32_t i = 0; i < pool->count(); ++i) std::memcpy(pool->at(i)->buf_addr() + kMbufHeaderSize + pool->headroom(), f.data(), f.size());
  constexpr unsigned kPerIteration = 512;
  std::vector<Mbuf*> bufs(kPerIteration);
  std::uint64_t packets = 0;
  for (auto _ : state) {
    state.PauseTiming();
    if (!pool->alloc_bulk(bufs.data(), kPerIteration)) std::abort();
    for (Mbuf* m : bufs) m->data_len = static_cast<std::uint32_t>(f.size());
    state.ResumeTiming();
    unsigned sent = 0;
    while (sent < kPerIteration) {
      sent += tx(q.get(), bufs.data() + sent, static_cast<std::uint16_t>(std::min<unsigned>(burst, kPerIteration - sent)));
      if (q->sq_pi - q->sq_ci == q->sq.wqe_cnt) {
        state.PauseTiming();
        dev.process_tx();
        state.ResumeTiming();
      }
    }
    state.PauseTiming();
    dev.process_tx();  // the device completes what was posted, outside the timed region
    state.ResumeTiming();
    packets += sent;
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(packets));
  state.counters["ns_per_pkt"] = benchmark::Counter(static_cast<double>(packets), benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  tx_release(*q);
  pool->detach_thread();
}
BENCHMARK(BM_Tx)->ArgNames({"burst", "inline"})->ArgsProduct({{32, 64}, {0, 18}});

}  // namespace
}  // namespace rawpipe::mlx5

BENCHMARK_MAIN();
