#include "report.hh"

#include <fmt/format.h>

#include "rawpipe/drop_tree.hh"

namespace rawpipe::app {

std::string format_rate(double pps) {
  if (pps >= 1e6) return fmt::format("{:.2f} Mpps", pps / 1e6);
  if (pps >= 1e3) return fmt::format("{:.1f} kpps", pps / 1e3);
  return fmt::format("{:.0f} pps", pps);
}

RateWindow RateWindow::between(const PipelineSnapshot& first, const PipelineSnapshot& last) noexcept {
  RateWindow w;
  w.seconds = last.time_ns > first.time_ns ? double(last.time_ns - first.time_ns) / 1e9 : 0;
  w.rx = last.total.rx_packets - first.total.rx_packets;
  w.delivered = last.total.delivered - first.total.delivered;
  w.transmitted = last.total.transmitted - first.total.transmitted;
  w.dropped = last.total.dropped() - first.total.dropped();
  for (std::size_t i = 0; i < last.lcores.size(); ++i)
    w.rx_per_lcore.push_back(last.lcores[i].rx_packets - (i < first.lcores.size() ? first.lcores[i].rx_packets : 0));
  return w;
}

bool RunSummary::lossless() const {
  for (const PortStats& p : port_stats)
    if (!loss_totals(rawpipe::lost_before_pipeline(p)).lossless()) return false;
  return true;
}

std::uint64_t RunSummary::lost_before_pipeline() const {
  std::uint64_t n = 0;
  for (const PortStats& p : port_stats) n += loss_totals(rawpipe::lost_before_pipeline(p)).frames;
  return n;
}

std::string loss_reasons(const PortLosses& losses) {
  std::string out;
  for (const auto& [reason, n] : losses) {
    if (n && !*n) continue;
    out += fmt::format("{}{} {}", out.empty() ? "" : ", ", reason, n ? std::to_string(*n) : std::string("unknown"));
  }
  return out;
}

std::string format_summary(const RunSummary& s) {
  const Accounting& a = s.accounting;
  const RateWindow& w = s.window;
  std::string out = fmt::format("summary: rx {} packets, {} bytes\n", a.rx_packets, a.rx_bytes);
  // Rates only from what was counted inside the window; delivered and dropped beside rx, so a run
  // that drops everything cannot pass for one that delivers.
  out += fmt::format("  rates over the {:.3f} s measured window ({} packets received in it): rx {}, delivered {}, "
                     "transmitted {}, dropped {}\n", w.seconds, w.rx, format_rate(w.pps(w.rx)),
                     format_rate(w.pps(w.delivered)), format_rate(w.pps(w.transmitted)), format_rate(w.pps(w.dropped)));
  out += fmt::format("  delivered {}\n", a.delivered);
  for (std::size_t e = 0; e < a.delivered_per_endpoint.size(); ++e) {
    const bool transmits = e < s.endpoint_transmits.size() && s.endpoint_transmits[e];
    out += fmt::format("    endpoint {:<16} {}", s.endpoint_names[e], a.delivered_per_endpoint[e]);
    // An echo or forward endpoint delivers nothing: what it did is what the tx queues took from it.
    if (transmits && e < a.transmitted_per_endpoint.size())
      out += fmt::format(" (transmitted {})", a.transmitted_per_endpoint[e]);
    if (e < s.consumed.size() && s.consumed[e]) out += fmt::format(" (consumer received {})", s.consumed[e]);
    out += "\n";
  }
  out += fmt::format("  transmitted {}\n", a.transmitted);
  for (std::size_t p = 0; p < a.transmitted_per_port.size(); ++p)
    if (a.transmitted_per_port[p]) out += fmt::format("    port {:<20} {}\n", s.port_names[p], a.transmitted_per_port[p]);
  out += fmt::format("  dropped {}\n", a.dropped());
  for (std::size_t r = 1; r < kDropReasonCount; ++r)
    if (a.drops[r]) out += fmt::format("    {:<24} {}\n", kDropReasonNames[r], a.drops[r]);
  if (a.drained) out += fmt::format("  still queued to endpoints at stop (freed): {}\n", a.drained);
  for (std::size_t p = 0; p < s.port_stats.size(); ++p) {
    const PortLosses losses = lost_before_pipeline(s.port_stats[p]);
    const std::string reasons = loss_reasons(losses);
    if (!reasons.empty())
      out += fmt::format("  port {} lost before the pipeline: {}\n", s.port_names[p], reasons);
  }
  for (const auto& l : s.lcores)
    out += fmt::format("  lcore {} (cpu {}): rx {}, {} bursts, {} empty polls\n", l.id,
                       l.cpu < 0 ? std::string("unpinned") : std::to_string(l.cpu), l.rx_packets, l.bursts, l.empty_polls);
  const std::uint64_t right = a.delivered + a.transmitted + a.dropped();
  out += fmt::format("  accounting: rx {} {} delivered {} + transmitted {} + dropped {} = {}\n", a.rx_packets,
                     a.rx_packets == right ? "==" : "!=", a.delivered, a.transmitted, a.dropped(), right);
  for (const auto& p : a.pools)
    out += fmt::format("  pool {}: {} of {} buffers outstanding\n", p.name, p.outstanding, p.count);
  if (!s.ok()) {
    out += "  FAILED: accounting is not balanced or buffers are outstanding\n";
  } else if (s.lossless()) {
    out += "  OK: every packet accounted for, every buffer back in its pool, nothing lost before the pipeline\n";
  } else {
    // Never a bare OK: what the pipeline received balances, but the run did not see everything.
    std::string where;
    for (std::size_t p = 0; p < s.port_stats.size(); ++p) {
      const LossTotals t = loss_totals(lost_before_pipeline(s.port_stats[p]));
      if (t.lossless()) continue;
      where += fmt::format("{}port {}: {}", where.empty() ? "" : "; ", s.port_names[p],
                           loss_reasons(lost_before_pipeline(s.port_stats[p])));
    }
    out += fmt::format("  LOSSY: {} frames lost before the pipeline ({}); every packet the pipeline received is "
                       "accounted for and every buffer is back in its pool\n",
                       s.lost_before_pipeline(), where);
  }
  return out;
}

nlohmann::json summary_json(const RunSummary& s) {
  const Accounting& a = s.accounting;
  nlohmann::json j;
  j["config"] = s.config;
  j["seconds"] = s.seconds;
  j["rx_packets"] = a.rx_packets;
  j["rx_bytes"] = a.rx_bytes;
  j["mpps"] = s.mpps();
  const RateWindow& w = s.window;
  j["window"] = {{"seconds", w.seconds},          {"rx_packets", w.rx},
                 {"delivered", w.delivered},      {"transmitted", w.transmitted},
                 {"dropped", w.dropped},          {"rx_mpps", w.pps(w.rx) / 1e6},
                 {"delivered_mpps", w.pps(w.delivered) / 1e6}, {"transmitted_mpps", w.pps(w.transmitted) / 1e6},
                 {"dropped_mpps", w.pps(w.dropped) / 1e6}};
  j["delivered"] = a.delivered;
  nlohmann::json per_ep = nlohmann::json::object();
  for (std::size_t e = 0; e < a.delivered_per_endpoint.size(); ++e) per_ep[s.endpoint_names[e]] = a.delivered_per_endpoint[e];
  j["delivered_per_endpoint"] = per_ep;
  nlohmann::json consumed = nlohmann::json::object();
  for (std::size_t e = 0; e < s.consumed.size(); ++e)
    if (s.consumed[e]) consumed[s.endpoint_names[e]] = s.consumed[e];
  j["consumed_per_endpoint"] = consumed;
  j["transmitted"] = a.transmitted;
  nlohmann::json per_port = nlohmann::json::object();
  for (std::size_t p = 0; p < a.transmitted_per_port.size(); ++p) per_port[s.port_names[p]] = a.transmitted_per_port[p];
  j["transmitted_per_port"] = per_port;
  nlohmann::json tx_per_ep = nlohmann::json::object();
  for (std::size_t e = 0; e < a.transmitted_per_endpoint.size() && e < s.endpoint_names.size(); ++e)
    tx_per_ep[s.endpoint_names[e]] = a.transmitted_per_endpoint[e];
  j["transmitted_per_endpoint"] = tx_per_ep;
  nlohmann::json drops = nlohmann::json::object();
  for (std::size_t r = 1; r < kDropReasonCount; ++r) drops[std::string(kDropReasonNames[r])] = a.drops[r];
  j["drops"] = drops;
  j["dropped"] = a.dropped();
  j["drained_at_stop"] = a.drained;
  j["buffers_outstanding"] = a.outstanding();
  nlohmann::json pools = nlohmann::json::array();
  for (const auto& p : a.pools) pools.push_back({{"name", p.name}, {"count", p.count}, {"outstanding", p.outstanding}});
  j["pools"] = pools;
  nlohmann::json lcores = nlohmann::json::array();
  for (std::size_t i = 0; i < s.lcores.size(); ++i) {
    const LcoreStats& l = s.lcores[i];
    const std::uint64_t in_window = i < w.rx_per_lcore.size() ? w.rx_per_lcore[i] : 0;
    lcores.push_back({{"id", l.id}, {"cpu", l.cpu}, {"rx_packets", l.rx_packets}, {"bursts", l.bursts},
                      {"empty_polls", l.empty_polls}, {"delivered", l.delivered}, {"transmitted", l.transmitted},
                      {"mpps", w.pps(in_window) / 1e6}});
  }
  j["lcores"] = lcores;
  nlohmann::json ports = nlohmann::json::object();
  for (std::size_t p = 0; p < s.port_stats.size(); ++p) {
    std::uint64_t nombuf = 0, errors = 0;
    for (const auto& q : s.port_stats[p].rx_queues) {
      nombuf += q.rx_nombuf;
      errors += q.rx_errors;
    }
    nlohmann::json port = {{"rx_nombuf", nombuf}, {"rx_errors", errors}};
    port["losses"] = ops::losses_json(lost_before_pipeline(s.port_stats[p]));
    for (const auto& [k, v] : s.port_stats[p].extended) port["extended"][k] = v;
    if (p < s.port_paths.size()) port["path"] = s.port_paths[p];
    ports[s.port_names[p]] = port;
  }
  j["ports"] = ports;
  // The same tree as `rawpipe stat --drops`: port-side (pool, device, kernel/NIC) and pipeline-side.
  std::vector<ops::NamedPortStats> named;
  for (std::size_t p = 0; p < s.port_stats.size(); ++p)
    named.push_back({p < s.port_names.size() ? s.port_names[p] : std::to_string(p), s.port_stats[p]});
  j["drops_tree"] = ops::drop_tree_json(a.drops, named);
  j["balanced"] = a.balanced();
  j["ok"] = s.ok();
  j["lossless"] = s.lossless();
  j["lost_before_pipeline"] = s.lost_before_pipeline();
  return j;
}

}  // namespace rawpipe::app
