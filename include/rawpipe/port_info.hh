// What a port says about itself: capabilities, counters and link (Pipeline::port_caps,
// port_stats, port_link). Drivers fill these through the port interface (pipeline/port/port.hh).
#pragma once

#include <array>
#include <cstdint>
#include <map>
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

struct PortStats {
  std::vector<QueueCounters> rx_queues;
  std::vector<QueueCounters> tx_queues;
  // Driver-specific counters (error syndromes, kernel/NIC drop counters, mode facts), by name.
  std::map<std::string, std::uint64_t> extended;
};

struct LinkInfo {
  bool up = true;
  std::uint32_t speed_mbps = 0;
  std::uint32_t mtu = 1500;
  std::array<std::uint8_t, 6> mac{};
};

}  // namespace rawpipe
