#include "pipeline/dispatch/dispatch.hh"

#include "pipeline/buf/pool.hh"
#include "pipeline/capture/lcore_taps.hh"
#include "pipeline/dispatch/echo.hh"
#include "pipeline/dispatch/sockperf_echo.hh"

namespace rawpipe {

Dispatcher::Dispatcher(std::vector<Route> routes, std::vector<TxQueueHandle> tx, LcoreCounters* counters)
    : routes_(std::move(routes)),
      tx_(std::move(tx)),
      counters_(counters),
      n_endpoints_(static_cast<std::uint16_t>(routes_.size())),
      slot_of_dest_(routes_.size() + tx_.size(), kUnused) {}

void Dispatcher::dispatch_burst(Mbuf* const* pkts, const Verdict* verdicts, unsigned n) noexcept {
  // Per packet: its destination, or kUnused for drops and holds.
  std::uint16_t dest[kMaxBurst];
  std::uint16_t active[kMaxBurst];   // destinations seen in this burst, in first-seen order
  std::uint16_t count[kMaxBurst + 1];
  unsigned n_active = 0;
  Mbuf* to_free[kMaxBurst];
  unsigned n_free = 0;
  LcoreCounters& c = *counters_;

  for (unsigned i = 0; i < n; ++i) {
    Mbuf* m = pkts[i];
    dest[i] = kUnused;
    if (verdicts[i] == Verdict::kHold) [[unlikely]] {
      c.delivered_per_endpoint[m->endpoint].add(1);
      c.delivered.add(1);
      continue;
    }
    std::uint8_t reason = m->drop_reason;
    if (verdicts[i] == Verdict::kRecv && reason == 0) [[likely]] {
      const Route& r = routes_[m->endpoint];
      std::uint16_t d;
      switch (r.action) {
        case EndpointAction::kRing:
        case EndpointAction::kSink:
          d = m->endpoint;
          break;
        case EndpointAction::kEcho:
          if (!echo_swap(m)) {
            reason = static_cast<std::uint8_t>(DropReason::kNotForUs);
            d = kUnused;
          } else if (r.sockperf && !sockperf_reply(m)) [[unlikely]] {
            d = m->endpoint;  // a sockperf server takes it without a reply: delivered, freed as a sink's
          } else {
            d = static_cast<std::uint16_t>(n_endpoints_ + m->port);
          }
          break;
        case EndpointAction::kForward:
        default:
          d = static_cast<std::uint16_t>(n_endpoints_ + r.forward_port);
          break;
      }
      if (d != kUnused) [[likely]] {
        std::uint16_t s = slot_of_dest_[d];
        if (s == kUnused) {
          s = static_cast<std::uint16_t>(n_active);
          slot_of_dest_[d] = s;
          active[n_active++] = d;
          count[s] = 0;
        }
        ++count[s];
        dest[i] = s;
        continue;
      }
    } else if (reason == 0) {
      reason = static_cast<std::uint8_t>(DropReason::kFilterDrop);
    }
    m->drop_reason = reason;
    c.drops[reason].add(1);
    to_free[n_free++] = m;
  }

  if (n_active != 0) [[likely]] {
    // Counting sort: contiguous runs per destination, order kept within each run.
    Mbuf* sorted[kMaxBurst];
    std::uint16_t start[kMaxBurst + 1];
    std::uint16_t pos = 0;
    for (unsigned s = 0; s < n_active; ++s) {
      start[s] = pos;
      pos = static_cast<std::uint16_t>(pos + count[s]);
    }
    start[n_active] = pos;
    std::uint16_t fill[kMaxBurst];
    for (unsigned s = 0; s < n_active; ++s) fill[s] = start[s];
    for (unsigned i = 0; i < n; ++i)
      if (dest[i] != kUnused) sorted[fill[dest[i]]++] = pkts[i];

    for (unsigned s = 0; s < n_active; ++s) {
      const std::uint16_t d = active[s];
      slot_of_dest_[d] = kUnused;
      Mbuf** run = &sorted[start[s]];
      const unsigned k = count[s];
      unsigned done;
      DropReason fail;
      if (d < n_endpoints_) {
        const Route& r = routes_[d];
        if (r.action == EndpointAction::kRing) {
          done = r.ring->enqueue_burst(run, k);
          fail = DropReason::kEndpointRingFull;
        } else {
          // Sink: delivered, then freed here.
          for (unsigned j = 0; j < k; ++j) to_free[n_free++] = run[j];
          done = k;
          fail = DropReason::kNone;
        }
        c.delivered_per_endpoint[d].add(done);
        c.delivered.add(done);
      } else {
        const std::uint16_t port = static_cast<std::uint16_t>(d - n_endpoints_);
        const TxQueueHandle& tx = tx_[port];
        // Echo and forward ask for nothing special (echo_swap keeps the checksums valid).
        for (unsigned j = 0; j < k; ++j) run[j]->tx_flags = 0;
        done = tx.burst ? tx(run, static_cast<std::uint16_t>(k)) : 0;
        fail = DropReason::kTxFailed;
        c.transmitted_per_port[port].add(done);
        c.transmitted.add(done);
      }
      if (done < k) [[unlikely]] {
        c.drops[static_cast<unsigned>(fail)].add(k - done);
        for (unsigned j = done; j < k; ++j) {
          run[j]->drop_reason = static_cast<std::uint8_t>(fail);
          to_free[n_free++] = run[j];
        }
        if (taps_) taps_->on_drops(run + done, k - done);
      }
    }
  }
  if (n_free) mbuf_free_bulk(to_free, n_free);
}

}  // namespace rawpipe
