// AF_PACKET transmit: one sendmmsg per burst, iovecs pointing into the buffers.
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <cerrno>

#include "pmd/af_packet/af_packet.hh"

namespace rawpipe::af_packet {

std::uint16_t tx_burst(void* queue, Mbuf** pkts, std::uint16_t n) noexcept {
  TxQueue& q = *static_cast<TxQueue*>(queue);
  n = std::min<std::uint16_t>(n, kMaxBurst);
  if (n == 0) return 0;
  mmsghdr msgs[kMaxBurst];
  iovec iov[kMaxBurst];
  for (unsigned i = 0; i < n; ++i) {
    iov[i].iov_base = pkts[i]->data();
    iov[i].iov_len = pkts[i]->data_len;
    msgs[i].msg_hdr = msghdr{};
    msgs[i].msg_hdr.msg_iov = &iov[i];
    msgs[i].msg_hdr.msg_iovlen = 1;
  }
  unsigned done = 0, failed = 0;
  std::uint64_t bytes = 0;
  while (done < n) {
    int sent = sendmmsg(q.fd, msgs + done, n - done, MSG_DONTWAIT);
    if (sent > 0) {
      for (int i = 0; i < sent; ++i) bytes += pkts[done + i]->data_len;
      done += static_cast<unsigned>(sent);
      continue;
    }
    int err = errno;
    if (err == EINTR) continue;
    if (err == EAGAIN || err == ENOBUFS) {
      // Queue full: the caller keeps the rest and retries or drops them (its accounting).
      count_add(q.would_block, 1);
      break;
    }
    // The frame at `done` can never be sent (too big for the MTU, not a valid frame): take it,
    // count it as an error and go on, so one bad frame cannot wedge the queue.
    ++failed;
    ++done;
  }
  // The kernel copied what it accepted; the buffers go back to their pools now.
  if (done) mbuf_free_bulk(pkts, done);
  if (failed) count_add(q.counters.tx_errors, failed);
  count_add(q.counters.tx_packets, done - failed);
  count_add(q.counters.tx_bytes, bytes);
  return static_cast<std::uint16_t>(done);
}

}  // namespace rawpipe::af_packet
