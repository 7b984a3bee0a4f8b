// The drop attribution tree: where every lost packet went, in one JSON object shared by the
// stats document (`rawpipe stat --drops`) and the run summary (`rawpipe run --json`, "drops_tree").
//
//   "port": { <port>: { counter: n } }   lost before the pipeline counted them: pool exhaustion
//            (rx_nombuf), device errors (rx_errors), and the driver's kernel/NIC counters
//            (af_packet kernel_drops, XSK rx_dropped/rx_ring_full, interface if_rx_dropped and
//            if_rx_missed_errors, mlx5 rx_hw_drops, ...);
//   "port_total": rx_nombuf + rx_errors (the driver counters may overlap each other, so they are
//            listed but not summed);
//   "pipeline": { <stage>: { reason: n } } and "pipeline_total": counted by reason on the lcores
//            (parse, classify, filter, endpoint, transmit), the rx == delivered + transmitted +
//            drops identity.
#pragma once

#include <nlohmann/json.hpp>

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "rawpipe/drop_reason.hh"
#include "rawpipe/api.h"
#include "rawpipe/port_info.hh"

namespace rawpipe::ops {

struct NamedPortStats {
  std::string name;
  PortStats stats;
};

// The pipeline stage a drop reason belongs to: "parse", "classify", "filter", "endpoint", "transmit".
RAWPIPE_API std::string_view drop_stage(DropReason reason) noexcept;

RAWPIPE_API nlohmann::json drop_tree_json(const std::array<std::uint64_t, kDropReasonCount>& pipeline_drops,
                              const std::vector<NamedPortStats>& ports);

// A port's losses before the pipeline as {"reason": frames}, with null for a counter the port
// could not read (unknown, not 0).
RAWPIPE_API nlohmann::json losses_json(const PortLosses& losses);

}  // namespace rawpipe::ops
