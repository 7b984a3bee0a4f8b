// Shared pieces of the fault-injection tests: building a pipeline from config text, waiting for a
// condition with a deadline, a holder that keeps HELD buffers and frees them from its own thread,
// and the checks every fault test ends with (the accounting identity and an empty pool).
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "pipeline/buf/pool.hh"
#include "rawpipe/config.hh"
#include "rawpipe/pipeline.hh"
#include "pipeline/filter/filter.hh"
#include "pipeline/ring/ring.hh"
#include "pipeline/port/registry.hh"
#include "rawpipe/extra.h"

namespace rawpipe::fault {

inline std::uint64_t drops(const Accounting& a, DropReason r) { return a.drops[static_cast<std::size_t>(r)]; }

// Loads config text (named `file` in messages) and creates the pipeline; fails the test otherwise.
inline std::unique_ptr<Pipeline> make_pipeline(const std::string& text, const std::string& file) {
  LoadOptions o;
  o.find_pmd = &find_pmd;
  o.cpu_count = 2;
  auto loaded = load_config_string(text, file, o);
  EXPECT_TRUE(loaded) << loaded.message();
  if (!loaded) return nullptr;
  auto created = Pipeline::create(loaded->plan);
  EXPECT_TRUE(created) << created.message();
  if (!created) return nullptr;
  return std::move(created).value();
}

// Polls `done` every millisecond until it holds or `limit` passes; returns whether it held.
inline bool wait_for(const std::function<bool()>& done, std::chrono::milliseconds limit = std::chrono::seconds(30)) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!done()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

// Every packet received is accounted for, nothing is left in any pool, and the figures add up
// the same way when counted by endpoint.
inline void expect_balanced(const Accounting& a) {
  std::uint64_t per_endpoint = 0;
  for (std::uint64_t d : a.delivered_per_endpoint) per_endpoint += d;
  EXPECT_EQ(per_endpoint, a.delivered);
  EXPECT_EQ(a.rx_packets, a.delivered + a.transmitted + a.dropped())
      << "rx " << a.rx_packets << " delivered " << a.delivered << " transmitted " << a.transmitted << " dropped "
      << a.dropped();
  for (const PoolUsage& p : a.pools) EXPECT_EQ(p.outstanding, 0u) << "pool " << p.name << " has buffers out";
  EXPECT_TRUE(a.balanced());
}

inline std::uint64_t rx_nombuf(const PortStats& s) {
  std::uint64_t n = 0;
  for (const QueueCounters& q : s.rx_queues) n += q.rx_nombuf;
  return n;
}
inline std::uint64_t rx_errors(const PortStats& s) {
  std::uint64_t n = 0;
  for (const QueueCounters& q : s.rx_queues) n += q.rx_errors;
  return n;
}
inline std::uint64_t rx_packets(const PortStats& s) {
  std::uint64_t n = 0;
  for (const QueueCounters& q : s.rx_queues) n += q.rx_packets;
  return n;
}
inline std::uint64_t ext(const PortStats& s, const std::string& key) {
  auto it = s.extended.find(key);
  EXPECT_NE(it, s.extended.end()) << "no extended counter " << key;
  return it == s.extended.end() ? 0 : it->second;
}

// A filter owner that HOLDs packets: the callback (an lcore) hands each buffer over through an
// MPSC-safe ring; release() (any other thread) frees what is held. While `holding` is false the
// callback lets packets through (RECV).
class Holder {
 public:
  explicit Holder(std::uint32_t capacity) : ring_(std::move(MpmcRing<Mbuf*>::create(capacity)).value()) {}

  static int filter(const rawpipe_packet* pkt, void* ctx) {
    auto* h = static_cast<Holder*>(ctx);
    // Relaxed: a switch the test flips; the ring hand-off below carries the buffer itself.
    if (!h->holding.load(std::memory_order_relaxed)) return RAWPIPE_RECV;
    Mbuf* m = static_cast<Mbuf*>(pkt->handle);
    if (h->ring_->enqueue_burst(&m, 1) != 1) return RAWPIPE_DROP;  // cannot keep it: a counted drop
    h->held.fetch_add(1, std::memory_order_relaxed);
    return RAWPIPE_HOLD;
  }

  // Frees up to n held buffers from the calling thread; returns how many.
  unsigned release(unsigned n = ~0u) {
    Mbuf* batch[kMaxBurst];
    unsigned done = 0;
    while (done < n) {
      const unsigned want = std::min<unsigned>(kMaxBurst, n - done);
      const unsigned got = ring_->dequeue_burst(batch, want);
      if (got == 0) break;
      mbuf_free_bulk(batch, got);
      done += got;
    }
    released.fetch_add(done, std::memory_order_relaxed);
    return done;
  }

  std::atomic<bool> holding{true};
  std::atomic<std::uint64_t> held{0};
  std::atomic<std::uint64_t> released{0};

 private:
  std::unique_ptr<MpmcRing<Mbuf*>> ring_;
};

}  // namespace rawpipe::fault
