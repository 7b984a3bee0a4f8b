// The line `rawpipe run` prints every [run] stats_interval, short enough for an 80-column terminal:
//   [    3.0s] pps rx 12.41M  delivered 9.30M  drops 3.11M  lost 0
// with "tx" beside delivered when the config has echo or forward endpoints. Rates are over the
// last interval. The reasons behind drops and losses (totals so far) are a separate block, printed
// on request (--reasons, --reasons-every) so the line itself stays one line.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "rawpipe/pipeline.hh"
#include "rawpipe/port_info.hh"

namespace rawpipe::app {

inline constexpr std::size_t kLiveLineMaxWidth = 80;

// What the live line reads at one moment: the pipeline's counters and each port's losses before
// the pipeline (frames the kernel, the NIC or the pool lost), by port name.
struct LiveSample {
  PipelineSnapshot snapshot;
  std::vector<std::pair<std::string, PortStats>> ports;
};

LiveSample take_live_sample(const Pipeline& pipeline);

class LiveLine {
 public:
  LiveLine(const LiveSample& start, bool show_tx) : start_(start), prev_(start), show_tx_(show_tx) {}
  // One line, no newline, at most kLiveLineMaxWidth columns.
  std::string line(const LiveSample& now);
  // "  drops so far: no_match 12, truncated_ipv4 3" and "  lost so far: port p0 kernel_ring_full 4",
  // wrapped at kLiveLineMaxWidth; "" when nothing was dropped or lost.
  static std::string reasons(const LiveSample& now);

 private:
  LiveSample start_;
  LiveSample prev_;
  bool show_tx_;
};

// A rate in at most 7 characters: "12.41M", "870.1k", "12", "1.234G".
std::string short_rate(double per_second);

}  // namespace rawpipe::app
