// How a packet buffer pool is sized and where its memory comes from ([[pools]] in a config, or
// a Plan built in code).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "rawpipe/build_config.h"

namespace rawpipe {

enum class HugePages { kAuto, kRequire, kNever };

// Where a pool's region comes from when the application supplies it (the Extra API's user
// allocator); unset means rawpipe maps the region itself.
struct PoolMemoryProvider {
  void* (*alloc)(std::size_t bytes, void* ctx) = nullptr;  // must return 4 KiB-aligned memory
  void (*free)(void* addr, void* ctx) = nullptr;
  void* ctx = nullptr;
};

// A pool of a Plan whose count is this is sized from what its ports and lcores hold, as a
// [[pools]] table without `count` is (at least 8192; docs/config.md, `count`).
inline constexpr std::uint32_t kPoolSizedFromPlan = 0;

struct PoolConfig {
  std::string name = "default";
  std::uint32_t count = kPoolSizedFromPlan;  // slots; a pool made outside a Plan needs a count
  std::uint32_t buf_size = 2048;      // bytes per slot, header included; a power of two for AF_XDP
  std::uint32_t headroom = RAWPIPE_HEADROOM;  // the build's default (meson option headroom)
  std::uint32_t cache_size = 256;     // per attached thread; 0 disables caches
  HugePages huge_pages = HugePages::kAuto;
  // Slots exactly buf_size apart, for drivers that find a slot from an address with a shift
  // (AF_XDP UMEM frames, the DPDK buffer bridge). Otherwise one cache line of padding follows
  // each slot: with a power-of-two stride the headers of all slots fall into 1/32 of the L2
  // cache's sets (2048-byte slots, 64-byte lines), so a pool of a few thousand buffers misses
  // on every header although it would fit; DPDK's mempool pads its objects for the same reason.
  bool exact_stride = false;
  PoolMemoryProvider provider{};
};

}  // namespace rawpipe
