// `rawpipe run`'s driver of lcores without a thread of their own ([[lcores]] thread = false): one
// thread that runs their loop passes (Pipeline::progress) while packets come and, after
// kIdlePasses passes that found nothing, sleeps on the ports' queue descriptors
// (Pipeline::progress_fds) until traffic arrives, the way VPP's interrupt mode serves a queue:
// the CPU is free while the port is idle, at the price of a wake-up after each quiet spell. A
// port whose driver has no such descriptor makes it sleep a millisecond at a time instead.
// Applications that link the library drive such lcores from their own waiting threads; this is
// what `rawpipe run`, which has no application thread, does in their place.
#pragma once

#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

#include "rawpipe/pipeline.hh"
#include "rawpipe/status.hh"

namespace rawpipe::app {

class ThreadlessDriver {
 public:
  // Control path, after Pipeline::start(). Starts nothing when every lcore has its own thread.
  Status start(Pipeline& pipeline);
  // Stops and joins the thread; call before Pipeline::stop().
  void stop();
  ~ThreadlessDriver();

  // Empty passes before the thread sleeps: some tens of microseconds of polling.
  static constexpr unsigned kIdlePasses = 1024;

  bool running() const noexcept { return thread_.joinable(); }
  // Times the thread went to sleep (statistic), and how many descriptors it sleeps on.
  std::uint64_t sleeps() const noexcept { return sleeps_.load(std::memory_order_relaxed); }

 private:
  void loop(Pipeline* pipeline, std::vector<int> queue_fds, bool nap);

  std::thread thread_;
  std::atomic<bool> stop_{false};
  int stop_fd_ = -1;  // eventfd: stop() wakes a sleeping thread
  std::atomic<std::uint64_t> sleeps_{0};
};

}  // namespace rawpipe::app
