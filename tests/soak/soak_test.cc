// Soak: one pipeline runs for RAWPIPE_SOAK_SECONDS (default 30) with three ports at once, the
// synth generator and the mlx5 and MANA device models, into ring endpoints drained by a consumer
// thread, while a filter HOLDs one packet in 64 and a second thread frees each held packet about
// 20 ms later. Every second the process's resident memory is sampled from /proc/self/statm.
//
// Asserted at the end:
//   - resident memory is flat after warm-up: no sample after the warm-up exceeds the sample taken
//     at the end of the warm-up by more than kRssTolerance (see there for why that much);
//   - traffic kept flowing on every port in every second (a stall would show as a flat counter);
//   - after stop: rx == delivered + transmitted + drops, every pool has all its buffers back,
//     every held packet was freed, and the consumer received everything the rings did not drain.
//
// Warm-up is the first 10% of the run, at least 3 s: the pools are mapped and touched when the
// pipeline is created, but malloc arenas, thread stacks and the kernel's page tables for the
// rings settle during the first seconds of traffic.
//
// The nightly-style run is one command (10 minutes):
//     RAWPIPE_SOAK_SECONDS=600 meson test -C build --suite soak
// The test has no meson timeout (timeout: 0, the duration comes from the environment at run
// time); it enforces its own: it aborts if it has not finished 120 s after the configured
// duration.
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <thread>
#include <vector>

#include "rawpipe/config.hh"
#include "rawpipe/pipeline.hh"
#include "pipeline/filter/filter.hh"
#include "pipeline/ring/ring.hh"
#include "pipeline/port/registry.hh"
#include "rawpipe/extra.h"

namespace rawpipe {
namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

// A leak of one 2 KiB buffer copy, or of a 64-byte node, per packet would grow resident memory
// by tens to hundreds of MiB per second at these rates; malloc arena growth from the control
// thread's snapshots and stats maps and deeper stack use stay within a few MiB. 8 MiB separates
// the two with a wide margin on both sides.
constexpr long kRssTolerance = 8l << 20;

long resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  long size = 0, resident = 0;
  statm >> size >> resident;
  return resident * sysconf(_SC_PAGESIZE);
}

unsigned soak_seconds() {
  const char* s = std::getenv("RAWPIPE_SOAK_SECONDS");
  if (!s || !*s) return 30;
  char* end = nullptr;
  const unsigned long v = std::strtoul(s, &end, 10);
  return (end && *end == '\0' && v >= 5) ? static_cast<unsigned>(v) : 30;
}

// HOLDs one packet in kEvery of the endpoint it is attached to; release_older() frees what was
// held before the previous call (FIFO hand-off through an MPMC ring).
class DelayedFree {
 public:
  static constexpr std::uint64_t kEvery = 64;
  DelayedFree() : ring_(std::move(MpmcRing<Mbuf*>::create(1u << 13)).value()) {}

  static int filter(const rawpipe_packet* pkt, void* ctx) {
    auto* h = static_cast<DelayedFree*>(ctx);
    // Only the one lcore calls this: a plain counter would do, an atomic keeps TSan quiet if not.
    if (h->seen_.fetch_add(1, std::memory_order_relaxed) % kEvery != 0) return RAWPIPE_RECV;
    Mbuf* m = static_cast<Mbuf*>(pkt->handle);
    if (h->ring_->enqueue_burst(&m, 1) != 1) return RAWPIPE_DROP;
    h->held.fetch_add(1, std::memory_order_relaxed);
    return RAWPIPE_HOLD;
  }

  // Frees the packets that were held when the previous call returned.
  void release_older() {
    const std::uint64_t target = mark_;
    mark_ = held.load(std::memory_order_relaxed);
    Mbuf* batch[kMaxBurst];
    while (released < target) {
      const unsigned want = static_cast<unsigned>(std::min<std::uint64_t>(kMaxBurst, target - released));
      const unsigned got = ring_->dequeue_burst(batch, want);
      if (got == 0) break;
      mbuf_free_bulk(batch, got);
      released += got;
    }
  }
  void release_all() {
    Mbuf* batch[kMaxBurst];
    while (unsigned got = ring_->dequeue_burst(batch, kMaxBurst)) {
      mbuf_free_bulk(batch, got);
      released += got;
    }
  }

  std::atomic<std::uint64_t> held{0};
  std::uint64_t released = 0;  // releaser thread only (then the test thread after join)

 private:
  std::unique_ptr<MpmcRing<Mbuf*>> ring_;
  std::atomic<std::uint64_t> seen_{0};
  std::uint64_t mark_ = 0;
};

// Our own timeout (meson's is off because the duration is only known at run time): aborts the
// process if the test is still running 120 s after its duration; ends quietly with the test.
class Watchdog {
 public:
  explicit Watchdog(unsigned seconds)
      : thread_([this, seconds] {
          const auto limit = Clock::now() + std::chrono::seconds(seconds + 120);
          while (!done_.load() && Clock::now() < limit) std::this_thread::sleep_for(100ms);
          if (!done_.load()) {
            std::fprintf(stderr, "soak: still running 120 s after its %u s duration; aborting\n", seconds);
            std::abort();
          }
        }) {}
  ~Watchdog() {
    done_ = true;
    thread_.join();
  }

 private:
  std::atomic<bool> done_{false};
  std::thread thread_;
};

constexpr const char* kConfig = R"([run]
default_action = "drop"

[[pools]]
name = "rx"
count = 16384
huge_pages = "never"

[[ports]]
name = "gen"
pmd = "synth"
rate_pps = 200000
src_ports = 64

[[ports]]
name = "cx"
pmd = "mlx5-model"
inject_count = 4294967296
inject_loops = 1048576
inject_flows = 64
inject_rate_pps = 200000
rx_ring_size = 512

[[ports]]
name = "ms"
pmd = "mana-model"
flows = 64
rx_ring_size = 512

[[endpoints]]
name = "gen_feed"
match = ["udp dst *:5000 port gen"]
ring_size = 4096

[[endpoints]]
name = "cx_feed"
match = ["udp dst *:5000 port cx"]
ring_size = 4096

[[endpoints]]
name = "ms_feed"
match = ["udp dst *:9000 port ms"]
ring_size = 4096

[[lcores]]
rx = ["gen:0", "cx:0", "ms:0"]
)";

TEST(Soak, ThreePortsHoldAndRingTrafficMemoryFlatNothingLost) {
  for (const char* pmd : {"synth", "mlx5-model", "mana-model"})
    if (!find_pmd(pmd)) GTEST_SKIP() << "driver " << pmd << " not built";
  const unsigned seconds = soak_seconds();
  const unsigned warmup = std::max(3u, seconds / 10);
  Watchdog watchdog(seconds);

  LoadOptions o;
  o.find_pmd = &find_pmd;
  o.cpu_count = 2;
  auto loaded = load_config_string(kConfig, "soak.toml", o);
  ASSERT_TRUE(loaded) << loaded.message();
  auto created = Pipeline::create(loaded->plan);
  ASSERT_TRUE(created) << created.message();
  Pipeline& p = *created.value();
  const std::size_t n_ep = p.endpoint_count();
  std::vector<std::unique_ptr<DelayedFree>> holders;
  for (std::size_t e = 0; e < n_ep; ++e) {
    holders.push_back(std::make_unique<DelayedFree>());
    ASSERT_TRUE(p.filters().set_endpoint_filter(static_cast<std::uint16_t>(e),
                                                FilterFn{&DelayedFree::filter, nullptr, holders.back().get()}));
  }
  ASSERT_TRUE(p.start());

  std::atomic<bool> stop{false};
  std::atomic<std::uint64_t> consumed{0};
  std::thread consumer([&] {
    Mbuf* burst[kMaxBurst];
    while (!stop.load(std::memory_order_relaxed)) {
      unsigned any = 0;
      for (std::size_t e = 0; e < n_ep; ++e) {
        const unsigned n = p.endpoint_receive(static_cast<std::uint16_t>(e), burst, kMaxBurst);
        mbuf_free_bulk(burst, n);
        any += n;
      }
      consumed.fetch_add(any, std::memory_order_relaxed);
      if (any == 0) std::this_thread::sleep_for(20us);
    }
  });
  std::thread releaser([&] {
    while (!stop.load(std::memory_order_relaxed)) {
      std::this_thread::sleep_for(20ms);
      for (auto& h : holders) h->release_older();
    }
  });

  std::vector<long> rss;
  std::vector<std::vector<std::uint64_t>> per_second;  // delivered per endpoint, each second
  const auto t0 = Clock::now();
  for (unsigned s = 1; s <= seconds; ++s) {
    std::this_thread::sleep_until(t0 + std::chrono::seconds(s));
    rss.push_back(resident_bytes());
    per_second.push_back(p.snapshot().delivered_per_endpoint);
  }
  stop = true;
  consumer.join();
  releaser.join();
  ASSERT_TRUE(p.stop());
  for (auto& h : holders) h->release_all();

  // Memory: flat after warm-up.
  const long base = rss.at(warmup - 1);
  long worst = base;
  unsigned worst_at = warmup;
  for (unsigned s = warmup; s < rss.size(); ++s)
    if (rss[s] > worst) {
      worst = rss[s];
      worst_at = s + 1;
    }
  std::string trace;
  for (unsigned s = 0; s < rss.size(); ++s) trace += fmt::format(" {}:{:.1f}", s + 1, double(rss[s]) / (1 << 20));
  EXPECT_LE(worst - base, kRssTolerance) << "resident memory grew " << (worst - base) / 1024 << " KiB from second "
                                         << warmup << " to second " << worst_at << "; MiB per second:" << trace;
  std::printf("soak: %u s, resident MiB per second:%s\n", seconds, trace.c_str());

  // Traffic flowed on every endpoint in every second after warm-up.
  for (unsigned s = warmup; s < per_second.size(); ++s)
    for (std::size_t e = 0; e < n_ep; ++e)
      EXPECT_GT(per_second[s][e], per_second[s - 1][e]) << "endpoint " << p.endpoint_name(static_cast<std::uint16_t>(e))
                                                        << " stalled in second " << s + 1;

  // Books: nothing lost, nothing leaked.
  Accounting a = p.accounting();
  std::uint64_t held = 0, released = 0;
  for (auto& h : holders) {
    held += h->held.load();
    released += h->released;
  }
  EXPECT_EQ(held, released);
  EXPECT_GT(held, 0u);
  EXPECT_EQ(a.delivered, consumed.load() + a.drained + held) << "ring deliveries reach the consumer or the drain";
  EXPECT_EQ(a.rx_packets, a.delivered + a.transmitted + a.dropped());
  EXPECT_EQ(a.outstanding(), 0u);
  EXPECT_TRUE(a.balanced());
  std::uint64_t ring_full = a.drops[static_cast<std::size_t>(DropReason::kEndpointRingFull)];
  std::printf("soak: rx %llu delivered %llu (held %llu, consumed %llu, drained %llu) dropped %llu (ring full %llu)\n",
              static_cast<unsigned long long>(a.rx_packets), static_cast<unsigned long long>(a.delivered),
              static_cast<unsigned long long>(held), static_cast<unsigned long long>(consumed.load()),
              static_cast<unsigned long long>(a.drained), static_cast<unsigned long long>(a.dropped()),
              static_cast<unsigned long long>(ring_full));
}

}  // namespace
}  // namespace rawpipe
