// One lcore: a worker thread that owns some (port, rx queue) pairs and runs each burst to
// completion: rx_burst -> parse -> classify -> verdicts -> [filters] -> dispatch.
//
// State an lcore writes is its own: its counters, its dispatcher (its SPSC endpoint rings and its
// tx queues), its pool caches. It reads the current classification table through the Classifier
// once per loop pass and reports a quiescent state after the pass, so tables can be swapped while
// it runs (classifier.hh).
//
// Buffers a consumer released with Pipeline::endpoint_release come back to this lcore, in order
// through the endpoint ring's own slots, out of order on its return rings, and are freed every
// few loop passes (and every idle one) into this lcore's pool cache, where the next receive takes
// them while their header lines are still in this core's cache.
//
// Runs queued to a ring endpoint are published with each run, or, when the endpoint's consumer
// measures itself far from this lcore's core (pipeline/dispatch/consumer_distance.hh), once per
// kPassesPerPublish busy passes and on every idle pass (docs/consumer-wait.md).
//
// Empty polls: by default the loop never sleeps (DPDK-style busy poll: lowest latency, one core
// at 100%). With LcorePlan::idle_sleep_us > 0, a pass in which no queue returned a packet ends
// with a sleep of that length (one syscall per idle pass, none while traffic flows).
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "pipeline/buf/pool.hh"
#include "pipeline/classify/classifier.hh"
#include "pipeline/dispatch/dispatch.hh"
#include "rawpipe/plan.hh"
#include "pipeline/stats/lcore_counters.hh"
#include "pipeline/stats/stage_latency.hh"
#include "pipeline/port/port.hh"

namespace rawpipe {

class FilterStage;
struct LcoreTaps;
class NeighStage;
struct SendPort;

// The plan index of the lcore whose loop runs on the calling thread, or -1 (control threads,
// consumers, a thread that drives poll_once). Control calls that wait for every lcore to pass a
// point (stop, a synchronising rule removal) check it: made from a filter callback they would
// wait for themselves.
int current_lcore() noexcept;

class Lcore {
 public:
  struct RxQueue {
    RxQueueHandle rx;
    std::uint16_t port = 0;
    std::uint16_t queue = 0;
  };

  // `index` is the lcore's position in the plan and its Classifier reader number.
  Lcore(const LcorePlan& plan, unsigned index, std::size_t endpoints, std::size_t ports);

  // Control path, before run(): the queues this lcore polls, and its dispatcher.
  void bind(std::vector<RxQueue> rx, std::unique_ptr<Dispatcher> dispatcher, Classifier* classifier,
            std::vector<Pool*> pools);
  // Control path, before run(): the Extra API's filter stage (null: none).
  void set_filters(FilterStage* filters) noexcept { filters_ = filters; }
  // Control path, before run(): time one queue poll in `every` (0: never; stage_latency.hh).
  void enable_latency(std::uint32_t every);
  // Control path, before run(): capture taps (capture/lcore_taps.hh) and the ARP/ND responder
  // (neigh/stage.hh); null when not configured, which costs one branch per burst each.
  void set_taps(LcoreTaps* taps) noexcept { taps_ = taps; }
  void set_neigh(NeighStage* neigh) noexcept { neigh_ = neigh; }
  // Control path, before run(): the application send paths (send/send_port.hh) whose hand-off
  // rings this lcore drains into its tx queues once per loop pass.
  void set_sends(std::vector<SendPort*> sends) { sends_ = std::move(sends); }
  // Control path, before run(): the return rings of the ring endpoints this lcore feeds
  // (Pipeline::endpoint_release); the lcore frees what arrives on them between loop passes.
  void set_returns(std::vector<MbufRing*> returns) {
    returns_ = std::move(returns);
    // A pass receives at most a burst per queue; reading ahead that many pointers' lines per pass
    // keeps pace with what the consumer can give back.
    const std::size_t per_pass = std::size_t{plan_.burst} * std::max<std::size_t>(rx_.size(), 1);
    return_lines_per_pass_ = static_cast<unsigned>((per_pass * sizeof(Mbuf*) + kCacheLine - 1) / kCacheLine);
    // One look at the return tail per kPacketsPerReturnLook packets received: the look's wait on
    // the consumer's core is then spread over as many packets whatever the burst size and queue
    // count, and so is the pile of frees a look leads to, which the pool cache must absorb.
    passes_per_return_look_ = static_cast<unsigned>(
        std::clamp<std::size_t>(kPacketsPerReturnLook / per_pass, 1, kMaxPassesPerReturnLook));
    // Twice what the passes between two looks can receive, so the returns keep up, while a pile of
    // releases cannot stall receive for long.
    return_take_per_look_ = static_cast<unsigned>(2 * passes_per_return_look_ * per_pass);
  }

  // The thread body. Returns once `stop` reads true (checked once per loop pass).
  void run(const std::atomic<bool>& stop) noexcept;

  // Polls every queue once (one loop pass without the stop check, cache attach or sleep); for
  // tests and benchmarks that drive an lcore from their own thread. Returns packets received.
  unsigned poll_once() noexcept;

  // An lcore without a thread (LcorePlan::thread == false): application threads run its passes.
  // One pass at a time: a thread that finds another one's pass under way returns 0 at once and
  // lets it finish (VMA's receive path does the same with its ring's try-lock), so the queues and
  // endpoint rings keep a single producer. A pass is one compare-and-swap and a reader
  // online/offline pair around poll_once; it runs without a pool cache (the calling thread may
  // exit without detaching one). Passes are refused until open_passes() and after close_passes().
  unsigned try_pass() noexcept;
  // Control path: start() opens the lcore once it is bound; stop() closes it, waiting for a pass
  // under way to end, so that nothing touches the queues once the ports stop.
  void open_passes() noexcept { pass_state_.store(kPassFree, std::memory_order_release); }
  void close_passes() noexcept;

  const LcoreCounters& counters() const noexcept { return *counters_; }
  LcoreCounters& counters_mut() noexcept { return *counters_; }
  const LcorePlan& plan() const noexcept { return plan_; }
  // The sampled stage latencies (null when off); any thread may snapshot them.
  const StageLatency* latency() const noexcept { return latency_.get(); }
  unsigned index() const noexcept { return index_; }

 private:
  unsigned poll_queues(const ClassifyTable* table) noexcept;
  void free_returns(bool idle) noexcept;
  void publish_rings(bool idle) noexcept;
  template <bool kTimed>
  unsigned poll_queue(const RxQueue& q, const ClassifyTable* table) noexcept;

  LcorePlan plan_;
  unsigned index_;
  std::unique_ptr<LcoreCounters> counters_;
  std::vector<RxQueue> rx_;
  std::unique_ptr<Dispatcher> dispatcher_;
  Classifier* classifier_ = nullptr;
  ClassifyMemo classify_memo_;
  std::vector<Pool*> pools_;
  FilterStage* filters_ = nullptr;
  LcoreTaps* taps_ = nullptr;
  NeighStage* neigh_ = nullptr;
  std::vector<MbufRing*> returns_;
  std::vector<SendPort*> sends_;
  static constexpr std::size_t kPacketsPerReturnLook = 256;
  static constexpr std::size_t kMaxPassesPerReturnLook = 8;
  unsigned passes_ = 0;
  unsigned passes_per_return_look_ = kMaxPassesPerReturnLook;
  unsigned return_lines_per_pass_ = 1;
  unsigned return_take_per_look_ = 2 * kMaxBurst;
  // Ring endpoints whose consumer is far have their tail published once per kPassesPerPublish
  // busy passes, and on every idle pass: 8 measured best with the CPUs far apart (4 gave about
  // 60% of its gain; 16 collapsed, before the pool had its recent ring). Held-back packets
  // wait up to that many passes, a few microseconds under full load. The consumers' verdicts
  // are read once per kPassesPerFollow passes; they change once per window of samples at most.
  static constexpr unsigned kPassesPerPublish = 8;
  static constexpr unsigned kPassesPerFollow = 64;
  unsigned passes_since_publish_ = 0;
  unsigned passes_since_follow_ = 0;
  std::unique_ptr<StageLatency> latency_;  // null: stage timing off
  // try_pass: who may run a pass now. Its own line: waiting threads hammer it.
  static constexpr int kPassFree = 0, kPassBusy = 1, kPassClosed = 2;
  alignas(kFalseSharingRange) std::atomic<int> pass_state_{kPassClosed};
};

}  // namespace rawpipe
