// What a port says about itself: capabilities, counters and link (Pipeline::port_caps,
// port_stats, port_link). Drivers fill these through the port interface (pipeline/port/port.hh).
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace rawpipe {

struct PortCaps {
  bool rx_checksum = false;    // sets pkt_flag::kL3CsumGood/kL4CsumGood
  bool rss = false;            // sets rss_hash and spreads flows over queues
  bool flow_rules = false;     // steers only the endpoints' traffic to the port (update_steering)
  bool kernel_pass = false;    // traffic not steered to us keeps reaching the kernel
  bool timestamps = false;     // sets timestamp_ns
  bool tx = false;             // tx_burst sends somewhere real
  bool dummy_send = false;     // tx_burst posts a tx_flag::kDummy buffer as a no-op the device drops (mlx5 NOP WQE)
  std::uint16_t max_rx_queues = 1;
  std::uint16_t max_tx_queues = 1;
};

// Counters are per queue, written by the queue's lcore only, read relaxed by the stats reader.
struct QueueCounters {
  std::uint64_t rx_packets = 0;
  std::uint64_t rx_bytes = 0;
  std::uint64_t rx_nombuf = 0;   // frames the port had to drop because the pool was empty
  std::uint64_t rx_errors = 0;   // frames the device reported as bad (error CQEs, truncation)
  std::uint64_t tx_packets = 0;
  std::uint64_t tx_bytes = 0;
  std::uint64_t tx_errors = 0;
};

// Frames a port lost before the pipeline saw them, by reason: a full kernel ring, an XSK the
// kernel could not deliver to, a NIC out of descriptors, a full socket buffer. They are part of a
// run's verdict (a run with any is not lossless). Each reason counts frames, and reasons do not
// overlap, so their sum is the frames lost. std::nullopt: the port has such a loss point but
// cannot read its counter right now, which is not the same as 0 (nothing can be claimed).
using PortLosses = std::map<std::string, std::optional<std::uint64_t>>;

struct PortStats {
  std::vector<QueueCounters> rx_queues;
  std::vector<QueueCounters> tx_queues;
  // Driver-specific counters (error syndromes, kernel/NIC drop counters, mode facts), by name.
  std::map<std::string, std::uint64_t> extended;
  // Losses below the pipeline that only the driver can see (kernel, XSK, NIC, socket buffer).
  // The queue counters' rx_nombuf and rx_errors are losses too: lost_before_pipeline() adds them.
  PortLosses losses;
};

// Every loss of a port before the pipeline: its driver's `losses` plus the frames it dropped for
// lack of pool buffers (rx_nombuf) or as bad (rx_errors), under the names "rx_nombuf" and
// "rx_errors" when not zero.
inline PortLosses lost_before_pipeline(const PortStats& s) {
  PortLosses out = s.losses;
  std::uint64_t nombuf = 0, errors = 0;
  for (const QueueCounters& q : s.rx_queues) {
    nombuf += q.rx_nombuf;
    errors += q.rx_errors;
  }
  if (nombuf) out["rx_nombuf"] = nombuf;
  if (errors) out["rx_errors"] = errors;
  return out;
}

struct LossTotals {
  std::uint64_t frames = 0;          // sum of the counted reasons
  std::vector<std::string> unknown;  // reasons whose counters could not be read
  bool lossless() const noexcept { return frames == 0 && unknown.empty(); }
};

inline LossTotals loss_totals(const PortLosses& losses) {
  LossTotals t;
  for (const auto& [reason, n] : losses) {
    if (n)
      t.frames += *n;
    else
      t.unknown.push_back(reason);
  }
  return t;
}


struct LinkInfo {
  bool up = true;
  std::uint32_t speed_mbps = 0;
  std::uint32_t mtu = 1500;
  std::array<std::uint8_t, 6> mac{};
};

}  // namespace rawpipe
