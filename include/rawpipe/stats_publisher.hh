// The stats segment `rawpipe stat` reads: a thread that publishes a pipeline's stats document
// (lcores, endpoints, ports, pools, the drop tree, filters, latency) into /dev/shm once per
// interval, off the lcores.
#pragma once

#include <nlohmann/json.hpp>

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>

#include "rawpipe/api.h"
#include "rawpipe/pipeline.hh"
#include "rawpipe/shm_stats.hh"
#include "rawpipe/status.hh"

namespace rawpipe::ops {

// Adds what the host knows beyond the pipeline (e.g. the app consumer's "end_to_end") to a
// stats document; called on the publishing thread.
using DocumentExtension = std::function<void(nlohmann::json&)>;

// One part of the document under "sections" that a library user adds at run time (the preload
// library's sockets): JSON text, or nothing to leave it out of that publish.
using SectionFn = std::function<std::optional<std::string>()>;
inline constexpr std::size_t kMaxStatsSections = 16;

class RAWPIPE_API StatsPublisher {
 public:
  StatsPublisher() = default;
  StatsPublisher(const StatsPublisher&) = delete;
  StatsPublisher& operator=(const StatsPublisher&) = delete;
  ~StatsPublisher() { stop(); }

  // Control path, before start(): adds the host's part to every document.
  void set_extension(DocumentExtension f) { extension_ = std::move(f); }
  // Any thread, any time: adds or replaces the section `name` (an empty fn removes it). Returns
  // false when kMaxStatsSections are already there. Sections are called on the publishing
  // thread, one publish at a time; after the section is removed it is not called again.
  bool set_section(const std::string& name, SectionFn fn);
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
  std::map<std::string, SectionFn> sections_;  // under mu_
  ShmStatsWriter writer_;
  std::mutex mu_;  // control threads only: guards stopping_ and serialises publishes
  std::condition_variable cv_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace rawpipe::ops
