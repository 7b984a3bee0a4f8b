// The app's zero-copy consumer: one thread that drains every "ring" endpoint with
// Pipeline::endpoint_receive and frees what it gets with Pipeline::endpoint_release (back through
// the lcore that queued it), counting per endpoint. It stands in for an
// application reading its endpoints; the benchmark config measures the pipeline with it.
// It busy-polls while packets come and sleeps on the endpoints' descriptors once the rings have
// stayed empty for kSpinPolls passes (docs/consumer-wait.md).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include "rawpipe/status.hh"
#include "rawpipe/e2e_latency.hh"
#include "rawpipe/endpoint_wait.hh"
#include "rawpipe/pipeline.hh"

namespace rawpipe::app {

class RingConsumer {
 public:
  // Control path. cpu < 0: not pinned. Starts nothing when no endpoint has a ring.
  Status start(Pipeline& pipeline, int cpu);
  // Stops and joins the thread. Call before Pipeline::stop(), which drains the rings itself
  // (one consumer per ring at a time).
  void stop();
  ~RingConsumer();

  // Empty passes over every ring before the thread sleeps: at a few tens of nanoseconds each,
  // some tens of microseconds, longer than the gap between two bursts of a busy lcore.
  static constexpr unsigned kSpinPolls = 2048;

  bool running() const noexcept { return thread_.joinable(); }
  // Packets received per endpoint id; exact after stop().
  std::vector<std::uint64_t> received() const;
  // Times the thread went to sleep (statistic).
  std::uint64_t sleeps() const noexcept { return sleeps_.load(std::memory_order_relaxed); }

 // Control path, before start(): record port-to-consumer latency there (null: not).
  void set_e2e(E2eLatency* e2e) noexcept { e2e_ = e2e; }

 private:
  void loop(Pipeline* pipeline, std::vector<std::uint16_t> endpoints);

  std::thread thread_;
  std::atomic<bool> stop_{false};
  int stop_fd_ = -1;  // eventfd: stop() wakes a sleeping thread
  std::atomic<std::uint64_t> sleeps_{0};
  // One counter per endpoint, written by the consumer thread, read relaxed by the stats reader.
  std::unique_ptr<std::atomic<std::uint64_t>[]> received_;
  std::size_t endpoint_count_ = 0;
  E2eLatency* e2e_ = nullptr;
};

}  // namespace rawpipe::app
