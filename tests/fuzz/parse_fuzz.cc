// libFuzzer target for the parse stage.
//
// Each input is one frame. It is copied into a pool buffer that ends right before a PROT_NONE
// page (tests/support/guarded_pool.hh), so a read past data_len faults even where AddressSanitizer
// would not see it (the pool region is one mapping, not a heap object). After parsing, the
// results must describe bytes inside the frame; anything else aborts.
//
// Seeds: tests/fuzz/corpus/parse/ (one golden frame of each header kind and a few malformed ones).
#include <cstdint>
#include <cstdlib>
#include <memory>

#include "pipeline/parse/parse.hh"
#include "tests/support/guarded_pool.hh"

namespace {

rawpipe::testing::GuardedPool* guarded() {
  static rawpipe::testing::GuardedPool* g = [] {
    auto p = rawpipe::testing::GuardedPool::create(16384);
    if (!p) std::abort();
    return p.release();
  }();
  return g;
}

void check(bool ok) {
  if (!ok) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace rawpipe;
  testing::GuardedPool* g = guarded();
  if (size > g->max_frame()) return -1;  // not added to the corpus
  Mbuf* m = g->place(data, size);
  // The burst form on odd lengths, the inline form on even ones: both must hold the same line.
  if (size & 1) {
    parse_burst(&m, 1);
  } else {
    parse_packet(m);
  }
  check(m->drop_reason < kDropReasonCount);
  check(m->l3_off <= size && m->l4_off <= size);
  check(std::size_t(m->payload_off) + m->payload_len <= size);
  check(m->vlan_count <= 2);
  if (m->drop_reason == 0) {
    check(m->l4_off == 0 || m->l4_off >= m->l3_off + 20);
    if (m->l3_type == L3Type::kNone) check(m->l4_off == 0 && (m->flags & pkt_flag::kMulticast) == 0);
  }
  return 0;
}
