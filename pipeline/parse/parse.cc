#include "pipeline/parse/parse.hh"

namespace rawpipe {

namespace {
// Parse prefetches nothing. Whether a frame's data is in this core's cache is known only to the
// receive that produced it: a driver whose frames were written elsewhere asks for each frame's
// first line as it hands the frame out (pipeline/port/port.hh), and one that copied or wrote the
// frame on this core has it in L1. Asking again here, four packets ahead, cost parse three loads
// and two prefetches per packet for lines that were already on their way or already here.
// The metadata lines are not prefetched either: every receive path has just written them on this
// core (data_off, data_len, port).

// Out of line, so that the keyed loop's fast path keeps its registers to itself.
[[gnu::noinline]] void parse_general_out_of_line(Mbuf* m) noexcept { parse_packet_general(m); }

template <bool kKeyed>
RAWPIPE_ALWAYS_INLINE std::uint64_t parse_all(Mbuf* const* pkts, unsigned n, std::uint64_t* keys) noexcept {
  // The byte count rides along: parse loads every data_len anyway, and the lcore would otherwise
  // walk the burst once more just for its rx_bytes counter.
  std::uint64_t bytes = 0;
  for (unsigned i = 0; i < n; ++i) {
    bytes += pkts[i]->data_len;
    if constexpr (kKeyed)
      keys[i] = parse_packet_keyed(pkts[i], parse_general_out_of_line);
    else
      parse_packet(pkts[i]);
  }
  return bytes;
}
}  // namespace

std::uint64_t parse_burst(Mbuf* const* pkts, unsigned n) noexcept { return parse_all<false>(pkts, n, nullptr); }

std::uint64_t parse_burst(Mbuf* const* pkts, unsigned n, std::uint64_t* keys) noexcept {
  return parse_all<true>(pkts, n, keys);
}

}  // namespace rawpipe
