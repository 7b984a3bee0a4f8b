// Counters of one filter callback (an Extra API registration or a filter plugin): packets shown to
// it, its verdicts, and its sampled latency, per lcore.
//
// A registration gets one FilterCounters when it is attached (pipeline/filter/filter.hh). Each
// lcore writes only its own FilterLcoreCounters (single writer, no read-modify-write); readers
// (stats publisher, metrics server) sum them. When a replaced or removed filter's block is
// reclaimed (no lcore can write it any more), its totals are folded into one summary per name
// and attachment point, so they stay readable and counters never go backwards, while memory
// stays flat however often filters are attached and removed.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "pipeline/stats/histogram.hh"
#include "pipeline/stats/lcore_counters.hh"

namespace rawpipe {

// Packets shown to the callback are not counted apart: a snapshot sums the four verdicts, so that
// a reader between two of the lcore's stores never sees "seen" disagree with them.
struct alignas(kFalseSharingRange) FilterLcoreCounters {
  Counter recv;     // RAWPIPE_RECV
  Counter drop;     // RAWPIPE_DROP
  Counter hold;     // RAWPIPE_HOLD
  Counter invalid;  // any other value (dropped as filter_invalid_verdict)
  // Cycles per packet of the callback, in the lcore's timed polls (stage_latency.hh): a burst
  // callback's call divided by its packet count, a per-packet callback timed call by call.
  LatencyHistogram latency;
};

// Where a filter is attached: an endpoint, or one rx queue of a port.
struct FilterAttachPoint {
  bool on_queue = false;
  std::uint16_t endpoint = 0;
  std::uint16_t port = 0;
  std::uint16_t queue = 0;
};

struct FilterCounters {
  FilterCounters(std::string name_, FilterAttachPoint at_, std::size_t lcores)
      : name(std::move(name_)), at(at_), lcore_count(lcores ? lcores : 1),
        per_lcore(std::make_unique<FilterLcoreCounters[]>(lcore_count)) {}

  std::string name;  // plugin name, the callback's symbol, or its address
  FilterAttachPoint at;
  std::size_t lcore_count;
  std::unique_ptr<FilterLcoreCounters[]> per_lcore;
};

// A reader's sum over lcores.
struct FilterStats {
  std::string name;
  FilterAttachPoint at;
  bool attached = false;  // still the filter of its attachment point
  std::uint64_t seen = 0, recv = 0, drop = 0, hold = 0, invalid = 0;
  HistogramSnapshot latency;  // cycles
};

}  // namespace rawpipe
