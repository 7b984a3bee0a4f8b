#include "pipeline/ops/prometheus.hh"

#include <fmt/core.h>

#include <utility>
#include <vector>

#include "rawpipe/drop_reason.hh"

namespace rawpipe::ops {
namespace {

using Labels = std::vector<std::pair<std::string_view, std::string>>;

std::uint64_t u(const nlohmann::json& j, const char* key) {
  return j.is_object() && j.contains(key) && j[key].is_number() ? j[key].get<std::uint64_t>() : 0;
}

// The member `key` of j, or an empty array/object (the document may come from an older writer).
const nlohmann::json& member(const nlohmann::json& j, const char* key, bool array) {
  static const nlohmann::json kEmptyArray = nlohmann::json::array();
  static const nlohmann::json kEmptyObject = nlohmann::json::object();
  if (j.is_object()) {
    auto it = j.find(key);
    if (it != j.end() && (array ? it->is_array() : it->is_object())) return *it;
  }
  return array ? kEmptyArray : kEmptyObject;
}
const nlohmann::json& arr(const nlohmann::json& j, const char* key) { return member(j, key, true); }
const nlohmann::json& obj(const nlohmann::json& j, const char* key) { return member(j, key, false); }

std::string str(const nlohmann::json& j, const char* key) {
  return j.is_object() && j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : std::string();
}

// Collects the samples of one metric family, then writes HELP, TYPE and the samples together
// (the format wants a family's lines in one group).
class Family {
 public:
  Family(std::string name, std::string_view type, std::string_view help)
      : name_(std::move(name)), type_(type), help_(help) {}
  void add(const Labels& labels, std::string_view value, std::string_view suffix = "") {
    std::string line = name_;
    line += suffix;
    if (!labels.empty()) {
      line += '{';
      for (std::size_t i = 0; i < labels.size(); ++i)
        line += fmt::format("{}{}=\"{}\"", i ? "," : "", labels[i].first, prometheus_escape_label(labels[i].second));
      line += '}';
    }
    line += ' ';
    line += value;
    line += '\n';
    lines_ += line;
  }
  void add(const Labels& labels, std::uint64_t v, std::string_view suffix = "") { add(labels, std::to_string(v), suffix); }
  void write(std::string& out) const {
    if (lines_.empty()) return;
    out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name_, help_, name_, type_);
    out += lines_;
  }

 private:
  std::string name_;
  std::string_view type_;
  std::string_view help_;
  std::string lines_;
};

std::string seconds(std::uint64_t ns) { return fmt::format("{}", double(ns) / 1e9); }

// A latency histogram of the document as a summary (seconds) and its max gauge.
void add_summary(Family& sum, Family& max, Labels labels, const nlohmann::json& h) {
  const std::pair<const char*, const char*> q[] = {{"0.5", "p50_ns"}, {"0.99", "p99_ns"}, {"0.999", "p999_ns"}};
  max.add(labels, seconds(u(h, "max_ns")));
  for (const auto& [quantile, key] : q) {
    Labels l = labels;
    l.emplace_back("quantile", quantile);
    sum.add(l, u(h, "samples") ? seconds(u(h, key)) : std::string("NaN"));
  }
  sum.add(labels, seconds(u(h, "sum_ns")), "_sum");
  sum.add(labels, u(h, "samples"), "_count");
}

}  // namespace

std::string prometheus_escape_label(std::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    if (c == '\\') out += "\\\\";
    else if (c == '"') out += "\\\"";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

std::string prometheus_text(const nlohmann::json& doc) {
  std::string out;
  Family info("rawpipe_pipeline_info", "gauge", "The pipeline this process runs (name = config file stem); always 1.");
  info.add({{"name", str(doc, "name")}, {"pid", std::to_string(u(doc, "pid"))}}, 1);
  Family running("rawpipe_pipeline_running", "gauge", "1 while the lcores run, 0 once the pipeline stopped.");
  running.add({}, doc.value("running", false) ? 1 : 0);

  Family rx("rawpipe_lcore_rx_packets_total", "counter", "Packets an lcore received from its queues.");
  Family rx_bytes("rawpipe_lcore_rx_bytes_total", "counter", "Bytes an lcore received from its queues.");
  Family bursts("rawpipe_lcore_bursts_total", "counter", "Queue polls that returned packets.");
  Family empty("rawpipe_lcore_empty_polls_total", "counter", "Queue polls that returned no packet.");
  Family delivered("rawpipe_lcore_delivered_packets_total", "counter",
                   "Packets an lcore delivered to endpoints (ring, sink, held by a filter).");
  Family transmitted("rawpipe_lcore_transmitted_packets_total", "counter", "Packets an lcore's tx queues took.");
  Family preempted("rawpipe_lcore_involuntary_context_switches_total", "counter",
                   "Times the kernel preempted an lcore's thread (another task or a kernel thread ran on its CPU).");
  Family dropped("rawpipe_lcore_dropped_packets_total", "counter",
                 "Packets an lcore dropped, by reason (pipeline/stats/drop_reason.hh).");
  for (const auto& l : arr(doc, "lcores")) {
    const Labels lab = {{"lcore", std::to_string(u(l, "id"))}};
    rx.add(lab, u(l, "rx_packets"));
    rx_bytes.add(lab, u(l, "rx_bytes"));
    bursts.add(lab, u(l, "bursts"));
    empty.add(lab, u(l, "empty_polls"));
    delivered.add(lab, u(l, "delivered"));
    transmitted.add(lab, u(l, "transmitted"));
    // Absent from documents of writers older than the field.
    if (l.is_object() && l.contains("involuntary_switches")) preempted.add(lab, u(l, "involuntary_switches"));
    const nlohmann::json& drops = obj(l, "drops");
    for (std::size_t r = 1; r < kDropReasonCount; ++r) {
      const std::string reason(kDropReasonNames[r]);
      dropped.add({{"lcore", lab[0].second}, {"reason", reason}}, u(drops, reason.c_str()));
    }
  }

  Family ep("rawpipe_endpoint_delivered_packets_total", "counter", "Packets delivered to an endpoint.");
  for (const auto& e : arr(doc, "endpoints")) ep.add({{"endpoint", str(e, "name")}}, u(e, "delivered"));

  Family port_info("rawpipe_port_info", "gauge", "A port and its poll-mode driver; always 1.");
  Family port_tx("rawpipe_port_transmitted_packets_total", "counter", "Packets the pipeline transmitted on a port.");
  Family q_rx("rawpipe_port_rx_packets_total", "counter", "Packets a port's rx queue handed to the pipeline.");
  Family q_rx_bytes("rawpipe_port_rx_bytes_total", "counter", "Bytes a port's rx queue handed to the pipeline.");
  Family q_nombuf("rawpipe_port_rx_nombuf_total", "counter", "Frames an rx queue dropped because its pool was empty.");
  Family q_rx_err("rawpipe_port_rx_errors_total", "counter", "Frames the device reported as bad on an rx queue.");
  Family q_tx("rawpipe_port_tx_packets_total", "counter", "Packets a port's tx queue sent.");
  Family q_tx_bytes("rawpipe_port_tx_bytes_total", "counter", "Bytes a port's tx queue sent.");
  Family q_tx_err("rawpipe_port_tx_errors_total", "counter", "Packets a port's tx queue failed to send.");
  Family driver("rawpipe_port_driver_stat", "gauge",
                "A driver-specific port counter or fact (kernel/NIC drops, XDP/XSK counters, modes), by name.");
  Family lost("rawpipe_port_lost_before_pipeline_total", "counter",
              "Frames a port lost before the pipeline saw them (kernel ring, XSK, NIC, socket buffer), by reason.");
  Family lost_unknown("rawpipe_port_loss_unknown", "gauge",
                      "1 for a loss counter the port has but could not read: the run cannot be called lossless.");
  Family lossless("rawpipe_lossless", "gauge",
                  "1 when no port lost a frame before the pipeline and every such counter was read, else 0.");
  for (const auto& p : arr(doc, "ports")) {
    const std::string name = str(p, "name");
    port_info.add({{"port", name}, {"pmd", str(p, "pmd")}}, 1);
    port_tx.add({{"port", name}}, u(p, "transmitted"));
    const auto& rxq = arr(p, "rx_queues");
    for (std::size_t q = 0; q < rxq.size(); ++q) {
      const Labels lab = {{"port", name}, {"queue", std::to_string(q)}};
      q_rx.add(lab, u(rxq[q], "rx_packets"));
      q_rx_bytes.add(lab, u(rxq[q], "rx_bytes"));
      q_nombuf.add(lab, u(rxq[q], "rx_nombuf"));
      q_rx_err.add(lab, u(rxq[q], "rx_errors"));
    }
    const auto& txq = arr(p, "tx_queues");
    for (std::size_t q = 0; q < txq.size(); ++q) {
      const Labels lab = {{"port", name}, {"queue", std::to_string(q)}};
      q_tx.add(lab, u(txq[q], "tx_packets"));
      q_tx_bytes.add(lab, u(txq[q], "tx_bytes"));
      q_tx_err.add(lab, u(txq[q], "tx_errors"));
    }
    for (const auto& [k, v] : obj(p, "extended").items())
      if (v.is_number()) driver.add({{"port", name}, {"stat", k}}, v.get<std::uint64_t>());
    for (const auto& [reason, v] : obj(p, "losses").items()) {
      if (v.is_number())
        lost.add({{"port", name}, {"reason", reason}}, v.get<std::uint64_t>());
      else
        lost_unknown.add({{"port", name}, {"reason", reason}}, 1);
    }
  }
  // Absent from documents of writers older than the field: nothing is claimed then.
  if (doc.is_object() && doc.contains("lossless") && doc["lossless"].is_boolean())
    lossless.add({}, doc["lossless"].get<bool>() ? 1 : 0);

  Family pool_size("rawpipe_pool_buffers", "gauge", "Buffers in a pool.");
  Family pool_out("rawpipe_pool_buffers_outstanding", "gauge", "Buffers of a pool not back in it (in flight).");
  for (const auto& p : arr(doc, "pools")) {
    pool_size.add({{"pool", str(p, "name")}}, u(p, "count"));
    pool_out.add({{"pool", str(p, "name")}}, u(p, "outstanding"));
  }

  Family f_seen("rawpipe_filter_packets_total", "counter", "Packets shown to a filter callback.");
  Family f_verdicts("rawpipe_filter_verdicts_total", "counter",
                    "A filter callback's verdicts (recv, drop, hold, invalid: not a verdict, dropped).");
  Family f_lat("rawpipe_filter_latency_seconds", "summary",
               "Time a filter callback spends per packet, in sampled polls.");
  Family f_max("rawpipe_filter_latency_max_seconds", "gauge", "Longest per-packet filter time sampled.");
  for (const auto& f : arr(doc, "filters")) {
    Labels lab = {{"filter", str(f, "name")}};
    if (f.contains("endpoint")) {
      lab.emplace_back("endpoint", str(f, "endpoint"));
    } else {
      lab.emplace_back("port", str(f, "port"));
      lab.emplace_back("queue", std::to_string(u(f, "queue")));
    }
    f_seen.add(lab, u(f, "seen"));
    for (const char* v : {"recv", "drop", "hold", "invalid"}) {
      Labels l = lab;
      l.emplace_back("verdict", v);
      f_verdicts.add(l, u(f, v));
    }
    add_summary(f_lat, f_max, lab, obj(f, "latency"));
  }

  const nlohmann::json& lat = obj(doc, "latency");
  Family sample("rawpipe_stage_timing_sample_polls", "gauge", "One queue poll in this many is timed (0: timing off).");
  sample.add({}, u(lat, "sample_every"));
  Family s_lat("rawpipe_stage_latency_seconds", "summary",
               "Time per packet of a pipeline stage (burst time / packets), in sampled polls.");
  Family s_max("rawpipe_stage_latency_max_seconds", "gauge", "Longest per-packet stage time sampled.");
  for (const auto& l : arr(lat, "lcores"))
    for (const auto& [stage, h] : obj(l, "stages").items())
      add_summary(s_lat, s_max, {{"lcore", std::to_string(u(l, "id"))}, {"stage", stage}}, h);
  Family e2e("rawpipe_endpoint_latency_seconds", "summary",
             "Port timestamp to consumer, per endpoint (ports with kernel timestamps only).");
  Family e2e_max("rawpipe_endpoint_latency_max_seconds", "gauge", "Longest port-to-consumer latency seen.");
  for (const auto& e : arr(doc, "end_to_end"))
    add_summary(e2e, e2e_max, {{"endpoint", str(e, "endpoint")}}, obj(e, "latency"));

  for (const Family* f : {&info, &running, &rx, &rx_bytes, &bursts, &empty, &delivered, &transmitted, &dropped, &preempted, &ep,
                          &port_info, &port_tx, &q_rx, &q_rx_bytes, &q_nombuf, &q_rx_err, &q_tx, &q_tx_bytes,
                          &q_tx_err, &driver, &lost, &lost_unknown, &lossless, &pool_size, &pool_out, &f_seen, &f_verdicts, &f_lat, &f_max, &sample,
                          &s_lat, &s_max, &e2e, &e2e_max})
    f->write(out);
  return out;
}

}  // namespace rawpipe::ops
