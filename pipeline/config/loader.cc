#include "rawpipe/config.hh"

#include <sys/stat.h>

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include "pipeline/classify/rule.hh"
#include "rawpipe/compiler.hh"
#include "pipeline/config/metrics_section.hh"
#include "pipeline/config/filters_section.hh"
#include "pipeline/config/rule_warnings.hh"
#include "pipeline/config/section.hh"
#include "pipeline/config/tables.hh"
#include "pipeline/config/taps_section.hh"
#include "pipeline/neigh/port_keys.hh"
#include "pipeline/port/registry.hh"
#include "pipeline/privilege/settings.hh"
#include "pipeline/plan/pool_sizing.hh"
#include "pipeline/plan/validate.hh"

namespace rawpipe {

namespace {

const KeyDoc kTopLevelDocs[] = {
    {"run", "table", "", "", "how long to run, what to do with unmatched packets, privileges ([run])"},
    {"pools", "array of tables", "", "required", "packet buffer pools ([[pools]])"},
    {"ports", "array of tables", "", "required", "ports and their drivers ([[ports]])"},
    {"endpoints", "array of tables", "", "", "where matched packets go ([[endpoints]])"},
    {"lcores", "array of tables", "", "required", "worker threads and the queues each polls ([[lcores]])"},
    {"metrics", "table", "", "", "Prometheus listener, latency sampling, stats segment ([metrics])"},
    {"taps", "array of tables", "", "", "pcap/pcapng capture taps ([[taps]])"},
    {"filters", "array of tables", "", "", "filter plugins on an endpoint or an rx queue ([[filters]])"},
};

const KeyDoc kRunDocs[] = {
    {"duration", "number", "0 to 1e9", "0", "seconds to run; 0 runs until SIGINT or SIGTERM (`run --duration` overrides it)"},
    {"stats_interval", "number", "0.01 to 3600", "1.0", "seconds between live stats lines and stats segment updates"},
    {"default_action", "string", "\"drop\", \"endpoint\"", "\"drop\"",
     "packets no rule matches: dropped as no_match, or delivered to default_endpoint"},
    {"default_endpoint", "string", "an [[endpoints]] name", "required with default_action = \"endpoint\"",
     "the endpoint unmatched packets go to"},
    {"consumer_cpu", "integer", "-1 to 4095", "-1", "CPU of the thread that drains \"ring\" endpoints; -1: not pinned"},
    {"on_loss", "string", "\"warn\", \"fail\"", "\"warn\"",
     "a loss a port saw before the pipeline makes `rawpipe run` exit non-zero (\"fail\") or only reports it"},
};

const KeyDoc kPoolDocs[] = {
    {"name", "string", "non-empty", "required", "name ports refer to (`pool = ...`)"},
    {"count", "integer", "64 to 1073741824", "what its ports and lcores hold, at least 8192",
     "packet buffers; allocated once at start, never grows. Left out: every receive and transmit descriptor of "
     "the ports on the pool (af_xdp: its fill rings), plus, for each lcore polling them, a burst per queue it "
     "polls and twice cache_size, as DPDK's l3fwd sizes its mbuf pool. Given: refused below what its ports keep posted, "
     "warned about below that plus the lcores' share"},
    {"buf_size", "integer", "power of two, 512 to 65536", "2048", "bytes per buffer, header and headroom included"},
    {"headroom", "integer", "0 to 1024", "128", "bytes kept free in front of the packet data"},
    {"cache_size", "integer", "0 to 256", "256", "buffers each lcore keeps in its private cache"},
    {"huge_pages", "string", "\"auto\", \"require\", \"never\"", "\"auto\"",
     "2 MiB hugepages if reserved (else transparent huge pages), always, or never"},
};

const KeyDoc kPortDocs[] = {
    {"name", "string", "non-empty", "required", "name lcores (\"NAME:QUEUE\"), rules and endpoints refer to"},
    {"pmd", "string", "a built-in driver (`rawpipe list-pmds`)", "required",
     "poll-mode driver; its own keys are listed under its name"},
    {"pool", "string", "a [[pools]] name", "the only pool, when there is one", "pool the receive buffers come from"},
    {"rx_queues", "integer", "1 to the driver's maximum", "1", "receive queues, each polled by exactly one lcore"},
    {"tx_queues", "integer", "0 to the driver's maximum", "1", "transmit queues"},
    {"rx_ring_size", "integer", "power of two", "1024; pmd = \"af_xdp\": 2048 (libxdp's)",
     "receive descriptors per queue; af_xdp and mlx5 keep that many of the pool's buffers posted per queue"},
    {"tx_ring_size", "integer", "power of two", "1024", "transmit descriptors per queue"},
};

const KeyDoc kEndpointDocs[] = {
    {"name", "string", "non-empty", "required", "name printed in stats, the JSON summary and the Extra API"},
    {"action", "string", "\"ring\", \"sink\", \"echo\", \"forward\"", "\"ring\"",
     "queue for the consumer (zero-copy), count and free, send back swapped, or send on `port`"},
    {"match", "string list", "rules (docs/rules.md)", "[]", "rules that select this endpoint's packets"},
    {"ring_size", "integer", "power of two (action \"ring\" only)", "4096", "packets queued per lcore"},
    {"echo_format", "string", "\"bytes\", \"sockperf\" (action \"echo\" only)", "\"bytes\"",
     "echo the payload as is, or answer sockperf's ping-pong protocol"},
    {"port", "string", "a [[ports]] name (action \"forward\" only)", "required with action \"forward\"",
     "port the packets are sent on"},
};

const KeyDoc kLcoreDocs[] = {
    {"cpu", "integer", "-1 to the last online CPU", "-1", "CPU the worker is pinned to; -1: not pinned"},
    {"burst", "integer", "1 to 256", "32", "packets per rx burst"},
    {"idle_sleep_us", "integer", "0 to 4294967295", "0",
     "microseconds to sleep after a pass that found nothing; 0: busy poll"},
    {"rx", "string list", "\"PORT:QUEUE\" entries", "[]", "the rx queues this lcore polls"},
    {"thread", "boolean", "true, false", "true",
     "false: no thread of its own; the application's threads poll its queues while they wait (Pipeline::progress); "
     "rawpipe run drives it from one thread that sleeps while the ports are idle"},
};

}  // namespace

const KeyTable kTopLevelKeys{"top", "top level", "the sections of a config file", kTopLevelDocs};
const KeyTable kRunKeys{"run", "[run]", "how the run goes: duration, stats, unmatched packets, privileges", kRunDocs,
                        &kPrivilegeKeys};
const KeyTable kPoolKeys{"pools", "[[pools]]", "packet buffer pools, one contiguous region each", kPoolDocs};
const KeyTable kPortKeys{"ports", "[[ports]]", "keys every port takes, whatever its driver", kPortDocs,
                         &kNeighPortKeys};
const KeyTable kEndpointKeys{"endpoints", "[[endpoints]]", "where matched packets go", kEndpointDocs};
const KeyTable kLcoreKeys{"lcores", "[[lcores]]", "run-to-completion worker threads", kLcoreDocs};

namespace {

// The loader reads each value into the Plan's type; whether the value is acceptable is
// pipeline/plan/validate.cc's decision, so these are the types' ranges only.
constexpr std::int64_t kU16 = 0xffff;
constexpr std::int64_t kU32 = 0xffffffff;

std::string join_names(const std::vector<std::string_view>& names) {
  std::string out;
  for (auto n : names) out += fmt::format("{}\"{}\"", out.empty() ? "" : ", ", n);
  return out;
}

std::uint32_t ring_size(ConfigSection& s, std::string_view key, std::uint32_t fallback) {
  return static_cast<std::uint32_t>(s.integer(key, 0, kU32, fallback));
}

SourceLocation where(const ConfigSection& s) { return {s.file(), s.line()}; }

std::string read_name(ConfigSection& s, std::string_view kind, std::size_t index) {
  std::string name = s.string("name");
  // Other tables refer to it by name: an empty one cannot be resolved, so it is a reading error.
  if (s.has("name") && name.empty()) s.fail("name", "expected a non-empty string");
  s.set_label(fmt::format("{}[{}] '{}'", kind, index, name));
  return name;
}

// A pool that leaves `count` out keeps kPoolSizedFromPlan until ports and lcores are read.
void load_pools(ConfigSection& root, Plan& plan, std::vector<ConfigSection>& sections) {
  sections = root.table_array("pools");
  for (std::size_t i = 0; i < sections.size(); ++i) {
    ConfigSection& s = sections[i];
    s.declare(kPoolKeys);
    PoolPlan p;
    p.config.name = read_name(s, "pools", i);
    if (s.has("count")) p.config.count = static_cast<std::uint32_t>(s.integer("count", 64, kMaxPoolCount, 0));
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
}

// Fills plan.ports with the ports whose driver is known. `all_names` gets every port name, including
// ports that fail to load, so references to a broken port are not reported again as dangling;
// `has_driver[i]` says whether sections[i] had its driver keys read (and so can reject unknown keys).
void load_ports(ConfigSection& root, Plan& plan, const LoadOptions& options, std::vector<ConfigSection>& sections,
                std::set<std::string, std::less<>>& all_names, std::vector<bool>& has_driver,
                std::vector<std::size_t>& section_of_port) {
  sections = root.table_array("ports");
  has_driver.assign(sections.size(), false);
  for (std::size_t i = 0; i < sections.size(); ++i) {
    ConfigSection& s = sections[i];
    s.declare(kPortKeys);
    PortPlan p;
    p.id = static_cast<std::uint16_t>(plan.ports.size());
    p.name = read_name(s, "ports", i);
    all_names.insert(p.name);
    p.pmd = s.string("pmd");
    if (plan.pools.size() == 1 && !s.has("pool")) {
      p.pool = plan.pools[0].config.name;
      (void)s.string("pool", p.pool);
    } else {
      p.pool = s.string("pool");
    }
    p.rx_queues = static_cast<std::uint16_t>(s.integer("rx_queues", 0, kU16, 1));
    p.tx_queues = static_cast<std::uint16_t>(s.integer("tx_queues", 0, kU16, 1));
    const PmdDriver* driver = p.pmd.empty() || !options.find_pmd ? nullptr : options.find_pmd(p.pmd);
    p.rx_ring_size = ring_size(s, "rx_ring_size", driver ? driver->default_rx_ring_size : kDefaultRxRingSize);
    p.tx_ring_size = ring_size(s, "tx_ring_size", 1024);
    p.neigh = read_neigh_port_keys(s);
    p.where = where(s);

    if (!p.pmd.empty() && !driver) {
      std::vector<std::string_view> names = options.known_pmds;
      if (names.empty() && options.find_pmd == &rawpipe::find_pmd)
        for (const PmdDriver* d : all_pmds()) names.push_back(d->name);
      std::string known = names.empty() ? std::string("none") : join_names(names);
      s.fail("pmd", fmt::format("no driver named \"{}\" is built into this binary{} (available: {}; "
                                "`rawpipe list-pmds` describes them)",
                                p.pmd, did_you_mean(p.pmd, names), known));
    }
    if (driver) {
      has_driver[i] = true;
      if (driver->keys) s.declare(*driver->keys);
      else s.allow_undeclared();  // built-in drivers all have a table (tests/unit/config/reference_test.cc)
      Status before = s.status();
      auto spec = driver->parse(s);
      if (spec) {
        p.spec = std::shared_ptr<const PortSpec>(std::move(spec).value());
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
  sections = root.table_array("endpoints");
  for (std::size_t i = 0; i < sections.size(); ++i) {
    ConfigSection& s = sections[i];
    s.declare(kEndpointKeys);
    EndpointPlan e;
    e.id = static_cast<std::uint16_t>(i);
    e.name = read_name(s, "endpoints", i);
    std::string action = s.choice("action", {"ring", "sink", "echo", "forward"}, "ring");
    e.action = action == "sink"      ? EndpointAction::kSink
               : action == "echo"    ? EndpointAction::kEcho
               : action == "forward" ? EndpointAction::kForward
                                     : EndpointAction::kRing;
    e.match = s.string_list("match");
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

void load_run(ConfigSection& root, Plan& plan, AppSettings& app, unsigned cpus, std::optional<ConfigSection>& run) {
  run = root.table("run");
  if (!run) return;
  ConfigSection& s = *run;
  s.declare(kRunKeys);
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
  plan.plugin_dirs_set = app.privilege.plugin_dirs_set;
  plan.plugin_dirs = app.privilege.plugin_dirs;
  if (app.consumer_cpu >= static_cast<int>(cpus))
    s.fail("consumer_cpu", fmt::format("cpu {} is beyond this machine's {} CPU{} (0 to {})", app.consumer_cpu, cpus,
                                       cpus == 1 ? "" : "s", cpus - 1));
  (void)s.finish();
}

// "port:queue" -> (port id, queue), recording an error at `rx` when it does not resolve.
// "port:queue" entries resolve to (port id, queue) here; which of them may run is the validator's.
void load_lcores(ConfigSection& root, Plan& plan, std::vector<ConfigSection>& sections,
                 const std::set<std::string, std::less<>>& all_port_names) {
  sections = root.table_array("lcores");
  for (std::size_t i = 0; i < sections.size(); ++i) {
    ConfigSection& s = sections[i];
    s.declare(kLcoreKeys);
    s.set_label(fmt::format("lcores[{}]", i));
    LcorePlan l;
    l.id = static_cast<std::uint16_t>(i);
    l.cpu = static_cast<int>(s.integer("cpu", -1, 4095, -1));
    l.burst = static_cast<std::uint16_t>(s.integer("burst", 0, kU16, kDefaultBurst));
    l.idle_sleep_us = static_cast<std::uint32_t>(s.integer("idle_sleep_us", 0, kU32, 0));
    l.thread = s.boolean("thread", true);
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
      l.rx.push_back({*port, static_cast<std::uint16_t>(queue)});
    }
    l.where = where(s);
    plan.lcores.push_back(std::move(l));
  }
}

// Records each of the validator's problems at the table and key it came from, so the message
// names the file and line like every other config error.
void record_problems(const Plan& plan, const ValidateOptions& options, ConfigSection& root, ConfigSection* run,
                     std::vector<ConfigSection>& pools, std::vector<ConfigSection>& ports,
                     const std::vector<std::size_t>& section_of_port, std::vector<ConfigSection>& endpoints,
                     std::vector<ConfigSection>& lcores) {
  for (const PlanProblem& p : find_plan_problems(plan, options)) {
    ConfigSection* at = nullptr;
    switch (p.part) {
      case PlanPart::kPool: at = p.index < pools.size() ? &pools[p.index] : nullptr; break;
      case PlanPart::kPort: at = p.index < section_of_port.size() ? &ports[section_of_port[p.index]] : nullptr; break;
      case PlanPart::kEndpoint: at = p.index < endpoints.size() ? &endpoints[p.index] : nullptr; break;
      case PlanPart::kLcore: at = p.index < lcores.size() ? &lcores[p.index] : nullptr; break;
      case PlanPart::kRun: at = run; break;
      case PlanPart::kPlan:
      case PlanPart::kTap:
      case PlanPart::kFilter: break;
    }
    if (at) {
      at->fail(p.key, p.message);
    } else if (p.part == PlanPart::kPlan) {
      root.fail(p.key, p.message);
    } else {
      // Taps and filters keep no section past their loading: name the element in the message.
      root.fail(p.part == PlanPart::kRun ? "run" : p.part == PlanPart::kTap ? "taps" : "filters",
                fmt::format("{}: {}{}", plan_part_label(plan, p.part, p.index),
                            p.key.empty() ? std::string() : fmt::format("key '{}': ", p.key), p.message));
    }
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

}  // namespace

unsigned online_cpu_count() {
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? static_cast<unsigned>(n) : 1u;
}

Result<LoadedConfig> load_config_string(std::string_view text, const std::string& file, const LoadOptions& options) {
  auto parsed = ConfigSection::parse_string(text, file);
  if (!parsed) return parsed.status();
  ConfigSection root = std::move(parsed).value();
  root.declare(kTopLevelKeys);
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
  load_endpoints(root, plan, endpoints, all_port_names);
  std::optional<ConfigSection> run;
  load_run(root, plan, out.app, cpus, run);
  load_metrics_section(root, plan);
  load_lcores(root, plan, lcores, all_port_names);
  size_pools_from_plan(plan);
  load_filters(root, plan);
  load_taps(root, plan);
  // The plan is validated once every element read cleanly: an element that failed to read is not
  // in it, and checking the rest against its absence would only add phantom errors.
  ValidateOptions validate;
  validate.cpu_count = cpus;
  validate.endpoints_need_rules = true;
  if (root.status()) record_problems(plan, validate, root, run ? &*run : nullptr, pools, ports, section_of_port, endpoints, lcores);
  if (root.status()) check_unmatched_reach(plan, ports, section_of_port);

  for (auto& s : pools) (void)s.finish();
  for (std::size_t i = 0; i < ports.size(); ++i)
    if (port_has_driver[i]) (void)ports[i].finish();  // without a driver its keys were never read
  for (auto& s : endpoints) (void)s.finish();
  for (auto& s : lcores) (void)s.finish();
  Status status = root.finish();
  if (!status) return status;
  for (std::size_t i = 0; i < plan.pools.size(); ++i) {
    // A pool whose ports keep nearly all of it posted starts, then drops frames: a driver that
    // replaces each received buffer before handing it on (mlx5, like DPDK's) finds none when the
    // few left sit in another lcore's cache. Not refused: a deliberately short pool is how the
    // pool-dry path is exercised.
    const PoolDemand d = pool_demand(plan, i);
    const std::uint64_t count = plan.pools[i].config.count;
    if (d.kept == 0 || count < d.kept || count >= d.kept + d.lcores) continue;
    const ConfigSection& s = pools[i];
    out.warnings.push_back(fmt::format(
        "{}:{}: {}: key 'count': {} buffers, and its ports keep {} posted: the {} left are fewer than the lcores "
        "polling them hold in bursts and caches ({}), so a received frame can find no buffer to take its place and "
        "be dropped as rx_nombuf; raise count to at least {}, or leave it out to have it sized",
        s.file(), s.line_of("count"), s.label(), count, d.kept, count - d.kept, d.lcores, d.kept + d.lcores));
  }
  for (const RuleWarning& w : find_rule_warnings(plan)) {
    const ConfigSection& s = endpoints[w.endpoint];
    out.warnings.push_back(fmt::format("{}:{}: {}: key 'match': {}", s.file(), s.line_of("match"), s.label(), w.message));
  }
  return out;
}

Result<LoadedConfig> load_config(const std::string& file, const LoadOptions& options) {
  // An ifstream opens a directory and then reads nothing, which would surface as a confusing
  // parse error; say what is wrong instead.
  struct stat st {};
  if (::stat(file.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
    return Status::errorf("{}: is a directory, not a config file; give the path of a .toml file", file);
  std::ifstream in(file, std::ios::binary);
  if (!in) return Status::errorf("{}: cannot open the config file: {}", file, std::strerror(errno));
  std::stringstream text;
  text << in.rdbuf();
  if (in.bad()) return Status::errorf("{}: cannot read the config file: {}", file, std::strerror(errno));
  return load_config_string(text.str(), file, options);
}

std::string describe_plan(const Plan& plan) {
  std::string out = fmt::format("config {}\n", plan.source);
  for (std::size_t i = 0; i < plan.pools.size(); ++i) {
    const PoolPlan& p = plan.pools[i];
    // A plan built in code may not be sized yet: show the count Pipeline::create would give it.
    out += fmt::format("  pool {:<12} {} buffers of {} bytes ({} headroom, cache {}), huge pages {}\n",
                       p.config.name, pool_count(plan, i), p.config.buf_size, p.config.headroom, p.config.cache_size,
                       p.config.huge_pages == HugePages::kRequire ? "required"
                       : p.config.huge_pages == HugePages::kNever ? "never"
                                                                  : "if available");
  }
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
