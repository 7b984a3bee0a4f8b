#include "pipeline/parse/parse.hh"

namespace rawpipe {

namespace {
// Two-stage prefetch: the metadata line of packet i + 2K (its data_off tells where the data is),
// then the first two data lines of packet i + K (VLAN tags or IPv6 extension headers push the
// L4 header into the second line). K covers a miss to L3 at a few ns of parse per packet; the rx
// stage usually left the metadata hot, but a burst handed over from another core (or a bench
// walking a large working set) does not.
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

void parse_burst(Mbuf* const* pkts, unsigned n) noexcept {
  for (unsigned i = 0; i < n && i < 2 * kAhead; ++i) prefetch0(pkts[i]);
  for (unsigned i = 0; i < n && i < kAhead; ++i) prefetch_data(pkts[i]);
  unsigned i = 0;
  for (; i + 2 * kAhead < n; ++i) {
    prefetch0(pkts[i + 2 * kAhead]);
    prefetch_data(pkts[i + kAhead]);
    parse_packet(pkts[i]);
  }
  for (; i + kAhead < n; ++i) {
    prefetch_data(pkts[i + kAhead]);
    parse_packet(pkts[i]);
  }
  for (; i < n; ++i) parse_packet(pkts[i]);
}

}  // namespace rawpipe
