// How far a ring endpoint's consumer sits from the lcore that fills its ring, in the time a cache
// line takes to cross between their cores.
//
// Handing packets over moves lines between the two cores: the ring's tail, which the lcore writes
// and the consumer polls, and the slots. Between cores that share a cache a line crosses in tens
// of nanoseconds, and publishing the tail with every burst keeps both the hand-over and the
// buffers' way back as short as they can be. Between CCDs or sockets it takes hundreds, and an
// lcore that publishes 30 times a microsecond spends its time waiting for its own line; it then
// does better to publish once per several bursts (Lcore, kPassesPerPublish).
//
// The consumer measures it, not the lcore: the lcore's loads queue behind its own traffic (the
// packets, the pool), where the consumer's poll of the tail is mostly alone. It times its looks at
// the tails the lcore stores plainly (a far consumer's other tails are streamed past the caches,
// EndpointRing::publish_streaming): the lcore wrote that line since this core read it, so the
// load fetched it from the lcore's core. The smallest of a window of such loads is the crossing
// with nothing in front of it (an interrupt or a contended line only lengthens a sample), and each
// window decides near or far on its own, so the verdict follows the threads when a scheduler or a
// hypervisor moves them.
#pragma once

#include <x86intrin.h>

#include <atomic>
#include <cstdint>
#include <limits>

#include "rawpipe/compiler.hh"

namespace rawpipe {

class alignas(kFalseSharingRange) ConsumerDistance {
 public:
  static constexpr unsigned kSamplesPerVerdict = 32;
  // Between the crossing of cores that share a cache (30-60 ns one way on the machine of
  // docs/BENCHMARKS.md) and that of CCDs or sockets apart (250 ns and more).
  static constexpr double kFarNs = 90;

  // Control path: loads that take at least `cycles` TSC cycles make a window far.
  void set_far_cycles(std::uint64_t cycles) noexcept { far_cycles_ = cycles; }

  // The consumer (the one thread that holds the endpoint's consumer side): one timed load of the
  // tail, which the lcore had written since the last one.
  void sample(std::uint64_t cycles) noexcept {
    if (cycles < min_) min_ = cycles;
    if (++samples_ < kSamplesPerVerdict) return;
    const bool far = min_ >= far_cycles_;
    // Stored only when it changes: the lcore reads this line, and keeps it in its cache.
    if (far != far_.load(std::memory_order_relaxed)) far_.store(far, std::memory_order_relaxed);
    samples_ = 0;
    min_ = std::numeric_limits<std::uint64_t>::max();
  }

  // The lcore, any number of times: the last window's verdict. Relaxed: it only chooses when the
  // lcore publishes, never what the consumer may read.
  bool far() const noexcept { return far_.load(std::memory_order_relaxed); }

  // The TSC once every earlier instruction has completed, before any later one starts.
  static std::uint64_t tsc_before() noexcept {
    _mm_lfence();
    const std::uint64_t t = __rdtsc();
    _mm_lfence();
    return t;
  }
  // The TSC once every earlier load has its value (rdtscp waits for them; rdtsc does not).
  static std::uint64_t tsc_after() noexcept {
    unsigned aux;
    return __rdtscp(&aux);
  }

 private:
  // The consumer's line.
  std::uint64_t far_cycles_ = std::numeric_limits<std::uint64_t>::max();
  std::uint64_t min_ = std::numeric_limits<std::uint64_t>::max();
  unsigned samples_ = 0;
  // The lcore's line.
  alignas(kFalseSharingRange) std::atomic<bool> far_{false};
};

}  // namespace rawpipe
