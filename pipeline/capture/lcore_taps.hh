// The capture taps one lcore feeds, grouped by stage, and the two calls the lcore loop makes.
//
// The lcore holds a LcoreTaps pointer that is null when no [[taps]] table exists, so a pipeline
// without taps pays one predictable branch per burst and nothing per packet. With taps:
//   on_rx()       every received packet, before parse (what the port delivered);
//   on_verdicts() after the filter stage, before dispatch: packets with verdict kRecv go to the
//                 "filtered" taps (they are about to be delivered or transmitted), packets with
//                 verdict kDrop to the "drops" taps with their reason (a filter drop without a
//                 reason gets kFilterDrop here, as dispatch would give it). Held packets already
//                 belong to the filter's owner and are not read.
//   on_drops()    called by dispatch for the drops it decides itself (endpoint ring full, tx
//                 failed), with their reason set.
// An echo packet that dispatch cannot rewrite (not_for_us) is seen by "filtered" taps, not by
// "drops" taps.
//
// Thread-safety: one LcoreTaps per lcore; its Tap lanes are single-producer (that lcore).
#pragma once

#include <vector>

#include "rawpipe/mbuf.hh"
#include "pipeline/capture/tap.hh"
#include "pipeline/dispatch/dispatch.hh"

namespace rawpipe {

struct LcoreTaps {
  std::vector<Tap*> rx;
  std::vector<Tap*> filtered;
  std::vector<Tap*> drops;

  bool empty() const noexcept { return rx.empty() && filtered.empty() && drops.empty(); }
  void add(TapStage stage, Tap& lane);

  void on_rx(Mbuf* const* pkts, unsigned n) noexcept;
  void on_verdicts(Mbuf* const* pkts, const Verdict* verdicts, unsigned n) noexcept;
  void on_drops(Mbuf* const* pkts, unsigned n) noexcept;
};

}  // namespace rawpipe
