#include "pipeline/capture/lcore_taps.hh"

namespace rawpipe {

void LcoreTaps::add(TapStage stage, Tap& lane) {
  switch (stage) {
    case TapStage::kRx:
      rx.push_back(&lane);
      break;
    case TapStage::kFiltered:
      filtered.push_back(&lane);
      break;
    case TapStage::kDrops:
      drops.push_back(&lane);
      break;
  }
}

void LcoreTaps::on_rx(Mbuf* const* pkts, unsigned n) noexcept {
  for (Tap* t : rx) tap_burst(*t, pkts, n);
}

void LcoreTaps::on_verdicts(Mbuf* const* pkts, const Verdict* verdicts, unsigned n) noexcept {
  if (filtered.empty() && drops.empty()) return;
  Mbuf* pass[kMaxBurst];
  Mbuf* dropped[kMaxBurst];
  unsigned n_pass = 0, n_drop = 0;
  for (unsigned i = 0; i < n; ++i) {
    Mbuf* m = pkts[i];
    if (verdicts[i] == Verdict::kRecv && m->drop_reason == 0) {
      pass[n_pass++] = m;
    } else if (verdicts[i] != Verdict::kHold) {
      if (m->drop_reason == 0) m->drop_reason = static_cast<std::uint8_t>(DropReason::kFilterDrop);
      dropped[n_drop++] = m;
    }
  }
  if (n_pass)
    for (Tap* t : filtered) tap_burst(*t, pass, n_pass);
  if (n_drop)
    for (Tap* t : drops) tap_burst(*t, dropped, n_drop);
}

void LcoreTaps::on_drops(Mbuf* const* pkts, unsigned n) noexcept {
  for (Tap* t : drops) tap_burst(*t, pkts, n);
}

}  // namespace rawpipe
