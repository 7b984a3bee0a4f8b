// A log-linear latency histogram (HDR-style): values below 16 have one bucket each; above, each
// power of two [2^k, 2^(k+1)) is split into 16 equal sub-buckets, so a bucket's width is at most
// 1/16 of its lower bound (6.25% relative error) from one cycle to 2^42 cycles (~25 min at 3 GHz);
// larger values land in the last bucket. 624 buckets, 5 KiB.
//
// Writing: one thread (an lcore) records; each bucket, the count, the sum and the max are
// single-writer counters (a relaxed load and store, no read-modify-write), so recording costs a
// few plain adds. Reading: any thread takes a HistogramSnapshot at any time (relaxed loads; the
// snapshot is not atomic as a whole, each bucket is exact), merges snapshots of several writers
// and asks for quantiles.
//
// Units: whatever the writer records; the pipeline records TSC cycles (pipeline/stats/tsc.hh) and
// converts quantiles to ns when it reads.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>

#include "pipeline/stats/lcore_counters.hh"

namespace rawpipe {

struct HistogramLayout {
  static constexpr unsigned kSubBits = 4;
  static constexpr unsigned kSub = 1u << kSubBits;  // linear sub-buckets per power of two
  static constexpr unsigned kMaxBits = 42;          // values >= 2^kMaxBits share the last bucket
  static constexpr unsigned kBuckets = (kMaxBits - kSubBits + 1) * kSub;

  static constexpr unsigned bucket_of(std::uint64_t v) noexcept {
    if (v < kSub) return static_cast<unsigned>(v);
    const unsigned msb = 63u - static_cast<unsigned>(__builtin_clzll(v));
    if (msb >= kMaxBits) return kBuckets - 1;
    const unsigned shift = msb - kSubBits;
    return (shift + 1) * kSub + static_cast<unsigned>((v >> shift) & (kSub - 1));
  }
  // Smallest value of bucket b.
  static constexpr std::uint64_t lower(unsigned b) noexcept {
    if (b < kSub) return b;
    const unsigned shift = b / kSub - 1;
    return std::uint64_t(kSub + b % kSub) << shift;
  }
  // Largest value of bucket b (the last bucket is open-ended).
  static constexpr std::uint64_t upper(unsigned b) noexcept {
    if (b == kBuckets - 1) return ~std::uint64_t{0};
    return lower(b + 1) - 1;
  }
};

// A plain copy of a histogram, or the merge of several.
struct HistogramSnapshot {
  std::array<std::uint64_t, HistogramLayout::kBuckets> buckets{};
  std::uint64_t count = 0;  // sum of buckets (so quantiles and counts always agree)
  std::uint64_t sum = 0;
  std::uint64_t max = 0;

  void merge(const HistogramSnapshot& o) noexcept {
    for (unsigned b = 0; b < HistogramLayout::kBuckets; ++b) buckets[b] += o.buckets[b];
    count += o.count;
    sum += o.sum;
    max = std::max(max, o.max);
  }
  // The upper bound of the bucket holding the ceil(q * count)-th smallest value, capped at max:
  // never below the true quantile, at most 1/16 above it. 0 when empty. q in [0, 1].
  std::uint64_t quantile(double q) const noexcept {
    if (count == 0) return 0;
    std::uint64_t rank = static_cast<std::uint64_t>(q * double(count) + 0.999999);
    rank = std::clamp<std::uint64_t>(rank, 1, count);
    std::uint64_t seen = 0;
    for (unsigned b = 0; b < HistogramLayout::kBuckets; ++b) {
      seen += buckets[b];
      if (seen >= rank) return std::min(HistogramLayout::upper(b), max);
    }
    return max;
  }
};

class LatencyHistogram {
 public:
  // Single writer.
  void record(std::uint64_t v) noexcept {
    buckets_[HistogramLayout::bucket_of(v)].add(1);
    sum_.add(v);
    if (v > max_.load()) max_.store_single_writer(v);
  }
  // Any thread.
  HistogramSnapshot snapshot() const noexcept {
    HistogramSnapshot s;
    for (unsigned b = 0; b < HistogramLayout::kBuckets; ++b) {
      s.buckets[b] = buckets_[b].load();
      s.count += s.buckets[b];
    }
    s.sum = sum_.load();
    s.max = max_.load();
    return s;
  }

 private:
  // The max is a gauge, not a sum: stored, not added.
  class Max {
   public:
    void store_single_writer(std::uint64_t v) noexcept { v_.store(v, std::memory_order_relaxed); }
    std::uint64_t load() const noexcept { return v_.load(std::memory_order_relaxed); }  // relaxed: a statistic

   private:
    std::atomic<std::uint64_t> v_{0};
  };
  Counter buckets_[HistogramLayout::kBuckets];
  Counter sum_;
  Max max_;
};

static_assert(HistogramLayout::bucket_of(15) == 15 && HistogramLayout::bucket_of(16) == 16);
static_assert(HistogramLayout::bucket_of(31) == 31 && HistogramLayout::bucket_of(32) == 32);
static_assert(HistogramLayout::lower(HistogramLayout::bucket_of(1000)) <= 1000 &&
              HistogramLayout::upper(HistogramLayout::bucket_of(1000)) >= 1000);
static_assert(HistogramLayout::bucket_of(~std::uint64_t{0}) == HistogramLayout::kBuckets - 1);

}  // namespace rawpipe
