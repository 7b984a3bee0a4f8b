// The builder: a validated Plan -> the parts of a pipeline, nothing running yet.
//
// build_pipeline() validates the plan (pipeline/plan/validate.hh: the same checks as the config
// loader's), then makes the pools, opens every port through its spec and checks it against the
// port's capabilities, compiles the endpoints' rules into the classifier and pushes them to the
// ports that steer, attaches the plan's filter plugins, builds the ARP/ND tables, the capture
// taps, the endpoint queues and the lcores, and hands each lcore its tx queue on every port it
// may send on (and on a port nobody else transmits on, a queue for the application's send path,
// pipeline/send/send_port.hh). What only a device can say (a port that does not open, fewer queues than asked, no
// MAC for ARP) is reported here, at the element's config location.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "pipeline/buf/pool.hh"
#include "rawpipe/status.hh"
#include "rawpipe/plan.hh"
#include "pipeline/port/port.hh"
#include "pipeline/port/steering.hh"

namespace rawpipe {

class Classifier;
class EndpointQueues;
class FilterPlugin;
class FilterStage;
class Lcore;
struct LcoreTaps;
class NeighTable;
struct SendPort;
class TapWriter;

// Everything a Plan becomes. Owned by the Pipeline facade; run control binds and runs it.
struct PipelineParts {
  PipelineParts();
  ~PipelineParts();  // tears down in dependency order: plugins, lcores, queues, classifier, ports, pools
  PipelineParts(const PipelineParts&) = delete;
  PipelineParts& operator=(const PipelineParts&) = delete;

  std::vector<std::unique_ptr<Pool>> pools;          // plan order; outlive ports
  std::vector<std::unique_ptr<Port>> ports;          // by port id
  std::vector<PortCaps> caps;                        // by port id, read once when the port opened
  std::unique_ptr<Classifier> classifier;
  std::unique_ptr<FilterStage> filters;
  std::vector<std::unique_ptr<FilterPlugin>> plugins;  // unloaded after the lcores stop, before the pools go
  std::unique_ptr<EndpointQueues> queues;
  std::vector<std::unique_ptr<Lcore>> lcores;
  std::vector<std::unique_ptr<TapWriter>> taps;           // plan order
  std::vector<std::unique_ptr<LcoreTaps>> lcore_taps;     // by lcore; empty without taps
  std::vector<std::unique_ptr<NeighTable>> neigh_tables;  // by port id; null without addresses
  std::vector<std::vector<int>> tx_queue_of;              // [lcore][port]: its tx queue there, or -1
  std::vector<std::unique_ptr<SendPort>> send_ports;      // by port id: the application's send path
  std::uint32_t config_rules = 0;                         // rule ids 1..config_rules came from the plan
};

Result<std::unique_ptr<PipelineParts>> build_pipeline(const Plan& plan);

// The plan's endpoint rules, parsed, each bound to its endpoint, with `port NAME` resolved to
// the port's id: what the classifier is built from, and what a port that receives only steered
// traffic is asked for (Port::update_steering skips the rules of other ports).
Result<std::vector<SteeringRule>> plan_endpoint_rules(const Plan& plan);

// Tells every port that steers (PortCaps::flow_rules) which traffic the endpoints want: the
// classifier's rules for endpoints that are offloaded, restricted to the port's own rules. Ports
// that cannot steer receive everything anyway and are not asked.
Status push_steering(const Plan& plan, PipelineParts& parts);

}  // namespace rawpipe
