// The filter stage of the Extra API: application callbacks that see each classified burst and may
// rewrite its verdicts (RECV / DROP / HOLD) before dispatch (see pipeline/dispatch/dispatch.hh for
// where it sits and what each verdict means to dispatch).
//
// Attachment points: one filter per (port, rx queue), which sees every live packet of that queue,
// then one per endpoint, which sees the live packets classified to it that the queue filter left
// as RECV. Each is either a per-packet callback or a burst callback (one call per burst with a
// packet array and a verdict array). Packets already dropped by parse/classify are not shown.
// A callback's value that is not a verdict drops the packet as kFilterInvalidVerdict.
//
// Run-time changes: the set of filters is an immutable FilterSet published through one atomic
// pointer; set_*() copies the current set, edits the copy and publishes it (release), lcores load
// it once per burst (acquire). A replaced set, and the counters of filters it alone still
// references, are reclaimed once every lcore has passed a quiescent point after the swap (the
// classifier's scheme, Classifier::retire_epoch/passed, given with set_quiescence): an lcore may
// still be inside a callback of the old set until then. Without a quiescence source (a stage
// driven directly by a test) replaced sets are kept until the stage is destroyed.
//
// Offload off (the Extra API's thread_offload analogue): an endpoint can be taken off the
// pipeline at run time. Its packets that still reach an lcore (ports that cannot leave them to the
// kernel: synth, pcap; or in flight when it was switched) are dropped as kEndpointOffloadOff
// before any filter sees them. The flags live in the FilterSet, so switching is one publish and
// the lcore pays one byte lookup per packet only while some endpoint is off.
//
// Hot path: when no filter is attached and every endpoint is offloaded the stage costs one atomic
// load and a branch per burst. With filters, packet descriptors are filled only for the packets a
// filter will see; callbacks are plain C function pointers (one indirect call per packet, or per
// burst in the burst form).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "rawpipe/extra.h"
#include "rawpipe/mbuf.hh"
#include "rawpipe/status.hh"
#include "pipeline/dispatch/dispatch.hh"
#include "pipeline/stats/filter_counters.hh"
#include "pipeline/stats/lcore_counters.hh"

namespace rawpipe {

struct FilterFn {
  rawpipe_filter_fn fn = nullptr;
  rawpipe_filter_burst_fn burst = nullptr;
  void* ctx = nullptr;
  // Shown in stats and metrics; null: the callback's symbol name (dladdr) or its address.
  const char* name = nullptr;
  // Set by the stage when the filter is attached (a caller's value is ignored).
  FilterCounters* counters = nullptr;
  bool set() const noexcept { return fn || burst; }
};

struct FilterSet {
  std::vector<FilterFn> by_endpoint;           // by endpoint id
  std::vector<std::vector<FilterFn>> by_queue;  // [port][queue]
  std::vector<std::uint8_t> offload_off;       // by endpoint id: 1 = not offloaded
  bool any_endpoint = false;
  bool any_queue = false;
  bool any_offload_off = false;
  bool active = false;                          // any of the three
};

// Fills the descriptor a filter or a receiver sees for buffer m (addresses from the parsed
// headers; user_ctx left to the caller).
void describe_packet(Mbuf* m, rawpipe_packet* out) noexcept;

class Classifier;

class FilterStage {
 public:
  // rx_queues[p] = rx queue count of port p.
  // `lcores`: how many lcores call run() (each writes its own filter counters).
  FilterStage(std::size_t endpoints, const std::vector<std::uint16_t>& rx_queues, std::size_t lcores = 1);

  // Control path; any thread, serialised inside. fn and burst both null removes the filter.
  Status set_endpoint_filter(std::uint16_t endpoint, FilterFn f);
  Status set_queue_filter(std::uint16_t port, std::uint16_t queue, FilterFn f);
  // Offload on (the default) or off for one endpoint; see above.
  Status set_endpoint_offload(std::uint16_t endpoint, bool offloaded);
  bool endpoint_offloaded(std::uint16_t endpoint) const;
  // No filter attached (offload flags do not count).
  bool empty() const noexcept;
  // The epoch source that says when no lcore can see a replaced set (the pipeline's classifier,
  // whose readers are the lcores that call run()). Control path, before lcores start.
  // `may_wait` says whether the calling thread may wait for the lcores (not when it is one of
  // them, inside a filter callback: it would wait for itself); null: never.
  void set_quiescence(Classifier* c, bool (*may_wait)() = nullptr);
  // Replaced sets a caller that may wait leaves behind it at most. Each holds a copy of the
  // attachment tables, and a set is freed only once every lcore has passed a quiescent point:
  // a control thread replacing filters in a loop while an lcore is kept off its CPU (a busy
  // host) would otherwise pile them up for as long as the lcore is away. Past this many, set_*()
  // waits for the lcores as remove_rule does for the classifier.
  static constexpr std::size_t kMaxRetired = 256;
  // Replaced sets not reclaimed yet (a statistic for tests).
  std::size_t retired_count() const;
  // Every filter attached so far (also replaced and removed ones), counters summed over lcores;
  // latency in TSC cycles. Control path, any thread; lcores never wait for it.
  std::vector<FilterStats> stats() const;

  // Whether run() would call anything now (a set published later applies from the next burst).
  bool active() const noexcept { return current_.load(std::memory_order_acquire)->active; }

  // Lcore: drops the packets of endpoints that are not offloaded, runs the filters of (port,
  // queue) and of the packets' endpoints over pkts[0..n) and rewrites verdicts. Invalid verdicts
  // become kDrop with drop_reason kFilterInvalidVerdict.
  // `lcore` selects the counters written (the caller's index, < lcores); `timed` also records
  // each callback's cycles per packet (the lcore's sampled polls, pipeline/stats/stage_latency.hh).
  void run(std::uint16_t port, std::uint16_t queue, Mbuf* const* pkts, Verdict* verdicts, unsigned n,
           unsigned lcore = 0, bool timed = false) noexcept {
    // Acquire pairs with the release in publish(): the set's vectors are fully built.
    const FilterSet* s = current_.load(std::memory_order_acquire);
    if (!s->active) [[likely]] return;
    run_slow(*s, port, queue, pkts, verdicts, n, lcore, timed);
  }

 private:
  void run_slow(const FilterSet& s, std::uint16_t port, std::uint16_t queue, Mbuf* const* pkts, Verdict* verdicts,
                unsigned n, unsigned lcore, bool timed) noexcept;
  // Gives an attached filter its counters (with mu_ held).
  void attach_counters(FilterFn& f, bool on_queue, std::uint16_t a, std::uint16_t b);
  void publish(std::unique_ptr<FilterSet> next);
  // After a publish: waits, with mu_ released, until the lcores let the retired sets down to
  // kMaxRetired, when the caller may wait (lock holds mu_ on entry and on return).
  void bound_retired(std::unique_lock<std::mutex>& lock);
  // Frees retired sets no lcore can see and folds the counters they alone held (mu_ held).
  void reclaim_locked();
  void fold_locked(const FilterCounters& c);

  struct Retired {
    std::unique_ptr<FilterSet> set;
    std::uint64_t epoch = 0;                   // reclaimable once every lcore reported it
    std::vector<const FilterCounters*> leaving;  // counters no newer set references
  };

  mutable std::mutex mu_;  // control path: serialises copy-edit-publish
  std::atomic<const FilterSet*> current_;
  std::unique_ptr<FilterSet> cur_;  // what current_ points to (mu_)
  std::vector<Retired> retired_;    // oldest first (mu_)
  Classifier* quiescence_ = nullptr;
  bool (*may_wait_)() = nullptr;
  std::size_t lcores_ = 1;
  std::vector<std::unique_ptr<FilterCounters>> counters_;  // of the current and retired sets (mu_)
  std::vector<FilterStats> removed_;  // reclaimed counters, one per name and attachment point (mu_)
};

}  // namespace rawpipe
