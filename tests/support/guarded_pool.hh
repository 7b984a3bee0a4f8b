// A one-slot packet pool whose slot ends right before a PROT_NONE page.
//
// place() copies a frame so that its last byte is the last readable byte of the mapping: any read
// past data_len faults at once (SIGSEGV) instead of silently reading the slot's tail. Parse tests
// and the parse fuzz target run every frame through it. Header-only so that tests and the fuzz
// target can use it without a build-system change.
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <span>

#include "rawpipe/mbuf.hh"
#include "pipeline/buf/pool.hh"

namespace rawpipe::testing {

class GuardedPool {
 public:
  // buf_size: a power of two from 4096 (the pool wants a page-aligned region that ends at the
  // guard) to 65536; frames up to buf_size - 128 bytes fit. Returns null if the pool fails.
  static std::unique_ptr<GuardedPool> create(std::uint32_t buf_size = 4096) {
    if (buf_size < 4096) return nullptr;
    std::unique_ptr<GuardedPool> g(new GuardedPool());
    g->page_ = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
    PoolConfig c;
    c.name = "guarded";
    c.count = 1;
    c.buf_size = buf_size;
    c.headroom = 0;
    c.cache_size = 0;
    c.huge_pages = HugePages::kNever;
    c.exact_stride = true;  // the slot must end at the guard page
    c.provider.alloc = &GuardedPool::map;
    c.provider.free = &GuardedPool::unmap;
    c.provider.ctx = g.get();
    auto p = Pool::create(c);
    if (!p) return nullptr;
    g->pool_ = std::move(p).value();
    g->slot_ = g->pool_->alloc();
    if (!g->slot_) return nullptr;
    return g;
  }

  ~GuardedPool() {
    if (slot_) mbuf_free(slot_);
    pool_.reset();
  }

  std::size_t max_frame() const noexcept { return pool_->buf_size() - kMbufHeaderSize; }

  // Copies the frame to the end of the slot, resets the parse fields and returns the buffer.
  // Frames longer than max_frame() are cut to it.
  Mbuf* place(const std::uint8_t* bytes, std::size_t len) noexcept {
    if (len > max_frame()) len = max_frame();
    pool_->reset(slot_);
    slot_->data_off = static_cast<std::uint32_t>(pool_->buf_size() - len);
    slot_->data_len = static_cast<std::uint32_t>(len);
    if (len) std::memcpy(slot_->data(), bytes, len);
    return slot_;
  }
  Mbuf* place(std::span<const std::uint8_t> bytes) noexcept { return place(bytes.data(), bytes.size()); }

  // First byte that faults when read.
  const std::uint8_t* guard() const noexcept { return pool_->region() + pool_->region_bytes(); }
  Pool& pool() noexcept { return *pool_; }

 private:
  GuardedPool() = default;

  static void* map(std::size_t bytes, void* ctx) {
    auto* g = static_cast<GuardedPool*>(ctx);
    const std::size_t body = (bytes + g->page_ - 1) / g->page_ * g->page_;
    void* mem = mmap(nullptr, body + g->page_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED) return nullptr;
    // The region must end exactly at the guard page: with buf_size >= 4096 bytes is a whole
    // number of pages, so body == bytes and the region starts page-aligned.
    auto* base = static_cast<std::uint8_t*>(mem);
    if (mprotect(base + body, g->page_, PROT_NONE) != 0) {
      munmap(mem, body + g->page_);
      return nullptr;
    }
    g->map_base_ = base;
    g->map_len_ = body + g->page_;
    return base + (body - bytes);
  }
  static void unmap(void*, void* ctx) {
    auto* g = static_cast<GuardedPool*>(ctx);
    munmap(g->map_base_, g->map_len_);
  }

  std::size_t page_ = 4096;
  std::uint8_t* map_base_ = nullptr;
  std::size_t map_len_ = 0;
  Mbuf* slot_ = nullptr;
  std::unique_ptr<Pool> pool_;  // last: destroyed first, while map_base_ is still known
};

}  // namespace rawpipe::testing
