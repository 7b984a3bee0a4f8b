// Extra API costs.
//
//   ninja -C build tests/bench/bench_extra_bench plugins/rawpipe_seq_gap.so && build/tests/bench/bench_extra_bench
//
// BM_Filter/{none,packet,burst}: one lcore's data path on this thread (replayed 64-byte frames,
//   parse, classify, filter stage, sink endpoint) with no filter, a per-packet endpoint filter and
//   a burst endpoint filter that both return RECV; the difference in ns/packet is the callback
//   overhead (descriptor fill + indirect call).
// BM_Receive/{zcopy,copy}: a running pipeline (one lcore thread, replay port, ring endpoint);
//   this thread consumes with recvfrom_zcopy + free_packets, or with the copying recv; Mpps is
//   what the consumer achieved.
// BM_RuleInsertWhileRunning: add_conf_rule + remove_rule pairs per second while the lcore runs.
// BM_WakeLatency: a consumer asleep in epoll_wait on a ring endpoint's descriptor (endpoint_fd,
//   arm_fd); a gate filter on the lcore lets one packet through when the consumer asks, stamping
//   the TSC just before the packet is queued; p50/p99/max in ns from that stamp to the consumer's
//   return from epoll_wait (the lcore busy-polls a replay port; the consumer is this thread).
// BM_FreeChecked/{free_buff,free_packets}: a burst of 32 buffers taken from a pool and returned
//   through the API's free_buff (one call each) or free_packets (one call, no handle) on this
//   thread; ns per packet, so the cost of checking each pointer on free is the difference
//   between builds.
#include <benchmark/benchmark.h>

#include <sys/epoll.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <vector>

#include "pipeline/buf/pool.hh"
#include "pipeline/classify/classifier.hh"
#include "pipeline/dispatch/dispatch.hh"
#include "pipeline/extra/extra.hh"
#include "pipeline/filter/filter.hh"
#include "pipeline/lcore/lcore.hh"
#include "pipeline/stats/tsc.hh"
#include "tests/support/test_port.hh"
#include "pipeline/port/driver.hh"
#include "pipeline/buf/pool.hh"

namespace rawpipe {
namespace {

constexpr int kFlows = 1024;

std::vector<testing::Frame> frames() {
  std::vector<testing::Frame> out;
  for (int i = 0; i < kFlows; ++i)
    out.push_back(testing::udp_frame("192.168.0.1", static_cast<std::uint16_t>(1000 + i), "239.1.1.1", 5000, -1, 18));
  return out;
}

int pass_packet(const rawpipe_packet* p, void* ctx) {
  *static_cast<std::uint64_t*>(ctx) += p->payload.iov_len;
  return RAWPIPE_RECV;
}
void pass_burst(const rawpipe_packet* p, int*, unsigned n, void* ctx) {
  for (unsigned i = 0; i < n; ++i) *static_cast<std::uint64_t*>(ctx) += p[i].payload.iov_len;
}

void BM_Filter(benchmark::State& state) {
  PoolConfig pc;
  pc.name = "extra_bench";
  pc.count = 8192;
  auto pool = std::move(Pool::create(pc)).value();
  pool->attach_thread();
  testing::TestPortConfig tc;
  tc.repeat = 0;
  tc.record_tx = false;
  tc.rx_frames = {frames()};
  PortEnv env;
  env.name = "replay";
  env.pool = pool.get();
  testing::TestPort port(env, tc);
  std::vector<TableRule> rules{{SteeringRule{parse_match_rule("udp dst 239.1.1.1:5000").value(), 0, 0}, 0}};
  auto classifier = std::move(Classifier::create(1, rules, {})).value();
  LcorePlan lp;
  lp.burst = 32;
  Lcore lcore(lp, 0, 1, 1);
  std::vector<Dispatcher::Route> routes{{EndpointAction::kSink, 0, nullptr}};
  lcore.bind({{port.rx_queue(0), 0, 0}},
             std::make_unique<Dispatcher>(std::move(routes), std::vector<TxQueueHandle>{TxQueueHandle{}},
                                          &lcore.counters_mut()),
             classifier.get(), {pool.get()});
  FilterStage filters(1, {1});
  std::uint64_t sum = 0;
  if (state.range(0) == 1) (void)filters.set_endpoint_filter(0, {&pass_packet, nullptr, &sum});
  if (state.range(0) == 2) (void)filters.set_endpoint_filter(0, {nullptr, &pass_burst, &sum});
  lcore.set_filters(&filters);
  classifier->reader_online(0);
  for (auto _ : state) lcore.poll_once();
  classifier->reader_offline(0);
  benchmark::DoNotOptimize(sum);
  const LcoreCounters& c = lcore.counters();
  if (c.delivered.load() != c.rx_packets.load()) state.SkipWithError("packets were dropped");
  state.SetItemsProcessed(static_cast<std::int64_t>(c.rx_packets.load()));
  state.SetLabel(state.range(0) == 0 ? "none" : state.range(0) == 1 ? "per-packet" : "burst");
  pool->detach_thread();
}
BENCHMARK(BM_Filter)->Arg(0)->Arg(1)->Arg(2);

struct Running {
  std::unique_ptr<Pipeline> p;
  rawpipe_pipeline* h = nullptr;
  const rawpipe_api_t* api = rawpipe_get_api(RAWPIPE_EXTRA_ABI_VERSION);
  explicit Running(EndpointAction action) {
    Plan plan;
    PoolPlan pp;
    pp.config.name = "rx";
    pp.config.count = 16384;
    plan.pools.push_back(pp);
    testing::TestPortConfig tc;
    tc.repeat = 0;
    tc.record_tx = false;
    tc.rx_frames = {frames()};
    PortPlan port;
    port.name = "p0";
    port.pmd = "test";
    port.spec = std::make_shared<testing::TestPortSpec>(tc);
    port.pool = "rx";
    plan.ports.push_back(port);
    EndpointPlan ep;
    ep.name = "md";
    ep.action = action;
    ep.match = {"udp dst 239.1.1.1:5000"};
    ep.ring_size = 4096;
    plan.endpoints.push_back(ep);
    LcorePlan lc;
    lc.rx = {{0, 0}};
    plan.lcores.push_back(lc);
    p = std::move(Pipeline::create(plan)).value();
    h = extra_wrap(*p);
    (void)api->start(h);
  }
  ~Running() {
    (void)api->stop(h);
    api->destroy(h);
  }
};

void BM_Receive(benchmark::State& state) {
  Running r(EndpointAction::kRing);
  const bool zcopy = state.range(0) == 0;
  rawpipe_packet pkts[64];
  char buf[2048];
  std::uint64_t got = 0;
  for (auto _ : state) {
    if (zcopy) {
      int n = r.api->recvfrom_zcopy(r.h, 0, pkts, 64);
      r.api->free_packets(r.h, pkts, static_cast<unsigned>(n));
      got += static_cast<std::uint64_t>(n);
    } else {
      for (int i = 0; i < 64; ++i) {
        long n = r.api->recv(r.h, 0, buf, sizeof buf, nullptr);
        if (n <= 0) break;
        ++got;
      }
    }
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(got));
  state.counters["Mpps"] = benchmark::Counter(static_cast<double>(got) / 1e6, benchmark::Counter::kIsRate);
  state.SetLabel(zcopy ? "recvfrom_zcopy" : "recv (copy)");
}
BENCHMARK(BM_Receive)->Arg(0)->Arg(1)->UseRealTime();

void BM_RuleInsertWhileRunning(benchmark::State& state) {
  Running r(EndpointAction::kSink);
  unsigned i = 0;
  for (auto _ : state) {
    std::string rule = fmt::format("md: udp dst 10.{}.{}.{}:7000", (i >> 16) & 255, (i >> 8) & 255, i & 255);
    long id = r.api->add_conf_rule(r.h, rule.c_str());
    if (id <= 0) {
      state.SkipWithError(r.api->last_error(r.h));
      break;
    }
    (void)r.api->remove_rule(r.h, static_cast<std::uint32_t>(id));
    ++i;
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_RuleInsertWhileRunning)->UseRealTime();

#ifdef RAWPIPE_CAP_WAIT  // so the free benchmark also builds against an older header (the before figure)
// The gate: drops everything until the consumer opens it, then passes one packet and stamps it.
struct Gate {
  std::atomic<bool> open{false};
  std::atomic<std::uint64_t> stamp{0};
};
int gate_filter(const rawpipe_packet*, void* ctx) {
  auto* g = static_cast<Gate*>(ctx);
  if (!g->open.load(std::memory_order_relaxed) || !g->open.exchange(false, std::memory_order_acq_rel))
    return RAWPIPE_DROP;
  g->stamp.store(tsc_now(), std::memory_order_release);
  return RAWPIPE_RECV;
}

void BM_WakeLatency(benchmark::State& state) {
  Running r(EndpointAction::kRing);
  Gate gate;
  if (r.api->endpoint_filter(r.h, 0, &gate_filter, nullptr, &gate) != 0) {
    state.SkipWithError(r.api->last_error(r.h));
    return;
  }
  const int fd = r.api->endpoint_fd(r.h, 0);
  const int ep = epoll_create1(0);
  epoll_event ev{};
  ev.events = EPOLLIN;
  (void)epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
  rawpipe_packet pkts[64];
  while (r.api->recvfrom_zcopy(r.h, 0, pkts, 64) > 0) (void)r.api->free_packets(r.h, pkts, 64);
  std::vector<double> ns;
  std::uint64_t no_sleep = 0;
  const double ns_per_cycle = tsc_ns_per_cycle();
  for (auto _ : state) {
    if (r.api->arm_fd(r.h, 0) != 0) {
      ++no_sleep;
      int n = r.api->recvfrom_zcopy(r.h, 0, pkts, 64);
      if (n > 0) (void)r.api->free_packets(r.h, pkts, static_cast<unsigned>(n));
      continue;
    }
    gate.open.store(true, std::memory_order_release);
    epoll_event out;
    if (epoll_wait(ep, &out, 1, 1000) != 1) {
      state.SkipWithError("no wake-up within 1 s");
      break;
    }
    const std::uint64_t woke = tsc_now();
    ns.push_back(static_cast<double>(woke - gate.stamp.load(std::memory_order_acquire)) * ns_per_cycle);
    int n = r.api->recvfrom_zcopy(r.h, 0, pkts, 64);
    if (n > 0) (void)r.api->free_packets(r.h, pkts, static_cast<unsigned>(n));
  }
  ::close(ep);
  if (ns.empty()) return;
  std::sort(ns.begin(), ns.end());
  state.counters["p50_ns"] = ns[ns.size() / 2];
  state.counters["p99_ns"] = ns[std::min(ns.size() - 1, ns.size() * 99 / 100)];
  state.counters["max_ns"] = ns.back();
  state.counters["no_sleep"] = static_cast<double>(no_sleep);
}
BENCHMARK(BM_WakeLatency)->Iterations(2000)->UseRealTime();
#endif

void BM_FreeChecked(benchmark::State& state) {
  const rawpipe_api_t* api = rawpipe_get_api(RAWPIPE_EXTRA_ABI_VERSION);
  PoolConfig pc;
  pc.name = "bench_free";
  pc.count = 4096;
  pc.cache_size = 256;
  auto pool = std::move(Pool::create(pc)).value();
  pool->attach_thread();
  const bool per_buffer = state.range(0) == 0;
  Mbuf* bufs[32];
  rawpipe_packet pkts[32];
  for (auto& pk : pkts) pk = rawpipe_packet{};
  for (auto _ : state) {
    if (!pool->alloc_bulk(bufs, 32)) {
      state.SkipWithError("pool ran dry: a free did not return its buffer");
      break;
    }
    if (per_buffer) {
      for (Mbuf* m : bufs) (void)api->free_buff(m);
    } else {
      for (unsigned i = 0; i < 32; ++i) pkts[i].handle = bufs[i];
      (void)api->free_packets(nullptr, pkts, 32);
    }
  }
  pool->detach_thread();
  state.SetItemsProcessed(state.iterations() * 32);
  state.SetLabel(per_buffer ? "free_buff" : "free_packets");
}
BENCHMARK(BM_FreeChecked)->Arg(0)->Arg(1);

}  // namespace
}  // namespace rawpipe

BENCHMARK_MAIN();
