// The pipeline: everything a Plan describes, built, started, stopped and accounted for.
//
// Life cycle (all control path, one control thread at a time unless stated):
//   create(plan)  checks the plan as the config loader does (pipeline/plan/validate.hh), takes
//                 the instance locks of its device queues and CPUs (a second pipeline on one of
//                 them, in this process or another, is refused naming the first one's pid and
//                 config: ops/instance_lock.hh), then builds the pools, opens every port through its spec (PortSpec::open), compiles
//                 the endpoints' rules into the classifier, creates one SPSC ring per
//                 (lcore, ring endpoint) and the lcores' state. Nothing runs yet. Errors name the
//                 config file and line of the element that failed.
//   start()       starts the ports, launches one thread per lcore (pinned with
//                 pthread_setaffinity_np when LcorePlan::cpu >= 0) and returns once all run.
//   request_stop() asks the lcores to leave their loop. Async-signal-safe: call it from a
//                 SIGINT/SIGTERM handler. Does not wait.
//   stop()        request_stop(), joins the lcores, stops the ports (which return every buffer
//                 they hold), frees whatever is still queued in endpoint rings (those packets were
//                 already counted as delivered) and releases retired classifier tables.
//                 Idempotent. After stop(), accounting() is exact.
//   ~Pipeline()   stops if still running, then closes ports before freeing pools.
//
// Each lcore runs rx_burst -> parse -> classify -> [filters, issue 3] -> dispatch to completion
// for each of its (port, queue) pairs, in a busy poll (DPDK style) unless LcorePlan::idle_sleep_us
// is set. Lcores share no writable state: counters, rings and tx queues are per lcore.
//
// Accounting identity (checked by Accounting::balanced()):
//   rx == delivered + transmitted + sum(drops by reason), and no buffer outstanding in any pool.
// "Delivered" means queued to an endpoint ring, counted by a sink, or (issue 3) held by a filter.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "rawpipe/instance_lock.hh"
#include "rawpipe/api.h"
#include "rawpipe/drop_reason.hh"
#include "rawpipe/mbuf.hh"
#include "rawpipe/plan.hh"
#include "rawpipe/port_info.hh"
#include "rawpipe/status.hh"

namespace rawpipe {

// The engine's parts; internal (pipeline/), opaque here.
class EndpointQueues;
struct EndpointWake;
class FilterPlugin;
class FilterStage;
struct PipelineParts;
class Pool;
class Port;
class RunControl;
struct SendPort;
struct StageLatency;
class TapWriter;

// One lcore's counters at one instant (a consistent-enough copy: each value is exact, the set is
// not taken atomically).
struct RAWPIPE_API LcoreStats {
  std::uint16_t id = 0;
  int cpu = -1;
  std::uint64_t rx_packets = 0;
  std::uint64_t rx_bytes = 0;
  std::uint64_t bursts = 0;        // rx_burst calls that returned packets
  std::uint64_t empty_polls = 0;   // rx_burst calls that returned none
  std::uint64_t delivered = 0;     // to endpoints (ring, sink, held)
  std::uint64_t transmitted = 0;   // taken by a tx queue (echo, forward)
  std::array<std::uint64_t, kDropReasonCount> drops{};
  // Times the kernel preempted the lcore's thread (read from /proc by the snapshot's caller).
  std::uint64_t involuntary_switches = 0;

  std::uint64_t dropped() const noexcept;
};

// Readable from any thread at any time (the app's live stats line).
struct PipelineSnapshot {
  std::uint64_t time_ns = 0;                  // CLOCK_MONOTONIC (std::chrono::steady_clock)
  bool running = false;
  std::vector<LcoreStats> lcores;             // in plan order
  LcoreStats total;                           // sum over lcores (id and cpu meaningless)
  std::vector<std::uint64_t> delivered_per_endpoint;   // by endpoint id
  std::vector<std::uint64_t> ring_full_per_endpoint;   // by endpoint id: dropped, its ring was full
  std::vector<std::uint64_t> transmitted_per_port;     // by port id
  std::vector<std::uint64_t> transmitted_per_endpoint; // by endpoint id: echo/forward packets a tx queue took
};

struct PoolUsage {
  std::string name;
  std::uint32_t count = 0;        // slots in the pool
  std::uint32_t outstanding = 0;  // slots not back in the pool
};

// Final figures; exact after stop() (and while running, as exact as a snapshot).
struct RAWPIPE_API Accounting {
  std::uint64_t rx_packets = 0;
  std::uint64_t rx_bytes = 0;
  std::uint64_t delivered = 0;
  std::uint64_t transmitted = 0;
  std::array<std::uint64_t, kDropReasonCount> drops{};
  std::vector<std::uint64_t> delivered_per_endpoint;   // by endpoint id
  std::vector<std::uint64_t> transmitted_per_port;     // by port id
  std::vector<std::uint64_t> transmitted_per_endpoint; // by endpoint id: echo/forward packets a tx queue took
  std::uint64_t drained = 0;      // delivered packets still queued in endpoint rings at stop, freed by stop()
  std::vector<PoolUsage> pools;   // in plan order

  std::uint64_t dropped() const noexcept;
  std::uint64_t outstanding() const noexcept;
  // rx == delivered + transmitted + dropped() and nothing outstanding.
  bool balanced() const noexcept;
};

// ARP/ND responder counters (ports with `addresses`), summed over lcores.
struct NeighStats {
  std::uint64_t replies = 0;    // replies taken by a tx queue
  std::uint64_t ignored = 0;    // requests for addresses that are not ours
  std::uint64_t malformed = 0;  // ARP/NS frames that break their format (left to the pipeline)
  std::uint64_t tx_failed = 0;  // replies the tx queue did not take (dropped as tx_failed)

  NeighStats& operator+=(const NeighStats& o) noexcept {
    replies += o.replies;
    ignored += o.ignored;
    malformed += o.malformed;
    tx_failed += o.tx_failed;
    return *this;
  }
};

// A loaded filter plugin ([[filters]]) and what it says about its run.
struct FilterReport {
  std::string label;   // "filters[0]"
  std::string name;    // the plugin's own name
  std::string report;  // its summary line
};

// A capture tap ([[taps]]) and what it wrote.
struct TapReport {
  std::string name;
  std::uint64_t captured = 0;   // records taken by the lcores
  std::uint64_t lost = 0;       // records lost because a lane was full
  std::uint64_t written = 0;    // records in files
  std::uint64_t bytes = 0;      // bytes written over all files
  std::uint64_t files_opened = 0;   // rotation may have removed some of them (max_files)
  std::vector<std::string> files;   // the files that exist now
};

// A rule as the classifier holds it: config rules and rules added at run time.
struct RuleInfo {
  std::uint32_t id = 0;       // stable handle for remove_rule()
  std::uint16_t endpoint = 0;
  std::string text;           // canonical form (format_match_rule)
  bool from_config = false;
};

class RAWPIPE_API Pipeline {
 public:
  static Result<std::unique_ptr<Pipeline>> create(const Plan& plan);
  ~Pipeline();
  Pipeline(const Pipeline&) = delete;
  Pipeline& operator=(const Pipeline&) = delete;

  Status start();
  void request_stop() noexcept;
  Status stop();
  // Any thread, any time (also while stop() runs).
  bool running() const noexcept;
  // True once request_stop() was called (e.g. by a signal handler); the app's wait loop polls it.
  bool stop_requested() const noexcept;

  // "No lcore" mode: lcores with LcorePlan::thread = false have no thread; the application's
  // threads run their loop passes. progress() runs one pass of each such lcore that no other
  // thread is running now, on the calling thread, and returns the packets received (0 before
  // start, after stop, or when every such lcore is busy elsewhere). Any thread; a thread that
  // waits for an endpoint calls it while the endpoint's ring is empty.
  unsigned progress() noexcept;
  // Whether any lcore has no thread (progress() does something).
  bool has_threadless_lcores() const noexcept;
  // Descriptors that poll readable while a queue of a threadless lcore has packets waiting: a
  // waiter sleeps on them (with its endpoints' descriptors) instead of spinning in progress().
  // Their readiness is level-triggered and says only "call progress()". `missing` names a queue
  // whose driver offers no such descriptor; the waiter must then poll progress() on a timer.
  // Collected once by start() (before it, `missing` says so); any thread may read it after.
  struct ProgressFds {
    std::vector<int> fds;
    std::string missing;
  };
  const ProgressFds& progress_fds() const noexcept { return progress_fds_; }

  // MT-safe, any thread, any time.
  PipelineSnapshot snapshot() const;
  Accounting accounting() const;

  // Zero-copy receive for the consumer of a kRing endpoint: moves up to n packets into out and
  // returns how many; the caller owns them and frees them with endpoint_release or mbuf_free_bulk
  // (from any thread). Until released they are on loan from the lcore's ring: they take none
  // of its ring_size queue room, and once a quarter of ring_size is on loan the next receive
  // makes them the caller's own, so a caller that holds packets or frees them directly loses
  // nothing to the ring.
  // One consumer thread per endpoint at a time. Returns 0 for endpoints without rings.
  unsigned endpoint_receive(std::uint16_t endpoint, Mbuf** out, unsigned n) noexcept;
  // Packets queued to a ring endpoint and not yet received (VMA's socket_ready_queue_pkt_count);
  // 0 for other endpoints. Any thread; exact only when nobody enqueues or dequeues.
  std::size_t endpoint_queued(std::uint16_t endpoint) const noexcept;
  // The wake-up state of a ring endpoint's consumer (pipeline/dispatch/wake.hh, internal), null
  // for other endpoints. Lives as long as the pipeline.
  EndpointWake* endpoint_wake(std::uint16_t endpoint) const noexcept;
  // Frees packets the caller got from endpoint_receive(endpoint, ...) and no longer needs, like
  // VMA's free_packets returning buffers to their ring: the buffers go back to the lcore that
  // queued them, which frees them between its polls. Packets released in the order they were
  // received go back in the ring's own slots (the consumer writes only its tail, the lcore reads
  // slots it wrote); any other order goes on a return ring per (endpoint, lcore). The consumer
  // never touches a buffer's header, so the line stays in the cache of the core that rewrites it
  // on the next receive, instead of crossing cores twice per packet.
  // Same effect as mbuf_free_bulk (reference counts are honoured, the buffers may belong to any
  // pool); it falls back to it when the return ring is full, when another consumer of the
  // endpoint holds it, and once the pipeline has stopped, and always frees at once in builds with
  // the ownership auditor (mbuf_debug). Same thread rules as endpoint_receive.
  void endpoint_release(std::uint16_t endpoint, Mbuf* const* bufs, unsigned n) noexcept;

  // Rules at run time (MT-safe among control threads; lcores keep running and lose nothing: the
  // new table is published atomically and the old one freed once every lcore has moved past it).
  // The rule text uses the grammar of pipeline/classify/rule.hh; `port NAME` must name a port.
  // remove_rule returns once no lcore can classify another packet with the removed rule; called
  // from a filter callback (on an lcore) it returns without that wait, and lcores may still
  // classify the burst in progress with it.
  Result<std::uint32_t> add_rule(std::uint16_t endpoint, std::string_view rule);
  Status remove_rule(std::uint32_t rule_id);
  std::vector<RuleInfo> rules() const;

  // The Extra API's filter stage (pipeline/filter/filter.hh): callbacks may be attached and
  // removed at any time, also while lcores run.
  FilterStage& filters() noexcept;
  // The plugins of the plan's [[filters]] entries, loaded and attached by create(), in plan order;
  // unloaded when the pipeline is destroyed.
  const std::vector<std::unique_ptr<FilterPlugin>>& filter_plugins() const noexcept;

  // Offload on/off per endpoint at run time (the Extra API's thread_offload analogue; MT-safe
  // among control threads, lcores keep running). Off: ports that can leave traffic to the kernel
  // (an AF_XDP steering map, mlx5 flow rules) stop steering the endpoint's rules to us; packets
  // that still arrive for it are dropped as kEndpointOffloadOff (pipeline/filter/filter.hh).
  Status set_endpoint_offload(std::uint16_t endpoint, bool offloaded);
  bool endpoint_offloaded(std::uint16_t endpoint) const;
  const FilterStage& filters() const noexcept;
  // Lcore `lcore`'s sampled stage latencies (plan order); null when sampling is off.
  const StageLatency* lcore_latency(std::size_t lcore) const noexcept;

  // Name <-> id lookups and access to the parts, for the app and the stats thread.
  std::optional<std::uint16_t> endpoint_id(std::string_view name) const noexcept;
  std::optional<std::uint16_t> port_id(std::string_view name) const noexcept;
  std::size_t endpoint_count() const noexcept { return plan_.endpoints.size(); }
  std::size_t port_count() const noexcept { return plan_.ports.size(); }
  std::size_t lcore_count() const noexcept { return plan_.lcores.size(); }
  const std::string& endpoint_name(std::uint16_t endpoint) const { return plan_.endpoints.at(endpoint).name; }
  const std::string& port_name(std::uint16_t port) const { return plan_.ports.at(port).name; }
  // A port's driver, capabilities, counters (safe while lcores run), link, what its queues really
  // run in (known once started), and what the person running it must know (a file cut short, an
  // interface removed), by port id.
  std::string_view port_pmd(std::uint16_t port) const;
  PortCaps port_caps(std::uint16_t port) const;
  PortStats port_stats(std::uint16_t port) const;
  LinkInfo port_link(std::uint16_t port) const;
  std::string port_path_report(std::uint16_t port) const;
  std::vector<std::string> port_notices(std::uint16_t port) const;
  // Where the pool's memory comes from (hugepages or transparent huge pages), one line; empty for
  // a pool that does not exist.
  std::string pool_memory_notice(std::string_view pool) const;
  std::vector<FilterReport> filter_reports() const;
  std::vector<TapReport> tap_reports() const;

  // The engine's parts, for the library's own services (stats document, Extra API) and tests;
  // their types are internal.
  // Control path, before start(): the one-way cache-line crossing from which a ring endpoint's
  // consumer counts as far from an lcore, whose runs to it are then published once per few
  // passes (pipeline/dispatch/consumer_distance.hh); a test sets 0 to make every consumer far.
  void set_far_consumer_ns(double ns);
  // Whether the consumer of ring endpoint `endpoint` counts as far from some lcore now (false for
  // other endpoints). Any thread.
  bool endpoint_consumer_far(std::uint16_t endpoint) const noexcept;
  Port& port(std::uint16_t id);
  const Port& port(std::uint16_t id) const;
  const Pool* pool(std::string_view name) const noexcept;
  // Hands the pools to the caller after stop(): the Extra API's destroy keeps the pools of
  // buffers the application still holds (pipeline/extra/kept_pools.hh) while the rest of the
  // pipeline goes.
  std::vector<std::unique_ptr<Pool>> release_pools() noexcept;
  const Plan& plan() const noexcept { return plan_; }
  // Capture taps in plan order (pipeline/capture/tap.hh: stats(), files()).
  std::vector<const TapWriter*> taps() const;
  // ARP/ND responder counters summed over lcores.
  NeighStats neigh_stats() const;
  // The application's send path on a port (pipeline/send/send_port.hh, internal), null for an
  // unknown port. Lives as long as the pipeline.
  SendPort* send_port(std::uint16_t port) const noexcept;

 private:
  explicit Pipeline(const Plan& plan);

  // The facade over three components (pipeline/engine/): the builder's parts (builder.hh), run
  // control (run_control.hh) and, inside the parts, the endpoint queues (endpoint_queues.hh).
  Plan plan_;
  // The plan's device queues and lcore CPUs (ops/instance_lock.hh), taken before any port opens
  // and released after the ports closed.
  ops::InstanceLocks locks_;
  std::unique_ptr<PipelineParts> parts_;
  std::unique_ptr<RunControl> run_;
  EndpointQueues* queues_ = nullptr;  // parts_->queues: one load less on the consumer's calls
  ProgressFds progress_fds_{{}, "the pipeline has not started: its queues have no descriptors yet"};
};

}  // namespace rawpipe
