// Receive rate on one end of a veth pair, for tools/bench/veth-rx: rawpipe's AF_XDP port against a
// kernel UDP socket (recvmmsg), with the same kernel UDP generator (sendmmsg) on the other end.
//
// Cases, each configured by environment variables because the script runs them inside network
// namespaces it creates (Google Benchmark owns the command line):
//   rx/af_xdp          RAWPIPE_BENCH_IFACE, RAWPIPE_BENCH_PORT; optional RAWPIPE_BENCH_ATTACH
//                      (native/generic/auto), RAWPIPE_BENCH_RING (rx and fill ring size, default
//                      8192). rx_burst + free, burst 32, like testpmd rxonly.
//   rx/af_xdp_all      the same with mode = "all" (the whole queue redirected, no rule lookup).
//   rx/af_packet       RAWPIPE_BENCH_IFACE: the AF_PACKET port (TPACKET_V3, one copy per frame).
//   rx/af_packet_v2    the same with TPACKET_V2, the ring DPDK's net_af_packet uses.
//   rx/kernel_recvmmsg RAWPIPE_BENCH_PORT: a UDP socket, recvmmsg batches of 32.
//   gen/udp_sendmmsg   RAWPIPE_BENCH_DST, RAWPIPE_BENCH_PORT, RAWPIPE_BENCH_FLOWS (source ports),
//                      RAWPIPE_BENCH_SIZE (UDP payload bytes): the generator, also reporting its rate.
// Rates are per wall-clock second (UseRealTime), as testpmd's are. Each receiver also reports the
// frames lost before it during its timed loop, as counters lost_<reason>, and the loop's start and
// end on CLOCK_MONOTONIC (window_start_s, window_end_s): the script reads the generator's counters
// on the same clock, so what was offered is taken over exactly the window the rate was.
#include <arpa/inet.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <benchmark/benchmark.h>

#include <cstdlib>
#include <cstring>
#include <ctime>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "pipeline/buf/pool.hh"
#include "pipeline/classify/rule.hh"
#include "pipeline/config/section.hh"
#include "pipeline/port/registry.hh"
#include "pipeline/port/driver.hh"
#include "rawpipe/port_info.hh"

namespace rawpipe {
namespace {

std::string env(const char* name, const char* fallback = "") {
  const char* v = std::getenv(name);
  return v && *v ? v : fallback;
}

// Frames lost before the receiver over the timed loop, per reason, as counters "lost_<reason>"
// (tools/bench/veth-rx reports them beside each rate); -1 for a counter that could not be read.
void count_losses(benchmark::State& state, const PortLosses& before, const PortLosses& after) {
  for (const auto& [reason, n] : after) {
    // A reason that first appears afterwards (rx_nombuf is listed only once non-zero) started at 0.
    const auto was = before.find(reason);
    const bool start_known = was == before.end() || was->second.has_value();
    const std::uint64_t start = was != before.end() && was->second ? *was->second : 0;
    state.counters["lost_" + reason] = n && start_known ? static_cast<double>(*n - start) : -1.0;
  }
}

// CLOCK_MONOTONIC in seconds, the clock Python's time.monotonic() reads in the script.
double monotonic_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// The timed loop's bounds, as counters; taken just outside the loop, which the timer also brackets.
void report_window(benchmark::State& state, double start, double end) {
  state.counters["window_start_s"] = start;
  state.counters["window_end_s"] = end;
}

// Datagrams the kernel dropped for this socket (SO_MEMINFO's sk_drops, as the socket port reads
// it), or nullopt when unreadable.
std::optional<std::uint64_t> socket_drops(int s) {
  std::uint32_t mem[SK_MEMINFO_VARS] = {};
  socklen_t len = sizeof mem;
  if (getsockopt(s, SOL_SOCKET, SO_MEMINFO, mem, &len) != 0 || len <= SK_MEMINFO_DROPS * sizeof mem[0])
    return std::nullopt;
  return mem[SK_MEMINFO_DROPS];
}

// One kernel-port receiver: rx_burst + free on queue 0 of `pmd` opened on RAWPIPE_BENCH_IFACE.
void port_rx(benchmark::State& state, const char* pmd, const std::string& driver_keys) {
  const std::string iface = env("RAWPIPE_BENCH_IFACE");
  const int port_no = std::atoi(env("RAWPIPE_BENCH_PORT", "9000").c_str());
  if (iface.empty()) return state.SkipWithError("set RAWPIPE_BENCH_IFACE to the receiving interface");
  const PmdDriver* drv = find_pmd(pmd);
  if (!drv) return state.SkipWithError(fmt::format("the {} driver is not built", pmd).c_str());
  PoolConfig pc;
  pc.name = "bench";
  // Deep rings: on a shared 2-core box the receiver gets preempted, and a kernel socket with an
  // 8 MiB buffer would otherwise be compared against a 2048-frame fill ring.
  const std::uint32_t ring = static_cast<std::uint32_t>(std::atoi(env("RAWPIPE_BENCH_RING", "8192").c_str()));
  pc.count = 2 * ring + 1024;
  pc.buf_size = 2048;
  auto section = ConfigSection::parse_string(fmt::format("interface = '{}'\n{}", iface, driver_keys), "bench");
  auto spec = drv->parse(section.value());
  if (!spec) return state.SkipWithError(spec.message().c_str());
  // As the config loader does: AF_XDP frames (UMEM) must be exactly buf_size apart.
  pc.exact_stride = spec.value()->needs_exact_pool_stride();
  auto pool = Pool::create(pc);
  if (!pool) return state.SkipWithError(pool.message().c_str());
  PortEnv penv;
  penv.name = "bench";
  penv.pool = pool.value().get();
  penv.rx_ring_size = ring;
  penv.tx_ring_size = 512;
  auto port = spec.value()->open(penv);
  if (!port) return state.SkipWithError(port.message().c_str());
  auto rule = parse_match_rule(fmt::format("udp dst *:{}", port_no));
  SteeringRules rules;
  rules.rules.push_back({rule.value(), 0, 0});
  Status st = port.value()->update_steering(rules);
  if (st) st = port.value()->start();
  if (!st) return state.SkipWithError(st.message().c_str());
  pool.value()->attach_thread();
  RxQueueHandle rxq = port.value()->rx_queue(0);
  std::uint64_t total = 0;
  Mbuf* burst[32];
  const PortLosses lost_before = lost_before_pipeline(port.value()->stats());
  const double window_start = monotonic_seconds();
  for (auto _ : state) {
    std::uint16_t n = rxq(burst, 32);
    total += n;
    mbuf_free_bulk(burst, n);
  }
  report_window(state, window_start, monotonic_seconds());
  auto stats = port.value()->stats();
  state.SetItemsProcessed(static_cast<std::int64_t>(total));
  count_losses(state, lost_before, lost_before_pipeline(stats));
  for (const auto& [name, value] : stats.extended) state.counters[name] = static_cast<double>(value);
  state.SetLabel(port.value()->path_report());
  pool.value()->detach_thread();
  port.value()->stop();
}
void BM_AfXdpRx(benchmark::State& state) {
  port_rx(state, "af_xdp", fmt::format("attach = '{}'\n", env("RAWPIPE_BENCH_ATTACH", "auto")));
}
BENCHMARK(BM_AfXdpRx)->Name("rx/af_xdp")->UseRealTime();

// mode = "all": the XDP program redirects every frame of the queue without a rule lookup, as
// net_af_xdp's default program does. On veth that program runs on the sender's CPU.
void BM_AfXdpAllRx(benchmark::State& state) {
  port_rx(state, "af_xdp", fmt::format("attach = '{}'\nmode = 'all'\n", env("RAWPIPE_BENCH_ATTACH", "auto")));
}
BENCHMARK(BM_AfXdpAllRx)->Name("rx/af_xdp_all")->UseRealTime();

void BM_AfPacketRx(benchmark::State& state) { port_rx(state, "af_packet", ""); }
BENCHMARK(BM_AfPacketRx)->Name("rx/af_packet")->UseRealTime();

// TPACKET_V2, the ring DPDK's net_af_packet uses: one frame per slot instead of V3's blocks.
void BM_AfPacketV2Rx(benchmark::State& state) { port_rx(state, "af_packet", "tpacket_version = 2\n"); }
BENCHMARK(BM_AfPacketV2Rx)->Name("rx/af_packet_v2")->UseRealTime();

void BM_KernelRecvmmsg(benchmark::State& state) {
  const int port_no = std::atoi(env("RAWPIPE_BENCH_PORT", "9000").c_str());
  int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  int big = 8 << 20;
  setsockopt(s, SOL_SOCKET, SO_RCVBUFFORCE, &big, sizeof(big));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<std::uint16_t>(port_no));
  if (bind(s, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    close(s);
    return state.SkipWithError(std::strerror(errno));
  }
  timeval tv{0, 100000};
  setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  constexpr unsigned kBatch = 32;
  static char bufs[kBatch][2048];
  iovec iov[kBatch];
  mmsghdr msgs[kBatch];
  for (unsigned i = 0; i < kBatch; ++i) {
    iov[i] = {bufs[i], sizeof(bufs[i])};
    msgs[i] = {};
    msgs[i].msg_hdr.msg_iov = &iov[i];
    msgs[i].msg_hdr.msg_iovlen = 1;
  }
  std::uint64_t total = 0;
  const PortLosses before{{"socket_buffer_full", socket_drops(s)}};
  const double window_start = monotonic_seconds();
  for (auto _ : state) {
    int n = recvmmsg(s, msgs, kBatch, MSG_WAITFORONE, nullptr);
    if (n > 0) total += static_cast<unsigned>(n);
  }
  report_window(state, window_start, monotonic_seconds());
  count_losses(state, before, {{"socket_buffer_full", socket_drops(s)}});
  state.SetItemsProcessed(static_cast<std::int64_t>(total));
  close(s);
}
BENCHMARK(BM_KernelRecvmmsg)->Name("rx/kernel_recvmmsg")->UseRealTime();

void BM_UdpSendmmsg(benchmark::State& state) {
  const std::string dst = env("RAWPIPE_BENCH_DST");
  const int port_no = std::atoi(env("RAWPIPE_BENCH_PORT", "9000").c_str());
  const int flows = std::max(1, std::atoi(env("RAWPIPE_BENCH_FLOWS", "16").c_str()));
  const std::size_t size = static_cast<std::size_t>(std::atoi(env("RAWPIPE_BENCH_SIZE", "18").c_str()));
  if (dst.empty()) return state.SkipWithError("set RAWPIPE_BENCH_DST to the receiver's IPv4 address");
  std::vector<int> socks;
  sockaddr_in d{};
  d.sin_family = AF_INET;
  d.sin_port = htons(static_cast<std::uint16_t>(port_no));
  if (inet_pton(AF_INET, dst.c_str(), &d.sin_addr) != 1) return state.SkipWithError("bad RAWPIPE_BENCH_DST");
  for (int f = 0; f < flows; ++f) {
    int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    connect(s, reinterpret_cast<sockaddr*>(&d), sizeof(d));
    socks.push_back(s);
  }
  constexpr unsigned kBatch = 32;
  std::vector<char> payload(size, 'x');
  iovec iov{payload.data(), payload.size()};
  mmsghdr msgs[kBatch];
  for (auto& m : msgs) {
    m = {};
    m.msg_hdr.msg_iov = &iov;
    m.msg_hdr.msg_iovlen = 1;
  }
  std::uint64_t total = 0;
  std::size_t next = 0;
  for (auto _ : state) {
    int n = sendmmsg(socks[next], msgs, kBatch, 0);
    if (n > 0) total += static_cast<unsigned>(n);
    next = (next + 1) % socks.size();
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(total));
  for (int s : socks) close(s);
}
BENCHMARK(BM_UdpSendmmsg)->Name("gen/udp_sendmmsg")->UseRealTime();

}  // namespace
}  // namespace rawpipe

BENCHMARK_MAIN();
