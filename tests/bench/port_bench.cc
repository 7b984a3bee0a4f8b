// Port-level cost of a receive and a transmit loop, one thread, burst 32: what an lcore pays per
// packet to get buffers out of a port and give them back, before parse/classify/dispatch.
//
// Cases (each skipped with a reason when its driver is not built):
//   rx/dpdk_null_zero_copy   dpdk port over net_null, DPDK allocating straight from the rawpipe pool
//   rx/dpdk_null_copy        the same with buffers = "copy" (DPDK mempool + one memcpy per packet)
//   rx/synth_64              the synth generator, 64-byte IPv4/UDP over 1024 flows (writes every frame)
//   rx/dpdk_pcap_zero_copy   dpdk port over net_pcap replaying RAWPIPE_PORT_BENCH_PCAP with infinite_rx=1
//                            (copies every frame into the buffer), skipped when that is unset;
//                            tools/bench/pcap-vs-testpmd puts it next to testpmd rxonly on the same file
//   tx/dpdk_null_zero_copy   pool buffers transmitted through their shadow mbufs, freed by net_null
//   tx/dpdk_null_copy        copied into DPDK buffers first
// net_null with copy=0 never touches packet data, so rx/dpdk_null_* measure buffer traffic only;
// synth writes 64 bytes per frame. tools/bench/run puts these next to dpdk-testpmd rxonly on net_null.
// Rates are per wall-clock second (UseRealTime), as testpmd's are.
//
// RAWPIPE_PORT_BENCH_EAL, when set, is the dpdk ports' eal_args (a TOML array): the harness gives
// them the memory it gives testpmd, huge pages included, since the shadow mbufs live there.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>

#include <fmt/format.h>

#include "pipeline/buf/pool.hh"
#include "pipeline/config/section.hh"
#include "pipeline/port/registry.hh"
#include "pipeline/port/driver.hh"

namespace rawpipe {
namespace {

// `text` as a TOML basic string, quotes included: a path may hold any character.
std::string toml_string(std::string_view text) {
  std::string out = "\"";
  for (const char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
      out += fmt::format("\\u{:04x}", static_cast<unsigned char>(c));
    } else {
      out += c;
    }
  }
  return out + '"';
}

std::string eal_keys() {
  const char* eal = std::getenv("RAWPIPE_PORT_BENCH_EAL");
  return std::string("eal_args = ") + (eal && *eal ? eal : R"(["--no-huge", "-m", "256", "--log-level=*:error"])") + "\n";
}

struct Rig {
  std::unique_ptr<Pool> pool;
  std::unique_ptr<Port> port;
  std::string error;
};

Rig make_rig(const char* pmd, const std::string& keys) {
  Rig r;
  const PmdDriver* drv = find_pmd(pmd);
  if (!drv) {
    r.error = std::string("driver '") + pmd + "' is not built";
    return r;
  }
  auto section = ConfigSection::parse_string(keys, "port_bench");
  if (!section) {
    r.error = section.message();
    return r;
  }
  auto spec = drv->parse(section.value());
  if (!spec) {
    r.error = spec.message();
    return r;
  }
  if (Status st = section->finish(); !st) {
    r.error = st.message();
    return r;
  }
  // The pool as the config loader makes it for this driver: slots exactly buf_size apart when the
  // driver finds a slot by shifting an address (DPDK zero-copy, AF_XDP UMEM).
  PoolConfig pc;
  pc.name = "bench";
  pc.count = 8192;
  pc.cache_size = 256;
  pc.exact_stride = spec.value()->needs_exact_pool_stride();
  auto pool = Pool::create(pc);
  if (!pool) {
    r.error = pool.message();
    return r;
  }
  r.pool = std::move(pool).value();
  PortEnv env;
  env.name = pmd;
  env.pool = r.pool.get();
  auto port = spec.value()->open(env);
  if (!port) {
    r.error = port.message();
    return r;
  }
  r.port = std::move(port).value();
  if (Status st = r.port->start(); !st) {
    r.error = st.message();
    r.port.reset();
  }
  return r;
}

void run_rx(benchmark::State& state, const char* pmd, std::string keys) {
  Rig r = make_rig(pmd, keys);
  if (!r.port) {
    state.SkipWithError(r.error.c_str());
    return;
  }
  r.pool->attach_thread();  // as an lcore does
  RxQueueHandle rx = r.port->rx_queue(0);
  Mbuf* pkts[32];
  std::uint64_t n = 0;
  for (auto _ : state) {
    std::uint16_t k = rx(pkts, 32);
    mbuf_free_bulk(pkts, k);
    n += k;
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(n));
  state.counters["zero_copy"] = static_cast<double>(r.port->stats().extended["zero_copy"]);
  r.pool->detach_thread();
  r.port->stop();
}

void run_tx(benchmark::State& state, std::string keys) {
  Rig r = make_rig("dpdk", keys);
  if (!r.port) {
    state.SkipWithError(r.error.c_str());
    return;
  }
  r.pool->attach_thread();
  TxQueueHandle tx = r.port->tx_queue(0);
  Mbuf* pkts[32];
  std::uint64_t n = 0;
  for (auto _ : state) {
    if (!r.pool->alloc_bulk(pkts, 32)) {
      state.SkipWithError("pool ran dry: the port kept buffers");
      break;
    }
    for (Mbuf* m : pkts) m->data_len = 64;
    std::uint16_t sent = tx(pkts, 32);
    if (sent < 32) mbuf_free_bulk(pkts + sent, 32 - sent);
    n += sent;
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(n));
  r.pool->detach_thread();
  r.port->stop();
}

const std::string kNull = eal_keys() + "device = \"net_null0,size=64\"\n";

void run_rx_pcap(benchmark::State& state) {
  const char* pcap = std::getenv("RAWPIPE_PORT_BENCH_PCAP");
  if (pcap == nullptr || *pcap == '\0') {
    state.SkipWithError("RAWPIPE_PORT_BENCH_PCAP names no pcap file to replay");
    return;
  }
  // DPDK splits device arguments at commas and has no escape for one.
  if (std::string_view(pcap).find(',') != std::string_view::npos) {
    state.SkipWithError("RAWPIPE_PORT_BENCH_PCAP holds a comma, which DPDK's device arguments cannot carry");
    return;
  }
  run_rx(state, "dpdk",
         eal_keys() + "device = " + toml_string(std::string("net_pcap0,rx_pcap=") + pcap + ",infinite_rx=1") +
             "\nbuffers = \"zero_copy\"\n");
}

const std::string kSynth = "frame_size = 64\nsrc_ports = 1024\n";

}  // namespace
}  // namespace rawpipe

int main(int argc, char** argv) {
  using namespace rawpipe;
  benchmark::RegisterBenchmark("rx/dpdk_null_zero_copy", run_rx, "dpdk", kNull + "buffers = \"zero_copy\"\n")->UseRealTime();
  benchmark::RegisterBenchmark("rx/dpdk_null_copy", run_rx, "dpdk", kNull + "buffers = \"copy\"\n")->UseRealTime();
  benchmark::RegisterBenchmark("rx/synth_64", run_rx, "synth", kSynth)->UseRealTime();
  benchmark::RegisterBenchmark("rx/dpdk_pcap_zero_copy", run_rx_pcap)->UseRealTime();
  benchmark::RegisterBenchmark("tx/dpdk_null_zero_copy", run_tx, kNull + "buffers = \"zero_copy\"\n")->UseRealTime();
  benchmark::RegisterBenchmark("tx/dpdk_null_copy", run_tx, kNull + "buffers = \"copy\"\n")->UseRealTime();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
