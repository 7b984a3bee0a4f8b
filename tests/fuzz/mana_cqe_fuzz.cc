// libFuzzer target for the MANA PMD's receive CQE consumer (pmd/mana/rx.cc).
//
// A receive queue is set up on the in-memory device model as the control path sets it up from
// manadv_init_obj (setup_rx_queue, then rx_refill posts pool buffers), then the fuzzer plays the
// NIC: it writes random 64-byte CQEs (well-formed or not: any CQE type, packet counts, lengths,
// WQE sizes, owner bits) into the CQ at the driver's head and calls rx_burst.
//
// Input: steps of
//   one control byte  bits 0..2: CQEs to write (0..7); bit 3: set the owner bits to the pass the
//                     driver expects; bit 4: set wq_num to the RQ's id and clear is_sq;
//                     bits 5..7: burst size / 2
//   that many 64-byte CQEs.
// Checks: no crash or out-of-bounds access (ASan), every frame handed out lies in its buffer, no
// buffer handed out twice or while still posted, `packets` counts exactly the frames handed out,
// and after rx_release_all every buffer is back in the pool.
//
// Seeds: tests/fuzz/corpus/mana_cqe/.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <unordered_set>
#include <vector>

#include "pipeline/buf/pool.hh"
#include "pmd/mana/model/device.hh"
#include "pmd/mana/rx.hh"
#include "pmd/mana/setup.hh"

namespace {

using namespace rawpipe;
using namespace rawpipe::mana;

// Names the failed check on stderr before aborting, so a crash input explains itself.
#define must(cond)                                                           \
  do {                                                                         \
    if (!(cond)) {                                                             \
      std::fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                            \
    }                                                                          \
  } while (0)

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size > 64 * 1024) return -1;
  PoolConfig c;
  c.name = "mana-fuzz";
  c.count = 1024;
  c.buf_size = 2048;
  c.cache_size = 0;
  c.huge_pages = HugePages::kNever;
  auto pr = Pool::create(c);
  must(static_cast<bool>(pr));
  std::unique_ptr<Pool> pool = std::move(pr).value();

  ManaModel model;
  const std::uint32_t lkey = model.register_mr(pool->region(), pool->region_bytes());
  const std::uint32_t cq_id = model.create_cq(64);
  const std::uint32_t rq_id = model.create_rq(64, cq_id);
  QueueSetup rs;
  model.describe_wq(rq_id, rs.wq);
  model.describe_cq(cq_id, rs.cq);
  rs.db_page = model.db_page();
  rs.db_sink = model.doorbell_sink();
  rs.lkey = lkey;
  rs.pool = pool.get();
  rs.port_id = 5;
  rs.queue_id = 0;
  auto q = std::make_unique<RxQueue>();
  must(static_cast<bool>(setup_rx_queue(*q, rs)));
  rx_refill<rdma::ModelDoorbell>(*q);

  auto posted = [&](Mbuf* m) {
    for (std::uint32_t u = q->rq.tail; u != q->rq.head; ++u)
      if (q->bufs[u & q->bufs_mask] == m) return true;
    return false;
  };

  std::unordered_set<Mbuf*> held;
  std::vector<Mbuf*> held_list;
  std::uint64_t received = 0;
  std::size_t at = 0;
  while (at < size) {
    const std::uint8_t ctl = data[at++];
    const unsigned k = ctl & 7;
    const auto burst = static_cast<std::uint16_t>(((ctl >> 5) + 1) * 2);
    for (unsigned i = 0; i < k && at + kCqeSize <= size; ++i, at += kCqeSize) {
      const std::uint32_t h = q->cq.head + i;
      Cqe* e = &q->cq.buf[h & (q->cq.count - 1)];
      std::memcpy(static_cast<void*>(e), data + at, kCqeSize);
      std::uint32_t w = e->wq_owner;
      if (ctl & 16) w = (w & ~0x1ffffffu) | (q->rq.id & 0xffffff);
      if (ctl & 8) w = (w & ~(kOwnerMask << 29)) | (((h >> q->cq.shift) & kOwnerMask) << 29);
      e->wq_owner = w;
    }
    Mbuf* pkts[16];
    const std::uint16_t n = rx_burst<rdma::ModelDoorbell>(q.get(), pkts, burst);
    must(n <= burst);
    for (std::uint16_t i = 0; i < n; ++i) {
      Mbuf* m = pkts[i];
      must(m != nullptr);
      must(std::size_t(m->data_off) + m->data_len <= m->buf_len);
      must(m->port == 5);
      must(held.insert(m).second);  // never handed out twice
      must(!posted(m));             // not still owned by the NIC
      held_list.push_back(m);
    }
    received += n;
    must(q->posted() <= q->target_posted);
    if (held_list.size() > 256) {
      for (Mbuf* m : held_list) held.erase(m);
      mbuf_free_bulk(held_list.data(), static_cast<unsigned>(held_list.size()));
      held_list.clear();
    }
  }
  must(q->counters.packets.load() == received);
  mbuf_free_bulk(held_list.data(), static_cast<unsigned>(held_list.size()));
  rx_release_all(*q);
  must(pool->available() == pool->count());
  return 0;
}
