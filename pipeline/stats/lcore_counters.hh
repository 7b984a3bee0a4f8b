// Per-lcore data-path counters.
//
// Each lcore owns one LcoreCounters and is its only writer; the stats thread reads it at any time.
// Counters are relaxed atomics updated with a plain load+store (no read-modify-write: there is one
// writer), so the hot path pays an ordinary add. The block is aligned to kFalseSharingRange so two
// lcores never write the same cache line.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <new>

#include "rawpipe/compiler.hh"
#include "rawpipe/drop_reason.hh"

namespace rawpipe {

class Counter {
 public:
  // Single writer. Relaxed: a statistic, read by snapshot() with no data depending on it.
  void add(std::uint64_t n) noexcept { v_.store(v_.load(std::memory_order_relaxed) + n, std::memory_order_relaxed); }
  // Any thread. Relaxed, for the same reason.
  std::uint64_t load() const noexcept { return v_.load(std::memory_order_relaxed); }

 private:
  std::atomic<std::uint64_t> v_{0};
};
static_assert(std::atomic<std::uint64_t>::is_always_lock_free);

// A fixed-length array of counters in its own cache lines.
class CounterArray {
 public:
  explicit CounterArray(std::size_t n)
      : n_(n),
        v_(new (std::align_val_t{kFalseSharingRange}) Counter[round_up(n)]) {}
  ~CounterArray() { ::operator delete[](v_, std::align_val_t{kFalseSharingRange}); }
  CounterArray(const CounterArray&) = delete;
  CounterArray& operator=(const CounterArray&) = delete;

  Counter& operator[](std::size_t i) noexcept { return v_[i]; }
  const Counter& operator[](std::size_t i) const noexcept { return v_[i]; }
  std::size_t size() const noexcept { return n_; }

 private:
  // Whole cache-line ranges, so the next allocation cannot share the last line.
  static std::size_t round_up(std::size_t n) {
    constexpr std::size_t per = kFalseSharingRange / sizeof(Counter);
    return (n + per - 1) / per * per + (n == 0 ? per : 0);
  }
  std::size_t n_;
  Counter* v_;
};

struct alignas(kFalseSharingRange) LcoreCounters {
  LcoreCounters(std::size_t endpoints, std::size_t ports)
      : delivered_per_endpoint(endpoints), ring_full_per_endpoint(endpoints), transmitted_per_endpoint(endpoints),
        transmitted_per_port(ports) {}

  Counter rx_packets;
  Counter rx_bytes;
  Counter bursts;        // rx_burst calls that returned packets
  Counter empty_polls;   // rx_burst calls that returned none
  Counter delivered;     // sum of delivered_per_endpoint
  Counter transmitted;   // sum of transmitted_per_port
  Counter drops[kDropReasonCount];
  CounterArray delivered_per_endpoint;
  CounterArray ring_full_per_endpoint;  // drops[kEndpointRingFull] by endpoint
  CounterArray transmitted_per_endpoint;  // echo and forward endpoints: taken by a tx queue
  CounterArray transmitted_per_port;
};

}  // namespace rawpipe
