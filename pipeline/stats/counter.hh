// Single-writer statistics counters.
//
// A queue's counters are written only by the lcore that owns the queue and read by the stats
// thread. A relaxed load/store pair (no read-modify-write) is a plain add on x86-64, and the
// reader never sees a torn value; relaxed both ways because a statistic carries no data edge.
#pragma once

#include <atomic>
#include <cstdint>

namespace rawpipe {

inline void count_add(std::uint64_t& counter, std::uint64_t n = 1) noexcept {
  std::atomic_ref<std::uint64_t> c(counter);
  c.store(c.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
}

inline std::uint64_t count_load(const std::uint64_t& counter) noexcept {
  // atomic_ref needs a non-const object; the load does not write.
  return std::atomic_ref<std::uint64_t>(const_cast<std::uint64_t&>(counter)).load(std::memory_order_relaxed);
}

}  // namespace rawpipe
