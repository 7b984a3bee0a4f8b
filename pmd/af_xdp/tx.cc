// AF_XDP transmit: descriptors point at the packet inside its UMEM slot; the completion ring
// gives the slot back and the buffer returns to its pool.
#include <sys/socket.h>

#include <cerrno>
#include <cstring>

#include "pmd/af_xdp/af_xdp.hh"

namespace rawpipe::af_xdp {

namespace {

// Copy mode and drivers that sleep need a syscall to send; with need_wakeup the kernel says when.
RAWPIPE_ALWAYS_INLINE void kick(XskQueue& q) noexcept {
  if (!q.need_wakeup || xsk_ring_prod__needs_wakeup(&q.tx)) {
    q.tx_wakeups.add(1);
    if (sendto(q.fd, nullptr, 0, MSG_DONTWAIT, nullptr, 0) < 0) [[unlikely]] {
      // EAGAIN/EBUSY/ENOBUFS: the kernel is busy and the next kick retries. Anything else (ENETDOWN,
      // ENXIO once the interface is gone) is a condition the person running rawpipe must see.
      const int err = errno;
      if (err != EAGAIN && err != EBUSY && err != ENOBUFS) {
        q.tx_kick_errors.add(1);
        q.last_errno.store(err, std::memory_order_relaxed);
      }
    }
  }
}

}  // namespace

void reclaim_completions(XskQueue& q) noexcept {
  for (;;) {
    std::uint32_t idx = 0;
    unsigned done = xsk_ring_cons__peek(&q.comp, kMaxBurst, &idx);
    if (done == 0) return;
    Mbuf* bufs[kMaxBurst];
    for (unsigned i = 0; i < done; ++i) {
      const std::uint32_t slot = static_cast<std::uint32_t>(*xsk_ring_cons__comp_addr(&q.comp, idx + i) >> q.slot_shift);
      q.unmark(slot);
      bufs[i] = reinterpret_cast<Mbuf*>(q.base + (std::uint64_t(slot) << q.slot_shift));
    }
    xsk_ring_cons__release(&q.comp, done);
    // Drops the reference tx_burst took over; a buffer still shared stays with its other holders.
    mbuf_free_bulk(bufs, done);
  }
}

std::uint16_t tx_burst(void* queue, Mbuf** pkts, std::uint16_t n) noexcept {
  XskQueue& q = *static_cast<XskQueue*>(queue);
  reclaim_completions(q);
  std::uint32_t idx = 0;
  unsigned room = xsk_prod_nb_free(&q.tx, n);
  unsigned k = n < room ? n : room;
  if (k < n) q.tx_ring_full.add(1);
  if (k == 0) {
    // Nothing new, but copy mode may have left earlier frames in the ring (it sends a bounded
    // batch per kick and stops when the socket's send budget is spent): kick again for those.
    if (room < q.tx.size) kick(q);
    return 0;
  }
  (void)xsk_ring_prod__reserve(&q.tx, k, &idx);
  std::uint64_t bytes = 0;
  unsigned sent = 0;
  for (; sent < k; ++sent) {
    Mbuf* m = pkts[sent];
    if (m->pool != q.pool) [[unlikely]] {
      // The kernel can only send from the UMEM: a buffer of another pool (forwarded from another
      // port) is copied into one of ours.
      Mbuf* c = q.pool->alloc();
      if (c == nullptr || m->data_len > c->buf_len - c->data_off) {
        if (c) mbuf_free(c);
        q.tx_foreign_nombuf.add(1);
        break;
      }
      std::memcpy(c->data(), m->data(), m->data_len);
      c->data_len = m->data_len;
      mbuf_free(m);
      m = c;
      q.tx_copied.add(1);
    }
    xdp_desc* d = xsk_ring_prod__tx_desc(&q.tx, idx + sent);
    d->addr = static_cast<std::uint64_t>(m->data() - q.base);
    d->len = m->data_len;
    d->options = 0;
    q.mark(m->index);
    bytes += m->data_len;
  }
  if (sent < k) {
    // Entries reserved but not written: give them back before publishing. The producer index is
    // only published by submit, so lowering our cached copy is enough.
    q.tx.cached_prod -= k - sent;
  }
  if (sent == 0) return 0;
  xsk_ring_prod__submit(&q.tx, sent);
  q.tx_packets.add(sent);
  q.tx_bytes.add(bytes);
  kick(q);
  return static_cast<std::uint16_t>(sent);
}

}  // namespace rawpipe::af_xdp
