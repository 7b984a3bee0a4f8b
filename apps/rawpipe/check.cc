// `rawpipe check` and `rawpipe list-pmds`.
#include <fmt/core.h>

#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "commands.hh"
#include "report.hh"
#include "rawpipe/config.hh"
#include "rawpipe/drop_reason.hh"
#include "rawpipe/privilege.hh"

namespace rawpipe::app {
namespace {

const char* action_name(EndpointAction a) {
  switch (a) {
    case EndpointAction::kRing: return "ring";
    case EndpointAction::kSink: return "sink";
    case EndpointAction::kEcho: return "echo";
    case EndpointAction::kForward: return "forward";
  }
  return "?";
}

const char* stage_name(TapStage s) {
  return s == TapStage::kRx ? "rx" : s == TapStage::kFiltered ? "filtered" : "drops";
}

// What the ports need to be set up, judged from the driver names as `rawpipe doctor` does (the
// doctor also checks what this host grants), and what each keeps once running.
struct PrivilegeNeeds {
  std::vector<std::string> setup;
  std::vector<std::string> runtime;
};

PrivilegeNeeds privilege_needs(const Plan& plan) {
  PrivilegeNeeds out;
  bool raw = false, xdp = false, pin = false;
  for (const PortPlan& p : plan.ports) {
    const bool is_auto = p.pmd == "auto";
    raw = raw || p.pmd == "af_packet" || p.pmd == "af_xdp" || p.pmd == "mlx5" || p.pmd == "mana" || is_auto;
    xdp = xdp || p.pmd == "af_xdp" || is_auto;
    pin = pin || p.pmd == "af_xdp" || p.pmd == "mlx5" || p.pmd == "mana" || is_auto;
  }
  if (raw) out.setup.push_back("CAP_NET_RAW: raw sockets and raw-packet queues");
  if (xdp) out.setup.push_back("CAP_NET_ADMIN and CAP_BPF: attaching and loading the XDP program");
  if (pin) out.setup.push_back("CAP_IPC_LOCK or a large enough RLIMIT_MEMLOCK: pinning the packet pool");
  for (const PortPlan& p : plan.ports) {
    std::vector<std::string> why;
    const privilege::CapMask caps = privilege::runtime_needs_for_port(p.pmd, p.name, why);
    if (caps) out.runtime.push_back(fmt::format("port {}: {}", p.name, privilege::format_caps(caps)));
  }
  return out;
}

nlohmann::json plan_json(const LoadedConfig& loaded, const PrivilegeNeeds& needs) {
  const Plan& plan = loaded.plan;
  nlohmann::json j;
  j["config"] = plan.source;
  j["valid"] = true;
  for (const auto& p : plan.pools)
    j["pools"].push_back({{"name", p.config.name}, {"count", p.config.count}, {"buf_size", p.config.buf_size},
                          {"headroom", p.config.headroom}, {"cache_size", p.config.cache_size}});
  for (const auto& p : plan.ports)
    j["ports"].push_back({{"name", p.name}, {"pmd", p.pmd}, {"pool", p.pool}, {"rx_queues", p.rx_queues},
                          {"tx_queues", p.tx_queues}, {"rx_ring_size", p.rx_ring_size},
                          {"tx_ring_size", p.tx_ring_size}, {"line", p.where.line}});
  for (const auto& e : plan.endpoints) {
    nlohmann::json ej = {{"name", e.name}, {"action", action_name(e.action)}, {"rules", e.match}, {"line", e.where.line}};
    if (e.action == EndpointAction::kRing) ej["ring_size"] = e.ring_size;
    if (e.action == EndpointAction::kForward) ej["port"] = e.forward_port;
    j["endpoints"].push_back(std::move(ej));
  }
  for (const auto& l : plan.lcores) {
    nlohmann::json rx = nlohmann::json::array();
    for (const auto& q : l.rx) rx.push_back(fmt::format("{}:{}", plan.ports[q.port].name, q.queue));
    j["lcores"].push_back({{"id", l.id}, {"cpu", l.cpu}, {"burst", l.burst}, {"idle_sleep_us", l.idle_sleep_us},
                           {"rx", rx}});
  }
  j["taps"] = nlohmann::json::array();
  for (const auto& t : plan.taps)
    j["taps"].push_back({{"name", t.name}, {"stage", stage_name(t.stage)}, {"path", t.path}, {"snaplen", t.snaplen},
                         {"port", t.port}, {"endpoint", t.endpoint}});
  j["filters"] = nlohmann::json::array();
  for (const auto& f : plan.filters) {
    nlohmann::json fj = {{"label", f.label}, {"path", f.path}};
    if (f.on_queue) fj["queue"] = fmt::format("{}:{}", plan.ports[f.port].name, f.rx_queue);
    else fj["endpoint"] = plan.endpoints[f.endpoint].name;
    for (const auto& [k, v] : f.config) fj["config"][k] = v;
    j["filters"].push_back(std::move(fj));
  }
  j["metrics"] = {{"listen", plan.metrics.listen}, {"latency_sample", plan.metrics.latency_sample},
                  {"stats_segment", plan.metrics.stats_segment}};
  j["default_action"] = plan.default_action == DefaultAction::kEndpoint ? "endpoint" : "drop";
  if (plan.default_action == DefaultAction::kEndpoint) j["default_endpoint"] = plan.endpoints[plan.default_endpoint].name;
  j["duration_s"] = plan.duration_s;
  j["privileges"] = {{"setup", needs.setup},
                     {"runtime", needs.runtime},
                     {"drop_privileges", loaded.app.privilege.drop},
                     {"user", loaded.app.privilege.user}};
  j["warnings"] = loaded.warnings;
  return j;
}

void print_sections(const LoadedConfig& loaded, const PrivilegeNeeds& needs) {
  const Plan& plan = loaded.plan;
  fmt::print("{}", describe_plan(plan));
  if (loaded.app.consumer_cpu >= 0) fmt::print("  ring consumer on cpu {}\n", loaded.app.consumer_cpu);
  if (plan.taps.empty()) fmt::print("  taps: none\n");
  for (const auto& t : plan.taps)
    fmt::print("  tap {:<13} stage {}, {} (snaplen {}){}{}\n", t.name, stage_name(t.stage), t.path, t.snaplen,
               t.port.empty() ? "" : ", port " + t.port, t.endpoint.empty() ? "" : ", endpoint " + t.endpoint);
  if (plan.filters.empty()) fmt::print("  filters: none\n");
  for (const auto& f : plan.filters)
    fmt::print("  filter {:<10} {} on {}\n", f.label, f.path,
               f.on_queue ? fmt::format("queue {}:{}", plan.ports[f.port].name, f.rx_queue)
                          : fmt::format("endpoint {}", plan.endpoints[f.endpoint].name));
  fmt::print("  metrics: {}; latency sample 1 in {}; stats segment {}\n",
             plan.metrics.listen.empty() ? std::string("no listener") : "GET /metrics on " + plan.metrics.listen,
             plan.metrics.latency_sample, plan.metrics.stats_segment ? "on" : "off");
  if (needs.setup.empty()) fmt::print("  privileges: none needed to set up\n");
  for (const auto& s : needs.setup) fmt::print("  privileges: setup needs {}\n", s);
  for (const auto& s : needs.runtime) fmt::print("  privileges: kept after setup, {}\n", s);
  fmt::print("  privileges: {}\n", loaded.app.privilege.drop ? "the rest are dropped after setup (drop_privileges)"
                                                             : "kept (drop_privileges = false)");
}

}  // namespace

int check_command(const CheckOptions& options) {
  const std::string& config = options.config;
  auto loaded = load_config(config, LoadOptions{});
  if (!loaded) {
    // Every error of the config, one per line, so one edit fixes them all.
    std::size_t count = 0;
    std::string_view all = loaded.message();
    while (!all.empty()) {
      const std::size_t eol = all.find('\n');
      fmt::print(stderr, "rawpipe: {}\n", all.substr(0, eol));
      ++count;
      all = eol == std::string_view::npos ? std::string_view() : all.substr(eol + 1);
    }
    if (count > 1) fmt::print(stderr, "rawpipe: {}: {} errors\n", config, count);
    return 1;
  }
  const PrivilegeNeeds needs = privilege_needs(loaded->plan);
  const bool json_to_stdout = options.json_file == "-";
  if (!json_to_stdout) {
    print_sections(*loaded, needs);
    for (const auto& w : loaded->warnings) fmt::print(stderr, "rawpipe: warning: {}\n", w);
    fmt::print("{}: valid{}\n", config,
               loaded->warnings.empty() ? std::string()
                                        : fmt::format(", {} warning{}", loaded->warnings.size(),
                                                      loaded->warnings.size() == 1 ? "" : "s"));
  } else {
    for (const auto& w : loaded->warnings) fmt::print(stderr, "rawpipe: warning: {}\n", w);
  }
  if (!options.json_file.empty()) {
    const std::string text = plan_json(*loaded, needs).dump(2) + "\n";
    if (json_to_stdout) {
      std::cout << text;
    } else {
      std::ofstream out(options.json_file);
      if (!(out << text)) {
        fmt::print(stderr, "rawpipe: cannot write {}: check that its directory exists and is writable\n",
                   options.json_file);
        return 1;
      }
    }
  }
  return 0;
}

int list_pmds_command() {
  for (const DriverInfo& d : builtin_drivers()) fmt::print("{:<12} {}\n", d.name, d.summary);
  return 0;
}

}  // namespace rawpipe::app
