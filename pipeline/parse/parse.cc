#include "pipeline/parse/parse.hh"

namespace rawpipe {

namespace {
// How far ahead the data is prefetched: far enough to cover a DRAM miss at a few ns per packet,
// near enough that the lines are still in L1 when the packet's turn comes.
constexpr unsigned kPrefetchAhead = 4;
}  // namespace

void parse_burst(Mbuf* const* pkts, unsigned n) noexcept {
  const unsigned warm = n < kPrefetchAhead ? n : kPrefetchAhead;
  for (unsigned i = 0; i < warm; ++i) prefetch0(pkts[i]->data());
  unsigned i = 0;
  for (; i + kPrefetchAhead < n; ++i) {
    prefetch0(pkts[i + kPrefetchAhead]->data());
    parse_packet(pkts[i]);
  }
  for (; i < n; ++i) parse_packet(pkts[i]);
}

}  // namespace rawpipe
