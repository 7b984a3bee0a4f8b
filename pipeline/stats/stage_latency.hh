// Sampled per-stage latency of one lcore.
//
// Sampling: one queue poll in `every` is timed (a countdown per poll, no clock read otherwise);
// a timed poll reads the TSC between the stages of that burst and records, per stage, the
// burst's cycles divided by its packet count: the per-packet cost of the stage in that burst.
// "burst" is the whole rx..dispatch span per packet. Empty polls are not recorded.
//
// Writer: the owning lcore. Readers: the stats publisher and the metrics server (snapshots).
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

#include "rawpipe/compiler.hh"
#include "pipeline/stats/histogram.hh"
#include "rawpipe/plan.hh"

namespace rawpipe {

enum class Stage : std::uint8_t { kRx, kParse, kClassify, kFilter, kDispatch, kBurst, kCount };
inline constexpr std::size_t kStageCount = static_cast<std::size_t>(Stage::kCount);
inline constexpr std::array<std::string_view, kStageCount> kStageNames = {"rx",     "parse",    "classify",
                                                                          "filter", "dispatch", "burst"};


struct alignas(kFalseSharingRange) StageLatency {
  explicit StageLatency(std::uint32_t every) noexcept : every_(every ? every : 1), countdown_(every_) {}

  // Lcore, once per queue poll: true when this poll is to be timed.
  bool due() noexcept {
    if (--countdown_ != 0) [[likely]] return false;
    countdown_ = every_;
    return true;
  }
  void record(Stage s, std::uint64_t cycles, unsigned packets) noexcept {
    stage[static_cast<std::size_t>(s)].record(cycles / packets);
  }
  std::uint32_t every() const noexcept { return every_; }

  LatencyHistogram stage[kStageCount];

 private:
  std::uint32_t every_;
  std::uint32_t countdown_;  // lcore only
};

}  // namespace rawpipe
