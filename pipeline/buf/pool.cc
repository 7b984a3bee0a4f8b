#include "pipeline/buf/pool.hh"

#include "pipeline/buf/audit.hh"
#include "pipeline/buf/checked_free.hh"

#include <sys/mman.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cerrno>
#include <cstring>

namespace rawpipe {
namespace {

constexpr std::size_t kHugePage = 2u << 20;
constexpr std::uint32_t kMaxCacheSize = 256;
// Sixteen full caches: more than a few lcores spill between two refills, so the recent ring
// rarely overflows into the shared list; and 4096 slots of 2 KiB stay within an L3 cache even
// when the ring is full and refills cycle through all of it.
constexpr std::uint32_t kRecentSlots = 16 * kMaxCacheSize;

std::mutex g_ids_mu;
std::array<bool, Pool::kMaxPools> g_ids_used{};

// Per-thread cache pointers, indexed by pool id. Set by attach_thread on the owning thread only.
thread_local std::array<PoolCache*, Pool::kMaxPools> t_caches{};

// Frees refused because the buffer was already in its pool (mbuf_free_bulk); a statistic.
std::atomic<std::uint64_t> g_frees_of_free{0};

}  // namespace

Result<std::unique_ptr<Pool>> Pool::create(const PoolConfig& config) {
  if (config.count == 0) return Status::errorf("pool '{}': count must be at least 1", config.name);
  if (!is_power_of_two(config.buf_size) || config.buf_size < 512 || config.buf_size > 65536)
    return Status::errorf("pool '{}': buf_size {} must be a power of two from 512 to 65536 (AF_XDP frames need it)",
                          config.name, config.buf_size);
  if (config.headroom + kMbufHeaderSize + 64 > config.buf_size)
    return Status::errorf("pool '{}': headroom {} leaves less than 64 data bytes in a {}-byte buffer",
                          config.name, config.headroom, config.buf_size);
  if (config.cache_size > kMaxCacheSize)
    return Status::errorf("pool '{}': cache_size {} is above the maximum of {}", config.name,
                          config.cache_size, kMaxCacheSize);
  if (config.count > (1u << 30))
    return Status::errorf("pool '{}': count {} is above 2^30", config.name, config.count);

  std::unique_ptr<Pool> pool(new Pool());
  pool->name_ = config.name;
  pool->count_ = config.count;
  pool->buf_size_ = config.buf_size;
  pool->stride_ = config.exact_stride ? config.buf_size : config.buf_size + kCacheLine;
  pool->headroom_ = config.headroom;
  pool->cache_size_ = config.cache_size;
  pool->provider_ = config.provider;

  {
    std::lock_guard lock(g_ids_mu);
    unsigned id = 0;
    while (id < kMaxPools && g_ids_used[id]) ++id;
    if (id == kMaxPools) return Status::errorf("pool '{}': more than {} pools exist", config.name, kMaxPools);
    g_ids_used[id] = true;
    pool->id_ = static_cast<std::uint16_t>(id);
  }

  const std::size_t bytes = std::size_t(config.count) * pool->stride_;
  const double mib = double(bytes) / double(1u << 20);
  if (config.provider.alloc) {
    void* mem = config.provider.alloc(bytes, config.provider.ctx);
    if (!mem)
      return Status::errorf("pool '{}': the application's allocator returned no memory for {} bytes",
                            config.name, bytes);
    if (reinterpret_cast<std::uintptr_t>(mem) % 4096 != 0) {
      config.provider.free(mem, config.provider.ctx);
      return Status::errorf("pool '{}': the application's allocator returned memory not aligned to 4096 bytes",
                            config.name);
    }
    pool->region_ = static_cast<std::uint8_t*>(mem);
    pool->region_bytes_ = bytes;
    pool->memory_notice_ = fmt::format("pool {}: {:.1f} MiB from the application's allocator", config.name, mib);
  } else {
    void* mem = MAP_FAILED;
    std::size_t huge_bytes = align_up(bytes, kHugePage);
    if (config.huge_pages != HugePages::kNever) {
      mem = mmap(nullptr, huge_bytes, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB | MAP_POPULATE, -1, 0);
    }
    if (mem != MAP_FAILED) {
      pool->region_bytes_ = huge_bytes;
      pool->on_hugepages_ = true;
      pool->memory_notice_ = fmt::format("pool {}: {:.1f} MiB on 2 MiB hugepages", config.name, mib);
    } else {
      int huge_errno = errno;
      if (config.huge_pages == HugePages::kRequire)
        return Status::errorf("pool '{}': {:.1f} MiB of 2 MiB hugepages are not available ({}); reserve them with "
                              "'echo {} > /sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages' or set huge_pages = \"auto\"",
                              config.name, mib, std::strerror(huge_errno), huge_bytes / kHugePage);
      mem = mmap(nullptr, huge_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (mem == MAP_FAILED)
        return Status::errorf("pool '{}': cannot map {} bytes: {}", config.name, huge_bytes, std::strerror(errno));
      pool->region_bytes_ = huge_bytes;
      if (config.huge_pages == HugePages::kNever) {
        // "never" means plain pages: no hugetlb and no transparent huge pages either.
        (void)madvise(mem, huge_bytes, MADV_NOHUGEPAGE);
        pool->memory_notice_ =
            fmt::format("pool {}: {:.1f} MiB of anonymous memory on plain pages (huge_pages = \"never\")", config.name, mib);
      } else {
        // Best effort: without THP the pool still works, only with more TLB misses.
        (void)madvise(mem, huge_bytes, MADV_HUGEPAGE);
        pool->memory_notice_ = fmt::format(
            "pool {}: {:.1f} MiB of anonymous memory advised for transparent huge pages (no 2 MiB hugepages reserved)",
            config.name, mib);
      }
    }
    pool->mapped_ = true;
    pool->region_ = static_cast<std::uint8_t*>(mem);
  }

  auto ring = MpmcRing<Mbuf*>::create(static_cast<std::uint32_t>(std::bit_ceil(config.count)));
  if (!ring) return ring.status().context(fmt::format("pool '{}'", config.name));
  pool->free_ = std::move(ring).value();
  auto recent = MpmcRing<Mbuf*>::create(std::min(kRecentSlots, static_cast<std::uint32_t>(std::bit_ceil(config.count))));
  if (!recent) return recent.status().context(fmt::format("pool '{}'", config.name));
  pool->recent_ = std::move(recent).value();

  Mbuf& t = pool->line0_template_;
  std::memset(static_cast<void*>(&t), 0, sizeof(t));
  t.pool = pool.get();
  t.data_off = kMbufHeaderSize + config.headroom;
  t.refcnt.store(1, std::memory_order_relaxed);
  t.endpoint = Mbuf::kNoEndpoint;

  // Writing every header also faults in every page, so the data path never takes a page fault.
  std::vector<Mbuf*> all(config.count);
  for (std::uint32_t i = 0; i < config.count; ++i) {
    Mbuf* m = pool->at(i);
    std::memset(static_cast<void*>(m), 0, sizeof(Mbuf));
    m->pool = pool.get();
    m->index = i;
    m->buf_len = config.buf_size;
    all[i] = m;
  }
  if (!pool->free_->enqueue_bulk(all.data(), config.count))
    return Status::errorf("pool '{}': internal error filling the free list", config.name);
#if RAWPIPE_MBUF_DEBUG
  audit_detail::register_pool(pool.get());
#endif
  buffer_regions::add(pool.get());
  return pool;
}

Pool::~Pool() {
  if (region_) buffer_regions::remove(this);
#if RAWPIPE_MBUF_DEBUG
  audit_detail::unregister_pool(this);
#endif
  {
    std::lock_guard lock(caches_mu_);
    caches_.clear();
  }
  if (region_) {
    if (mapped_)
      munmap(region_, region_bytes_);
    else if (provider_.free)
      provider_.free(region_, provider_.ctx);
  }
  std::lock_guard lock(g_ids_mu);
  g_ids_used[id_] = false;
}

PoolCache* Pool::thread_cache() const noexcept { return t_caches[id_]; }

void Pool::attach_thread() {
  if (cache_size_ == 0 || t_caches[id_]) return;
  auto cache = std::make_unique<PoolCache>();
  cache->size = cache_size_;
  t_caches[id_] = cache.get();
  std::lock_guard lock(caches_mu_);
  caches_.push_back(std::move(cache));
}

void Pool::detach_thread() {
  PoolCache* cache = t_caches[id_];
  if (!cache) return;
  std::uint32_t len = cache->len.load(std::memory_order_relaxed);
  give_free(cache->objs, len);
  cache->len.store(0, std::memory_order_relaxed);
  t_caches[id_] = nullptr;
  std::lock_guard lock(caches_mu_);
  std::erase_if(caches_, [cache](const auto& c) { return c.get() == cache; });
}

std::uint32_t Pool::available() const noexcept {
  std::uint32_t n = free_->size() + recent_->size();
  std::lock_guard lock(caches_mu_);
  for (const auto& c : caches_) n += c->len.load(std::memory_order_relaxed);
  return n;
}

bool Pool::take_free_bulk(Mbuf** out, unsigned n) noexcept {
  const unsigned recent = recent_->dequeue_burst(out, n);
  if (recent == n || free_->dequeue_bulk(out + recent, n - recent)) return true;
  give_free(out, recent);  // all or nothing: the recent slots go back where they came from
  return false;
}

void Pool::give_free(Mbuf* const* bufs, unsigned n) noexcept {
  const unsigned recent = recent_->enqueue_burst(bufs, n);
  // The shared list has room for every slot of the pool, so returning owned slots cannot fail.
  if (recent != n && !free_->enqueue_bulk(bufs + recent, n - recent)) std::abort();
}

std::uint32_t Pool::refill(PoolCache* c, std::uint32_t len, unsigned n) noexcept {
  const unsigned want = c->size + n - len;
  const unsigned recent = recent_->dequeue_burst(&c->objs[len], want);
  unsigned got = recent;
  if (recent < want) {
    got += free_->dequeue_burst(&c->objs[len + recent], want - recent);
    // The cache hands out its top first: the recent slots go above the shared list's.
    std::rotate(&c->objs[len], &c->objs[len + recent], &c->objs[len + got]);
  }
  len += got;
  c->unasked = len;
  if (len < n) c->len.store(len, std::memory_order_relaxed);
  return len;
}

bool Pool::alloc_bulk(Mbuf** out, unsigned n) noexcept {
  PoolCache* c = thread_cache();
  if (c == nullptr || n > c->size) {
    if (!take_free_bulk(out, n)) return false;
  } else {
    std::uint32_t len = c->len.load(std::memory_order_relaxed);
    if (len < n) [[unlikely]] {
      len = refill(c, len, n);
      if (len < n) return false;
    }
    // The top n in one block copy; which of them comes first in the burst does not matter.
    len -= n;
    std::memcpy(out, &c->objs[len], n * sizeof(Mbuf*));
    c->len.store(len, std::memory_order_relaxed);
    // Slots that came from the shared lists were freed by other threads: their header lines may
    // be dirty in another core's cache. The next burst's worth of them is asked for (for writing,
    // since reset() rewrites line 0) a call ahead, so the transfers are done before that reset
    // instead of stalling it; each once. Slots this thread freed itself go back on top with their
    // lines here, and asking for those on every call cost a prefetch per packet and pulled the
    // burst below into L1 for nothing (the next call takes the ones freed meanwhile).
    const std::uint32_t top = len < c->unasked ? len : c->unasked;
    const std::uint32_t stop = top > n ? top - n : 0;
    for (std::uint32_t i = top; i != stop;) prefetchw(c->objs[--i]);
    c->unasked = stop;
  }
  // The template read once: the stores into the buffers could otherwise alias it, and it would be
  // loaded again for every buffer.
  alignas(16) std::uint8_t line0[kResetBytes];
  std::memcpy(line0, &line0_template_, sizeof line0);
  for (unsigned i = 0; i < n; ++i) std::memcpy(static_cast<void*>(out[i]), line0, sizeof line0);
#if RAWPIPE_MBUF_DEBUG
  audit_detail::on_alloc(out, n);
#endif
  return true;
}

void Pool::put_bulk(Mbuf* const* bufs, unsigned n) noexcept {
  PoolCache* c = thread_cache();
  if (c == nullptr || n > c->size) {
    give_free(bufs, n);
    return;
  }
  std::uint32_t len = c->len.load(std::memory_order_relaxed);
  std::memcpy(&c->objs[len], bufs, n * sizeof(Mbuf*));
  len += n;
  if (len >= 2 * c->size) {
    give_free(&c->objs[c->size], len - c->size);
    len = c->size;
  }
  c->len.store(len, std::memory_order_relaxed);
}

std::uint64_t frees_of_free_buffers() noexcept { return g_frees_of_free.load(std::memory_order_relaxed); }

namespace {
// The common call: a burst of buffers of one pool, each held by the caller alone (a sink, a drop,
// a ring endpoint's returns). One pass checks all of them and a second marks them free, and the
// caller's own array goes to the pool; anything else (a null, a shared or released buffer, a
// second pool) returns false having changed nothing, for the general loop to take.
RAWPIPE_ALWAYS_INLINE bool free_sole_held_of_one_pool(Mbuf* const* bufs, unsigned n) noexcept {
#if RAWPIPE_MBUF_DEBUG
  (void)bufs;
  (void)n;
  return false;  // every free goes through the auditor's checks
#else
  if (n == 0 || bufs[0] == nullptr) return false;
  Pool* const pool = bufs[0]->pool;
  for (unsigned i = 0; i < n; ++i) {
    const Mbuf* m = bufs[i];
    // A5 of the general loop: acquire pairs with R3 of the holder that dropped the count to 1.
    if (m == nullptr || m->refcnt.load(std::memory_order_acquire) != 1 || m->pool != pool) [[unlikely]]
      return false;
  }
  for (unsigned i = 0; i < n; ++i) bufs[i]->refcnt.store(0, std::memory_order_relaxed);
  pool->put_bulk(bufs, n);
  return true;
#endif
}
}  // namespace

void mbuf_free_bulk(Mbuf* const* bufs, unsigned n) noexcept {
  if (free_sole_held_of_one_pool(bufs, n)) [[likely]]
    return;
  Mbuf* batch[kMaxBurst];
  unsigned batched = 0;
  Pool* batch_pool = nullptr;
  for (unsigned i = 0; i < n; ++i) {
    Mbuf* m = bufs[i];
    if (m == nullptr) [[unlikely]]
      continue;
#if RAWPIPE_MBUF_DEBUG
    if (!audit_detail::check_free(m)) continue;  // foreign or already free: counted and reported
#endif
    // Sole holder: nobody else can touch the count, so skip the atomic RMW (as rte_pktmbuf_prefree_seg).
    // A5: acquire pairs with R3 of the holder that dropped the count to 1 after its last access,
    // and with the acq_rel CAS of a checked free that left kRefReleased.
    const std::uint16_t r = m->refcnt.load(std::memory_order_acquire);
    if (r != 1 && r != kRefReleased) {
      // Zero: the buffer is in its pool already, so this is a second free by a caller that holds
      // no reference. Decrementing would wrap the count to kRefReleased and the next free would
      // put the slot in the pool twice, to be handed to two owners; it is refused and counted
      // instead (frees_of_free_buffers, reported with the API's misuse counters).
      if (r == 0) [[unlikely]] {
        g_frees_of_free.fetch_add(1, std::memory_order_relaxed);
        continue;
      }
      // R3: release so our reads of the packet happen before the last holder recycles it;
      // acquire (for the last holder) pairs with the other holders' R3.
      if (m->refcnt.fetch_sub(1, std::memory_order_acq_rel) != 1) continue;
    }
#if RAWPIPE_MBUF_DEBUG
    if (!audit_detail::on_release(m)) continue;  // another free of the same buffer got here first
#endif
    // Zero marks the slot free: the checked frees of the Extra API (and the ownership auditor)
    // refuse a second free. The line is in this core's cache already (the load above).
    m->refcnt.store(0, std::memory_order_relaxed);
    if (m->pool != batch_pool || batched == kMaxBurst) {
      if (batched) batch_pool->put_bulk(batch, batched);
      batch_pool = m->pool;
      batched = 0;
    }
    batch[batched++] = m;
  }
  if (batched) batch_pool->put_bulk(batch, batched);
}

}  // namespace rawpipe
