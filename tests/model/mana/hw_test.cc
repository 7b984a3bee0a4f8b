// Golden bytes for the MANA descriptors the driver writes and the model writes back, and the
// doorbell values in the order the device sees them.
#include <infiniband/manadv.h>

#include <gtest/gtest.h>

#include <array>
#include <cstring>
#include <vector>

#include "pmd/mana/hw.hh"
#include "tests/model/mana/harness.hh"

namespace rawpipe::mana {
namespace {

template <typename T>
std::vector<std::uint8_t> bytes_of(const T& v) {
  std::vector<std::uint8_t> b(sizeof v);
  std::memcpy(b.data(), &v, sizeof v);
  return b;
}

std::vector<std::uint8_t> le64(std::uint64_t v) { return bytes_of(v); }

// The public manadv structs the control path copies from, as measured in direct-verbs.md 3.1.
static_assert(sizeof(manadv_qp) == 32 && offsetof(manadv_qp, sq_id) == 16 && offsetof(manadv_qp, tx_vp_offset) == 20 &&
              offsetof(manadv_qp, db_page) == 24);
static_assert(sizeof(manadv_cq) == 16 && offsetof(manadv_cq, count) == 8 && offsetof(manadv_cq, cq_id) == 12);
static_assert(sizeof(manadv_rwq) == 32 && offsetof(manadv_rwq, wq_id) == 16 && offsetof(manadv_rwq, db_page) == 24);
static_assert(MANADV_OBJ_QP == 1 && MANADV_OBJ_CQ == 2 && MANADV_OBJ_RWQ == 4);

TEST(ManaHw, DoorbellValues) {
  // SQ 0x1600, head 3 BU: id in bits 0..23, byte offset 96 in the high dword.
  EXPECT_EQ(le64(sq_doorbell(0x1600, 3)), (std::vector<std::uint8_t>{0x00, 0x16, 0x00, 0x00, 0x60, 0x00, 0x00, 0x00}));
  // RQ 0x100, head 5 BU: wqe_cnt stays 0.
  EXPECT_EQ(le64(rq_doorbell(0x100, 5)), (std::vector<std::uint8_t>{0x00, 0x01, 0x00, 0x00, 0xa0, 0x00, 0x00, 0x00}));
  // Free-running: head 0x08000001 BU is byte offset 0x00000020 after the 32-bit wrap.
  EXPECT_EQ(rq_doorbell(0x100, 0x08000001u) >> 32, 0x20u);
  // CQ 0x41, tail 0x123, armed: arm is bit 63.
  EXPECT_EQ(le64(cq_doorbell(0x41, 0x123, true)), (std::vector<std::uint8_t>{0x41, 0x00, 0x00, 0x00, 0x23, 0x01, 0x00, 0x80}));
  EXPECT_EQ(kDoorbellSq, 0x000u);
  EXPECT_EQ(kDoorbellRq, 0x400u);
  EXPECT_EQ(kDoorbellCq, 0x800u);
  EXPECT_EQ(kDoorbellEq, 0xff8u);
}

// tail_ptr is a 32-bit byte offset: after 2^27 basic units it wraps while the driver's BU counter
// runs on (a long run reached it in under 30 s). The device side must follow the counter across
// the wrap, and a doorbell that goes backwards must still look like one (far ahead of the device).
TEST(ManaHw, DoorbellTailWrapsEvery2To27BasicUnits) {
  constexpr std::uint32_t kWrapBu = 1u << 27;
  for (std::uint32_t last : {0u, 100u, kWrapBu - 4, kWrapBu - 1, 5 * kWrapBu - 2, 0xffffffffu}) {
    for (std::uint32_t ahead : {0u, 1u, 2u, 16u, 512u}) {
      const std::uint32_t next = last + ahead;  // the driver's free-running BU counter
      const std::uint32_t tail = doorbell_tail(rq_doorbell(0x101, next));
      EXPECT_EQ(doorbell_bu(last, tail), next) << "last " << last << " ahead " << ahead;
    }
  }
  // Backwards by one BU: the counter it names is almost a whole wrap ahead.
  EXPECT_EQ(doorbell_bu(kWrapBu + 5, doorbell_tail(rq_doorbell(0x101, kWrapBu + 4))) - (kWrapBu + 5), kWrapBu - 1);
}

TEST(ManaHw, CqeOwnerDword) {
  // RQ 0x100, pass 0 writes owner 1: bits 29..31.
  EXPECT_EQ(bytes_of(cqe_wq_owner(0x100, false, 1)), (std::vector<std::uint8_t>{0x00, 0x01, 0x00, 0x20}));
  // SQ 0x1600, is_sq bit 24, owner 2.
  EXPECT_EQ(bytes_of(cqe_wq_owner(0x1600, true, 2)), (std::vector<std::uint8_t>{0x00, 0x16, 0x00, 0x41}));
  EXPECT_EQ(cqe_owner(0xe0000000u), 7u);
  EXPECT_EQ(bytes_of(cqe_header(kCqeRxCoalesced4)), (std::vector<std::uint8_t>{0x02, 0x00, 0x00, 0x00}));
  EXPECT_EQ(bytes_of(cqe_header(kCqeTxMtuDrop, 0xabcdef)), (std::vector<std::uint8_t>{0x22, 0xef, 0xcd, 0xab}));
}

TEST(ManaHw, TxShortOobFields) {
  // suppress + UDP checksum + outer IPv4, CQ 0x41; trans_off 34, VSQ frame 5, vPort offset 3.
  const std::uint32_t dw0 = tx_oob_dw0(tx_oob::kSuppressCqe | tx_oob::kCompUdpCsum | tx_oob::kOuterIpv4, 0x41);
  const std::uint32_t dw1 = tx_oob_dw1(34, 5, 3);
  EXPECT_EQ(bytes_of(dw0), (std::vector<std::uint8_t>{0xc4, 0x41, 0x00, 0x00}));
  EXPECT_EQ(bytes_of(dw1), (std::vector<std::uint8_t>{0x22, 0x14, 0x00, 0x03}));
  EXPECT_EQ(vsq_frame_of((5u << 10) | 0x200), 5u);
  EXPECT_EQ(bytes_of(dma_oob_flags(1, kSmallOobBytes)), (std::vector<std::uint8_t>{0x01, 0x02, 0x00, 0x00}));
  EXPECT_EQ(bytes_of(dma_oob_flags(3, kLargeOobBytes, 1448)), (std::vector<std::uint8_t>{0x03, 0x06, 0xa8, 0x05}));
}

TEST(ManaHw, WqesAsTheDriverWritesThem) {
  test::Harness h;
  // Receive WQE 0: DMA OOB {0, num_sge 1 | small OOB}, 8 zero bytes, SGE {data, lkey, room}.
  Mbuf* first = h.rx.bufs[0];
  std::vector<std::uint8_t> want = {0, 0, 0, 0, 0x01, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
  for (auto b : le64(reinterpret_cast<std::uintptr_t>(first->data()))) want.push_back(b);
  for (auto b : bytes_of(h.lkey)) want.push_back(b);
  for (auto b : bytes_of(std::uint32_t(first->buf_len - first->data_off))) want.push_back(b);
  EXPECT_EQ(std::vector<std::uint8_t>(h.rx.rq.buf, h.rx.rq.buf + 32), want);

  // A burst of two sends: the first WQE suppresses its CQE, the last does not.
  Mbuf* pkts[2];
  ASSERT_TRUE(h.pool->alloc_bulk(pkts, 2));
  for (Mbuf* m : pkts) m->data_len = 60;
  ASSERT_EQ(h.tx_burst(pkts, 2), 2);
  const std::uint32_t cq = h.tx_cq_id;
  const std::uint8_t* w0 = h.tx.sq.buf;
  const std::uint8_t* w1 = h.tx.sq.buf + 32;
  std::vector<std::uint8_t> oob0 = {0x80, std::uint8_t(cq), std::uint8_t(cq >> 8), std::uint8_t(cq >> 16),
                                    0x00, 0x14, 0x00, 0x03};
  std::vector<std::uint8_t> oob1 = oob0;
  oob1[0] = 0x00;
  EXPECT_EQ(std::vector<std::uint8_t>(w0, w0 + 8), (std::vector<std::uint8_t>{0, 0, 0, 0, 0x01, 0x02, 0, 0}));
  EXPECT_EQ(std::vector<std::uint8_t>(w0 + 8, w0 + 16), oob0);
  EXPECT_EQ(std::vector<std::uint8_t>(w1 + 8, w1 + 16), oob1);
  std::vector<std::uint8_t> sge1 = le64(reinterpret_cast<std::uintptr_t>(pkts[1]->data()));
  for (auto b : bytes_of(h.lkey)) sge1.push_back(b);
  for (auto b : bytes_of(std::uint32_t(60))) sge1.push_back(b);
  EXPECT_EQ(std::vector<std::uint8_t>(w1 + 16, w1 + 32), sge1);
  EXPECT_TRUE(h.model.violations(h.sq_id).empty());
  // Drain: one CQE retires both.
  EXPECT_EQ(tx_reap(h.tx), 2u);
  h.release();
  EXPECT_EQ(h.pool->available(), h.pool->count());
}

TEST(ManaHw, ModelCqeBytesForACoalescedReceive) {
  test::HarnessConfig c;
  c.model.coalesce = 4;
  test::Harness h(c);
  auto a = test::udp_frame(1), b = test::udp_frame(2);
  std::span<const std::uint8_t> frames[] = {a, b};
  ASSERT_EQ(h.model.receive(h.rq_id, frames), 2u);
  const auto* raw = reinterpret_cast<const std::uint8_t*>(h.rx.cq.buf);
  // Header: type 2 (coalesced). Packet lengths at 8 and 20, then a zero length ends the list.
  EXPECT_EQ(std::vector<std::uint8_t>(raw, raw + 4), (std::vector<std::uint8_t>{0x02, 0, 0, 0}));
  std::uint32_t len0, len1, len2;
  std::memcpy(&len0, raw + 8, 4);
  std::memcpy(&len1, raw + 20, 4);
  std::memcpy(&len2, raw + 32, 4);
  EXPECT_EQ(len0, a.size());
  EXPECT_EQ(len1, b.size());
  EXPECT_EQ(len2, 0u);
  // Flags: IP checksum ok (bit 25), UDP checksum ok (bit 29), NDIS UDP/IPv4 hash type (bit 2 of 16..24).
  std::uint32_t flags;
  std::memcpy(&flags, raw + 4, 4);
  EXPECT_EQ(flags, rx_flag::kIpCsumOk | rx_flag::kUdpCsumOk | (ndis_hash::kUdpIpv4 << rx_flag::kHashTypeShift));
  // Owner dword last: RQ id, is_sq 0, owner 1.
  EXPECT_EQ(std::vector<std::uint8_t>(raw + 60, raw + 64),
            (std::vector<std::uint8_t>{std::uint8_t(h.rq_id), std::uint8_t(h.rq_id >> 8), 0x00, 0x20}));
  h.release();
}

// The doorbells the device sees, in order, with their values.
TEST(ManaHw, DoorbellSequence) {
  struct Log {
    ManaModel* model;
    std::vector<std::pair<std::size_t, std::uint64_t>> writes;
  };
  test::HarnessConfig c;
  c.rx_wqes = 8;
  c.rx_cq = 8;
  test::Harness h(c);
  Log log{&h.model, {}};
  rdma::DoorbellSink spy;
  spy.ctx = &log;
  spy.mmio64 = [](void* ctx, void* base, std::size_t off, std::uint64_t v) noexcept {
    auto* l = static_cast<Log*>(ctx);
    l->writes.emplace_back(off, v);
    l->model->doorbell_sink()->mmio64(l->model->doorbell_sink()->ctx, base, off, v);
  };
  h.rx.db_sink = &spy;
  h.tx.db_sink = &spy;
  auto f = test::udp_frame(9);
  ASSERT_EQ(h.model.receive_one(h.rq_id, f.data(), static_cast<std::uint32_t>(f.size())), 1u);
  Mbuf* got[4];
  ASSERT_EQ(h.rx_burst(got, 4), 1);
  ASSERT_EQ(h.tx_burst(got, 1), 1);
  ASSERT_EQ(log.writes.size(), 2u);
  // Refill of the one consumed WQE: RQ head 9 BU = byte 288.
  EXPECT_EQ(log.writes[0].first, kDoorbellRq);
  EXPECT_EQ(log.writes[0].second, (std::uint64_t(288) << 32) | h.rq_id);
  EXPECT_EQ(log.writes[1].first, kDoorbellSq);
  EXPECT_EQ(log.writes[1].second, (std::uint64_t(32) << 32) | h.sq_id);
  EXPECT_EQ(h.model.stats(h.sq_id).tx_frames, 1u);
  tx_reap(h.tx);
  h.release();
  EXPECT_EQ(h.pool->available(), h.pool->count());
}

}  // namespace
}  // namespace rawpipe::mana
