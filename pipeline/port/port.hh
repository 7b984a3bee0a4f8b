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
//
// Frame data: rx_burst asks for the first line of each frame's data (prefetch0) when something other
// than the calling core wrote it (a NIC's DMA, the kernel on another CPU), as it hands the frame
// out, so the line is on its way while the rest of the burst is received and parse reaches it
// warm. A driver that wrote or copied the frame on this core during the call has it in L1 already
// and asks for nothing: only the driver knows which of the two it is.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "rawpipe/mbuf.hh"
#include "rawpipe/port_info.hh"
#include "rawpipe/status.hh"

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

class Port {
 public:
  virtual ~Port() = default;

  virtual std::string_view pmd_name() const noexcept = 0;
  // One line per queue: the driver and the mode it really runs in (for the path report).
  virtual std::string path_report() const = 0;
  virtual PortCaps caps() const = 0;
  // True when the queues receive only what update_steering asked for (flow rules, an XDP
  // steering map, bound sockets), so a user of the port that steers nothing receives nothing. A
  // port can take rules for flow tags and group joins and still receive every frame (mlx5 with
  // steering = "all"), which is why this is not caps().flow_rules alone.
  virtual bool steered_only() const { return caps().flow_rules; }
  virtual LinkInfo link() const { return {}; }

  virtual Status start() = 0;
  // Stops the queues and returns every buffer the driver holds (rings, hardware queues) to its pool.
  virtual void stop() = 0;

  virtual RxQueueHandle rx_queue(std::uint16_t queue) = 0;
  virtual TxQueueHandle tx_queue(std::uint16_t queue) = 0;
  // A descriptor that polls readable (POLLIN) while receive queue `queue` has packets for
  // rx_burst, for a thread that sleeps until traffic arrives instead of polling ("no lcore"
  // mode: Pipeline::progress_fds). -1: the driver has none (the caller must poll). Valid from
  // start() to stop(); the port owns it.
  virtual int rx_wait_fd(std::uint16_t queue) const {
    (void)queue;
    return -1;
  }

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
