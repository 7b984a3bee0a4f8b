#include "pipeline/send/send_port.hh"

#include <algorithm>

namespace rawpipe {

unsigned SendPort::submit(Mbuf* const* pkts, unsigned n) noexcept {
  submitted.add(n);
  // Relaxed: the ring's own release/acquire orders the buffers; this flag only wakes the lcore's
  // look at the ring, which it may see a pass late.
  if (!used.load(std::memory_order_relaxed)) used.store(true, std::memory_order_relaxed);
  const unsigned k = ring->enqueue_burst(pkts, n);
  if (k < n) ring_full.add(n - k);
  return k;
}

void SendPort::drain_ring() noexcept {
  Mbuf* batch[kMaxBurst];
  // At most eight bursts per pass, so a sender that never stops cannot starve receive for long
  // (tools/bench/send-vs-testpmd: two bursts per pass left the drain bound by the pass itself).
  // Only the header line the driver reads anyway (data_len) is looked at here: the sender
  // counted the dummies, and tx_flags sit on the second line.
  for (int round = 0; round < 8; ++round) {
    const unsigned n = ring->dequeue_burst(batch, kMaxBurst);
    if (n == 0) return;
    std::uint64_t bytes = 0;
    for (unsigned i = 0; i < n; ++i) bytes += batch[i]->data_len;
    const unsigned done = tx.burst ? tx(batch, static_cast<std::uint16_t>(n)) : 0;
    if (done < n) {
      for (unsigned i = done; i < n; ++i) bytes -= batch[i]->data_len;
      tx_failed.add(n - done);
      mbuf_free_bulk(batch + done, n - done);
    }
    sent.add(done);
    sent_bytes.add(bytes);
    if (n < kMaxBurst) return;
  }
}

void SendPort::drain_stopped() noexcept {
  if (!ring) return;
  Mbuf* batch[kMaxBurst];
  unsigned n;
  while ((n = ring->dequeue_burst(batch, kMaxBurst)) != 0) {
    tx_failed.add(n);
    mbuf_free_bulk(batch, n);
  }
}

SendStats SendPort::stats() const noexcept {
  SendStats s;
  s.submitted = submitted.load();
  s.sent = sent.load();
  s.sent_bytes = sent_bytes.load();
  s.tx_failed = tx_failed.load();
  s.ring_full = ring_full.load();
  s.dummies = dummies.load();
  s.dummies_posted = dummies_posted.load();
  s.solicitations = solicitations.load();
  s.unresolved = unresolved.load();
  s.neigh_learned = cache ? cache->learned() : 0;
  return s;
}

}  // namespace rawpipe
