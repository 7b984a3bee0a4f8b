#include "pipeline/plan/validate.hh"

#include "pipeline/plan/pool_sizing.hh"

#include <map>
#include <set>
#include <utility>

#include "pipeline/classify/rule.hh"
#include "rawpipe/compiler.hh"
#include "pipeline/port/driver.hh"

namespace rawpipe {
namespace {

class Problems {
 public:
  explicit Problems(std::vector<PlanProblem>& out) : out_(out) {}
  void add(PlanPart part, std::size_t index, std::string key, std::string message) {
    out_.push_back({part, index, std::move(key), std::move(message)});
  }

 private:
  std::vector<PlanProblem>& out_;
};

std::string plural(std::uint64_t n, std::string_view word) {
  return fmt::format("{} {}{}", n, word, n == 1 ? "" : "s");
}

std::string power_of_two_message(std::uint64_t v, std::uint32_t min) {
  std::uint64_t up = min;
  while (up < v && up < kMaxRingSize) up <<= 1;
  return fmt::format("expected a power of two from {} to {}, got {} (try {})", min, kMaxRingSize, v, up);
}

bool ring_size_ok(std::uint64_t v, std::uint32_t min) { return v >= min && v <= kMaxRingSize && is_power_of_two(v); }

template <typename T, typename NameOf>
void unique_names(const Plan& plan, const std::vector<T>& items, PlanPart part, std::string_view kind, NameOf name_of,
                  Problems& problems) {
  std::map<std::string, std::size_t> first;
  for (std::size_t i = 0; i < items.size(); ++i) {
    const std::string& name = name_of(items[i]);
    if (name.empty()) {
      problems.add(part, i, "name", "expected a non-empty string");
      continue;
    }
    auto [it, fresh] = first.emplace(name, i);
    if (!fresh)
      problems.add(part, i, "name",
                   fmt::format("{} name \"{}\" is already used by {}", kind, name, plan_part_label(plan, part, it->second)));
  }
}

void check_pools(const Plan& plan, Problems& problems) {
  if (plan.pools.empty())
    problems.add(PlanPart::kPlan, 0, "pools", "expected at least one [[pools]] table (where receive buffers come from)");
  unique_names(plan, plan.pools, PlanPart::kPool, "pool", [](const PoolPlan& p) -> const std::string& { return p.config.name; },
               problems);
}

// The ports on one pool post their receive buffers from the same free list, so the plan adds them
// up: a port's own start checks only its own need against the pool, and the port started last
// could be left nothing to receive into, where the plan can name the count to raise.
void check_buffers_kept(const Plan& plan, Problems& problems) {
  for (std::size_t pi = 0; pi < plan.pools.size(); ++pi) {
    const PoolPlan& pool = plan.pools[pi];
    const PoolDemand d = pool_demand(plan, pi);
    const std::uint32_t count = pool_count(plan, pi);
    if (d.kept <= count) continue;
    if (d.keepers.size() == 1) {
      const PortPlan& p = plan.ports[d.keepers[0]];
      problems.add(PlanPart::kPort, d.keepers[0], "rx_ring_size",
                   fmt::format("at {} the {} driver keeps {} buffers posted, more than pool '{}' has ({}); raise the "
                               "pool's count to at least {} or lower rx_ring_size",
                               p.rx_ring_size, p.pmd, d.kept, pool.config.name, count, d.kept));
    } else {
      std::string names;
      for (std::size_t i : d.keepers) names += fmt::format("{}'{}'", names.empty() ? "" : ", ", plan.ports[i].name);
      problems.add(PlanPart::kPool, pi, "count",
                   fmt::format("{} buffers, but ports {} keep {} posted between them; raise it to at least {} or "
                               "lower their rx_ring_size",
                               count, names, d.kept, d.kept));
    }
  }
}

void check_ports(const Plan& plan, Problems& problems) {
  if (plan.ports.empty()) problems.add(PlanPart::kPlan, 0, "ports", "expected at least one [[ports]] table");
  unique_names(plan, plan.ports, PlanPart::kPort, "port", [](const PortPlan& p) -> const std::string& { return p.name; },
               problems);
  for (std::size_t i = 0; i < plan.ports.size(); ++i) {
    const PortPlan& p = plan.ports[i];
    if (p.id != i) problems.add(PlanPart::kPort, i, "", fmt::format("has id {} but is entry {} (ids are positions)", p.id, i));
    if (p.pool.empty()) {
      problems.add(PlanPart::kPort, i, "pool", "expected the name of a [[pools]] table for its receive buffers");
    } else {
      bool found = false;
      for (const PoolPlan& pool : plan.pools) found |= pool.config.name == p.pool;
      if (!found) problems.add(PlanPart::kPort, i, "pool", fmt::format("no [[pools]] table is named \"{}\"", p.pool));
    }
    if (!p.spec)
      problems.add(PlanPart::kPort, i, "pmd", fmt::format("no driver settings for pmd \"{}\" (PortPlan::spec is empty)", p.pmd));
    if (p.rx_queues < 1 || p.rx_queues > kMaxPortQueues)
      problems.add(PlanPart::kPort, i, "rx_queues",
                   fmt::format("expected an integer from 1 to {}, got {}", kMaxPortQueues, p.rx_queues));
    else if (p.spec && p.rx_queues > p.spec->max_rx_queues())
      problems.add(PlanPart::kPort, i, "rx_queues",
                   fmt::format("the {} driver supports at most {} for this port, got {}", p.pmd,
                               plural(p.spec->max_rx_queues(), "rx queue"), p.rx_queues));
    if (p.tx_queues > kMaxPortQueues)
      problems.add(PlanPart::kPort, i, "tx_queues",
                   fmt::format("expected an integer from 0 to {}, got {}", kMaxPortQueues, p.tx_queues));
    else if (p.spec && p.tx_queues > p.spec->max_tx_queues())
      problems.add(PlanPart::kPort, i, "tx_queues",
                   fmt::format("the {} driver supports at most {} for this port, got {}", p.pmd,
                               plural(p.spec->max_tx_queues(), "tx queue"), p.tx_queues));
    if (!ring_size_ok(p.rx_ring_size, 1)) problems.add(PlanPart::kPort, i, "rx_ring_size", power_of_two_message(p.rx_ring_size, 1));
    if (!ring_size_ok(p.tx_ring_size, 1)) problems.add(PlanPart::kPort, i, "tx_ring_size", power_of_two_message(p.tx_ring_size, 1));
  }
}

void check_endpoints(const Plan& plan, Problems& problems) {
  if (plan.endpoints.size() > kMaxEndpointCount)
    problems.add(PlanPart::kPlan, 0, "endpoints",
                 fmt::format("at most {} endpoints are supported, got {}", kMaxEndpointCount, plan.endpoints.size()));
  unique_names(plan, plan.endpoints, PlanPart::kEndpoint, "endpoint",
               [](const EndpointPlan& e) -> const std::string& { return e.name; }, problems);
  for (std::size_t i = 0; i < plan.endpoints.size(); ++i) {
    const EndpointPlan& e = plan.endpoints[i];
    if (e.id != i) problems.add(PlanPart::kEndpoint, i, "", fmt::format("has id {} but is entry {} (ids are positions)", e.id, i));
    for (const std::string& text : e.match) {
      auto rule = parse_match_rule(text);
      if (!rule) {
        problems.add(PlanPart::kEndpoint, i, "match", fmt::format("rule \"{}\": {}", text, rule.message()));
        continue;
      }
      if (rule->ingress_port_name.empty()) continue;
      bool found = false;
      for (const PortPlan& p : plan.ports) found |= p.name == rule->ingress_port_name;
      if (!found)
        problems.add(PlanPart::kEndpoint, i, "match",
                     fmt::format("rule \"{}\": no [[ports]] table is named \"{}\"", text, rule->ingress_port_name));
    }
    if (e.action == EndpointAction::kRing && !ring_size_ok(e.ring_size, kMinEndpointRingSize))
      problems.add(PlanPart::kEndpoint, i, "ring_size", power_of_two_message(e.ring_size, kMinEndpointRingSize));
    if (e.action == EndpointAction::kForward) {
      if (e.forward_port_id >= plan.ports.size())
        problems.add(PlanPart::kEndpoint, i, "port",
                     fmt::format("forward port id {} does not exist (there are {})", e.forward_port_id, plural(plan.ports.size(), "port")));
      else if (plan.ports[e.forward_port_id].tx_queues == 0)
        problems.add(PlanPart::kEndpoint, i, "port",
                     fmt::format("port \"{}\" has tx_queues = 0, so nothing can be forwarded to it",
                                 plan.ports[e.forward_port_id].name));
    }
  }
}

void check_default(const Plan& plan, const ValidateOptions& options, Problems& problems) {
  if (plan.default_action == DefaultAction::kEndpoint && plan.default_endpoint >= plan.endpoints.size())
    problems.add(PlanPart::kRun, 0, "default_endpoint",
                 fmt::format("endpoint id {} does not exist (there are {})", plan.default_endpoint,
                             plural(plan.endpoints.size(), "endpoint")));
  if (!options.endpoints_need_rules) return;
  for (std::size_t i = 0; i < plan.endpoints.size(); ++i) {
    if (!plan.endpoints[i].match.empty()) continue;
    if (plan.default_action == DefaultAction::kEndpoint && plan.default_endpoint == i) continue;
    problems.add(PlanPart::kEndpoint, i, "match",
                 "expected at least one rule (e.g. \"udp dst *:5000\"): without rules an endpoint receives nothing "
                 "unless it is [run] default_endpoint");
  }
}

void check_lcores(const Plan& plan, const ValidateOptions& options, Problems& problems) {
  if (plan.lcores.empty()) {
    problems.add(PlanPart::kPlan, 0, "lcores", "expected at least one [[lcores]] table (the worker threads that poll the ports)");
    return;
  }
  std::map<int, std::size_t> cpu_owner;
  std::map<std::pair<std::uint16_t, std::uint16_t>, std::size_t> queue_owner;
  for (std::size_t i = 0; i < plan.lcores.size(); ++i) {
    const LcorePlan& l = plan.lcores[i];
    if (l.id != i) problems.add(PlanPart::kLcore, i, "", fmt::format("has id {} but is entry {} (ids are positions)", l.id, i));
    if (l.cpu < -1) {
      problems.add(PlanPart::kLcore, i, "cpu", fmt::format("expected -1 (not pinned) or a CPU number, got {}", l.cpu));
    } else if (options.cpu_count && l.cpu >= static_cast<int>(options.cpu_count)) {
      problems.add(PlanPart::kLcore, i, "cpu",
                   fmt::format("cpu {} is beyond this machine's {} (0 to {})", l.cpu, plural(options.cpu_count, "CPU"),
                               options.cpu_count - 1));
    } else if (l.cpu >= 0) {
      auto [it, fresh] = cpu_owner.emplace(l.cpu, i);
      if (!fresh)
        problems.add(PlanPart::kLcore, i, "cpu",
                     fmt::format("cpu {} is already polled by {}; two polling lcores on one CPU halve each other's rate", l.cpu,
                                 plan_part_label(plan, PlanPart::kLcore, it->second)));
    }
    if (l.burst < 1 || l.burst > kMaxBurst)
      problems.add(PlanPart::kLcore, i, "burst", fmt::format("expected an integer from 1 to {}, got {}", kMaxBurst, l.burst));
    if (l.idle_sleep_us > kMaxIdleSleepUs)
      problems.add(PlanPart::kLcore, i, "idle_sleep_us",
                   fmt::format("expected an integer from 0 to {}, got {}", kMaxIdleSleepUs, l.idle_sleep_us));
    if (!l.thread && l.cpu >= 0)
      problems.add(PlanPart::kLcore, i, "cpu",
                   "an lcore without a thread (thread = false) runs on whichever application thread waits; it cannot be "
                   "pinned (pin the application's thread instead)");
    if (!l.thread && l.idle_sleep_us != 0)
      problems.add(PlanPart::kLcore, i, "idle_sleep_us",
                   "an lcore without a thread (thread = false) never sleeps itself: the waiting application thread "
                   "sleeps on the queues' descriptors");
    if (l.rx.empty()) problems.add(PlanPart::kLcore, i, "rx", "expected at least one \"port:queue\" to poll");
    for (const LcorePlan::RxQueue& q : l.rx) {
      if (q.port >= plan.ports.size()) {
        problems.add(PlanPart::kLcore, i, "rx", fmt::format("port id {} does not exist (there are {})", q.port,
                                                            plural(plan.ports.size(), "port")));
        continue;
      }
      const PortPlan& p = plan.ports[q.port];
      const std::string entry = fmt::format("{}:{}", p.name, q.queue);
      if (q.queue >= p.rx_queues) {
        problems.add(PlanPart::kLcore, i, "rx",
                     p.rx_queues == 0 ? fmt::format("\"{}\": port \"{}\" has no rx queues", entry, p.name)
                                      : fmt::format("\"{}\": port \"{}\" has {} (0 to {})", entry, p.name,
                                                    plural(p.rx_queues, "rx queue"), p.rx_queues - 1));
        continue;
      }
      auto [it, fresh] = queue_owner.emplace(std::make_pair(q.port, q.queue), i);
      if (!fresh)
        problems.add(PlanPart::kLcore, i, "rx",
                     fmt::format("\"{}\" is already polled by {}; each rx queue belongs to exactly one lcore", entry,
                                 plan_part_label(plan, PlanPart::kLcore, it->second)));
    }
  }
  for (const PortPlan& p : plan.ports)
    for (std::uint16_t q = 0; q < p.rx_queues && q < kMaxPortQueues; ++q)
      if (!queue_owner.count({p.id, q}))
        problems.add(PlanPart::kPlan, 0, "lcores",
                     fmt::format("rx queue {} of port \"{}\" ({}:{}) is polled by no lcore; add \"{}:{}\" to an lcore's rx list",
                                 q, p.name, p.where.file, p.where.line, p.name, q));
}

// Lcores transmit echo and forward endpoints' packets and ARP/ND replies; each needs a tx queue of
// its own on every port it may send on (tx queues are single-owner, like rx queues). The builder
// hands them out in lcore order (pipeline/engine/builder.cc, assign_tx_queues), this counts them.
void check_tx_queues(const Plan& plan, Problems& problems) {
  bool any_echo = false;
  std::set<std::uint16_t> forward_ports;
  for (const EndpointPlan& e : plan.endpoints) {
    any_echo |= e.action == EndpointAction::kEcho;
    if (e.action == EndpointAction::kForward && e.forward_port_id < plan.ports.size()) forward_ports.insert(e.forward_port_id);
  }
  for (const PortPlan& p : plan.ports) {
    if (p.id >= plan.ports.size()) continue;
    const bool forward = forward_ports.count(p.id) > 0;
    const bool answers = !p.neigh.addresses.empty();
    std::size_t senders = 0;
    for (const LcorePlan& l : plan.lcores) {
      bool polls = false;
      for (const LcorePlan::RxQueue& q : l.rx) polls |= q.port == p.id;
      if (forward || (polls && (any_echo || answers))) ++senders;
    }
    if (senders <= p.tx_queues) continue;
    // A port nothing may be forwarded to has its own message at the forward endpoint.
    if (p.tx_queues == 0 && forward && !any_echo && !answers) continue;
    std::vector<std::string_view> why;
    if (any_echo) why.push_back("echo endpoints");
    if (forward) why.push_back("forward endpoints");
    if (answers) why.push_back("ARP/ND replies for its addresses");
    std::string reasons;
    for (std::size_t k = 0; k < why.size(); ++k) reasons += fmt::format("{}{}", k == 0 ? "" : k + 1 == why.size() ? " and " : ", ", why[k]);
    problems.add(PlanPart::kPort, p.id, "tx_queues",
                 fmt::format("{} may transmit on port \"{}\" ({}) but it has {}; set tx_queues = {} so each lcore owns one",
                             plural(senders, "lcore"), p.name, reasons, plural(p.tx_queues, "tx queue"), senders));
  }
}

void check_taps(const Plan& plan, Problems& problems) {
  for (std::size_t i = 0; i < plan.taps.size(); ++i) {
    const TapConfig& t = plan.taps[i];
    if (t.port_id >= static_cast<std::int64_t>(plan.ports.size()) || t.port_id < -1)
      problems.add(PlanPart::kTap, i, "port", fmt::format("port id {} does not exist (there are {})", t.port_id,
                                                          plural(plan.ports.size(), "port")));
    if (t.endpoint_id >= static_cast<std::int64_t>(plan.endpoints.size()) || t.endpoint_id < -1)
      problems.add(PlanPart::kTap, i, "endpoint", fmt::format("endpoint id {} does not exist (there are {})", t.endpoint_id,
                                                              plural(plan.endpoints.size(), "endpoint")));
  }
}

void check_filters(const Plan& plan, Problems& problems) {
  for (std::size_t i = 0; i < plan.filters.size(); ++i) {
    const FilterPlan& f = plan.filters[i];
    if (f.on_queue) {
      if (f.port >= plan.ports.size())
        problems.add(PlanPart::kFilter, i, "queue", fmt::format("port id {} does not exist (there are {})", f.port,
                                                                plural(plan.ports.size(), "port")));
      else if (f.rx_queue >= plan.ports[f.port].rx_queues)
        problems.add(PlanPart::kFilter, i, "queue",
                     fmt::format("port \"{}\" has {}; queue {} does not exist", plan.ports[f.port].name,
                                 plural(plan.ports[f.port].rx_queues, "rx queue"), f.rx_queue));
    } else if (f.endpoint >= plan.endpoints.size()) {
      problems.add(PlanPart::kFilter, i, "endpoint", fmt::format("endpoint id {} does not exist (there are {})", f.endpoint,
                                                                 plural(plan.endpoints.size(), "endpoint")));
    }
  }
}

SourceLocation location(const Plan& plan, PlanPart part, std::size_t index) {
  switch (part) {
    case PlanPart::kPool: return index < plan.pools.size() ? plan.pools[index].where : SourceLocation{plan.source, 0};
    case PlanPart::kPort: return index < plan.ports.size() ? plan.ports[index].where : SourceLocation{plan.source, 0};
    case PlanPart::kEndpoint:
      return index < plan.endpoints.size() ? plan.endpoints[index].where : SourceLocation{plan.source, 0};
    case PlanPart::kLcore: return index < plan.lcores.size() ? plan.lcores[index].where : SourceLocation{plan.source, 0};
    case PlanPart::kFilter: return index < plan.filters.size() ? plan.filters[index].where : SourceLocation{plan.source, 0};
    case PlanPart::kPlan:
    case PlanPart::kRun:
    case PlanPart::kTap: break;
  }
  return {plan.source, 0};
}

}  // namespace

std::string plan_part_label(const Plan& plan, PlanPart part, std::size_t index) {
  switch (part) {
    case PlanPart::kPlan: return "top level";
    case PlanPart::kRun: return "[run]";
    case PlanPart::kPool:
      return fmt::format("pools[{}] '{}'", index, index < plan.pools.size() ? plan.pools[index].config.name : "");
    case PlanPart::kPort: return fmt::format("ports[{}] '{}'", index, index < plan.ports.size() ? plan.ports[index].name : "");
    case PlanPart::kEndpoint:
      return fmt::format("endpoints[{}] '{}'", index, index < plan.endpoints.size() ? plan.endpoints[index].name : "");
    case PlanPart::kLcore: return fmt::format("lcores[{}]", index);
    case PlanPart::kTap:
      return index < plan.taps.size() && !plan.taps[index].name.empty() ? fmt::format("taps[{}] '{}'", index, plan.taps[index].name)
                                                                         : fmt::format("taps[{}]", index);
    case PlanPart::kFilter: return fmt::format("filters[{}]", index);
  }
  return "plan";
}

std::vector<PlanProblem> find_plan_problems(const Plan& plan, const ValidateOptions& options) {
  std::vector<PlanProblem> out;
  Problems problems(out);
  check_pools(plan, problems);
  check_ports(plan, problems);
  check_buffers_kept(plan, problems);
  check_endpoints(plan, problems);
  check_default(plan, options, problems);
  check_lcores(plan, options, problems);
  check_tx_queues(plan, problems);
  check_taps(plan, problems);
  check_filters(plan, problems);
  return out;
}

std::string location_prefix(const SourceLocation& w) {
  if (w.file.empty()) return "";
  return w.line > 0 ? fmt::format("{}:{}: ", w.file, w.line) : fmt::format("{}: ", w.file);
}

Status validate_plan(const Plan& plan, const ValidateOptions& options) {
  std::vector<PlanProblem> problems = find_plan_problems(plan, options);
  if (problems.empty()) return Status::ok();
  const PlanProblem& first = problems.front();
  const SourceLocation w = location(plan, first.part, first.index);
  std::string message = fmt::format("{}{}: {}{}", location_prefix(w), plan_part_label(plan, first.part, first.index),
                                    first.key.empty() ? std::string() : fmt::format("key '{}': ", first.key), first.message);
  if (problems.size() > 1)
    message += fmt::format(" (and {} more error{})", problems.size() - 1, problems.size() == 2 ? "" : "s");
  return Status::error(std::move(message));
}

}  // namespace rawpipe
