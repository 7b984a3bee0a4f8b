#include "pipeline/buf/pool.hh"

#include "pipeline/buf/audit.hh"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace rawpipe {
namespace {

std::unique_ptr<Pool> make_pool(std::uint32_t count, std::uint32_t cache = 32) {
  PoolConfig c;
  c.name = "test";
  c.count = count;
  c.cache_size = cache;
  c.huge_pages = HugePages::kNever;
  auto p = Pool::create(c);
  EXPECT_TRUE(p) << p.message();
  return std::move(p).value();
}

TEST(Pool, RegionIsContiguousAndSlotsAreFixedSize) {
  auto pool = make_pool(100);
  EXPECT_EQ(pool->count(), 100u);
  EXPECT_GE(pool->region_bytes(), 100u * 2048u);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(pool->region()) % 4096, 0u);
  for (std::uint32_t i = 0; i < 100; ++i) {
    Mbuf* m = pool->at(i);
    EXPECT_EQ(m->index, i);
    EXPECT_EQ(m->pool, pool.get());
    EXPECT_EQ(pool->slot_of(reinterpret_cast<std::uint8_t*>(m) + 1000), m);
  }
  EXPECT_FALSE(pool->memory_notice().empty());
  EXPECT_EQ(pool->data_room(), 2048u - 128u - pool->headroom());
}

TEST(Pool, SlotsArePaddedByALineUnlessExactStrideIsAsked) {
  auto padded = make_pool(64);
  EXPECT_EQ(padded->stride(), 2048u + 64u);
  PoolConfig c;
  c.name = "exact";
  c.count = 64;
  c.huge_pages = HugePages::kNever;
  c.exact_stride = true;
  auto exact = std::move(Pool::create(c)).value();
  EXPECT_EQ(exact->stride(), 2048u);
  for (Pool* pool : {padded.get(), exact.get()}) {
    for (std::uint32_t i = 0; i < 64; ++i) {
      Mbuf* m = pool->at(i);
      EXPECT_EQ(reinterpret_cast<std::uint8_t*>(m) - pool->region(), std::ptrdiff_t(i) * pool->stride());
      EXPECT_EQ(m->buf_len, 2048u);
      // Every byte of the slot, padding included, maps back to it.
      EXPECT_EQ(pool->slot_of(reinterpret_cast<std::uint8_t*>(m) + pool->stride() - 1), m);
    }
    EXPECT_GE(pool->region_bytes(), 64u * pool->stride());
  }
  // Padded headers spread over the cache's sets: 64 consecutive slots use 64 different line
  // offsets modulo 2048 bytes, where exact 2048-byte slots all share one.
  std::set<std::uintptr_t> offsets;
  for (std::uint32_t i = 0; i < 32; ++i) offsets.insert(reinterpret_cast<std::uintptr_t>(padded->at(i)) % 2048);
  EXPECT_EQ(offsets.size(), 32u);
}

TEST(Pool, FreshBuffersHaveCleanMetadata) {
  auto pool = make_pool(8, 0);
  Mbuf* m = pool->alloc();
  ASSERT_NE(m, nullptr);
  m->data_len = 77;
  m->drop_reason = 3;
  m->flags = 0xffff;
  m->endpoint = 4;
  mbuf_free(m);
  Mbuf* again[8];
  ASSERT_TRUE(pool->alloc_bulk(again, 8));
  for (Mbuf* b : again) {
    EXPECT_EQ(b->data_len, 0u);
    EXPECT_EQ(b->drop_reason, 0);
    EXPECT_EQ(b->flags, 0);
    EXPECT_EQ(b->endpoint, Mbuf::kNoEndpoint);
    EXPECT_EQ(b->refcnt.load(), 1);
    EXPECT_EQ(b->data_off, kMbufHeaderSize + pool->headroom());
  }
  mbuf_free_bulk(again, 8);
  EXPECT_EQ(pool->available(), 8u);
}

TEST(Pool, BulkAllocIsAllOrNothing) {
  auto pool = make_pool(10, 0);
  Mbuf* bufs[16];
  EXPECT_FALSE(pool->alloc_bulk(bufs, 11));
  EXPECT_EQ(pool->available(), 10u);
  ASSERT_TRUE(pool->alloc_bulk(bufs, 10));
  EXPECT_EQ(pool->available(), 0u);
  EXPECT_EQ(pool->alloc(), nullptr);
  mbuf_free_bulk(bufs, 10);
  EXPECT_EQ(pool->available(), 10u);
}

TEST(Pool, ThreadCacheServesAndFlushesWithoutLosingBuffers) {
  auto pool = make_pool(1000, 32);
  pool->attach_thread();
  std::vector<Mbuf*> held;
  for (int round = 0; round < 50; ++round) {
    Mbuf* b[20];
    ASSERT_TRUE(pool->alloc_bulk(b, 20));
    held.insert(held.end(), b, b + 20);
  }
  std::set<Mbuf*> unique(held.begin(), held.end());
  EXPECT_EQ(unique.size(), 1000u);
  EXPECT_EQ(pool->available(), 0u);
  mbuf_free_bulk(held.data(), 200);
  mbuf_free_bulk(held.data() + 200, 200);
  mbuf_free_bulk(held.data() + 400, 200);
  mbuf_free_bulk(held.data() + 600, 200);
  mbuf_free_bulk(held.data() + 800, 200);
  EXPECT_EQ(pool->available(), 1000u);
  pool->detach_thread();
  EXPECT_EQ(pool->available(), 1000u);
}

// A thread whose frees come in piles larger than its cache (an lcore taking back what a ring
// endpoint's consumer released 512 at a time) spills to the shared free list and later refills
// from it. The refill must hand back what was spilled, whose lines are still in this core's
// caches, not the buffers that have sat free the longest: behind those, the thread's working set
// grew to the whole pool (1.2 million buffers in configs/bench-synth.toml) and the receive rate
// fell by 40%.
TEST(Pool, RefillsAfterSpillsHandBackRecentlyFreedBuffers) {
  constexpr std::uint32_t kCount = 16384, kCache = 256, kBurst = 32, kPile = 512;
  auto pool = make_pool(kCount, kCache);
  pool->attach_thread();
  std::vector<Mbuf*> in_flight;  // received, not yet given back: oldest first
  std::set<Mbuf*> distinct;
  for (unsigned pass = 0; pass < 4000; ++pass) {
    Mbuf* b[kBurst];
    ASSERT_TRUE(pool->alloc_bulk(b, kBurst));
    distinct.insert(b, b + kBurst);
    in_flight.insert(in_flight.end(), b, b + kBurst);
    // The consumer gives back the oldest kPile once it holds two piles' worth.
    if (in_flight.size() >= 2 * kPile) {
      mbuf_free_bulk(in_flight.data(), kPile);
      in_flight.erase(in_flight.begin(), in_flight.begin() + kPile);
    }
  }
  // In flight (up to 2 piles), in the cache (up to 2 caches), and what spills and refills move.
  EXPECT_LT(distinct.size(), 4096u) << "refills handed out buffers that had been free the longest";
  mbuf_free_bulk(in_flight.data(), static_cast<unsigned>(in_flight.size()));
  pool->detach_thread();
  EXPECT_EQ(pool->available(), kCount);
}

// Buffers a thread without a cache frees (an application thread releasing what it held) are the
// next ones a refill hands out, for the same reason.
TEST(Pool, RefillsTakeWhatThreadsWithoutACacheFreedFirst) {
  auto pool = make_pool(16384, 256);
  Mbuf* held[256];
  ASSERT_TRUE(pool->alloc_bulk(held, 256));  // no cache on this thread yet: straight from the free list
  std::set<Mbuf*> freed(held, held + 256);
  mbuf_free_bulk(held, 256);
  pool->attach_thread();
  Mbuf* b[32];
  ASSERT_TRUE(pool->alloc_bulk(b, 32));
  for (Mbuf* m : b) EXPECT_TRUE(freed.count(m)) << "a refill skipped the buffers freed last";
  mbuf_free_bulk(b, 32);
  pool->detach_thread();
  EXPECT_EQ(pool->available(), 16384u);
}

TEST(Pool, ReferenceCountKeepsBufferUntilLastHolderFrees) {
  auto pool = make_pool(4, 0);
  Mbuf* m = pool->alloc();
  mbuf_ref(m, 2);
  EXPECT_EQ(pool->available(), 3u);
  mbuf_free(m);
  mbuf_free(m);
  EXPECT_EQ(pool->available(), 3u);
  mbuf_free(m);
  EXPECT_EQ(pool->available(), 4u);
}

// A second free of a buffer already in its pool must not put the slot in the free list twice,
// where it would later be handed to two owners at once.
TEST(Pool, FreeOfABufferAlreadyInItsPoolIsRefused) {
  auto pool = make_pool(8, 0);
  Mbuf* m = pool->alloc();
  ASSERT_NE(m, nullptr);
  mbuf_free(m);
  const std::uint64_t before = frees_of_free_buffers();
  mbuf_free(m);
  mbuf_free(m);
  EXPECT_EQ(pool->available(), 8u);
  // With the ownership auditor the audit refuses (and reports) them before the count is read.
  if (!kMbufAudit) {
    EXPECT_EQ(frees_of_free_buffers(), before + 2);
  }
  Mbuf* all[9];
  ASSERT_TRUE(pool->alloc_bulk(all, 8));
  EXPECT_EQ(std::set<Mbuf*>(all, all + 8).size(), 8u);
  EXPECT_EQ(pool->alloc(), nullptr);
  mbuf_free_bulk(all, 8);
  EXPECT_EQ(pool->available(), 8u);
}

TEST(Pool, BuffersFreedFromOtherThreadsAllComeBack) {
  auto pool = make_pool(4096, 64);
  auto handoff = std::move(MpmcRing<Mbuf*>::create(1024)).value();
  constexpr int kRounds = 20000;
  std::atomic<bool> done{false};
  // The allocating thread (an lcore) hands buffers to two freeing threads (applications).
  std::thread lcore([&] {
    pool->attach_thread();
    for (int i = 0; i < kRounds; ++i) {
      Mbuf* b[8];
      while (!pool->alloc_bulk(b, 8)) std::this_thread::yield();
      for (Mbuf* m : b) m->user_u64 = std::uint64_t(i);
      unsigned sent = 0;
      while (sent < 8) sent += handoff->enqueue_burst(b + sent, 8 - sent);
    }
    pool->detach_thread();
    done = true;
  });
  std::atomic<std::uint64_t> freed{0};
  auto app = [&] {
    Mbuf* b[16];
    for (;;) {
      unsigned n = handoff->dequeue_burst(b, 16);
      if (n == 0) {
        if (done && handoff->empty()) break;
        continue;
      }
      mbuf_free_bulk(b, n);
      freed += n;
    }
  };
  // Two application threads free while the lcore thread allocates through its cache.
  std::thread app1(app), app2(app);
  lcore.join();
  app1.join();
  app2.join();
  EXPECT_EQ(freed.load(), std::uint64_t(kRounds) * 8);
  EXPECT_EQ(pool->available(), 4096u);
}

}  // namespace
}  // namespace rawpipe

namespace rawpipe {
namespace {

// The VmFlags line of the mapping that holds `addr` in /proc/self/smaps ("hg": advised for
// transparent huge pages, "nh": advised against them, "ht": hugetlb).
std::string vm_flags_of(const void* addr) {
  std::ifstream smaps("/proc/self/smaps");
  const auto a = reinterpret_cast<std::uintptr_t>(addr);
  std::string line;
  bool inside = false;
  while (std::getline(smaps, line)) {
    unsigned long lo = 0, hi = 0;
    // Mapping lines start "lo-hi perms ..."; field lines ("Rss:", "VmFlags:") do not parse as two numbers.
    if (std::sscanf(line.c_str(), "%lx-%lx", &lo, &hi) == 2) inside = a >= lo && a < hi;
    if (inside && line.rfind("VmFlags:", 0) == 0) return line + " ";
  }
  return "";
}

// huge_pages = "never" means plain pages: no hugetlb, and the region is advised against
// transparent huge pages rather than for them; "auto" without reserved hugepages asks for THP.
TEST(Pool, HugePagesNeverMeansPlainPages) {
  PoolConfig c;
  c.name = "plain";
  c.count = 2048;
  c.huge_pages = HugePages::kNever;
  auto never = std::move(Pool::create(c)).value();
  EXPECT_FALSE(never->on_hugepages());
  EXPECT_NE(never->memory_notice().find("plain pages"), std::string::npos) << never->memory_notice();
  const std::string flags = vm_flags_of(never->region());
  ASSERT_FALSE(flags.empty());
  EXPECT_EQ(flags.find(" hg "), std::string::npos) << flags;
  EXPECT_EQ(flags.find(" ht "), std::string::npos) << flags;
  EXPECT_NE(flags.find(" nh "), std::string::npos) << flags;
  c.name = "auto";
  c.huge_pages = HugePages::kAuto;
  auto dflt = std::move(Pool::create(c)).value();
  if (!dflt->on_hugepages()) {
    const std::string auto_flags = vm_flags_of(dflt->region());
    EXPECT_NE(auto_flags.find(" hg "), std::string::npos) << auto_flags;
  }
}

}  // namespace
}  // namespace rawpipe
