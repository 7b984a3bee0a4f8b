#include "stat.hh"

#include <dirent.h>
#include <unistd.h>

#include <chrono>
#include <thread>
#include <vector>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "report.hh"
#include "rawpipe/shm_stats.hh"
#include "rawpipe/instance_lock.hh"

namespace rawpipe::app {
namespace {

// Segments of live pipelines only: a run killed by SIGKILL leaves its segment until the next run
// cleans it, and it must not count as running.
std::vector<std::string> running_segments() {
  std::vector<std::string> pids;
  for (const auto& s : ops::live_stats_segments()) pids.push_back(std::to_string(s.pid));
  return pids;
}

int list_live() {
  const auto segments = ops::live_stats_segments();
  const auto locks = ops::held_locks();
  fmt::print("{:>8}  {:<24} {}\n", "pid", "name", "config");
  for (const auto& s : segments) {
    std::string config;
    for (const auto& l : locks)
      if (l.pid == s.pid) config = l.config;
    fmt::print("{:>8}  {:<24} {}\n", s.pid, s.name, config.empty() ? "-" : config);
  }
  return 0;
}

std::uint64_t u(const nlohmann::json& j, const char* key) { return j.contains(key) ? j[key].get<std::uint64_t>() : 0; }

void print_drops(const nlohmann::json& doc) {
  const auto& d = doc["drops"];
  fmt::print("drops\n  before the pipeline (ports): {}\n", u(d, "port_total"));
  for (const auto& [port, counters] : d["port"].items()) {
    fmt::print("    {}\n", port);
    for (const auto& [k, v] : counters.items()) fmt::print("      {:<32} {}\n", k, v.get<std::uint64_t>());
  }
  fmt::print("  inside the pipeline: {}\n", u(d, "pipeline_total"));
  for (const auto& [stage, reasons] : d["pipeline"].items()) {
    fmt::print("    {}\n", stage);
    for (const auto& [k, v] : reasons.items()) fmt::print("      {:<32} {}\n", k, v.get<std::uint64_t>());
  }
}

// Nanoseconds with a unit that keeps three digits: 850ns, 12.3us, 4.56ms.
std::string ns_text(std::uint64_t ns) {
  if (ns < 1000) return fmt::format("{}ns", ns);
  if (ns < 1000000) return fmt::format("{:.3g}us", double(ns) / 1e3);
  if (ns < 1000000000) return fmt::format("{:.3g}ms", double(ns) / 1e6);
  return fmt::format("{:.3g}s", double(ns) / 1e9);
}

void print_latency(const nlohmann::json& doc) {
  if (!doc.contains("latency")) return;
  const auto& lat = doc["latency"];
  if (u(lat, "sample_every") == 0) {
    fmt::print("latency: off ([metrics] latency_sample = 0)\n");
    return;
  }
  fmt::print("latency per packet (one poll in {} timed)\n", u(lat, "sample_every"));
  fmt::print("  {:<12} {:>10} {:>10} {:>10} {:>10} {:>12}\n", "stage", "p50", "p99", "p99.9", "max", "samples");
  auto row = [](const std::string& label, const nlohmann::json& h) {
    if (u(h, "samples") == 0) return fmt::print("  {:<12} {:>10} {:>10} {:>10} {:>10} {:>12}\n", label, "-", "-", "-", "-", 0);
    fmt::print("  {:<12} {:>10} {:>10} {:>10} {:>10} {:>12}\n", label, ns_text(u(h, "p50_ns")), ns_text(u(h, "p99_ns")),
               ns_text(u(h, "p999_ns")), ns_text(u(h, "max_ns")), u(h, "samples"));
  };
  // Data-flow order (the JSON object is sorted by name).
  for (const char* stage : {"rx", "parse", "classify", "filter", "dispatch", "burst"})
    if (lat["stages"].contains(stage)) row(stage, lat["stages"][stage]);
  if (doc.contains("end_to_end"))
    for (const auto& e : doc["end_to_end"]) row("e2e:" + e["endpoint"].get<std::string>(), e["latency"]);
}

void print_filters(const nlohmann::json& doc) {
  if (!doc.contains("filters") || doc["filters"].empty()) return;
  fmt::print("filters\n  {:<24} {:<22} {:>12} {:>12} {:>10} {:>10} {:>8} {:>9} {:>9}\n", "name", "attached to", "seen", "recv",
             "drop", "hold", "invalid", "p50", "p99");
  for (const auto& f : doc["filters"]) {
    const auto& h = f["latency"];
    const bool timed = u(h, "samples") != 0;
    fmt::print("  {:<24} {:<22} {:>12} {:>12} {:>10} {:>10} {:>8} {:>9} {:>9}\n", f["name"].get<std::string>(),
               f["attach"].get<std::string>() + (f["attached"].get<bool>() ? "" : " (gone)"), u(f, "seen"), u(f, "recv"),
               u(f, "drop"), u(f, "hold"), u(f, "invalid"), timed ? ns_text(u(h, "p50_ns")) : "-",
               timed ? ns_text(u(h, "p99_ns")) : "-");
  }
}

// The preload library's sockets (section "sockets"): whether each UDP socket is served by
// rawpipe, and if not why, with what it received (through its endpoint and its kernel side) and
// lost.
void print_sockets(const nlohmann::json& rows) {
  fmt::print("sockets\n  {:>5} {:<4} {:<44} {:<9} {:>12} {:>12} {:>10}  {}\n", "fd", "", "local", "offloaded", "rx",
             "tx", "drops", "endpoint / why not");
  for (const auto& r : rows) {
    std::uint64_t drops = 0;
    if (r.contains("drops"))
      for (const auto& [reason, n] : r["drops"].items()) drops += n.get<std::uint64_t>();
    const bool offloaded = r.value("offloaded", false);
    // A kernel socket's datagrams are the kernel's to count; its drops are the kernel's too.
    fmt::print("  {:>5} {:<4} {:<44} {:<9} {:>12} {:>12} {:>10}  {}\n", u(r, "fd"), r.value("proto", "udp"),
               r.value("local", "-"), offloaded ? "yes" : "no",
               offloaded ? std::to_string(u(r, "rx_packets") + u(r, "rx_kernel")) : std::string("-"),
               offloaded ? std::to_string(u(r, "tx_packets")) : std::string("-"), drops,
               offloaded ? r.value("endpoint", "") : r.value("why", ""));
  }
}

void print_sections(const nlohmann::json& doc) {
  if (!doc.contains("sections")) return;
  for (const auto& [name, value] : doc["sections"].items()) {
    if (name == "sockets" && value.is_array()) print_sockets(value);
    else fmt::print("{}\n  {}\n", name, value.dump());
  }
}

// A preloaded process that offloads nothing has no pipeline: the reason, then its sockets (each
// the kernel's, with why and the kernel's own drop count).
void print_kernel_only(const nlohmann::json& doc) {
  fmt::print("rawpipe {} (pid {}): no pipeline\n  {}\n", doc["name"].get<std::string>(), u(doc, "pid"),
             doc["nothing_offloaded"].get<std::string>());
  print_sections(doc);
}

void print_view(const nlohmann::json& doc, const nlohmann::json* prev, bool drops_only) {
  if (doc.contains("nothing_offloaded")) return print_kernel_only(doc);
  if (drops_only) return print_drops(doc);
  double dt = prev ? double(u(doc, "time_ns") - u(*prev, "time_ns")) / 1e9 : 0;
  auto rate = [&](const nlohmann::json& now, const nlohmann::json* before, const char* key) {
    if (!before || dt <= 0) return std::string("-");
    return format_rate(double(u(now, key) - u(*before, key)) / dt);
  };
  fmt::print("rawpipe {} (pid {}) {}\n", doc["name"].get<std::string>(), u(doc, "pid"),
             doc["running"].get<bool>() ? "running" : "stopped");
  // preempted: the lcore thread's involuntary context switches (0 on an isolated CPU).
  fmt::print("{:<10} {:>14} {:>12} {:>14} {:>12} {:>12} {:>10}\n", "lcore", "rx", "rx/s", "delivered", "tx", "dropped",
             "preempted");
  for (std::size_t i = 0; i < doc["lcores"].size(); ++i) {
    const auto& l = doc["lcores"][i];
    const nlohmann::json* p = prev && i < (*prev)["lcores"].size() ? &(*prev)["lcores"][i] : nullptr;
    fmt::print("{:<10} {:>14} {:>12} {:>14} {:>12} {:>12} {:>10}\n", fmt::format("lcore{}", u(l, "id")),
               u(l, "rx_packets"), rate(l, p, "rx_packets"), u(l, "delivered"), u(l, "transmitted"), u(l, "dropped"),
               l.contains("involuntary_switches") ? std::to_string(u(l, "involuntary_switches")) : std::string("-"));
  }
  const auto& t = doc["total"];
  fmt::print("{:<10} {:>14} {:>12} {:>14} {:>12} {:>12}\n", "total", u(t, "rx_packets"),
             rate(t, prev ? &(*prev)["total"] : nullptr, "rx_packets"), u(t, "delivered"), u(t, "transmitted"),
             u(t, "dropped"));
  fmt::print("endpoints\n");
  fmt::print("  {:<20} {:>14} {:>14}\n", "", "delivered", "transmitted");
  for (const auto& e : doc["endpoints"])
    fmt::print("  {:<20} {:>14} {:>14}\n", e["name"].get<std::string>(), u(e, "delivered"), u(e, "transmitted"));
  fmt::print("ports\n");
  for (const auto& p : doc["ports"]) {
    fmt::print("  {} ({})\n", p["name"].get<std::string>(), p["pmd"].get<std::string>());
    fmt::print("{}", p["path_report"].get<std::string>());
    for (std::size_t q = 0; q < p["rx_queues"].size(); ++q) {
      const auto& c = p["rx_queues"][q];
      fmt::print("    rxq{} packets {} nombuf {} errors {}\n", q, u(c, "rx_packets"), u(c, "rx_nombuf"), u(c, "rx_errors"));
    }
    std::string lost;
    if (p.contains("losses"))
      for (const auto& [reason, n] : p["losses"].items())
        if (!n.is_number() || n.get<std::uint64_t>())
          lost += fmt::format("{}{} {}", lost.empty() ? "" : ", ", reason, n.is_number() ? std::to_string(n.get<std::uint64_t>()) : "unknown");
    if (!lost.empty()) fmt::print("    lost before the pipeline: {}\n", lost);
  }
  print_sections(doc);
  print_filters(doc);
  print_latency(doc);
  fmt::print("pools\n");
  for (const auto& p : doc["pools"])
    fmt::print("  {:<20} {}/{} outstanding\n", p["name"].get<std::string>(), u(p, "outstanding"), u(p, "count"));
  print_drops(doc);
}

}  // namespace

int stat_command(const StatOptions& options) {
  if (options.list) return list_live();
  std::string target = options.target;
  if (target.empty()) {
    auto pids = running_segments();
    if (pids.size() != 1) {
      fmt::print(stderr, "rawpipe stat: {} running pipelines found; name one by pid or name (`rawpipe stat --list`)\n", pids.size());
      return 1;
    }
    target = pids[0];
  }
  auto reader = ops::ShmStatsReader::open(target);
  if (!reader) {
    fmt::print(stderr, "rawpipe stat: {}\n", reader.message());
    return 1;
  }
  nlohmann::json prev;
  bool have_prev = false;
  for (;;) {
    auto text = reader->read();
    if (!text) {
      fmt::print(stderr, "rawpipe stat: {}\n", text.message());
      return 1;
    }
    if (text->empty()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      continue;
    }
    nlohmann::json doc = nlohmann::json::parse(*text, nullptr, false);
    if (doc.is_discarded() || doc.contains("error")) {
      fmt::print(stderr, "rawpipe stat: the segment holds no valid stats document\n");
      return 1;
    }
    if (options.json) {
      // A process without a pipeline has no drop tree: its whole document says why.
      const bool tree = options.drops && doc.contains("drops");
      fmt::print("{}\n", tree ? doc["drops"].dump(2) : doc.dump(2));
    } else {
      // top-style redraw in place on a terminal; into a pipe or file, one view after another.
      if (!options.once && isatty(STDOUT_FILENO)) fmt::print("\x1b[H\x1b[2J");
      print_view(doc, have_prev ? &prev : nullptr, options.drops);
    }
    std::fflush(stdout);
    if (options.once || options.json || !doc["running"].get<bool>()) return 0;
    prev = std::move(doc);
    have_prev = true;
    std::this_thread::sleep_for(std::chrono::seconds(1));
  }
}

}  // namespace rawpipe::app
