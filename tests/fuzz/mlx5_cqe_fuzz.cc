// libFuzzer target for the mlx5 PMD's CQE consumer (pmd/mlx5/rx.cc).
//
// A receive queue is set up on the in-memory device model exactly as the port does it (rx_setup
// posts pool buffers or stride regions through the model's doorbell sink), then the fuzzer plays
// the NIC: it writes random 64-byte CQEs (well-formed or not, compressed or not, error CQEs
// included) into the CQ ring at the driver's consumer index and calls the burst function.
//
// Input: byte 0 picks the mode (cyclic, cyclic with CQE compression, striding); then steps of
//   one control byte  bits 0..2: CQEs to write (0..7); bit 3: set the owner bit to the pass
//                     parity the driver expects (else leave the random one); bits 4..7: burst size-1
//   that many 64-byte CQEs.
// Checks: no crash or out-of-bounds access (ASan), every frame handed out lies in its buffer, no
// buffer is handed out twice or while still posted in the RQ, rx_packets counts exactly the
// frames handed out, and after rx_release every buffer is back in the pool.
//
// Seeds: tests/fuzz/corpus/mlx5_cqe/.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <unordered_set>
#include <vector>

#include "pipeline/buf/pool.hh"
#include "pmd/mlx5/hw.hh"
#include "pmd/mlx5/model/device.hh"
#include "pmd/mlx5/rx.hh"

namespace {

using namespace rawpipe;
using namespace rawpipe::mlx5;

// Names the failed check on stderr before aborting, so a crash input explains itself.
#define must(cond)                                                           \
  do {                                                                         \
    if (!(cond)) {                                                             \
      std::fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                            \
    }                                                                          \
  } while (0)

constexpr std::uint32_t kWqes = 64;
constexpr std::uint32_t kCqes = 64;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1 || size > 64 * 1024) return -1;
  const unsigned mode = data[0] % 3;
  PoolConfig c;
  c.name = "mlx5-fuzz";
  c.count = 1024;
  c.buf_size = 2048;
  c.cache_size = 0;
  c.huge_pages = HugePages::kNever;
  auto pr = Pool::create(c);
  must(static_cast<bool>(pr));
  std::unique_ptr<Pool> pool = std::move(pr).value();

  model::Device dev;
  model::RqOptions o;
  o.wqe_cnt = kWqes;
  o.cqe_cnt = kCqes;
  o.compression = mode == 1;
  o.striding = mode == 2;
  auto q = std::make_unique<RxQueue>();
  dev.create_rq(o, q->rq, q->cq);
  q->pool = pool.get();
  q->sink = dev.sink();
  q->lkey = dev.reg_mr(pool->region(), pool->region_bytes());
  q->data_room = pool->data_room();
  q->port_id = 2;
  q->control = {&dev, [](void* ctx, std::uint16_t) { return static_cast<model::Device*>(ctx)->reset_rq(0); }};
  std::vector<Mbuf*> elts;
  std::unique_ptr<std::uint8_t[]> mprq;
  if (o.striding) {
    q->stride_size = 1u << o.log_stride_size;
    q->strides_per_wqe = 1u << o.log_strides;
    const std::size_t bytes = std::size_t(o.wqe_cnt) * q->stride_size * q->strides_per_wqe;
    mprq.reset(new std::uint8_t[bytes]);
    q->mprq_buf = mprq.get();
    q->lkey = dev.reg_mr(q->mprq_buf, bytes);
  } else {
    elts.assign(o.wqe_cnt, nullptr);
    q->elts = elts.data();
  }
  must(rx_setup(*q, true).is_ok());
  RxBurstFn rx = rx_burst_function(o.striding ? RxMode::kStriding : RxMode::kCyclic, o.compression, true);

  std::unordered_set<Mbuf*> held;
  std::vector<Mbuf*> held_list;
  std::uint64_t received = 0;
  std::size_t at = 1;
  while (at < size) {
    const std::uint8_t ctl = data[at++];
    const unsigned k = ctl & 7;
    const bool fix_owner = ctl & 8;
    const auto burst = static_cast<std::uint16_t>((ctl >> 4) + 1);
    for (unsigned i = 0; i < k && at + kCqeSize <= size; ++i, at += kCqeSize) {
      const std::uint32_t ci = q->cq_ci + i;
      std::uint8_t* slot = q->cq.buf + std::size_t(ci & (kCqes - 1)) * kCqeSize;
      std::memcpy(slot, data + at, kCqeSize);
      if (fix_owner) slot[kCqeSize - 1] = static_cast<std::uint8_t>((slot[kCqeSize - 1] & ~1u) | ((ci / kCqes) & 1u));
    }
    Mbuf* pkts[16];
    const std::uint16_t n = rx(q.get(), pkts, burst);
    must(n <= burst);
    for (std::uint16_t i = 0; i < n; ++i) {
      Mbuf* m = pkts[i];
      must(m != nullptr);
      must(std::size_t(m->data_off) + m->data_len <= m->buf_len);
      must(m->port == 2);
      must(held.insert(m).second);  // never handed out twice
      if (!o.striding) must(std::find(elts.begin(), elts.end(), m) == elts.end());  // not still posted
      held_list.push_back(m);
    }
    received += n;
    if (held_list.size() > 256) {
      for (Mbuf* m : held_list) held.erase(m);
      mbuf_free_bulk(held_list.data(), static_cast<unsigned>(held_list.size()));
      held_list.clear();
    }
  }
  must(q->stats.rx_packets == received);
  mbuf_free_bulk(held_list.data(), static_cast<unsigned>(held_list.size()));
  rx_release(*q);
  must(pool->available() == pool->count());
  return 0;
}
