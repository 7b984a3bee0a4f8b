// Small portability helpers shared by the data path.
#pragma once

#include <cstddef>
#include <cstdint>

namespace rawpipe {

inline constexpr std::size_t kCacheLine = 64;
// Two lines: adjacent-line prefetch on x86 pulls pairs, so producer and consumer indices sit
// 128 bytes apart to avoid false sharing (DPDK's RTE_CACHE_GUARD, folly's hardware_destructive_interference_size).
inline constexpr std::size_t kFalseSharingRange = 128;

// The largest burst any stage handles; bursts live on the stack as arrays of this size.
inline constexpr unsigned kMaxBurst = 256;
inline constexpr unsigned kDefaultBurst = 32;

#define RAWPIPE_LIKELY(x) __builtin_expect(!!(x), 1)
#define RAWPIPE_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define RAWPIPE_ALWAYS_INLINE inline __attribute__((always_inline))

inline void cpu_relax() noexcept { __builtin_ia32_pause(); }

inline void prefetch0(const void* p) noexcept { __builtin_prefetch(p, 0, 3); }
inline void prefetchw(const void* p) noexcept { __builtin_prefetch(p, 1, 3); }

constexpr bool is_power_of_two(std::uint64_t v) noexcept { return v != 0 && (v & (v - 1)) == 0; }
constexpr std::uint64_t align_up(std::uint64_t v, std::uint64_t a) noexcept { return (v + a - 1) & ~(a - 1); }

}  // namespace rawpipe
