#include "pipeline/config/loader.hh"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include "pipeline/classify/rule.hh"
#include "pipeline/common/compiler.hh"
#include "pipeline/config/metrics_section.hh"
#include "pipeline/config/filters_section.hh"
#include "pipeline/config/section.hh"
#include "pipeline/config/taps_section.hh"
#include "pipeline/neigh/port_keys.hh"

namespace rawpipe {
namespace {

constexpr std::int64_t kMaxQueues = 256;
constexpr std::int64_t kMaxRingSize = 1 << 20;
constexpr std::size_t kMaxEndpoints = Mbuf::kNoEndpoint;  // 0xffff marks "no endpoint"

std::string join_names(const std::vector<std::string_view>& names) {
  std::string out;
  for (auto n : names) out += fmt::format("{}\"{}\"", out.empty() ? "" : ", ", n);
  return out;
}

// Reads a ring size and checks it is a power of two (rings mask free-running indices).
std::uint32_t ring_size(ConfigSection& s, std::string_view key, std::uint32_t fallback) {
  std::int64_t v = s.integer(key, 1, kMaxRingSize, fallback);
  if (!is_power_of_two(static_cast<std::uint64_t>(v))) {
    s.fail(key, fmt::format("expected a power of two from 1 to {}, got {} (try {})", kMaxRingSize, v,
                            std::uint64_t(1) << (64 - __builtin_clzll(static_cast<std::uint64_t>(v)))));
    return fallback;
  }
  return static_cast<std::uint32_t>(v);
}

SourceLocation where(const ConfigSection& s) { return {s.file(), s.line()}; }

// Checks `name` is non-empty and not yet in `seen`; records the first owner's label otherwise.
void unique_name(ConfigSection& s, const std::string& name, std::map<std::string, std::string>& seen,
                 std::string_view kind) {
  if (name.empty()) return;  // the getter already reported a missing or empty name
  auto [it, inserted] = seen.emplace(name, s.label());
  if (!inserted)
    s.fail("name", fmt::format("{} name \"{}\" is already used by {}", kind, name, it->second));
}

std::string read_name(ConfigSection& s, std::string_view kind, std::size_t index) {
  std::string name = s.string("name");
  if (s.has("name") && name.empty()) s.fail("name", "expected a non-empty string");
  s.set_label(fmt::format("{}[{}] '{}'", kind, index, name));
  return name;
}

void load_pools(ConfigSection& root, Plan& plan, std::vector<ConfigSection>& sections) {
  std::map<std::string, std::string> seen;
  sections = root.table_array("pools");
  for (std::size_t i = 0; i < sections.size(); ++i) {
    ConfigSection& s = sections[i];
    PoolPlan p;
    p.config.name = read_name(s, "pools", i);
    unique_name(s, p.config.name, seen, "pool");
    p.config.count = static_cast<std::uint32_t>(s.integer("count", 64, 1 << 30, 8192));
    std::int64_t buf_size = s.integer("buf_size", 512, 65536, 2048);
    if (!is_power_of_two(static_cast<std::uint64_t>(buf_size)))
      s.fail("buf_size", fmt::format("expected a power of two from 512 to 65536, got {}", buf_size));
    p.config.buf_size = static_cast<std::uint32_t>(buf_size);
    std::int64_t headroom = s.integer("headroom", 0, 1024, RAWPIPE_HEADROOM);
    if (static_cast<std::uint64_t>(headroom) + kMbufHeaderSize + 64 > static_cast<std::uint64_t>(buf_size))
      s.fail("headroom", fmt::format("headroom {} leaves less than 64 data bytes in a {}-byte buffer "
                                     "({} bytes go to the buffer header)",
                                     headroom, buf_size, kMbufHeaderSize));
    p.config.headroom = static_cast<std::uint32_t>(headroom);
    p.config.cache_size = static_cast<std::uint32_t>(s.integer("cache_size", 0, 256, 256));
    std::string huge = s.choice("huge_pages", {"auto", "require", "never"}, "auto");
    p.config.huge_pages = huge == "require" ? HugePages::kRequire
                          : huge == "never" ? HugePages::kNever
                                            : HugePages::kAuto;
    p.where = where(s);
    plan.pools.push_back(std::move(p));
  }
  if (sections.empty())
    root.fail("pools", "expected at least one [[pools]] table (where receive buffers come from)");
}

// Fills plan.ports with the ports whose driver is known. `all_names` gets every port name, including
// ports that fail to load, so references to a broken port are not reported again as dangling;
// `has_driver[i]` says whether sections[i] had its driver keys read (and so can reject unknown keys).
void load_ports(ConfigSection& root, Plan& plan, const LoadOptions& options, std::vector<ConfigSection>& sections,
                std::set<std::string, std::less<>>& all_names, std::vector<bool>& has_driver,
                std::vector<std::size_t>& section_of_port) {
  std::map<std::string, std::string> seen;
  sections = root.table_array("ports");
  has_driver.assign(sections.size(), false);
  for (std::size_t i = 0; i < sections.size(); ++i) {
    ConfigSection& s = sections[i];
    PortPlan p;
    p.id = static_cast<std::uint16_t>(plan.ports.size());
    p.name = read_name(s, "ports", i);
    all_names.insert(p.name);
    unique_name(s, p.name, seen, "port");
    p.pmd = s.string("pmd");
    if (plan.pools.size() == 1 && !s.has("pool")) {
      p.pool = plan.pools[0].config.name;
      (void)s.string("pool", p.pool);
    } else {
      p.pool = s.string("pool");
    }
    if (!p.pool.empty()) {
      bool found = false;
      for (const auto& pool : plan.pools) found |= pool.config.name == p.pool;
      if (!found) s.fail("pool", fmt::format("no [[pools]] table is named \"{}\"", p.pool));
    }
    p.rx_queues = static_cast<std::uint16_t>(s.integer("rx_queues", 1, kMaxQueues, 1));
    p.tx_queues = static_cast<std::uint16_t>(s.integer("tx_queues", 0, kMaxQueues, 1));
    p.rx_ring_size = ring_size(s, "rx_ring_size", 1024);
    p.tx_ring_size = ring_size(s, "tx_ring_size", 1024);
    p.neigh = read_neigh_port_keys(s);
    p.where = where(s);

    const PmdDriver* driver = p.pmd.empty() || !options.find_pmd ? nullptr : options.find_pmd(p.pmd);
    if (!p.pmd.empty() && !driver) {
      std::vector<std::string_view> names = options.known_pmds;
      if (names.empty() && options.find_pmd == &rawpipe::find_pmd)
        for (const PmdDriver* d : all_pmds()) names.push_back(d->name);
      std::string known = names.empty() ? std::string("none") : join_names(names);
      s.fail("pmd", fmt::format("no driver named \"{}\" is built into this binary (available: {}; "
                                "`rawpipe list-pmds` describes them)",
                                p.pmd, known));
    }
    if (driver) {
      has_driver[i] = true;
      Status before = s.status();
      auto spec = driver->parse(s);
      if (spec) {
        p.spec = std::shared_ptr<const PortSpec>(std::move(spec).value());
        if (p.rx_queues > p.spec->max_rx_queues())
          s.fail("rx_queues", fmt::format("the {} driver supports at most {} rx queue{} for this port, got {}",
                                          p.pmd, p.spec->max_rx_queues(),
                                          p.spec->max_rx_queues() == 1 ? "" : "s", p.rx_queues));
      } else if (before.is_ok() && s.status().is_ok()) {
        // The driver returned an error without recording it at a key; place it at the table.
        s.fail("", spec.message());
      }
    } else {
      // Without a driver nobody reads the driver keys; skip the unknown-key check for this table
      // so the one real error (the pmd name) is reported instead of every driver key.
      continue;
    }
    if (p.spec && p.spec->needs_exact_pool_stride())
      for (auto& pool : plan.pools)
        if (pool.config.name == p.pool) pool.config.exact_stride = true;
    plan.ports.push_back(std::move(p));
    section_of_port.push_back(i);
  }
}

std::optional<std::uint16_t> find_port(const Plan& plan, std::string_view name) {
  for (const auto& p : plan.ports)
    if (p.name == name) return p.id;
  return std::nullopt;
}

void load_endpoints(ConfigSection& root, Plan& plan, std::vector<ConfigSection>& sections,
                    const std::set<std::string, std::less<>>& all_port_names) {
  std::map<std::string, std::string> seen;
  sections = root.table_array("endpoints");
  if (sections.size() > kMaxEndpoints) {
    root.fail("endpoints", fmt::format("at most {} endpoints are supported, got {}", kMaxEndpoints, sections.size()));
    return;
  }
  for (std::size_t i = 0; i < sections.size(); ++i) {
    ConfigSection& s = sections[i];
    EndpointPlan e;
    e.id = static_cast<std::uint16_t>(i);
    e.name = read_name(s, "endpoints", i);
    unique_name(s, e.name, seen, "endpoint");
    std::string action = s.choice("action", {"ring", "sink", "echo", "forward"}, "ring");
    e.action = action == "sink"      ? EndpointAction::kSink
               : action == "echo"    ? EndpointAction::kEcho
               : action == "forward" ? EndpointAction::kForward
                                     : EndpointAction::kRing;
    e.match = s.string_list("match");
    for (const auto& text : e.match) {
      auto rule = parse_match_rule(text);
      if (!rule) {
        s.fail("match", fmt::format("rule \"{}\": {}", text, rule.message()));
      } else if (!rule->ingress_port_name.empty() && !all_port_names.count(rule->ingress_port_name)) {
        s.fail("match", fmt::format("rule \"{}\": no [[ports]] table is named \"{}\"", text,
                                    rule->ingress_port_name));
      }
    }
    if (s.has("ring_size") && e.action != EndpointAction::kRing)
      s.fail("ring_size", fmt::format("only endpoints with action \"ring\" have a ring (this one is \"{}\")", action));
    e.ring_size = ring_size(s, "ring_size", e.ring_size);
    if (e.action == EndpointAction::kEcho)
      e.echo_format = s.choice("echo_format", {"bytes", "sockperf"}, "bytes") == "sockperf" ? EchoFormat::kSockperf
                                                                                            : EchoFormat::kBytes;
    else if (s.has("echo_format"))
      s.fail("echo_format", fmt::format("only endpoints with action \"echo\" have it (this one is \"{}\")", action));
    if (e.action == EndpointAction::kForward) {
      e.forward_port = s.string("port");
      if (!e.forward_port.empty()) {
        if (auto id = find_port(plan, e.forward_port)) {
          e.forward_port_id = *id;
          if (plan.ports[*id].tx_queues == 0)
            s.fail("port", fmt::format("port \"{}\" has tx_queues = 0, so nothing can be forwarded to it",
                                       e.forward_port));
        } else if (!all_port_names.count(e.forward_port)) {
          s.fail("port", fmt::format("no [[ports]] table is named \"{}\"", e.forward_port));
        }
      }
    } else if (s.has("port")) {
      (void)s.string("port");  // marks it read: this error replaces the unknown-key one
      s.fail("port", fmt::format("only endpoints with action \"forward\" name a port (this one is \"{}\")", action));
    }
    e.where = where(s);
    plan.endpoints.push_back(std::move(e));
  }
}

void load_run(ConfigSection& root, Plan& plan, AppSettings& app, unsigned cpus) {
  std::optional<ConfigSection> run = root.table("run");
  if (!run) return;
  ConfigSection& s = *run;
  plan.duration_s = s.number("duration", 0, 1e9, 0);
  plan.stats_interval_s = s.number("stats_interval", 0.01, 3600, 1.0);
  std::string action = s.choice("default_action", {"drop", "endpoint"}, "drop");
  plan.default_action = action == "endpoint" ? DefaultAction::kEndpoint : DefaultAction::kDrop;
  if (plan.default_action == DefaultAction::kEndpoint) {
    std::string name = s.string("default_endpoint");
    if (!name.empty()) {
      bool found = false;
      for (const auto& e : plan.endpoints) {
        if (e.name == name) {
          plan.default_endpoint = e.id;
          found = true;
        }
      }
      if (!found) s.fail("default_endpoint", fmt::format("no [[endpoints]] table is named \"{}\"", name));
    }
  } else if (s.has("default_endpoint")) {
    s.fail("default_endpoint", "is only used with default_action = \"endpoint\"");
  }
  app.consumer_cpu = static_cast<int>(s.integer("consumer_cpu", -1, 4095, -1));
  app.fail_on_loss = s.choice("on_loss", {"warn", "fail"}, "warn") == "fail";
  app.privilege = read_privilege_keys(s);
  if (app.consumer_cpu >= static_cast<int>(cpus))
    s.fail("consumer_cpu", fmt::format("cpu {} is beyond this machine's {} CPU{} (0 to {})", app.consumer_cpu, cpus,
                                       cpus == 1 ? "" : "s", cpus - 1));
  (void)s.finish();
}

// "port:queue" -> (port id, queue), recording an error at `rx` when it does not resolve.
void load_lcores(ConfigSection& root, Plan& plan, std::vector<ConfigSection>& sections, unsigned cpus,
                 const std::set<std::string, std::less<>>& all_port_names) {
  sections = root.table_array("lcores");
  if (sections.empty()) {
    root.fail("lcores", "expected at least one [[lcores]] table (the worker threads that poll the ports)");
    return;
  }
  std::map<int, std::string> cpu_owner;
  // (port, queue) -> label of the lcore polling it
  std::map<std::pair<std::uint16_t, std::uint16_t>, std::string> queue_owner;
  for (std::size_t i = 0; i < sections.size(); ++i) {
    ConfigSection& s = sections[i];
    s.set_label(fmt::format("lcores[{}]", i));
    LcorePlan l;
    l.id = static_cast<std::uint16_t>(i);
    l.cpu = static_cast<int>(s.integer("cpu", -1, 4095, -1));
    if (l.cpu >= static_cast<int>(cpus)) {
      s.fail("cpu", fmt::format("cpu {} is beyond this machine's {} CPU{} (0 to {})", l.cpu, cpus,
                                cpus == 1 ? "" : "s", cpus - 1));
    } else if (l.cpu >= 0) {
      auto [it, inserted] = cpu_owner.emplace(l.cpu, s.label());
      if (!inserted)
        s.fail("cpu", fmt::format("cpu {} is already polled by {}; two polling lcores on one CPU halve each "
                                  "other's rate",
                                  l.cpu, it->second));
    }
    l.burst = static_cast<std::uint16_t>(s.integer("burst", 1, kMaxBurst, kDefaultBurst));
    l.idle_sleep_us = static_cast<std::uint32_t>(s.integer("idle_sleep_us", 0, 1000000, 0));
    for (const auto& entry : s.string_list("rx")) {
      auto colon = entry.rfind(':');
      if (colon == std::string::npos || colon == 0 || colon + 1 == entry.size()) {
        s.fail("rx", fmt::format("\"{}\" is not \"port:queue\" (e.g. \"synth0:0\")", entry));
        continue;
      }
      std::string port_name = entry.substr(0, colon);
      std::string queue_text = entry.substr(colon + 1);
      unsigned long queue = 0;
      std::size_t used = 0;
      try {
        queue = std::stoul(queue_text, &used);
      } catch (...) {
        used = 0;
      }
      if (used != queue_text.size() || queue > 0xffff) {
        s.fail("rx", fmt::format("\"{}\": queue \"{}\" is not a number", entry, queue_text));
        continue;
      }
      auto port = find_port(plan, port_name);
      if (!port) {
        // A port whose own table failed to load already has its error; report only real dangling names.
        if (!all_port_names.count(port_name))
          s.fail("rx", fmt::format("\"{}\": no [[ports]] table is named \"{}\"", entry, port_name));
        continue;
      }
      const PortPlan& p = plan.ports[*port];
      if (queue >= p.rx_queues) {
        s.fail("rx", fmt::format("\"{}\": port \"{}\" has {} rx queue{} (0 to {})", entry, port_name, p.rx_queues,
                                 p.rx_queues == 1 ? "" : "s", p.rx_queues - 1));
        continue;
      }
      auto key = std::make_pair(*port, static_cast<std::uint16_t>(queue));
      auto [it, inserted] = queue_owner.emplace(key, s.label());
      if (!inserted) {
        s.fail("rx", fmt::format("\"{}\" is already polled by {}; each rx queue belongs to exactly one lcore", entry,
                                 it->second));
        continue;
      }
      l.rx.push_back({*port, static_cast<std::uint16_t>(queue)});
    }
    if (l.rx.empty() && s.status().is_ok())
      s.fail("rx", "expected at least one \"port:queue\" to poll");
    l.where = where(s);
    plan.lcores.push_back(std::move(l));
  }
  for (const auto& p : plan.ports) {
    for (std::uint16_t q = 0; q < p.rx_queues; ++q) {
      if (queue_owner.count({p.id, q})) continue;
      root.fail("lcores", fmt::format("rx queue {} of port \"{}\" ({}:{}) is polled by no lcore; add \"{}:{}\" to "
                                      "an lcore's rx list",
                                      q, p.name, p.where.file, p.where.line, p.name, q));
    }
  }
}

// An endpoint with no rules that is not the default endpoint can never receive a packet: almost
// certainly a forgotten match list.
void check_endpoints_reachable(const Plan& plan, std::vector<ConfigSection>& sections) {
  for (const auto& e : plan.endpoints) {
    if (!e.match.empty()) continue;
    if (plan.default_action == DefaultAction::kEndpoint && plan.default_endpoint == e.id) continue;
    sections[e.id].fail("match", "expected at least one rule (e.g. \"udp dst *:5000\"): without rules an endpoint "
                                 "receives nothing unless it is [run] default_endpoint");
  }
}

// A port that steers only matched traffic to its queues (af_xdp in steer mode) never sees what a
// default endpoint or the pipeline's ARP/ND answers (`addresses`) need: refuse rather than run a
// config that silently receives nothing there.
void check_unmatched_reach(const Plan& plan, std::vector<ConfigSection>& port_sections,
                           const std::vector<std::size_t>& section_of_port) {
  for (const auto& p : plan.ports) {
    if (!p.spec || p.id >= section_of_port.size()) continue;
    const std::string why = p.spec->unmatched_go_elsewhere();
    if (why.empty()) continue;
    ConfigSection& s = port_sections[section_of_port[p.id]];
    if (plan.default_action == DefaultAction::kEndpoint && plan.default_endpoint < plan.endpoints.size())
      s.fail("mode", fmt::format("[run] default_endpoint \"{}\" would receive nothing from port \"{}\": {}",
                                 plan.endpoints[plan.default_endpoint].name, p.name, why));
    if (!p.neigh.addresses.empty())
      s.fail("addresses", fmt::format("the pipeline cannot answer ARP/ND on port \"{}\": {} (or configure the "
                                      "addresses on the interface and let the kernel answer)",
                                      p.name, why));
  }
}

// Echo and forward endpoints transmit from the lcores; each lcore needs a tx queue of its own on
// every port it may send on (tx queues are single-owner, like rx queues). The engine assigns them;
// this reports a shortfall at the port's tx_queues key before anything runs.
void check_tx_queues(const Plan& plan, std::vector<ConfigSection>& port_sections,
                     const std::vector<std::size_t>& section_of_port) {
  bool any_echo = false;
  std::set<std::uint16_t> forward_ports;
  for (const auto& e : plan.endpoints) {
    any_echo |= e.action == EndpointAction::kEcho;
    if (e.action == EndpointAction::kForward) forward_ports.insert(e.forward_port_id);
  }
  if (!any_echo && forward_ports.empty()) return;
  for (const auto& p : plan.ports) {
    std::size_t senders = 0;
    for (const auto& l : plan.lcores) {
      bool polls = false;
      for (const auto& q : l.rx) polls |= q.port == p.id;
      if (forward_ports.count(p.id) || (any_echo && polls)) ++senders;
    }
    if (senders <= p.tx_queues) continue;
    port_sections[section_of_port[p.id]].fail("tx_queues", fmt::format("{} lcore{} may transmit on port \"{}\" (echo or forward endpoints) but it has {} "
                                      "tx queue{}; set tx_queues = {} so each lcore owns one",
                                      senders, senders == 1 ? "" : "s", p.name, p.tx_queues, p.tx_queues == 1 ? "" : "s",
                                      senders));
  }
}

}  // namespace

unsigned online_cpu_count() {
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? static_cast<unsigned>(n) : 1u;
}

Result<LoadedConfig> load_config_string(std::string_view text, const std::string& file, const LoadOptions& options) {
  auto parsed = ConfigSection::parse_string(text, file);
  if (!parsed) return parsed.status();
  ConfigSection root = std::move(parsed).value();
  const unsigned cpus = options.cpu_count ? options.cpu_count : online_cpu_count();

  LoadedConfig out;
  Plan& plan = out.plan;
  plan.source = file;

  std::vector<ConfigSection> pools, ports, endpoints, lcores;
  std::set<std::string, std::less<>> all_port_names;
  std::vector<bool> port_has_driver;
  std::vector<std::size_t> section_of_port;
  load_pools(root, plan, pools);
  load_ports(root, plan, options, ports, all_port_names, port_has_driver, section_of_port);
  if (ports.empty()) root.fail("ports", "expected at least one [[ports]] table");
  load_endpoints(root, plan, endpoints, all_port_names);
  load_run(root, plan, out.app, cpus);
  load_metrics_section(root, plan);
  load_lcores(root, plan, lcores, cpus, all_port_names);
  load_filters(root, plan);
  load_taps(root, plan);
  check_endpoints_reachable(plan, endpoints);
  if (root.status()) check_tx_queues(plan, ports, section_of_port);
  if (root.status()) check_unmatched_reach(plan, ports, section_of_port);

  for (auto& s : pools) (void)s.finish();
  for (std::size_t i = 0; i < ports.size(); ++i)
    if (port_has_driver[i]) (void)ports[i].finish();  // without a driver its keys were never read
  for (auto& s : endpoints) (void)s.finish();
  for (auto& s : lcores) (void)s.finish();
  Status status = root.finish();
  if (!status) return status;
  return out;
}

Result<LoadedConfig> load_config(const std::string& file, const LoadOptions& options) {
  std::ifstream in(file, std::ios::binary);
  if (!in) return Status::errorf("{}: cannot open the config file: {}", file, std::strerror(errno));
  std::stringstream text;
  text << in.rdbuf();
  if (in.bad()) return Status::errorf("{}: cannot read the config file: {}", file, std::strerror(errno));
  return load_config_string(text.str(), file, options);
}

std::string describe_plan(const Plan& plan) {
  std::string out = fmt::format("config {}\n", plan.source);
  for (const auto& p : plan.pools)
    out += fmt::format("  pool {:<12} {} buffers of {} bytes ({} headroom, cache {}), huge pages {}\n",
                       p.config.name, p.config.count, p.config.buf_size, p.config.headroom, p.config.cache_size,
                       p.config.huge_pages == HugePages::kRequire ? "required"
                       : p.config.huge_pages == HugePages::kNever ? "never"
                                                                  : "if available");
  for (const auto& p : plan.ports)
    out += fmt::format("  port {:<12} pmd {}, pool {}, {} rx queue{} x {}, {} tx queue{} x {}\n", p.name, p.pmd,
                       p.pool, p.rx_queues, p.rx_queues == 1 ? "" : "s", p.rx_ring_size, p.tx_queues,
                       p.tx_queues == 1 ? "" : "s", p.tx_ring_size);
  for (const auto& e : plan.endpoints) {
    std::string action = e.action == EndpointAction::kRing   ? fmt::format("ring of {} per lcore", e.ring_size)
                         : e.action == EndpointAction::kSink ? std::string("sink")
                         : e.action == EndpointAction::kEcho ? std::string("echo")
                                                             : fmt::format("forward to {}", e.forward_port);
    out += fmt::format("  endpoint {:<8} {}; {} rule{}", e.name, action, e.match.size(), e.match.size() == 1 ? "" : "s");
    for (const auto& m : e.match) out += fmt::format("\n      {}", m);
    out += "\n";
  }
  for (const auto& l : plan.lcores) {
    std::string rx;
    for (const auto& q : l.rx) rx += fmt::format("{}{}:{}", rx.empty() ? "" : ", ", plan.ports[q.port].name, q.queue);
    out += fmt::format("  lcore {:<11} cpu {}, burst {}, polls {}\n", l.id,
                       l.cpu < 0 ? std::string("unpinned") : std::to_string(l.cpu), l.burst, rx);
  }
  if (plan.default_action == DefaultAction::kEndpoint && plan.default_endpoint < plan.endpoints.size())
    out += fmt::format("  unmatched packets go to endpoint {}\n", plan.endpoints[plan.default_endpoint].name);
  else
    out += "  unmatched packets are dropped (no_match)\n";
  out += plan.duration_s > 0 ? fmt::format("  runs for {} s, stats every {} s\n", plan.duration_s, plan.stats_interval_s)
                             : fmt::format("  runs until Ctrl-C, stats every {} s\n", plan.stats_interval_s);
  return out;
}

Result<Plan> load_plan(const std::string& file, const LoadOptions& options) {
  auto loaded = load_config(file, options);
  if (!loaded) return loaded.status();
  return std::move(loaded).value().plan;
}

}  // namespace rawpipe
