// The ARP/ND responder in the lcore loop.
//
// After classify, for a port that has `addresses`, the lcore hands its burst to NeighStage::run():
// ARP requests and IPv6 neighbour solicitations for one of the port's addresses are answered
// (neigh.hh writes the reply), the request buffer becomes the reply, and it leaves on this
// lcore's tx queue of the ingress port, counted as transmitted (so rx == delivered + transmitted
// + drops still holds). Answered packets leave the burst; everything else goes on unchanged
// (requests for other addresses are counted as ignored and are then dropped or delivered like
// any unmatched frame). Malformed parse results are never looked at.
//
// Cost: nothing when no port has addresses (the lcore's pointer is null); one table lookup per
// burst for ports without addresses; with addresses, a type test per packet and the responder
// only for ARP / ICMPv6 frames.
//
// Learning: every ARP frame and ICMPv6 ND frame looked at also teaches the port's neighbour cache
// (cache.hh) its sender's address, for the Extra API's sendto.
//
// Thread-safety: one NeighStage per lcore (its counters, its tx queues); the tables are shared
// and immutable.
#pragma once

#include <cstdint>
#include <vector>

#include "pipeline/dispatch/dispatch.hh"
#include "pipeline/neigh/cache.hh"
#include "pipeline/neigh/neigh.hh"
#include "pipeline/stats/lcore_counters.hh"
#include "pipeline/port/port.hh"
#include "rawpipe/pipeline.hh"

namespace rawpipe {


class NeighStage {
 public:
  // tables and tx by port id: a null table means the port has no addresses; tx is this lcore's
  // queue on that port.
  NeighStage(std::vector<const NeighTable*> tables, std::vector<TxQueueHandle> tx, LcoreCounters* counters);

  // Answers what is ours in pkts[0..n) received on `port`, removes the answered packets from
  // pkts/verdicts (order of the rest kept) and returns how many remain.
  unsigned run(std::uint16_t port, Mbuf** pkts, Verdict* verdicts, unsigned n) noexcept;

  NeighStats stats() const noexcept;

  // Control path, before run(): the ports' neighbour caches (cache.hh), by port id (null: none),
  // which learn from every ARP and ND frame this stage looks at (the Extra API's sendto reads them).
  void set_caches(std::vector<NeighCache*> caches) { caches_ = std::move(caches); }

 private:
  std::vector<const NeighTable*> tables_;
  std::vector<TxQueueHandle> tx_;
  std::vector<NeighCache*> caches_;
  LcoreCounters* counters_;
  Counter replies_;
  Counter ignored_;
  Counter malformed_;
  Counter tx_failed_;
};

}  // namespace rawpipe
