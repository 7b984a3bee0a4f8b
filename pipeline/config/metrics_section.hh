// The [metrics] table of a config: the Prometheus endpoint and the latency sampling period.
//
//   [metrics]
//   listen = "127.0.0.1:9464"   # serve GET /metrics there (IPv4 address and port; port 0 picks
//                               # a free one; a bare port "9464" means 127.0.0.1); absent: none
//   latency_sample = 64         # time one queue poll in N per lcore (0: no latency histograms)
#pragma once

#include "pipeline/config/section.hh"
#include "rawpipe/plan.hh"

namespace rawpipe {

// Reads [metrics] into plan.metrics; errors are recorded in `root` (file, line, key).
void load_metrics_section(ConfigSection& root, Plan& plan);

// "A.B.C.D:PORT", ":PORT" or "PORT" (127.0.0.1) -> (address in network order, port); an error
// message a user can act on otherwise.
struct ListenAddress {
  std::uint32_t addr_be = 0;
  std::uint16_t port = 0;
};
Result<ListenAddress> parse_listen_address(std::string_view text);

}  // namespace rawpipe
