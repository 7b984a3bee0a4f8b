// The port interface, engine-facing half: what the pipeline (and only the pipeline) calls on a
// port. Drivers implement it and also see pipeline/port/driver.hh (how a port is described,
// opened and registered), the way DPDK splits rte_ethdev.h from ethdev_driver.h. pmd/ depends on
// these headers; nothing under pipeline/ includes pmd/.
//
// Control and data are separate. The control side is a virtual class (open, start, stop, stats,
// link, capabilities, steering), used at setup and by the stats thread. The data side is a pair of
// plain function pointers per queue, resolved once when an lcore starts: at most one indirect call
// per burst, never per packet, and no mode checks inside the burst functions.
//
// Ownership (as rte_eth_rx_burst/rte_eth_tx_burst):
//   rx_burst(q, pkts, n)  returns k <= n buffers; the caller owns them.
//   tx_burst(q, pkts, n)  takes ownership of pkts[0..k) and returns k; the caller still owns
//                         pkts[k..n) and must free or retry them.
// A queue's burst functions are called by one thread at a time (the lcore that owns the queue).
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pipeline/buf/mbuf.hh"
#include "pipeline/common/status.hh"

namespace rawpipe {

struct SteeringRules;  // pipeline/port/steering.hh

using RxBurstFn = std::uint16_t (*)(void* queue, Mbuf** pkts, std::uint16_t n) noexcept;
using TxBurstFn = std::uint16_t (*)(void* queue, Mbuf** pkts, std::uint16_t n) noexcept;

struct RxQueueHandle {
  RxBurstFn burst = nullptr;
  void* queue = nullptr;
  std::uint16_t operator()(Mbuf** pkts, std::uint16_t n) const noexcept { return burst(queue, pkts, n); }
};

struct TxQueueHandle {
  TxBurstFn burst = nullptr;
  void* queue = nullptr;
  std::uint16_t operator()(Mbuf** pkts, std::uint16_t n) const noexcept { return burst(queue, pkts, n); }
};

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

class Port {
 public:
  virtual ~Port() = default;

  virtual std::string_view pmd_name() const noexcept = 0;
  // One line per queue: the driver and the mode it really runs in (for the path report).
  virtual std::string path_report() const = 0;
  virtual PortCaps caps() const = 0;
  virtual LinkInfo link() const { return {}; }

  virtual Status start() = 0;
  // Stops the queues and returns every buffer the driver holds (rings, hardware queues) to its pool.
  virtual void stop() = 0;

  virtual RxQueueHandle rx_queue(std::uint16_t queue) = 0;
  virtual TxQueueHandle tx_queue(std::uint16_t queue) = 0;

  // Safe to call from the stats thread while lcores run.
  virtual PortStats stats() const = 0;

  // What the person running the pipeline must know that counters alone do not say (a capture
  // file cut short at byte N, an interface removed while the port ran), one sentence each, or
  // nothing. Control path; safe from the stats thread while lcores run.
  virtual std::vector<std::string> notices() const { return {}; }

  // Tells a port with flow rules or an XDP program which traffic the endpoints want; the port
  // steers that to its queues and leaves the rest to the kernel. Ports without steering accept
  // and ignore it (classify filters in software either way).
  virtual Status update_steering(const SteeringRules& rules) {
    (void)rules;
    return Status::ok();
  }
};

}  // namespace rawpipe
