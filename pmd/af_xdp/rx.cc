// AF_XDP receive: rx ring descriptors become the pool slots the kernel wrote into, in place.
#include <sys/socket.h>

#include <cerrno>

#include "pipeline/wire/rx_checksum.hh"
#include "pmd/af_xdp/af_xdp.hh"

namespace rawpipe::af_xdp {

void refill(XskQueue& q) noexcept {
  // Refill in bursts only: a short top-up per packet would cost a ring update each time.
  std::uint32_t free = xsk_prod_nb_free(&q.fill, kDefaultBurst);
  if (free < kDefaultBurst) return;
  unsigned n = free > kMaxBurst ? kMaxBurst : free;
  Mbuf* bufs[kMaxBurst];
  if (!q.pool->alloc_bulk(bufs, n)) [[unlikely]] {
    // All-or-nothing allocation: try the minimum batch before giving up for this burst.
    n = kDefaultBurst;
    if (!q.pool->alloc_bulk(bufs, n)) {
      q.fill_alloc_failed.add(1);
      return;
    }
  }
  std::uint32_t idx = 0;
  (void)xsk_ring_prod__reserve(&q.fill, n, &idx);  // cannot fail: nb_free said there is room
  for (unsigned i = 0; i < n; ++i) {
    // Aligned UMEM: the kernel rounds a fill address down to its frame and places the packet
    // after the UMEM headroom (our Mbuf header) plus XDP_PACKET_HEADROOM.
    *xsk_ring_prod__fill_addr(&q.fill, idx + i) = std::uint64_t(bufs[i]->index) << q.slot_shift;
    q.mark(bufs[i]->index);
  }
  xsk_ring_prod__submit(&q.fill, n);
}

namespace {

void rx_syscall(XskQueue& q) noexcept {
  if (recvfrom(q.fd, nullptr, 0, MSG_DONTWAIT, nullptr, nullptr) < 0) [[unlikely]] {
    // As tx's kick: a busy kernel retries next time; other errors are counted and kept.
    const int err = errno;
    if (err != EAGAIN && err != EBUSY && err != ENOBUFS) {
      q.rx_wakeup_errors.add(1);
      q.last_errno.store(err, std::memory_order_relaxed);
    }
  }
}

}  // namespace

std::uint16_t rx_burst(void* queue, Mbuf** pkts, std::uint16_t n) noexcept {
  XskQueue& q = *static_cast<XskQueue*>(queue);
  std::uint32_t idx = 0;
  unsigned got = xsk_ring_cons__peek(&q.rx, n, &idx);
  std::uint64_t bytes = 0;
  const std::uint64_t offset_mask = (std::uint64_t(1) << q.slot_shift) - 1;
  for (unsigned i = 0; i < got; ++i) {
    const xdp_desc* d = xsk_ring_cons__rx_desc(&q.rx, idx + i);
    const std::uint32_t slot = static_cast<std::uint32_t>(d->addr >> q.slot_shift);
    Mbuf* m = reinterpret_cast<Mbuf*>(q.base + (std::uint64_t(slot) << q.slot_shift));
    m->data_off = static_cast<std::uint32_t>(d->addr & offset_mask);
    prefetch0(m->data());  // written by the NIC or by the kernel on another CPU
    m->data_len = d->len;
    m->port = q.port_id;
    m->queue = q.queue_id;
    q.unmark(slot);
    bytes += d->len;
    pkts[i] = m;
  }
  if (got) {
    xsk_ring_cons__release(&q.rx, got);
    q.rx_packets.add(got);
    q.rx_bytes.add(bytes);
  }
  refill(q);
  if (got == 0) {
    // Busy polling: the system call runs the driver's NAPI poll here, so an empty ring makes one
    // whatever the wakeup flag says (as DPDK's net_af_xdp does). need_wakeup: the kernel asks for
    // a syscall only when it ran dry and stopped polling (zero-copy drivers); otherwise receive
    // costs no syscall at all.
    if (q.busy_poll) {
      q.rx_busy_polls.add(1);
      rx_syscall(q);
    } else if (q.need_wakeup && xsk_ring_prod__needs_wakeup(&q.fill)) {
      q.rx_wakeups.add(1);
      rx_syscall(q);
    }
  }
  return static_cast<std::uint16_t>(got);
}

std::uint16_t rx_burst_verify_csum(void* queue, Mbuf** pkts, std::uint16_t n) noexcept {
  const std::uint16_t got = rx_burst(queue, pkts, n);
  std::uint64_t completed = 0, bad = 0;
  for (unsigned i = 0; i < got; ++i) {
    Mbuf* m = pkts[i];
    switch (wire::verify_or_complete_l4(m->data(), m->data_len)) {
      case wire::RxL4Csum::kCompleted:
        ++completed;
        [[fallthrough]];
      case wire::RxL4Csum::kGood:
        m->flags |= pkt_flag::kL4CsumGood;
        break;
      case wire::RxL4Csum::kBad:
        ++bad;
        m->flags |= pkt_flag::kL4CsumBad;  // parse drops it under its reason
        break;
      case wire::RxL4Csum::kNotChecked:
        break;
    }
  }
  if (completed | bad) [[unlikely]] {
    XskQueue& q = *static_cast<XskQueue*>(queue);
    q.csum_completed.add(completed);
    q.csum_bad.add(bad);
  }
  return got;
}

}  // namespace rawpipe::af_xdp
