#include "pipeline/buf/checked_free.hh"

#include <array>
#include <atomic>

#include "pipeline/buf/pool.hh"

namespace rawpipe {
namespace {

// Indexed by pool id. A pool publishes itself after its region is mapped and its headers written
// (release) and withdraws before the region goes away; find() loads with acquire.
std::array<std::atomic<const Pool*>, Pool::kMaxPools> g_pools{};
// One past the highest id ever used, so find() scans only as far as pools have existed.
std::atomic<unsigned> g_high{0};

}  // namespace

namespace buffer_regions {

void add(const Pool* pool) noexcept {
  g_pools[pool->id()].store(pool, std::memory_order_release);
  unsigned high = g_high.load(std::memory_order_relaxed);
  while (high < pool->id() + 1u && !g_high.compare_exchange_weak(high, pool->id() + 1u, std::memory_order_release)) {
  }
}

void remove(const Pool* pool) noexcept {
  const Pool* expected = pool;
  g_pools[pool->id()].compare_exchange_strong(expected, nullptr, std::memory_order_release);
}

const Pool* find(const void* p) noexcept {
  const unsigned high = g_high.load(std::memory_order_acquire);
  for (unsigned i = 0; i < high; ++i) {
    const Pool* pool = g_pools[i].load(std::memory_order_acquire);
    if (pool && pool->contains(p)) return pool;
  }
  return nullptr;
}

}  // namespace buffer_regions

BufferCheck resolve_buffer(const void* p, Mbuf** out) noexcept {
  if (p == nullptr) return BufferCheck::kNull;
  const Pool* pool = buffer_regions::find(p);
  if (!pool) return BufferCheck::kForeign;
  Mbuf* start = pool->slot_of(p);
  const std::size_t off = static_cast<const std::uint8_t*>(p) - start->buf_addr();
  BufferCheck kind = BufferCheck::kOk;
  if (off != 0) {
    // Data lives from the end of the header to the end of the slot (headroom included: a
    // payload pointer after a prepend is still the buffer's).
    if (off < kMbufHeaderSize || off >= pool->buf_size()) return BufferCheck::kInsideHeader;
    kind = BufferCheck::kPayload;
  }
  if (start->pool != pool) return BufferCheck::kBadHeader;
  *out = start;
  return kind;
}

}  // namespace rawpipe
