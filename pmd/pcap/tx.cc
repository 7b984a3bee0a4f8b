// pcap transmit: append frames to a capture file.
#include <time.h>

#include <algorithm>

#include "pmd/pcap/pcap.hh"

namespace rawpipe::pcap_pmd {

std::uint16_t tx_none(void*, Mbuf**, std::uint16_t) noexcept { return 0; }

std::uint16_t tx_burst(void* queue, Mbuf** pkts, std::uint16_t n) noexcept {
  TxQueue& q = *static_cast<TxQueue*>(queue);
  std::uint64_t now = 0;
  std::uint64_t bytes = 0;
  unsigned failed = 0;
  for (unsigned i = 0; i < n; ++i) {
    const Mbuf* m = pkts[i];
    std::uint64_t ts;
    if (m->flags & pkt_flag::kTimestamp) {
      ts = m->timestamp_ns;
    } else {
      if (!now) {
        timespec t;
        clock_gettime(CLOCK_REALTIME, &t);  // vDSO, once per burst
        now = std::uint64_t(t.tv_sec) * 1000000000ull + std::uint64_t(t.tv_nsec);
      }
      ts = now;
    }
    if (q.writer->write(ts, m->data(), m->data_len, m->data_len))
      bytes += m->data_len;
    else
      ++failed;
  }
  // Written (or counted as a write error): the frames are done with either way.
  mbuf_free_bulk(pkts, n);
  count_add(q.counters.tx_packets, n - failed);
  count_add(q.counters.tx_bytes, bytes);
  if (failed) count_add(q.counters.tx_errors, failed);
  return n;
}

}  // namespace rawpipe::pcap_pmd
