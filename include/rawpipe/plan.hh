// The validated, immutable description of a pipeline run.
//
// The config loader (rawpipe/config.hh) turns a TOML file into a Plan; nothing starts until
// the whole Plan is valid. Lcores and the control thread only read it. Every element keeps the file
// and line it came from so later checks (opening a device, binding a CPU) can still point there.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "rawpipe/pool_config.hh"
#include "rawpipe/tap_config.hh"

namespace rawpipe {

class PortSpec;  // pipeline/port/driver.hh

// One timed poll in 64: about 0.1 ns per packet at 32-packet bursts (tests/bench/latency_bench.cc).
inline constexpr std::uint32_t kDefaultLatencySample = 64;

// A port's `addresses` and `mac` keys: what the pipeline answers ARP and neighbour solicitations
// for on that port (pipeline/neigh/stage.hh).
struct NeighPortKeys {
  std::vector<std::string> addresses;
  std::string mac;  // empty: the port's own
  // The Extra API's sendto sends every datagram to this MAC (a gateway, or a peer whose address
  // nobody resolves) instead of resolving the destination; empty: resolve through ARP/ND.
  std::string next_hop_mac;
};

struct SourceLocation {
  std::string file;
  int line = 0;
};

struct PoolPlan {
  PoolConfig config;
  SourceLocation where;
};

struct PortPlan {
  std::string name;
  std::uint16_t id = 0;
  std::string pmd;                         // driver name as in the registry
  std::shared_ptr<const PortSpec> spec;    // the driver's parsed keys
  std::string pool;                        // name of the PoolPlan its receive buffers come from
  std::uint16_t rx_queues = 1;
  std::uint16_t tx_queues = 1;
  std::uint32_t rx_ring_size = 1024;
  std::uint32_t tx_ring_size = 1024;
  NeighPortKeys neigh;                     // addresses the pipeline answers ARP/ND for (neigh/stage.hh)
  SourceLocation where;
};

enum class EndpointAction : std::uint8_t {
  kRing,     // queue to the endpoint's rings for a consumer (zero-copy hand-off)
  kSink,     // count and free on the lcore
  kEcho,     // swap addresses and transmit on the ingress port (like testpmd 5tswap)
  kForward,  // transmit unchanged on another port
};

// What kEcho sends back: the frame with addresses swapped (kBytes), or a sockperf server's reply
// (kSockperf: the client flag cleared too; pipeline/dispatch/sockperf_echo.hh).
enum class EchoFormat : std::uint8_t { kBytes, kSockperf };

struct EndpointPlan {
  std::string name;
  std::uint16_t id = 0;
  EndpointAction action = EndpointAction::kRing;
  std::vector<std::string> match;          // rules in the rule grammar (pipeline/classify/rule.hh)
  std::uint32_t ring_size = 4096;          // per lcore, for kRing
  std::string forward_port;                // for kForward
  std::uint16_t forward_port_id = 0;
  EchoFormat echo_format = EchoFormat::kBytes;  // for kEcho
  SourceLocation where;
};

// [metrics] (pipeline/config/metrics_section.hh): the Prometheus endpoint and latency sampling.
struct MetricsPlan {
  std::string listen;                      // "IPV4:PORT" serving GET /metrics; empty: none
  std::uint32_t latency_sample = kDefaultLatencySample;  // time one queue poll in N; 0: off
  // Publish the stats segment (rawpipe stat) /dev/shm/rawpipe.<pid>, linked from
  // /dev/shm/rawpipe-name.NAME, for this pipeline, also when it is created through the Extra API.
  // false: none.
  bool stats_segment = true;
};

// A [[filters]] entry (pipeline/config/filters_section.hh): a filter plugin the engine loads and
// attaches to an endpoint or to one rx queue.
struct FilterPlan {
  std::string path;                        // resolved shared object
  bool on_queue = false;                   // attached to (port, rx_queue), else to endpoint
  std::uint16_t endpoint = 0;
  std::uint16_t port = 0;
  std::uint16_t rx_queue = 0;
  std::vector<std::pair<std::string, std::string>> config;  // the `config` table, in file order
  std::string label;                       // "filters[0]", for messages
  SourceLocation where;                    // the table
  int path_line = 0;
  int config_line = 0;
};

enum class DefaultAction : std::uint8_t { kDrop, kEndpoint };

struct LcorePlan {
  std::uint16_t id = 0;
  int cpu = -1;                            // -1: not pinned
  struct RxQueue {
    std::uint16_t port = 0;
    std::uint16_t queue = 0;
  };
  std::vector<RxQueue> rx;
  std::uint16_t burst = 32;
  // 0: busy poll (DPDK style). Otherwise, after a loop pass in which no queue returned a packet,
  // the lcore sleeps this long, trading latency for a core that is not pegged at 100%.
  std::uint32_t idle_sleep_us = 0;
  // false: the lcore gets no thread of its own. The application's threads run its loop passes
  // through Pipeline::progress() while they wait for packets, as VMA's receive calls poll the
  // ring themselves: no core spins unless a thread waits, and that thread's own CPU does the
  // work. Not pinned (cpu stays -1) and never sleeps (idle_sleep_us stays 0).
  bool thread = true;
  SourceLocation where;
};

struct Plan {
  std::string source;                      // config file path
  std::vector<PoolPlan> pools;
  std::vector<PortPlan> ports;
  std::vector<EndpointPlan> endpoints;
  std::vector<LcorePlan> lcores;
  std::vector<FilterPlan> filters;         // attached in this order
  std::vector<TapConfig> taps;             // [[taps]]: capture taps (config/taps_section.hh)
  // [run] plugin_dirs: where the [[filters]] plugins (and the Extra API's load_filter_plugin on
  // this pipeline) may come from, and where bare plugin names are looked for first. Unset: the
  // process-wide setting (rawpipe/plugin_path.hh).
  bool plugin_dirs_set = false;
  std::vector<std::string> plugin_dirs;
  DefaultAction default_action = DefaultAction::kDrop;
  std::uint16_t default_endpoint = 0;      // for kEndpoint
  double duration_s = 0;                   // 0: until SIGINT/SIGTERM
  double stats_interval_s = 1.0;
  MetricsPlan metrics;
};

}  // namespace rawpipe
