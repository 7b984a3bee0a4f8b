// synth transmit: the frames go nowhere; count them and give the buffers back.
#include "pmd/synth/synth.hh"

namespace rawpipe::synth {

std::uint16_t tx_burst(void* queue, Mbuf** pkts, std::uint16_t n) noexcept {
  auto* q = static_cast<TxQueue*>(queue);
  std::uint64_t bytes = 0;
  for (std::uint16_t i = 0; i < n; ++i) bytes += pkts[i]->data_len;
  mbuf_free_bulk(pkts, n);
  count_add(q->counters.tx_packets, n);
  count_add(q->counters.tx_bytes, bytes);
  return n;
}

}  // namespace rawpipe::synth
