// What `rawpipe run` prints at the end: the summary and its JSON form (live_line.hh has the live line).
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "rawpipe/config.hh"
#include "rawpipe/pipeline.hh"

namespace rawpipe::app {


// What the lcores counted between two snapshots: rates over exactly the interval the packets were
// counted in (the run's totals also hold what arrived during setup and after the stop request).
struct RateWindow {
  double seconds = 0;
  std::uint64_t rx = 0, delivered = 0, transmitted = 0, dropped = 0;
  std::vector<std::uint64_t> rx_per_lcore;  // in plan order

  static RateWindow between(const PipelineSnapshot& first, const PipelineSnapshot& last) noexcept;
  double pps(std::uint64_t n) const noexcept { return seconds > 0 ? double(n) / seconds : 0; }
};

struct RunSummary {
  std::string config;
  double seconds = 0;               // the measured window: from the first snapshot after setup to the stop request
  RateWindow window;                // what the lcores counted in that window
  Accounting accounting;
  std::vector<LcoreStats> lcores;
  std::vector<std::string> endpoint_names;
  std::vector<bool> endpoint_transmits;  // by endpoint id: echo or forward (its packets go to a tx queue)
  std::vector<std::string> port_names;
  std::vector<std::uint64_t> consumed;  // packets the ring consumer received, by endpoint id
  std::vector<PortStats> port_stats;    // by port id
  std::vector<std::string> port_paths;  // by port id: each port's path report (driver and mode per queue)

  // Received packets over the window they were counted in (drops included: see window.dropped).
  double mpps() const noexcept { return window.pps(window.rx) / 1e6; }
  // The pipeline's own verdict: every packet it received accounted for, every buffer back.
  bool ok() const noexcept { return accounting.balanced() && accounting.outstanding() == 0; }
  // No port lost a frame before the pipeline, and every such counter could be read.
  bool lossless() const;
  std::uint64_t lost_before_pipeline() const;
};

std::string format_summary(const RunSummary& s);
nlohmann::json summary_json(const RunSummary& s);

// "kernel_ring_full 1234, rx_nombuf unknown": the reasons that lost something or could not be read.
std::string loss_reasons(const PortLosses& losses);

// "12.35 Mpps", "870.1 kpps", "12 pps".
std::string format_rate(double pps);

}  // namespace rawpipe::app
