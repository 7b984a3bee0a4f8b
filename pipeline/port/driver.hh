// The port interface, driver-facing half: how a driver reads its config keys into a validated
// spec, how the pipeline opens a port from it, and what a driver registers (pipeline/port/
// registry.hh). Only drivers and the pipeline's builder include it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "pipeline/config/keys.hh"
#include "rawpipe/status.hh"
#include "pipeline/port/port.hh"
#include "pipeline/port/steering.hh"
#include "pipeline/stats/counter.hh"

namespace rawpipe {

class Pool;
class ConfigSection;

// A consistent-enough copy of a queue's live counters for stats(): each field is loaded relaxed
// while the owning lcore keeps counting.
inline QueueCounters load_counters(const QueueCounters& live) noexcept {
  QueueCounters c;
  c.rx_packets = count_load(live.rx_packets);
  c.rx_bytes = count_load(live.rx_bytes);
  c.rx_nombuf = count_load(live.rx_nombuf);
  c.rx_errors = count_load(live.rx_errors);
  c.tx_packets = count_load(live.tx_packets);
  c.tx_bytes = count_load(live.tx_bytes);
  c.tx_errors = count_load(live.tx_errors);
  return c;
}

// Receive descriptors per queue for a driver that names no default of its own.
inline constexpr std::uint32_t kDefaultRxRingSize = 1024;

// What the pipeline gives a driver when it opens a port: everything already validated.
struct PortEnv {
  std::uint16_t port_id = 0;
  std::string name;
  std::uint16_t rx_queues = 1;
  std::uint16_t tx_queues = 1;
  std::uint32_t rx_ring_size = kDefaultRxRingSize;
  std::uint32_t tx_ring_size = 1024;
  Pool* pool = nullptr;      // receive buffers come from here
};

// A validated, immutable description of one port, produced from its config section before any
// device is touched. `rawpipe check` stops here; `rawpipe run` calls open().
class PortSpec {
 public:
  virtual ~PortSpec() = default;
  virtual Result<std::unique_ptr<Port>> open(const PortEnv& env) const = 0;
  // Queue limits known from the config alone (e.g. a pcap file has one queue).
  virtual std::uint16_t max_rx_queues() const { return 64; }
  virtual std::uint16_t max_tx_queues() const { return 64; }
  // True when the driver finds a buffer's slot from an address with a shift, so its pool's slots
  // must be exactly buf_size apart (PoolConfig::exact_stride); the config loader sets that on
  // the port's pool.
  virtual bool needs_exact_pool_stride() const { return false; }
  // Buffers of the port's pool the device takes at start and keeps posted for receive: the fewest
  // its start accepts, or 0 when it needs no fixed number. The plan refuses a pool smaller than
  // what its ports keep, so that `rawpipe check` says so rather than a port's start.
  virtual std::uint64_t buffers_kept(std::uint16_t /*rx_queues*/, std::uint16_t /*tx_queues*/,
                                     std::uint32_t /*rx_ring_size*/) const {
    return 0;
  }
  // Why frames no endpoint rule matches, and non-IP frames (ARP), never reach this port's queues
  // (they are steered to the kernel instead), naming the key that changes it; "" when the port
  // receives everything. The config loader refuses what would count on them: a default endpoint
  // or `addresses` answered by the pipeline.
  virtual std::string unmatched_go_elsewhere() const { return {}; }
  // The device whose queues the port takes for itself, and the first of them: a port with
  // `queues` queues claims first..first+queues-1, and no second pipeline may poll those
  // (ops/instance_lock.hh). The device is a kernel interface (per network namespace: af_packet,
  // af_xdp, mlx5 and mana, whose raw-packet queues and steering belong to the interface's NIC) or,
  // without one, a device named outside the kernel's namespaces (dpdk: the ethdev's name, a PCI
  // address for the whole host, a vdev only inside this process, where each process probes its
  // own). Neither: the port claims nothing (synth, pcap, the socket port, whose sockets the kernel
  // keeps apart by address, and the device models, each an in-memory device of its own port).
  struct ClaimedQueues {
    std::string interface;
    unsigned first = 0;
    std::string device;            // used when interface is empty: "dpdk 0000:03:00.0"
    bool process_private = false;  // the device exists in this process only (a DPDK vdev)
  };
  virtual ClaimedQueues claimed_queues() const { return {}; }
};

// A driver: its name in `pmd = "..."`, what it is, and how it reads its own config keys.
struct PmdDriver {
  std::string_view name;
  std::string_view summary;
  Result<std::unique_ptr<PortSpec>> (*parse)(ConfigSection& section) = nullptr;
  // The keys parse() reads beyond the generic port keys (pipeline/config/keys.hh): the loader
  // declares them on the port's table, so parse() cannot read a key the reference does not list.
  const KeyTable* keys = nullptr;
  // rx_ring_size when the config leaves it out: the default of the library the driver wraps, so
  // that a port behaves as its users know it from there (libxdp's 2048 for af_xdp).
  std::uint32_t default_rx_ring_size = kDefaultRxRingSize;
};

}  // namespace rawpipe
