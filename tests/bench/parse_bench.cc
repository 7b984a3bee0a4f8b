// Parse stage speed: ns per packet for parse_burst over bursts of 8..256 packets.
//
// Three traffic shapes: 64-byte IPv4/UDP frames (60 bytes before the FCS, the line-rate case),
// a VLAN + IPv6 mix (untagged/tagged/QinQ IPv4 and IPv6, extension headers, fragments), and a
// malformed mix (one frame of each kind parse rejects, interleaved with good frames). The
// buffers come from a real pool (2 KiB slots) and are walked burst after burst across a working
// set of 256 buffers (512 KiB: stays in L2, like buffers a PMD just wrote) or 4096 buffers
// (8 MiB: every packet's metadata and data lines come from L3 or memory, the pessimistic case).
// Arguments: burst size / working set.
//
//   build-*/tests/bench/bench_parse_bench --benchmark_min_time=0.5
//
// Peer: DPDK's software parser rte_net_get_ptype (L2/VLAN/QinQ, IPv4/IPv6 with extension
// headers, L4 type and header lengths) over the same frames in the same buffers, compiled in
// when DPDK's flags are given (meson builds the bench without them); one command line:
//   g++ -std=c++20 -O3 -march=x86-64-v2 -DRAWPIPE_BENCH_DPDK_PEER -I. -Iinclude -Ibuild-X
//     tests/bench/parse_bench.cc pipeline/parse/parse.cc pipeline/wire/builder.cc pipeline/buf/pool.cc
//     $(pkg-config --cflags --libs libdpdk) -lbenchmark -lfmt -pthread -o /tmp/parse_bench_peer
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "pipeline/buf/pool.hh"
#include "pipeline/parse/parse.hh"
#include "pipeline/wire/builder.hh"
#include "tests/support/golden_frames.hh"

#ifdef RAWPIPE_BENCH_DPDK_PEER
#include <rte_mbuf.h>
#include <rte_net.h>
#endif

namespace rawpipe {
namespace {

namespace g = testing::golden;
using Frame = std::vector<std::uint8_t>;

constexpr std::uint32_t kMaxWorkingSet = 4096;

Frame udp4_64(std::uint32_t flow) {
  wire::FrameSpec s;
  s.eth.dst = {0x02, 0, 0, 0, 0, 0x02};
  s.eth.src = {0x02, 0, 0, 0, 0, 0x01};
  s.ipv4.src = wire::ipv4(10, 0, static_cast<std::uint8_t>(flow >> 8), static_cast<std::uint8_t>(flow));
  s.ipv4.dst = wire::ipv4(10, 1, 0, 1);
  s.udp = {static_cast<std::uint16_t>(1024 + flow), 5000};
  s.payload_len = 18;  // 14 + 20 + 8 + 18 = 60 bytes + FCS = 64 on the wire
  Frame f(64);
  f.resize(wire::write_frame(s, f.data(), f.size()));
  return f;
}

std::vector<Frame> shape_udp4() {
  std::vector<Frame> v;
  for (std::uint32_t i = 0; i < 1024; ++i) v.push_back(udp4_64(i));
  return v;
}

std::vector<Frame> shape_vlan_ipv6_mix() {
  std::vector<Frame> v;
  for (auto f : {std::span<const std::uint8_t>(g::kUdp4), std::span<const std::uint8_t>(g::kUdp4Vlan),
                 std::span<const std::uint8_t>(g::kUdp4QinQ), std::span<const std::uint8_t>(g::kUdp6),
                 std::span<const std::uint8_t>(g::kUdp6VlanMulticast), std::span<const std::uint8_t>(g::kUdp6HopByHop),
                 std::span<const std::uint8_t>(g::kUdp6Chain), std::span<const std::uint8_t>(g::kUdp6FragFirst),
                 std::span<const std::uint8_t>(g::kUdp6Routing), std::span<const std::uint8_t>(g::kTcp6)})
    v.emplace_back(f.begin(), f.end());
  return v;
}

Frame patched(std::span<const std::uint8_t> base, std::size_t at, std::uint8_t value) {
  Frame f(base.begin(), base.end());
  f[at] = value;
  return f;
}

std::vector<Frame> shape_malformed_mix() {
  std::vector<Frame> v;
  v.emplace_back(g::kUdp4, g::kUdp4 + 13);                      // runt
  v.emplace_back(g::kUdp4Vlan, g::kUdp4Vlan + 16);              // truncated VLAN
  v.emplace_back(g::kUdp4, g::kUdp4 + 30);                      // truncated IPv4
  v.push_back(patched(g::kUdp4, 14, 0x65));                     // version
  v.push_back(patched(g::kUdp4, 14, 0x44));                     // IHL
  v.push_back(patched(g::kUdp4, 17, 0xff));                     // total length
  v.emplace_back(g::kUdp6, g::kUdp6 + 50);                      // truncated IPv6
  v.push_back(patched(g::kUdp6, 19, 0x30));                     // payload length
  v.push_back(patched(g::kUdp6HopByHop, 55, 9));                // extension header
  v.push_back(patched(g::kUdp4, 17, 27));                       // truncated UDP
  v.push_back(patched(g::kUdp4, 39, 4));                        // UDP length
  v.push_back(patched(g::kTcp4, 46, 0x40));                     // TCP data offset
  // Interleave with good frames: malformed traffic arrives among normal traffic.
  const std::size_t bad = v.size();
  for (std::size_t i = 0; i < bad; ++i) v.emplace_back(g::kAll[i % std::size(g::kAll)].bytes.begin(),
                                                       g::kAll[i % std::size(g::kAll)].bytes.end());
  return v;
}

struct Fixture {
  std::unique_ptr<Pool> pool;
  std::vector<Mbuf*> bufs;

  explicit Fixture(const std::vector<Frame>& frames) {
    PoolConfig c;
    c.name = "bench";
    c.count = kMaxWorkingSet;
    c.cache_size = 0;
    auto p = Pool::create(c);
    if (!p) {
      std::fprintf(stderr, "%s\n", p.message().c_str());
      std::exit(1);
    }
    pool = std::move(p).value();
    bufs.resize(kMaxWorkingSet);
    if (!pool->alloc_bulk(bufs.data(), kMaxWorkingSet)) std::exit(1);
    for (std::uint32_t i = 0; i < kMaxWorkingSet; ++i) {
      const Frame& f = frames[i % frames.size()];
      std::memcpy(bufs[i]->data(), f.data(), f.size());
      bufs[i]->data_len = static_cast<std::uint32_t>(f.size());
    }
  }
  ~Fixture() { mbuf_free_bulk(bufs.data(), static_cast<unsigned>(bufs.size())); }
};

void run(benchmark::State& state, const std::vector<Frame>& frames) {
  Fixture fx(frames);
  const unsigned burst = static_cast<unsigned>(state.range(0));
  const std::uint32_t working_set = static_cast<std::uint32_t>(state.range(1));
  std::uint32_t at = 0;
  std::uint64_t pkts = 0, dropped = 0;
  for (auto _ : state) {
    Mbuf* const* b = fx.bufs.data() + at;
    parse_burst(b, burst);
    benchmark::DoNotOptimize(b[burst - 1]->drop_reason);
    benchmark::ClobberMemory();
    at += burst;
    if (at + burst > working_set) at = 0;
    pkts += burst;
  }
  for (std::uint32_t i = 0; i < working_set; ++i) dropped += fx.bufs[i]->drop_reason != 0;
  state.SetItemsProcessed(static_cast<std::int64_t>(pkts));
  // Inverted rate of (packets / 1e9) = seconds * 1e9 / packets.
  state.counters["ns_per_pkt"] = benchmark::Counter(
      static_cast<double>(pkts) / 1e9, benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  state.counters["malformed_share"] = static_cast<double>(dropped) / working_set;
}

void BM_ParseUdp4_64B(benchmark::State& state) {
  static const std::vector<Frame> frames = shape_udp4();
  run(state, frames);
}
void BM_ParseVlanIpv6Mix(benchmark::State& state) {
  static const std::vector<Frame> frames = shape_vlan_ipv6_mix();
  run(state, frames);
}
void BM_ParseMalformedMix(benchmark::State& state) {
  static const std::vector<Frame> frames = shape_malformed_mix();
  run(state, frames);
}

BENCHMARK(BM_ParseUdp4_64B)->ArgsProduct({{8, 16, 32, 64, 128, 256}, {256, 4096}});
BENCHMARK(BM_ParseVlanIpv6Mix)->ArgsProduct({{8, 16, 32, 64, 128, 256}, {256, 4096}});
BENCHMARK(BM_ParseMalformedMix)->ArgsProduct({{8, 16, 32, 64, 128, 256}, {256, 4096}});

#ifdef RAWPIPE_BENCH_DPDK_PEER
// DPDK's own layout: each 2 KiB mempool object holds the rte_mbuf (128 bytes), 128 bytes of
// headroom, then the frame, exactly like a rawpipe pool slot; the peer writes packet_type and
// l2/l3/l4_len as a DPDK application would.
void run_dpdk(benchmark::State& state, const std::vector<Frame>& frames) {
  constexpr std::size_t kSlot = 2048;
  static_assert(sizeof(rte_mbuf) <= RTE_PKTMBUF_HEADROOM + 128);
  auto* region = static_cast<std::uint8_t*>(std::aligned_alloc(4096, kSlot * kMaxWorkingSet));
  if (!region) std::exit(1);
  std::vector<rte_mbuf*> ptrs(kMaxWorkingSet);
  for (std::uint32_t i = 0; i < kMaxWorkingSet; ++i) {
    auto* m = reinterpret_cast<rte_mbuf*>(region + i * kSlot);
    std::memset(m, 0, sizeof *m);
    const Frame& f = frames[i % frames.size()];
    m->buf_addr = region + i * kSlot + sizeof(rte_mbuf);
    m->data_off = RTE_PKTMBUF_HEADROOM;
    m->buf_len = static_cast<std::uint16_t>(kSlot - sizeof(rte_mbuf));
    m->data_len = static_cast<std::uint16_t>(f.size());
    m->pkt_len = static_cast<std::uint32_t>(f.size());
    m->nb_segs = 1;
    m->next = nullptr;
    std::memcpy(rte_pktmbuf_mtod(m, void*), f.data(), f.size());
    ptrs[i] = m;
  }
  const unsigned burst = static_cast<unsigned>(state.range(0));
  const std::uint32_t working_set = static_cast<std::uint32_t>(state.range(1));
  std::uint32_t at = 0;
  std::uint64_t pkts = 0;
  for (auto _ : state) {
    rte_mbuf* const* b = ptrs.data() + at;
    for (unsigned i = 0; i < burst; ++i) {
      if (i + 4 < burst) rte_prefetch0(rte_pktmbuf_mtod(b[i + 4], void*));
      rte_net_hdr_lens lens;
      b[i]->packet_type = rte_net_get_ptype(b[i], &lens, RTE_PTYPE_ALL_MASK);
      b[i]->l2_len = lens.l2_len;
      b[i]->l3_len = lens.l3_len;
      b[i]->l4_len = lens.l4_len;
    }
    benchmark::DoNotOptimize(b[burst - 1]->packet_type);
    benchmark::ClobberMemory();
    at += burst;
    if (at + burst > working_set) at = 0;
    pkts += burst;
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(pkts));
  state.counters["ns_per_pkt"] = benchmark::Counter(
      static_cast<double>(pkts) / 1e9, benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  std::free(region);
}

void BM_DpdkPtypeUdp4_64B(benchmark::State& state) {
  static const std::vector<Frame> frames = shape_udp4();
  run_dpdk(state, frames);
}
void BM_DpdkPtypeVlanIpv6Mix(benchmark::State& state) {
  static const std::vector<Frame> frames = shape_vlan_ipv6_mix();
  run_dpdk(state, frames);
}
void BM_DpdkPtypeMalformedMix(benchmark::State& state) {
  static const std::vector<Frame> frames = shape_malformed_mix();
  run_dpdk(state, frames);
}
BENCHMARK(BM_DpdkPtypeUdp4_64B)->ArgsProduct({{8, 16, 32, 64, 128, 256}, {256, 4096}});
BENCHMARK(BM_DpdkPtypeVlanIpv6Mix)->ArgsProduct({{8, 16, 32, 64, 128, 256}, {256, 4096}});
BENCHMARK(BM_DpdkPtypeMalformedMix)->ArgsProduct({{8, 16, 32, 64, 128, 256}, {256, 4096}});
#endif

}  // namespace
}  // namespace rawpipe

BENCHMARK_MAIN();
