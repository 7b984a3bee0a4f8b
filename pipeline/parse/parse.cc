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
  // nobody wrote, and fetching it for every packet would push useful lines out of L1. Without a
  // branch, so a mix of sizes costs no mispredictions: a short frame asks for its first line twice.
  const bool spans = (reinterpret_cast<std::uintptr_t>(d) % kCacheLine) + m->data_len > kCacheLine;
  prefetch0(d + (spans ? kCacheLine : 0));
}
}  // namespace

std::uint64_t parse_burst(Mbuf* const* pkts, unsigned n) noexcept {
  // The byte count rides along: parse loads every data_len anyway, and the lcore would otherwise
  // walk the burst once more just for its rx_bytes counter.
  std::uint64_t bytes = 0;
  for (unsigned i = 0; i < n && i < kAhead; ++i) prefetch_data(pkts[i]);
  unsigned i = 0;
  for (; i + kAhead < n; ++i) {
    prefetch_data(pkts[i + kAhead]);
    bytes += pkts[i]->data_len;
    parse_packet(pkts[i]);
  }
  for (; i < n; ++i) {
    bytes += pkts[i]->data_len;
    parse_packet(pkts[i]);
  }
  return bytes;
}

}  // namespace rawpipe
