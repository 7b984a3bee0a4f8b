// Buffer pools.
//
// A pool is one contiguous, page-aligned region cut into `count` slots of `buf_size` bytes (with
// a cache line of padding between them unless PoolConfig::exact_stride), so a PMD can register it
// with a NIC once (ibv_reg_mr) or hand it to the kernel as an AF_XDP UMEM and the same slot
// travels from the wire to the consumer without a copy. The region comes from 2 MiB
// hugepages when the host has them reserved, otherwise from anonymous memory advised for
// transparent huge pages; Pool::memory_notice() says which, in one line.
//
// Free slots live in two multi-producer/multi-consumer rings: the shared free list, which starts
// with every slot, and in front of it a small ring of the slots freed most recently. A thread that
// calls attach_thread() gets a private cache in front of both (DPDK's rte_mempool_cache):
// allocation and free on that thread touch only the cache until it runs empty or over-full, then
// move `cache_size` pointers in one ring operation. Threads without a cache (application threads
// freeing held buffers) go to the rings directly, which is safe from any thread.
//
// Frees go to the recent ring while it has room, allocations take from it first. The shared list
// is a FIFO as long as the pool, so a slot spilled to it comes back only after every other free
// slot has: a thread whose frees arrive in piles larger than its cache (an lcore taking back what
// a ring endpoint's consumer released in one go) would otherwise refill with the slots free the
// longest, cold in every cache, and its working set would grow to the whole pool. Through the
// recent ring a spilled slot is handed out again within a few thousand frees, while its lines are
// still in a cache. (DPDK's "stack" mempool driver keeps its whole free list LIFO for the same
// reason; a bounded FIFO in front keeps both rings lock-free.)
//
// Allocation is all-or-nothing (alloc_bulk returns false and hands out nothing when fewer than n
// slots are free), like rte_pktmbuf_alloc_bulk.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "rawpipe/mbuf.hh"
#include "rawpipe/pool_config.hh"
#include "rawpipe/status.hh"
#include "pipeline/ring/ring.hh"

namespace rawpipe {

// One attached thread's private free list. Only its owner thread writes it.
struct alignas(kFalseSharingRange) PoolCache {
  std::uint32_t size = 0;  // flush threshold
  // Owner writes, stats readers on other threads load relaxed; a statistic, never a data edge.
  std::atomic<std::uint32_t> len{0};
  // objs[0 .. unasked) may hold slots from the pool's shared lists (the last refill) whose header
  // lines have not been asked for yet; what this thread freed since lies above, in its cache.
  std::uint32_t unasked = 0;
  Mbuf* objs[2 * kMaxBurst + 512];
};

class Pool {
 public:
  static constexpr unsigned kMaxPools = 64;

  static Result<std::unique_ptr<Pool>> create(const PoolConfig& config);
  ~Pool();
  Pool(const Pool&) = delete;
  Pool& operator=(const Pool&) = delete;

  const std::string& name() const noexcept { return name_; }
  std::uint16_t id() const noexcept { return id_; }
  std::uint8_t* region() const noexcept { return region_; }
  std::size_t region_bytes() const noexcept { return region_bytes_; }
  std::uint32_t count() const noexcept { return count_; }
  std::uint32_t buf_size() const noexcept { return buf_size_; }
  // Bytes from one slot to the next: buf_size, plus one cache line unless exact_stride.
  std::uint32_t stride() const noexcept { return stride_; }
  std::uint32_t headroom() const noexcept { return headroom_; }
  // Bytes available for packet data in a fresh buffer.
  std::uint32_t data_room() const noexcept { return buf_size_ - kMbufHeaderSize - headroom_; }
  bool on_hugepages() const noexcept { return on_hugepages_; }
  const std::string& memory_notice() const noexcept { return memory_notice_; }

  Mbuf* at(std::uint32_t index) const noexcept {
    return reinterpret_cast<Mbuf*>(region_ + std::size_t(index) * stride_);
  }
  bool contains(const void* p) const noexcept {
    auto* b = static_cast<const std::uint8_t*>(p);
    return b >= region_ && b < region_ + std::size_t(count_) * stride_;
  }
  // The slot that holds address p (p must be inside the region).
  Mbuf* slot_of(const void* p) const noexcept {
    std::size_t off = static_cast<const std::uint8_t*>(p) - region_;
    return at(static_cast<std::uint32_t>(off / stride_));
  }

  // Data path. Fresh buffers have refcnt 1, data_off = header + headroom, data_len 0 and
  // zeroed parse fields.
  [[nodiscard]] bool alloc_bulk(Mbuf** out, unsigned n) noexcept;
  [[nodiscard]] Mbuf* alloc() noexcept {
    Mbuf* m;
    return alloc_bulk(&m, 1) ? m : nullptr;
  }
  // Returns buffers whose reference count already reached zero. Use mbuf_free() otherwise.
  void put_bulk(Mbuf* const* bufs, unsigned n) noexcept;

  // Gives the calling thread a private cache for this pool (control path, idempotent). Call
  // detach_thread() from the same thread before it exits so its cached buffers return.
  void attach_thread();
  void detach_thread();

  // Free slots right now (ring plus caches). Exact only when no thread is using the pool.
  std::uint32_t available() const noexcept;
  std::uint32_t in_use() const noexcept { return count_ - available(); }

  // Everything before the slot index comes from the template, refcnt 1 and no endpoint included;
  // index and the second line stay as they are (a received packet's header then costs one cache
  // line, not two). No other thread holds a buffer being reset, so refcnt needs no atomic store.
  static constexpr std::size_t kResetBytes = offsetof(Mbuf, index);
  // Resets the header fields a fresh buffer must have; used by alloc_bulk and by PMDs whose
  // hardware hands buffers back without going through the free list.
  void reset(Mbuf* m) const noexcept { std::memcpy(static_cast<void*>(m), &line0_template_, kResetBytes); }

 private:
  Pool() = default;
  PoolCache* thread_cache() const noexcept;
  // Slow path of alloc_bulk: tops the cache up from the free lists, out of line so the fast path
  // stays short. Returns the cache's new length; when below n, it is stored and nothing is taken.
  [[gnu::noinline, gnu::cold]] std::uint32_t refill(PoolCache* c, std::uint32_t len, unsigned n) noexcept;
  // Exactly n free slots, recent ones first, or none.
  bool take_free_bulk(Mbuf** out, unsigned n) noexcept;
  // Frees slots: into the recent ring as far as it has room, the rest to the shared list.
  void give_free(Mbuf* const* bufs, unsigned n) noexcept;

  std::string name_;
  std::uint16_t id_ = 0;
  std::uint8_t* region_ = nullptr;
  std::size_t region_bytes_ = 0;
  std::uint32_t count_ = 0;
  std::uint32_t buf_size_ = 0;
  std::uint32_t stride_ = 0;
  std::uint32_t headroom_ = 0;
  std::uint32_t cache_size_ = 0;
  bool on_hugepages_ = false;
  bool mapped_ = false;
  PoolMemoryProvider provider_{};
  std::string memory_notice_;
  std::unique_ptr<MpmcRing<Mbuf*>> free_;    // room for every slot
  std::unique_ptr<MpmcRing<Mbuf*>> recent_;  // the last frees, up to kRecentSlots
  Mbuf line0_template_;

  mutable std::mutex caches_mu_;  // control path only: attach/detach and statistics
  std::vector<std::unique_ptr<PoolCache>> caches_;
};

// Frees that mbuf_free_bulk refused since the process started because the buffer was already in
// its pool (a second free by a caller that held no reference). Any thread.
std::uint64_t frees_of_free_buffers() noexcept;

}  // namespace rawpipe
