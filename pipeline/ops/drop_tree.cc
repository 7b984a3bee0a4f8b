#include "rawpipe/drop_tree.hh"

#include "pipeline/ops/publisher.hh"

namespace rawpipe::ops {

std::string_view drop_stage(DropReason reason) noexcept {
  switch (reason) {
    case DropReason::kNoMatch: return "classify";
    case DropReason::kFilterDrop:
    case DropReason::kFilterInvalidVerdict: return "filter";
    case DropReason::kEndpointRingFull:
    case DropReason::kEndpointOffloadOff: return "endpoint";
    case DropReason::kTxFailed:
    case DropReason::kNotForUs: return "transmit";
    default: return "parse";
  }
}

nlohmann::json drop_tree_json(const std::array<std::uint64_t, kDropReasonCount>& drops,
                              const std::vector<NamedPortStats>& ports) {
  nlohmann::json port_drops = nlohmann::json::object();
  std::uint64_t port_total = 0;
  for (const NamedPortStats& p : ports) {
    nlohmann::json pd = nlohmann::json::object();
    std::uint64_t nombuf = 0, errors = 0;
    for (const auto& q : p.stats.rx_queues) {
      nombuf += q.rx_nombuf;
      errors += q.rx_errors;
    }
    // Pool exhaustion seen by the driver and device errors: lost before the pipeline counted rx.
    if (nombuf) pd["pool_exhausted (rx_nombuf)"] = nombuf;
    if (errors) pd["device_errors (rx_errors)"] = errors;
    port_total += nombuf + errors;
    for (const auto& [k, v] : p.stats.extended)
      if (v && is_port_drop_counter(k)) pd[k] = v;  // driver-specific; not added to the total (may overlap)
    if (!pd.empty()) port_drops[p.name] = pd;
  }
  nlohmann::json stages = nlohmann::json::object();
  std::uint64_t pipeline_total = 0;
  for (std::size_t r = 1; r < kDropReasonCount; ++r) {
    if (!drops[r]) continue;
    stages[std::string(drop_stage(static_cast<DropReason>(r)))][std::string(kDropReasonNames[r])] = drops[r];
    pipeline_total += drops[r];
  }
  nlohmann::json tree;
  tree["pipeline_total"] = pipeline_total;
  tree["pipeline"] = stages;
  tree["port_total"] = port_total;
  tree["port"] = port_drops;
  return tree;
}

}  // namespace rawpipe::ops
