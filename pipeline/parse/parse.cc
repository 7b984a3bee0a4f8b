#include "pipeline/parse/parse.hh"

namespace rawpipe {

namespace {
// The first two data lines of packet i + K are prefetched while packet i is parsed (VLAN tags or
// IPv6 extension headers push the L4 header into the second line); K covers a miss to L3 at a few
// ns of parse per packet. The metadata lines are not prefetched: every receive path has just
// written them on this core (data_off, data_len, port), so they are in L1, and a prefetch of a
// line already there still costs a load slot per packet.
constexpr unsigned kAhead = 4;

RAWPIPE_ALWAYS_INLINE void prefetch_data(const Mbuf* m) noexcept {
  const std::uint8_t* d = m->data();
  prefetch0(d);
  // The second line only when the frame reaches into it: for a minimum-size frame it is a line
  // nobody wrote, and fetching it for every packet would push useful lines out of L1. The line
  // holding byte min(len, 65) - 1 is the second one exactly when the frame reaches it (byte 64 is
  // always in the line after d's); otherwise the first is asked for twice. No branch, so a mix of
  // sizes costs no mispredictions, and a prefetch never faults (an empty frame asks for d - 1).
  const std::uint32_t len = m->data_len;
  prefetch0(d + (len < 65 ? len : 65) - 1);
}

// Out of line, so that the keyed loop's fast path keeps its registers to itself.
[[gnu::noinline]] void parse_general_out_of_line(Mbuf* m) noexcept { parse_packet_general(m); }

template <bool kKeyed>
RAWPIPE_ALWAYS_INLINE std::uint64_t parse_all(Mbuf* const* pkts, unsigned n, std::uint64_t* keys) noexcept {
  // The byte count rides along: parse loads every data_len anyway, and the lcore would otherwise
  // walk the burst once more just for its rx_bytes counter.
  std::uint64_t bytes = 0;
  auto one = [&](unsigned i) {
    bytes += pkts[i]->data_len;
    if constexpr (kKeyed)
      keys[i] = parse_packet_keyed(pkts[i], parse_general_out_of_line);
    else
      parse_packet(pkts[i]);
  };
  for (unsigned i = 0; i < n && i < kAhead; ++i) prefetch_data(pkts[i]);
  unsigned i = 0;
  for (; i + kAhead < n; ++i) {
    prefetch_data(pkts[i + kAhead]);
    one(i);
  }
  for (; i < n; ++i) one(i);
  return bytes;
}
}  // namespace

std::uint64_t parse_burst(Mbuf* const* pkts, unsigned n) noexcept { return parse_all<false>(pkts, n, nullptr); }

std::uint64_t parse_burst(Mbuf* const* pkts, unsigned n, std::uint64_t* keys) noexcept {
  return parse_all<true>(pkts, n, keys);
}

}  // namespace rawpipe
