#include "pipeline/ops/publisher.hh"

#include <unistd.h>

#include <map>
#include <tuple>

#include "pipeline/filter/filter.hh"
#include "rawpipe/drop_tree.hh"
#include "pipeline/stats/stage_latency.hh"
#include "pipeline/stats/tsc.hh"

namespace rawpipe::ops {
namespace {

nlohmann::json drops_json(const std::array<std::uint64_t, kDropReasonCount>& drops) {
  nlohmann::json j = nlohmann::json::object();
  for (std::size_t r = 1; r < kDropReasonCount; ++r)
    if (drops[r]) j[std::string(kDropReasonNames[r])] = drops[r];
  return j;
}

nlohmann::json lcore_json(const LcoreStats& s) {
  return {{"id", s.id},           {"cpu", s.cpu},
          {"rx_packets", s.rx_packets}, {"rx_bytes", s.rx_bytes},
          {"bursts", s.bursts},   {"empty_polls", s.empty_polls},
          {"delivered", s.delivered}, {"transmitted", s.transmitted},
          {"dropped", s.dropped()}, {"drops", drops_json(s.drops)},
          {"involuntary_switches", s.involuntary_switches}};
}

nlohmann::json queue_json(const QueueCounters& q) {
  return {{"rx_packets", q.rx_packets}, {"rx_bytes", q.rx_bytes}, {"rx_nombuf", q.rx_nombuf},
          {"rx_errors", q.rx_errors},   {"tx_packets", q.tx_packets}, {"tx_bytes", q.tx_bytes},
          {"tx_errors", q.tx_errors}};
}

std::string attach_text(const Pipeline& p, const FilterAttachPoint& at) {
  if (!at.on_queue) return fmt::format("endpoint {}", at.endpoint < p.endpoint_count() ? p.endpoint_name(at.endpoint) : std::to_string(at.endpoint));
  return fmt::format("queue {}:{}", at.port < p.port_count() ? p.port_name(at.port) : std::to_string(at.port), at.queue);
}

// Filter registrations grouped by (name, attachment): a callback replaced by itself keeps one
// entry whose counters keep growing.
nlohmann::json filters_json(const Pipeline& pipeline) {
  struct Group {
    FilterStats sum;
    std::size_t order = 0;
  };
  std::map<std::tuple<std::string, bool, std::uint16_t, std::uint16_t, std::uint16_t>, Group> groups;
  for (const FilterStats& f : pipeline.filters().stats()) {
    auto key = std::make_tuple(f.name, f.at.on_queue, f.at.endpoint, f.at.port, f.at.queue);
    auto [it, fresh] = groups.try_emplace(key);
    Group& g = it->second;
    if (fresh) {
      g.sum.name = f.name;
      g.sum.at = f.at;
      g.order = groups.size();
    }
    g.sum.attached |= f.attached;
    g.sum.seen += f.seen;
    g.sum.recv += f.recv;
    g.sum.drop += f.drop;
    g.sum.hold += f.hold;
    g.sum.invalid += f.invalid;
    g.sum.latency.merge(f.latency);
  }
  std::vector<const Group*> ordered;
  for (const auto& [k, g] : groups) ordered.push_back(&g);
  std::sort(ordered.begin(), ordered.end(), [](const Group* a, const Group* b) { return a->order < b->order; });
  nlohmann::json out = nlohmann::json::array();
  for (const Group* g : ordered) {
    const FilterStats& f = g->sum;
    nlohmann::json j = {{"name", f.name},       {"attach", attach_text(pipeline, f.at)}, {"attached", f.attached},
                        {"seen", f.seen},       {"recv", f.recv},   {"drop", f.drop},   {"hold", f.hold},
                        {"invalid", f.invalid}, {"latency", histogram_json(f.latency)}};
    if (f.at.on_queue) {
      j["port"] = f.at.port < pipeline.port_count() ? pipeline.port_name(f.at.port) : std::to_string(f.at.port);
      j["queue"] = f.at.queue;
    } else {
      j["endpoint"] = f.at.endpoint < pipeline.endpoint_count() ? pipeline.endpoint_name(f.at.endpoint)
                                                                : std::to_string(f.at.endpoint);
    }
    out.push_back(std::move(j));
  }
  return out;
}

// Per lcore and stage, and merged over lcores per stage.
nlohmann::json latency_json(const Pipeline& pipeline, const PipelineSnapshot& snap) {
  nlohmann::json j;
  j["sample_every"] = pipeline.plan().metrics.latency_sample;
  j["unit"] = "ns per packet";
  std::array<HistogramSnapshot, kStageCount> total;
  j["lcores"] = nlohmann::json::array();
  for (std::size_t l = 0; l < pipeline.lcore_count(); ++l) {
    const StageLatency* lat = pipeline.lcore_latency(l);
    if (!lat) continue;
    nlohmann::json lj;
    lj["id"] = l < snap.lcores.size() ? snap.lcores[l].id : l;
    for (std::size_t s = 0; s < kStageCount; ++s) {
      const HistogramSnapshot h = lat->stage[s].snapshot();
      lj["stages"][std::string(kStageNames[s])] = histogram_json(h);
      total[s].merge(h);
    }
    j["lcores"].push_back(std::move(lj));
  }
  for (std::size_t s = 0; s < kStageCount; ++s) j["stages"][std::string(kStageNames[s])] = histogram_json(total[s]);
  return j;
}

}  // namespace

nlohmann::json histogram_json(const HistogramSnapshot& h, double ns_per_unit) {
  // Calibrate the TSC only once something was timed.
  const double k = ns_per_unit > 0 ? ns_per_unit : h.count ? tsc_ns_per_cycle() : 1.0;
  auto ns = [k](std::uint64_t cycles) { return static_cast<std::uint64_t>(static_cast<double>(cycles) * k + 0.5); };
  return {{"samples", h.count},          {"sum_ns", ns(h.sum)},          {"p50_ns", ns(h.quantile(0.5))},
          {"p99_ns", ns(h.quantile(0.99))}, {"p999_ns", ns(h.quantile(0.999))}, {"max_ns", ns(h.max)}};
}

nlohmann::json losses_json(const PortLosses& losses) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [reason, n] : losses) j[reason] = n ? nlohmann::json(*n) : nlohmann::json(nullptr);
  return j;
}

bool is_port_drop_counter(std::string_view name) noexcept {
  for (std::string_view k : {"drop", "overflow", "error", "truncated", "too_long", "oversize", "nombuf",
                             "refill_failed", "refused", "ring_full", "invalid"})
    if (name.find(k) != std::string_view::npos) return true;
  return false;
}

nlohmann::json stats_document(const Pipeline& pipeline, std::string_view name) {
  const PipelineSnapshot snap = pipeline.snapshot();
  const Accounting acc = pipeline.accounting();
  nlohmann::json doc;
  doc["pid"] = static_cast<int>(getpid());
  doc["name"] = std::string(name);
  doc["time_ns"] = snap.time_ns;
  doc["running"] = snap.running;
  doc["total"] = lcore_json(snap.total);
  doc["lcores"] = nlohmann::json::array();
  for (const auto& l : snap.lcores) doc["lcores"].push_back(lcore_json(l));

  doc["endpoints"] = nlohmann::json::array();
  for (std::uint16_t e = 0; e < pipeline.endpoint_count(); ++e)
    doc["endpoints"].push_back({{"name", pipeline.endpoint_name(e)},
                                {"delivered", e < snap.delivered_per_endpoint.size() ? snap.delivered_per_endpoint[e] : 0},
                                {"transmitted", e < snap.transmitted_per_endpoint.size() ? snap.transmitted_per_endpoint[e] : 0}});

  std::vector<NamedPortStats> port_stats;
  std::uint64_t lost_frames = 0;
  bool lossless = true;
  doc["ports"] = nlohmann::json::array();
  for (std::uint16_t p = 0; p < pipeline.port_count(); ++p) {
    const Port& port = pipeline.port(p);
    const PortStats ps = port.stats();
    nlohmann::json pj;
    pj["name"] = pipeline.port_name(p);
    pj["pmd"] = std::string(port.pmd_name());
    pj["path_report"] = port.path_report();
    // What the device said it does, so a reader of the report knows whether checksums were
    // verified, flows spread by RSS, traffic steered (the rest left to the kernel) and packets
    // stamped, without knowing each driver.
    const PortCaps caps = pipeline.port_caps(p);
    pj["caps"] = {{"rx_checksum", caps.rx_checksum}, {"rss", caps.rss},
                  {"flow_rules", caps.flow_rules},   {"kernel_pass", caps.kernel_pass},
                  {"timestamps", caps.timestamps},   {"tx", caps.tx},
                  {"max_rx_queues", caps.max_rx_queues}, {"max_tx_queues", caps.max_tx_queues}};
    pj["transmitted"] = p < snap.transmitted_per_port.size() ? snap.transmitted_per_port[p] : 0;
    pj["rx_queues"] = nlohmann::json::array();
    pj["tx_queues"] = nlohmann::json::array();
    for (const auto& q : ps.rx_queues) pj["rx_queues"].push_back(queue_json(q));
    for (const auto& q : ps.tx_queues) pj["tx_queues"].push_back(queue_json(q));
    pj["extended"] = ps.extended;
    const PortLosses losses = lost_before_pipeline(ps);
    pj["losses"] = losses_json(losses);
    const LossTotals t = loss_totals(losses);
    lost_frames += t.frames;
    lossless = lossless && t.lossless();
    port_stats.push_back({pipeline.port_name(p), ps});
    doc["ports"].push_back(std::move(pj));
  }

  // Losses before the pipeline are part of the verdict beside the pipeline's own drops.
  doc["lossless"] = lossless;
  doc["lost_before_pipeline"] = lost_frames;
  doc["pools"] = nlohmann::json::array();
  for (const auto& pool : acc.pools)
    doc["pools"].push_back({{"name", pool.name}, {"count", pool.count}, {"outstanding", pool.outstanding}});

  // The drop tree: before the pipeline (ports) and inside it (by reason, grouped by stage).
  doc["drops"] = drop_tree_json(snap.total.drops, port_stats);
  doc["filters"] = filters_json(pipeline);
  doc["latency"] = latency_json(pipeline, snap);
  return doc;
}

Status StatsPublisher::start(const Pipeline& pipeline, std::string_view name, std::chrono::milliseconds interval) {
  auto w = ShmStatsWriter::create(name);
  if (!w) return Status::error(w.message());
  writer_ = std::move(w).value();
  pipeline_ = &pipeline;
  name_ = std::string(name);
  interval_ = interval;
  stopping_ = false;
  publish_now();
  thread_ = std::thread([this] { run(); });
  return Status::ok();
}

void StatsPublisher::publish_now() {
  std::lock_guard lock(mu_);
  if (!pipeline_) return;
  nlohmann::json doc = stats_document(*pipeline_, name_);
  if (extension_) extension_(doc);
  for (const auto& [name, fn] : sections_) {
    const std::optional<std::string> text = fn();
    if (!text) continue;
    nlohmann::json value = nlohmann::json::parse(*text, nullptr, false);
    doc["sections"][name] = value.is_discarded() ? nlohmann::json{{"error", "the section's text is not JSON"}} : std::move(value);
  }
  const std::string text = doc.dump();
  if (!writer_.publish(text))
    (void)writer_.publish(R"({"error":"the stats document exceeds the segment's capacity"})");
}

bool StatsPublisher::set_section(const std::string& name, SectionFn fn) {
  std::lock_guard lock(mu_);
  if (!fn) {
    sections_.erase(name);
    return true;
  }
  if (!sections_.contains(name) && sections_.size() == kMaxStatsSections) return false;
  sections_[name] = std::move(fn);
  return true;
}

void StatsPublisher::run() {
  std::unique_lock lock(mu_);
  while (!cv_.wait_for(lock, interval_, [this] { return stopping_; })) {
    lock.unlock();
    publish_now();
    lock.lock();
  }
}

void StatsPublisher::stop() {
  {
    std::lock_guard lock(mu_);
    if (!pipeline_) return;
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  std::lock_guard lock(mu_);
  pipeline_ = nullptr;
  writer_ = ShmStatsWriter();
}

}  // namespace rawpipe::ops
