// Run control: starting and stopping what the builder made.
//
//   start()        starts the ports, binds each lcore to its queues, dispatcher, filters, return
//                  rings, taps and ARP/ND stage, launches one thread per lcore (pinned when
//                  LcorePlan::cpu >= 0) and returns once all run; a failure undoes what it did.
//   request_stop() asks the lcores to leave their loop; async-signal-safe, does not wait.
//   stop()         joins the lcores, stops the ports (they return their buffers), drains the
//                  endpoint queues, reclaims retired classifier tables and closes the taps.
//
// running() and stop_requested() may be read from any thread at any time (the stats publisher,
// the metrics server, a signal handler's loop), also while stop() runs.
#pragma once

#include <atomic>
#include <memory>
#include <thread>
#include <vector>

#include "pipeline/lcore/preemption.hh"
#include "rawpipe/status.hh"
#include "rawpipe/plan.hh"

namespace rawpipe {

struct PipelineParts;
class NeighStage;
struct NeighStats;

class RunControl {
 public:
  RunControl(const Plan& plan, PipelineParts& parts) : plan_(plan), parts_(parts) {
    for (std::size_t l = 0; l < plan.lcores.size(); ++l) preemption_.push_back(std::make_unique<LcorePreemption>());
  }
  ~RunControl();
  RunControl(const RunControl&) = delete;
  RunControl& operator=(const RunControl&) = delete;

  Status start();
  void request_stop() noexcept {
    // Relaxed: lcores only need to see it eventually; join() gives the ordering.
    stop_flag_.store(true, std::memory_order_relaxed);
  }
  Status stop();

  // Acquire pairs with the release stores in start() and stop(): a reader that sees false after
  // a run sees everything stop() did before it (the drained count, the buffers back in their pools).
  bool running() const noexcept { return running_.load(std::memory_order_acquire); }
  bool stop_requested() const noexcept { return stop_flag_.load(std::memory_order_relaxed); }

  // ARP/ND responder counters summed over lcores.
  NeighStats neigh_stats() const;
  // Involuntary context switches of lcore `l` (plan order) so far; any thread, control path.
  std::uint64_t involuntary_switches(std::size_t l) const noexcept {
    return l < preemption_.size() ? preemption_[l]->involuntary_switches() : 0;
  }

 private:
  void join_lcores() noexcept;
  void stop_ports() noexcept;

  const Plan& plan_;
  PipelineParts& parts_;
  std::vector<std::unique_ptr<NeighStage>> neigh_stages_;  // by lcore; empty without addresses
  std::vector<std::thread> threads_;
  std::vector<std::unique_ptr<LcorePreemption>> preemption_;  // by lcore, fixed at construction
  std::atomic<bool> stop_flag_{false};
  std::atomic<int> go_{0};                         // lcore threads: 0 wait, 1 run, 2 exit
  std::atomic<bool> running_{false};
  bool started_once_ = false;                      // control thread only
  bool ports_started_ = false;                     // control thread only
};

static_assert(std::atomic<bool>::is_always_lock_free, "request_stop must be async-signal-safe");

}  // namespace rawpipe
