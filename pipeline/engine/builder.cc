#include "pipeline/engine/builder.hh"

#include <algorithm>
#include <bit>
#include <set>

#include "pipeline/buf/audit.hh"
#include "pipeline/capture/lcore_taps.hh"
#include "pipeline/capture/tap.hh"
#include "pipeline/classify/classifier.hh"
#include "pipeline/classify/rule.hh"
#include "pipeline/engine/endpoint_queues.hh"
#include "pipeline/filter/filter.hh"
#include "pipeline/filter/plugin.hh"
#include "pipeline/lcore/lcore.hh"
#include "pipeline/neigh/neigh.hh"
#include "pipeline/neigh/port_keys.hh"
#include "pipeline/plan/validate.hh"
#include "pipeline/port/driver.hh"
#include "pipeline/send/send_port.hh"

namespace rawpipe {
namespace {

Status build_pools(const Plan& plan, PipelineParts& parts) {
  for (const PoolPlan& pp : plan.pools) {
    auto pool = Pool::create(pp.config);
    if (!pool) return Status::errorf("{}{}", location_prefix(pp.where), pool.message());
    parts.pools.push_back(std::move(pool).value());
  }
  if constexpr (kMbufAudit) {
    std::vector<std::string> names;
    for (const EndpointPlan& ep : plan.endpoints) names.push_back(ep.name);
    for (const auto& pool : parts.pools) audit_set_endpoint_names(*pool, names);
  }
  return Status::ok();
}

// A port's queue counts are checked against the spec before anything opens; the device can still
// offer fewer (a NIC's channels, an interface's queues), which only its capabilities say.
Status check_against_caps(const PortPlan& pp, const PortCaps& caps) {
  if (pp.rx_queues > caps.max_rx_queues)
    return Status::errorf(
        "{}port '{}' (pmd {}): the device offers {} rx queue{} and the plan asks for {}; set rx_queues = {} "
        "or fewer",
        location_prefix(pp.where), pp.name, pp.pmd, caps.max_rx_queues, caps.max_rx_queues == 1 ? "" : "s",
        pp.rx_queues, caps.max_rx_queues);
  if (pp.tx_queues > caps.max_tx_queues)
    return Status::errorf(
        "{}port '{}' (pmd {}): the device offers {} tx queue{} and the plan asks for {}; set tx_queues = {} "
        "or fewer",
        location_prefix(pp.where), pp.name, pp.pmd, caps.max_tx_queues, caps.max_tx_queues == 1 ? "" : "s",
        pp.tx_queues, caps.max_tx_queues);
  return Status::ok();
}

Status open_ports(const Plan& plan, PipelineParts& parts) {
  for (const PortPlan& pp : plan.ports) {
    Pool* pool = nullptr;
    for (auto& pl : parts.pools)
      if (pl->name() == pp.pool) pool = pl.get();
    PortEnv env;
    env.port_id = pp.id;
    env.name = pp.name;
    env.rx_queues = pp.rx_queues;
    env.tx_queues = pp.tx_queues;
    env.rx_ring_size = pp.rx_ring_size;
    env.tx_ring_size = pp.tx_ring_size;
    env.pool = pool;
    auto port = pp.spec->open(env);
    if (!port)
      return Status::errorf("{}port '{}' (pmd {}): {}", location_prefix(pp.where), pp.name, pp.pmd, port.message());
    parts.ports.push_back(std::move(port).value());
    parts.caps.push_back(parts.ports.back()->caps());
    RAWPIPE_TRY(check_against_caps(pp, parts.caps.back()));
  }
  return Status::ok();
}

Status build_neigh_tables(const Plan& plan, PipelineParts& parts) {
  parts.neigh_tables.resize(parts.ports.size());
  for (const PortPlan& pp : plan.ports) {
    if (pp.neigh.addresses.empty()) continue;
    wire::MacAddr mac{};
    if (!pp.neigh.mac.empty()) {
      auto m = parse_mac_address(pp.neigh.mac);
      if (!m) return Status::errorf("{}port '{}': mac: {}", location_prefix(pp.where), pp.name, m.message());
      mac = *m;
    } else {
      mac = parts.ports[pp.id]->link().mac;
      if (mac == wire::MacAddr{})
        return Status::errorf(
            "{}port '{}' (pmd {}) has no MAC address to answer ARP/ND for its addresses with; "
            "set mac = \"02:...\" in its table",
            location_prefix(pp.where), pp.name, pp.pmd);
    }
    std::vector<NeighAddress> addrs;
    for (const std::string& a : pp.neigh.addresses) {
      auto na = parse_neigh_address(a, mac);
      if (!na) return Status::errorf("{}port '{}': addresses: {}", location_prefix(pp.where), pp.name, na.message());
      addrs.push_back(*na);
    }
    auto table = NeighTable::create(addrs);
    if (!table) return Status::errorf("{}port '{}': {}", location_prefix(pp.where), pp.name, table.message());
    parts.neigh_tables[pp.id] = std::make_unique<NeighTable>(std::move(table).value());
  }
  return Status::ok();
}

Status build_classifier(const Plan& plan, PipelineParts& parts) {
  auto parsed = plan_endpoint_rules(plan);
  if (!parsed) return parsed.status();
  std::vector<TableRule> rules;
  for (SteeringRule& r : parsed.value()) rules.push_back({std::move(r), 0});
  TableDefault dflt;
  if (plan.default_action == DefaultAction::kEndpoint) dflt.endpoint = plan.default_endpoint;
  auto cls = Classifier::create(static_cast<unsigned>(plan.lcores.size()), rules, dflt);
  if (!cls) return cls.status().context(plan.source.empty() ? "classifier" : plan.source);
  parts.classifier = std::move(cls).value();
  // The lcores are the classifier's readers and run the filter stage inside the same pass.
  // A control call may wait for the lcores, except from a filter callback on one of them.
  if (parts.filters) parts.filters->set_quiescence(parts.classifier.get(), [] { return current_lcore() < 0; });
  parts.config_rules = static_cast<std::uint32_t>(rules.size());
  return Status::ok();
}

// Every lcore gets its own tx queue on each port it may send on: forward targets, and the ports
// it polls when an echo endpoint exists or the port answers ARP/ND. The validator counted them
// against tx_queues (pipeline/plan/validate.cc, check_tx_queues).
Status assign_tx_queues(const Plan& plan, PipelineParts& parts) {
  const std::size_t n_ports = plan.ports.size();
  bool any_echo = false;
  std::set<std::uint16_t> forward_ports;
  for (const EndpointPlan& ep : plan.endpoints) {
    any_echo |= ep.action == EndpointAction::kEcho;
    if (ep.action == EndpointAction::kForward) forward_ports.insert(ep.forward_port_id);
  }
  std::vector<std::uint16_t> next_txq(n_ports, 0);
  parts.tx_queue_of.assign(plan.lcores.size(), std::vector<int>(n_ports, -1));
  for (std::size_t l = 0; l < plan.lcores.size(); ++l) {
    std::set<std::uint16_t> ports = forward_ports;
    for (const LcorePlan::RxQueue& q : plan.lcores[l].rx)
      if (any_echo || parts.neigh_tables[q.port]) ports.insert(q.port);
    for (std::uint16_t port : ports) {
      const PortPlan& pp = plan.ports[port];
      if (next_txq[port] >= pp.tx_queues)  // validate_plan() refuses this; kept as the invariant's guard
        return Status::errorf("{}port '{}': internal: tx queue {} assigned beyond tx_queues = {}",
                              location_prefix(pp.where), pp.name, next_txq[port], pp.tx_queues);
      parts.tx_queue_of[l][port] = next_txq[port]++;
    }
  }
  // A port no lcore transmits on gets one queue for the application's send path (its frames go
  // through the lcore that owns the queue): the lcore that polls the port, else the first. The
  // queue was unused, so the validator's count still holds.
  for (const PortPlan& pp : plan.ports) {
    if (next_txq[pp.id] != 0 || pp.tx_queues == 0 || plan.lcores.empty()) continue;
    std::size_t owner = 0;
    for (std::size_t l = plan.lcores.size(); l-- > 0;)
      for (const LcorePlan::RxQueue& q : plan.lcores[l].rx)
        if (q.port == pp.id) owner = l;
    parts.tx_queue_of[owner][pp.id] = next_txq[pp.id]++;
  }
  return Status::ok();
}

// The application's send path per port: the lcore that drains it (the first that owns a tx queue
// there), the hand-off ring, the pool alloc_tx takes from, the addresses sendto uses.
Status build_send_ports(const Plan& plan, PipelineParts& parts) {
  for (const PortPlan& pp : plan.ports) {
    auto sp = std::make_unique<SendPort>();
    sp->port = pp.id;
    for (std::size_t l = 0; l < parts.tx_queue_of.size() && sp->lcore < 0; ++l)
      if (parts.tx_queue_of[l][pp.id] >= 0) sp->lcore = static_cast<int>(l);
    if (sp->lcore < 0)
      sp->no_path = pp.tx_queues == 0 ? fmt::format("port '{}' has tx_queues = 0", pp.name)
                                      : fmt::format("the plan has no lcore to transmit on port '{}'", pp.name);
    sp->native_dummy = parts.caps[pp.id].dummy_send;
    for (auto& pl : parts.pools)
      if (pl->name() == pp.pool) sp->pool = pl.get();
    if (!pp.neigh.mac.empty()) {
      if (auto m = parse_mac_address(pp.neigh.mac)) sp->mac = *m;
    } else {
      sp->mac = parts.ports[pp.id]->link().mac;
    }
    if (!pp.neigh.next_hop_mac.empty()) {
      auto m = parse_mac_address(pp.neigh.next_hop_mac);
      if (!m) return Status::errorf("{}port '{}': next_hop_mac: {}", location_prefix(pp.where), pp.name, m.message());
      sp->next_hop = *m;
    }
    sp->addresses = parts.neigh_tables[pp.id].get();
    if (sp->addresses) sp->cache = std::make_unique<NeighCache>();
    // As deep as the port's tx ring: the lcore empties it once per pass.
    auto ring = MbufRing::create(std::bit_ceil(std::max<std::uint32_t>(pp.tx_ring_size, kMaxBurst)));
    if (!ring) return Status::errorf("{}port '{}': send ring: {}", location_prefix(pp.where), pp.name, ring.message());
    sp->ring = std::move(ring).value();
    parts.send_ports.push_back(std::move(sp));
  }
  return Status::ok();
}

Status build_taps(const Plan& plan, PipelineParts& parts) {
  for (const TapConfig& tc : plan.taps) {
    auto w = TapWriter::create(tc);
    if (!w) return Status::errorf("{}{}", location_prefix({plan.source, 0}), w.message());
    parts.taps.push_back(std::move(w).value());
  }
  if (parts.taps.empty()) return Status::ok();
  for (std::size_t l = 0; l < parts.lcores.size(); ++l) {
    auto lt = std::make_unique<LcoreTaps>();
    for (auto& t : parts.taps) lt->add(t->config().stage, t->add_lane());
    parts.lcore_taps.push_back(std::move(lt));
  }
  return Status::ok();
}

}  // namespace

PipelineParts::PipelineParts() = default;

PipelineParts::~PipelineParts() {
  for (auto& sp : send_ports) sp->drain_stopped();  // buffers handed over but never sent
  plugins.clear();  // a plugin that holds packets frees them in destroy(): pools still exist
  lcores.clear();
  queues.reset();
  classifier.reset();
  ports.clear();  // ports return their buffers before the pools go away
  pools.clear();
}

Result<std::vector<SteeringRule>> plan_endpoint_rules(const Plan& plan) {
  std::vector<SteeringRule> rules;
  for (const EndpointPlan& ep : plan.endpoints) {
    for (const std::string& text : ep.match) {
      // Validated already; the parse is repeated because the plan keeps rules as text.
      auto rule = parse_match_rule(text);
      if (!rule) return Status::errorf("{}endpoint '{}': {}", location_prefix(ep.where), ep.name, rule.message());
      MatchRule m = std::move(rule).value();
      if (!m.ingress_port_name.empty())
        for (const PortPlan& pp : plan.ports)
          if (pp.name == m.ingress_port_name) m.ingress_port = pp.id;
      rules.push_back(SteeringRule{std::move(m), ep.id, 0});
    }
  }
  return rules;
}

Result<std::unique_ptr<PipelineParts>> build_pipeline(const Plan& plan) {
  RAWPIPE_TRY(validate_plan(plan));
  auto parts = std::make_unique<PipelineParts>();
  RAWPIPE_TRY(build_pools(plan, *parts));
  RAWPIPE_TRY(open_ports(plan, *parts));
  RAWPIPE_TRY(build_neigh_tables(plan, *parts));

  std::vector<std::uint16_t> rx_queues;
  for (const PortPlan& pp : plan.ports) rx_queues.push_back(pp.rx_queues);
  parts->filters = std::make_unique<FilterStage>(plan.endpoints.size(), rx_queues, plan.lcores.size());
  auto plugins = attach_plan_filters(plan.filters, *parts->filters, rawpipe_get_api(RAWPIPE_EXTRA_ABI_VERSION),
                                     plan.plugin_dirs_set ? &plan.plugin_dirs : nullptr);
  if (!plugins) return plugins.status();
  parts->plugins = std::move(plugins).value();

  RAWPIPE_TRY(build_classifier(plan, *parts));
  RAWPIPE_TRY(push_steering(plan, *parts));
  RAWPIPE_TRY(assign_tx_queues(plan, *parts));
  RAWPIPE_TRY(build_send_ports(plan, *parts));

  auto queues = EndpointQueues::create(plan);
  if (!queues) return queues.status();
  parts->queues = std::move(queues).value();

  for (std::size_t l = 0; l < plan.lcores.size(); ++l)
    parts->lcores.push_back(std::make_unique<Lcore>(plan.lcores[l], static_cast<unsigned>(l), plan.endpoints.size(),
                                                    plan.ports.size()));
  for (auto& lc : parts->lcores) lc->enable_latency(plan.metrics.latency_sample);
  RAWPIPE_TRY(build_taps(plan, *parts));
  return parts;
}

Status push_steering(const Plan& plan, PipelineParts& parts) {
  std::vector<TableRule> all = parts.classifier->rules();
  for (std::size_t p = 0; p < parts.ports.size(); ++p) {
    if (!parts.caps[p].flow_rules) continue;
    SteeringRules sr;
    for (const TableRule& r : all)
      if ((!r.rule.match.ingress_port || *r.rule.match.ingress_port == p) && parts.filters->endpoint_offloaded(r.rule.endpoint))
        sr.rules.push_back(r.rule);
    Status s = parts.ports[p]->update_steering(sr);
    if (!s)
      return Status::errorf("{}port '{}': cannot steer the endpoints' traffic: {}",
                            location_prefix(plan.ports[p].where), plan.ports[p].name, s.message());
  }
  return Status::ok();
}

}  // namespace rawpipe
