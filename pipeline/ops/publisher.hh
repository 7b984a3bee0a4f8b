// The stats document of a pipeline and the thread that publishes it into the stats segment.
//
// The publisher runs on its own control thread and only calls Pipeline::snapshot(),
// accounting() and Port::stats()/path_report() (all safe while lcores run); the lcores are not
// touched. The document is JSON (schema in docs/operations.md) so readers need no layout header.
#pragma once

#include <nlohmann/json.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "pipeline/engine/pipeline.hh"
#include "pipeline/ops/shm_stats.hh"
#include "pipeline/stats/histogram.hh"

namespace rawpipe::ops {

// True for a port extended counter that counts frames lost before the pipeline saw them
// (kernel/NIC drops, ring overflows, device errors), by naming convention of the drivers.
bool is_port_drop_counter(std::string_view name) noexcept;

// A port's losses before the pipeline as {"reason": frames}, with null for a counter the port
// could not read (unknown, not 0).
nlohmann::json losses_json(const PortLosses& losses);

// Everything `rawpipe stat` shows: lcores, endpoints, ports and queues (with path report and
// extended counters and "losses"), "lossless" and "lost_before_pipeline" (the sum over ports), pools, and the drop tree ("drops": {"total", "port": {...}, "pipeline": {...}}).
// Also "filters" (per filter callback: seen, verdicts, latency) and "latency" (sampled per-stage
// latency per lcore and merged). Safe to call from several control threads at once.
nlohmann::json stats_document(const Pipeline& pipeline, std::string_view name);

// A latency histogram as {"samples", "sum_ns", "p50_ns", "p99_ns", "p999_ns", "max_ns"}; its
// values are TSC cycles unless ns_per_unit > 0 says what one unit is.
nlohmann::json histogram_json(const HistogramSnapshot& h, double ns_per_unit = 0);

// Adds what the host knows beyond the pipeline (e.g. the app consumer's "end_to_end") to a
// stats document; called on the publishing thread.
using DocumentExtension = std::function<void(nlohmann::json&)>;

class StatsPublisher {
 public:
  StatsPublisher() = default;
  StatsPublisher(const StatsPublisher&) = delete;
  StatsPublisher& operator=(const StatsPublisher&) = delete;
  ~StatsPublisher() { stop(); }

  // Control path, before start(): adds the host's part to every document.
  void set_extension(DocumentExtension f) { extension_ = std::move(f); }
  // Creates the segment and publishes once before returning, then once per interval.
  Status start(const Pipeline& pipeline, std::string_view name, std::chrono::milliseconds interval);
  // Publishes a final document (running = false if the pipeline stopped) and removes the segment.
  void stop();
  // Publishes now (used before stop so the last figures reach readers).
  void publish_now();
  const std::string& path() const noexcept { return writer_.path(); }
  // A live pipeline that already had the name (this one is then found by pid only), or 0.
  int name_owner() const noexcept { return writer_.name_owner(); }

 private:
  void run();
  const Pipeline* pipeline_ = nullptr;
  std::string name_;
  std::chrono::milliseconds interval_{1000};
  DocumentExtension extension_;
  ShmStatsWriter writer_;
  std::mutex mu_;  // control threads only: guards stopping_ and serialises publishes
  std::condition_variable cv_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace rawpipe::ops
