// Dispatch: moves each packet of a classified burst to its one destination, in batches.
//
// Stage boundary. An lcore runs, per burst:
//     classify  ->  verdicts  ->  [filter stage]  ->  dispatch
// After classify, make_verdicts() fills one Verdict per packet: kDrop for packets that already
// carry a drop_reason (malformed, no match), kRecv otherwise. The filter stage of the Extra API
// (issue 3) goes exactly between make_verdicts() and Dispatcher::dispatch_burst(): per-endpoint
// and per-queue callbacks see the burst (pkts[0..n), with Mbuf::endpoint set) and may rewrite
// verdicts[i]:
//   kRecv  deliver as the endpoint's action says;
//   kDrop  drop; the filter sets Mbuf::drop_reason (kFilterDrop when it leaves it 0);
//   kHold  the filter's owner now holds the buffer (it frees it later, from any thread);
//          dispatch counts it as delivered to Mbuf::endpoint and does not touch it again.
// Nothing else in the lcore loop changes when the filter stage is added.
//
// Batching: when every packet of a burst goes to one destination (the common case, as VPP's
// "whole frame to one next node") the burst is handed over as it is; otherwise dispatch groups it
// by destination (endpoint ring, sink, transmit port, drop) with a counting sort. Either way it
// does one ring enqueue / one tx_burst / one bulk free per destination.
//
// Actions (pipeline/plan/plan.hh EndpointAction):
//   kRing     enqueue on this lcore's SPSC ring of the endpoint; ring full -> kEndpointRingFull
//   kSink     count as delivered and free on the lcore
//   kEcho     5-tuple swap in place (echo.hh) and tx_burst on the ingress port's tx queue owned by
//             this lcore; not UDP -> kNotForUs. With echo_format "sockperf" only what a sockperf
//             server answers is sent back (client flag cleared); the rest counts as delivered.
//   kForward  tx_burst unchanged on the endpoint's forward port
// Buffers tx_burst does not take are dropped as kTxFailed.
//
// Thread-safety: a Dispatcher belongs to one lcore; it writes only that lcore's counters, rings
// (as their single producer) and tx queues.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "rawpipe/mbuf.hh"
#include "rawpipe/plan.hh"
#include "pipeline/ring/ring.hh"
#include "pipeline/stats/lcore_counters.hh"
#include "pipeline/port/port.hh"

namespace rawpipe {

enum class Verdict : std::uint8_t { kRecv = 0, kDrop = 1, kHold = 2 };

// kDrop for packets with a drop_reason, kRecv for the others.
inline void make_verdicts(Mbuf* const* pkts, Verdict* verdicts, unsigned n) noexcept {
  for (unsigned i = 0; i < n; ++i) verdicts[i] = pkts[i]->drop_reason ? Verdict::kDrop : Verdict::kRecv;
}

// Lcore -> consumer of a ring endpoint: lent, given back in order and freed by the lcore from
// its own slots (ring.hh).
using EndpointRing = LendingRing<Mbuf*>;
// A plain hand-off of buffers between two threads: an endpoint's return ring, a send port's ring.
using MbufRing = SpscRing<Mbuf*>;
struct EndpointWake;
class ConsumerDistance;
struct LcoreTaps;

class Dispatcher {
 public:
  // What one endpoint's packets do on this lcore.
  struct Route {
    EndpointAction action = EndpointAction::kSink;
    std::uint16_t forward_port = 0;   // kForward
    EndpointRing* ring = nullptr;     // kRing: this lcore's ring for the endpoint
    EndpointWake* wake = nullptr;     // kRing: the consumer's descriptor to wait on (wake.hh)
    const ConsumerDistance* consumer = nullptr;  // kRing: how far its consumer is (null: near)
    bool held = false;                // kRing: runs wait for publish_held() (follow_consumers)
    bool sockperf = false;            // kEcho: reply as a sockperf server (sockperf_echo.hh)
  };

  // routes by endpoint id; tx by port id (burst == nullptr: this lcore may not transmit there, and
  // packets routed there drop as kTxFailed). Allocates its scratch tables here, never later.
  Dispatcher(std::vector<Route> routes, std::vector<TxQueueHandle> tx, LcoreCounters* counters);

  // Consumes pkts[0..n): every packet ends delivered, transmitted, held or dropped and counted.
  // The array is scratch afterwards: a burst that all goes to one place is handed on from it.
  void dispatch_burst(Mbuf** pkts, const Verdict* verdicts, unsigned n) noexcept;

  // Whether deliver_burst_to() takes bursts for endpoint e: a sink or a ring.
  bool takes_whole_bursts(std::uint16_t e) const noexcept {
    return e < n_endpoints_ &&
           (routes_[e].action == EndpointAction::kSink || routes_[e].action == EndpointAction::kRing);
  }
  // A burst the classifier found bound, every packet alive, for endpoint e, with no stage after
  // it that could change a verdict: consumed as dispatch_burst would with every verdict kRecv,
  // without looking at each packet again. Only for an e that takes_whole_bursts().
  void deliver_burst_to(std::uint16_t e, Mbuf** pkts, unsigned n) noexcept;

  // Control path: the lcore's capture taps, which see the drops decided here (endpoint ring
  // full, tx failed) on that rare path only. Null: none.
  void set_taps(LcoreTaps* taps) noexcept { taps_ = taps; }

  // Publication of ring endpoints' tails (the lcore's thread). A run queued to a ring whose
  // consumer is near is published at once; one whose consumer is far (consumer_distance.hh) is
  // held back until publish_held(), which the lcore calls once per few passes and on each idle
  // pass (`idle`), and then published with a streaming store (EndpointRing::publish_streaming).
  // follow_consumers() takes each consumer's latest verdict (publishing what a ring held when
  // its consumer comes near); stop_holding() publishes everything and holds nothing more.
  void follow_consumers() noexcept;
  bool holding() const noexcept { return held_routes_ != 0; }
  bool has_ring_routes() const noexcept { return !ring_routes_.empty(); }
  void publish_held(bool idle) noexcept;
  void stop_holding() noexcept;
  // Frees up to `max` packets per ring endpoint that the consumer gave back in order
  // (EndpointRing::give_back), from this lcore's own ring slots.
  void reclaim_given_back(unsigned max) noexcept;
  // Asks for the lines of the consumers' tails, which reclaim_given_back() loads next.
  void prefetch_given_back() noexcept;

 private:
  static constexpr std::uint16_t kUnused = 0xffff;

  std::uint16_t destination(Mbuf* m, std::uint8_t& reason) noexcept;
  bool deliver_whole_burst(Mbuf** pkts, const Verdict* verdicts, unsigned n) noexcept;
  void deliver_run(std::uint16_t d, Mbuf** run, unsigned k, Mbuf** to_free, unsigned& n_free) noexcept;

  std::vector<Route> routes_;
  std::vector<TxQueueHandle> tx_;
  LcoreCounters* counters_;
  std::uint16_t n_endpoints_;
  // Destination d: endpoint d for d < n_endpoints_, port d - n_endpoints_ otherwise.
  std::vector<std::uint16_t> slot_of_dest_;  // kUnused between bursts
  LcoreTaps* taps_ = nullptr;
  std::vector<std::uint16_t> ring_routes_;  // endpoints whose action is kRing
  unsigned held_routes_ = 0;                // ring routes whose runs are held back now
};

}  // namespace rawpipe
