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

#include "rawpipe/pipeline.hh"
#include "rawpipe/drop_tree.hh"
#include "rawpipe/stats_publisher.hh"
#include "rawpipe/shm_stats.hh"
#include "pipeline/stats/histogram.hh"

namespace rawpipe::ops {

// True for a port extended counter that counts frames lost before the pipeline saw them
// (kernel/NIC drops, ring overflows, device errors), by naming convention of the drivers.
bool is_port_drop_counter(std::string_view name) noexcept;


// Everything `rawpipe stat` shows: lcores, endpoints, ports and queues (with path report and
// extended counters and "losses"), "lossless" and "lost_before_pipeline" (the sum over ports), pools, and the drop tree ("drops": {"total", "port": {...}, "pipeline": {...}}).
// Also "filters" (per filter callback: seen, verdicts, latency) and "latency" (sampled per-stage
// latency per lcore and merged). Safe to call from several control threads at once.
nlohmann::json stats_document(const Pipeline& pipeline, std::string_view name);

// A latency histogram as {"samples", "sum_ns", "p50_ns", "p99_ns", "p999_ns", "max_ns"}; its
// values are TSC cycles unless ns_per_unit > 0 says what one unit is.
nlohmann::json histogram_json(const HistogramSnapshot& h, double ns_per_unit = 0);

}  // namespace rawpipe::ops
