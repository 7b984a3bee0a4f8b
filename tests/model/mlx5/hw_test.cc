// Golden bytes for every WQE and CQE kind the mlx5 data path and model produce, compared with
// rdma-core's own inline helpers where they exist (mlx5dv_set_ctrl_seg, mlx5dv_set_data_seg,
// mlx5dv_get_cqe_*) and with hand-checked vectors elsewhere.
#include <infiniband/mlx5dv.h>

#include <gtest/gtest.h>

#include <cstring>

#include "tests/model/mlx5/harness.hh"

namespace rawpipe::mlx5::testing {
namespace {

std::vector<std::uint8_t> bytes(const void* p, std::size_t n) {
  auto* b = static_cast<const std::uint8_t*>(p);
  return {b, b + n};
}

struct TxFixture {
  Harness h{16};
  Mbuf* m = nullptr;
  std::vector<std::uint8_t> frame;
  TxFixture() {
    m = h.pool->alloc();
    frame = seq_frame(0x01020304, 40);
    std::memcpy(m->data(), frame.data(), frame.size());
    m->data_len = static_cast<std::uint32_t>(frame.size());
  }
  ~TxFixture() { mbuf_free(m); }
};

TEST(Mlx5Golden, SendWqeWithInlineHeaderMatchesRdmaCoreHelpers) {
  TxFixture f;
  alignas(64) std::uint8_t wqe[64];
  std::memset(wqe, 0xee, sizeof(wqe));
  build_send_wqe(wqe, 0x1234, 0xabcde, 0x5566, 18, true, f.m);

  alignas(64) std::uint8_t ref[64] = {};
  mlx5dv_set_ctrl_seg(reinterpret_cast<mlx5_wqe_ctrl_seg*>(ref), 0x1234, MLX5_OPCODE_SEND, 0, 0xabcde,
                      MLX5_WQE_CTRL_CQ_UPDATE, 4, 0, 0);
  // mlx5dv_set_ctrl_seg leaves dci_stream_channel_id alone; rawpipe zeroes it.
  EXPECT_EQ(bytes(wqe, 16), bytes(ref, 16));
  const std::vector<std::uint8_t> ctrl = {0x00, 0x12, 0x34, 0x0a, 0x0a, 0xbc, 0xde, 0x04,
                                          0x00, 0x00, 0x00, 0x08, 0x00, 0x00, 0x00, 0x00};
  EXPECT_EQ(bytes(wqe, 16), ctrl);

  // Eth segment: no checksum flags, inline_hdr_sz = 18 (BE), the first 18 frame bytes at +14.
  std::vector<std::uint8_t> eth(32, 0);
  eth[13] = 18;
  std::memcpy(eth.data() + 14, f.frame.data(), 18);
  EXPECT_EQ(bytes(wqe + 16, 32), eth);

  mlx5dv_set_data_seg(reinterpret_cast<mlx5_wqe_data_seg*>(ref + 48), static_cast<std::uint32_t>(f.frame.size() - 18), 0x5566,
                      reinterpret_cast<std::uintptr_t>(f.m->data() + 18));
  EXPECT_EQ(bytes(wqe + 48, 16), bytes(ref + 48, 16));
}

// L3 inline mode: 58 header bytes inline (2 in the eth segment, 56 after it, padded to 64), so
// ctrl + 5 eth DS + 1 data DS = 7 DS in two WQEBBs; the data segment starts at byte 96.
TEST(Mlx5Golden, SendWqeWithAnL3InlineHeaderSpansTwoWqebbs) {
  TxFixture f;
  alignas(64) std::uint8_t wqe[128];
  std::memset(wqe, 0xee, sizeof(wqe));
  build_send_wqe(wqe, 7, 0x42, 0x5566, kInlineL3, false, f.m);
  EXPECT_EQ(bytes(wqe + 4, 4), (std::vector<std::uint8_t>{0x00, 0x00, 0x42, 0x07})) << "qpn 0x42, ds 7";
  EXPECT_EQ(bytes(wqe + 16 + 12, 2), (std::vector<std::uint8_t>{0x00, 58})) << "inline_hdr_sz";
  EXPECT_EQ(bytes(wqe + 30, 58), std::vector<std::uint8_t>(f.frame.begin(), f.frame.begin() + 58));
  alignas(16) std::uint8_t ref[16];
  mlx5dv_set_data_seg(reinterpret_cast<mlx5_wqe_data_seg*>(ref), static_cast<std::uint32_t>(f.frame.size() - 58), 0x5566,
                      reinterpret_cast<std::uintptr_t>(f.m->data() + 58));
  EXPECT_EQ(bytes(wqe + 96, 16), bytes(ref, 16));
}

TEST(Mlx5Golden, SendWqeWithoutInlineHeaderIsThreeDs) {
  TxFixture f;
  f.m->tx_flags = tx_flag::kL3Csum | tx_flag::kL4Csum;
  alignas(64) std::uint8_t wqe[64] = {};
  build_send_wqe(wqe, 0xffff, 7, 9, 0, false, f.m);
  alignas(64) std::uint8_t ref[64] = {};
  mlx5dv_set_ctrl_seg(reinterpret_cast<mlx5_wqe_ctrl_seg*>(ref), 0xffff, MLX5_OPCODE_SEND, 0, 7, 0, 3, 0, 0);
  EXPECT_EQ(bytes(wqe, 16), bytes(ref, 16));
  std::vector<std::uint8_t> eth(16, 0);
  eth[4] = MLX5_ETH_WQE_L3_CSUM | MLX5_ETH_WQE_L4_CSUM;
  EXPECT_EQ(bytes(wqe + 16, 16), eth);
  mlx5dv_set_data_seg(reinterpret_cast<mlx5_wqe_data_seg*>(ref + 32), static_cast<std::uint32_t>(f.frame.size()), 9,
                      reinterpret_cast<std::uintptr_t>(f.m->data()));
  EXPECT_EQ(bytes(wqe + 32, 16), bytes(ref + 32, 16));
}

TEST(Mlx5Golden, DummySendIsANopWithTheSameLayout) {
  TxFixture f;
  f.m->tx_flags = tx_flag::kDummy;
  alignas(64) std::uint8_t wqe[64] = {};
  build_send_wqe(wqe, 3, 0x10, 1, 18, false, f.m);
  alignas(64) std::uint8_t ref[16] = {};
  mlx5dv_set_ctrl_seg(reinterpret_cast<mlx5_wqe_ctrl_seg*>(ref), 3, MLX5_OPCODE_NOP, 0, 0x10, 0, 4, 0, 0);
  EXPECT_EQ(bytes(wqe, 16), bytes(ref, 16));
}

TEST(Mlx5Golden, ReceiveWqesAsTheDeviceReadsThem) {
  Harness h(64);
  h.make_rx(model::RqOptions{.wqe_cnt = 4, .cqe_cnt = 4});
  for (std::uint32_t s = 0; s < 4; ++s) {
    alignas(16) std::uint8_t ref[16];
    mlx5dv_set_data_seg(reinterpret_cast<mlx5_wqe_data_seg*>(ref), h.pool->data_room(), h.rxq->lkey,
                        reinterpret_cast<std::uintptr_t>(h.rx_elts[s]->data()));
    EXPECT_EQ(bytes(h.rxq->rq.buf + s * 16, 16), bytes(ref, 16)) << s;
  }
  // The RQ doorbell record holds 4 posted WQEs, big-endian.
  EXPECT_EQ(bytes(h.rxq->rq.dbrec, 4), (std::vector<std::uint8_t>{0, 0, 0, 4}));
}

TEST(Mlx5Golden, StridingWqeIsNextSegmentThenOneDataSegment) {
  Harness h(64);
  h.make_rx(model::RqOptions{.wqe_cnt = 4, .cqe_cnt = 64, .striding = true, .log_stride_size = 6, .log_strides = 4});
  ASSERT_EQ(h.rxq->rq.stride, 32u);
  const std::uint8_t* w = h.rxq->rq.buf + 32;
  EXPECT_EQ(bytes(w, 16), std::vector<std::uint8_t>(16, 0));
  alignas(16) std::uint8_t ref[16];
  mlx5dv_set_data_seg(reinterpret_cast<mlx5_wqe_data_seg*>(ref), 64 * 16, h.rxq->lkey,
                      reinterpret_cast<std::uintptr_t>(h.rxq->mprq_buf + 64 * 16));
  EXPECT_EQ(bytes(w + 16, 16), bytes(ref, 16));
}

TEST(Mlx5Golden, ReceiveCqeFieldsAreBigEndianWithOwnerLast) {
  Harness h(64);
  h.make_rx(model::RqOptions{.wqe_cnt = 4, .cqe_cnt = 4}, false);
  auto rule = parse_match_rule("udp dst 10.0.0.2:5000");
  ASSERT_TRUE(rule);
  FlowTarget t;
  t.port_mac = kPortMac;
  for (auto& a : build_flow_attrs(rule.value(), 0xabcdef, t)) h.dev.create_flow(h.rq_id, flow_attr(a));
  // The CQ starts the way rdma-core initialises it.
  for (int i = 0; i < 4; ++i) EXPECT_EQ(h.rxq->cq.buf[i * 64 + 63], 0xf0);
  const auto frame = seq_frame(1, 100);
  ASSERT_EQ(h.dev.receive(frame), model::Device::Rx::kDelivered);
  auto* cqe = reinterpret_cast<mlx5_cqe64*>(h.rxq->cq.buf);
  EXPECT_EQ(mlx5dv_get_cqe_opcode(cqe), MLX5_CQE_RESP_SEND);
  EXPECT_EQ(mlx5dv_get_cqe_owner(cqe), 0);
  EXPECT_EQ(mlx5dv_get_cqe_format(cqe), 0);
  EXPECT_EQ(bytes(&cqe->byte_cnt, 4), (std::vector<std::uint8_t>{0, 0, 0, static_cast<std::uint8_t>(frame.size())}));
  EXPECT_EQ(bytes(&cqe->sop_drop_qpn, 4), (std::vector<std::uint8_t>{0x00, 0xab, 0xcd, 0xef}));
  EXPECT_EQ(bytes(&cqe->wqe_counter, 2), (std::vector<std::uint8_t>{0, 0}));
  EXPECT_EQ(cqe->hds_ip_ext, MLX5_CQE_L2_OK | MLX5_CQE_L3_OK | MLX5_CQE_L4_OK);
  EXPECT_EQ(cqe->l4_hdr_type_etc, 0x28) << "L3 IPv4 (2<<2), L4 UDP (2<<4)";
  // The second pass writes owner 1 into slot 0.
  for (int i = 0; i < 3; ++i) ASSERT_EQ(h.dev.receive(frame), model::Device::Rx::kDelivered);
  Mbuf* pkts[4];
  ASSERT_EQ(h.rx_burst(pkts, 4), 4);
  mbuf_free_bulk(pkts, 4);
  ASSERT_EQ(h.dev.receive(frame), model::Device::Rx::kDelivered);
  EXPECT_EQ(mlx5dv_get_cqe_owner(cqe), 1);
  EXPECT_EQ(bytes(&cqe->wqe_counter, 2), (std::vector<std::uint8_t>{0, 4}));
  EXPECT_EQ(bytes(h.rxq->cq.dbrec, 4), (std::vector<std::uint8_t>{0, 0, 0, 4})) << "CQ doorbell record, BE";
  EXPECT_EQ(bytes(h.rxq->rq.dbrec, 4), (std::vector<std::uint8_t>{0, 0, 0, 8})) << "RQ doorbell record, BE";
  ASSERT_EQ(h.rx_burst(pkts, 4), 1);
  mbuf_free(pkts[0]);
}

TEST(Mlx5Golden, ErrorCqeCarriesSyndromeAndWqeCounter) {
  Harness h(64);
  h.make_rx(model::RqOptions{.wqe_cnt = 4, .cqe_cnt = 8});
  h.dev.fail_next_rx(h.rq_id, MLX5_CQE_SYNDROME_LOCAL_PROT_ERR);
  ASSERT_EQ(h.dev.receive(seq_frame(1)), model::Device::Rx::kErrorCqe);
  auto* e = reinterpret_cast<mlx5_err_cqe*>(h.rxq->cq.buf);
  EXPECT_EQ(mlx5dv_get_cqe_opcode(reinterpret_cast<mlx5_cqe64*>(e)), MLX5_CQE_RESP_ERR);
  EXPECT_EQ(e->syndrome, MLX5_CQE_SYNDROME_LOCAL_PROT_ERR);
  auto* flush = reinterpret_cast<mlx5_err_cqe*>(h.rxq->cq.buf + 64);
  EXPECT_EQ(flush->syndrome, MLX5_CQE_SYNDROME_WR_FLUSH_ERR);
  EXPECT_EQ(bytes(&flush->wqe_counter, 2), (std::vector<std::uint8_t>{0, 1}));
}

TEST(Mlx5Golden, CompressedSessionTitleAndMiniArrays) {
  Harness h(64);
  h.make_rx(model::RqOptions{.wqe_cnt = 16, .cqe_cnt = 16, .compression = true});
  std::vector<std::vector<std::uint8_t>> frames;
  for (std::uint32_t i = 0; i < 10; ++i) frames.push_back(seq_frame(i, static_cast<std::uint16_t>(20 + i)));
  ASSERT_EQ(h.dev.receive_burst(frames), 10u);
  auto* title = reinterpret_cast<mlx5_cqe64*>(h.rxq->cq.buf);
  EXPECT_EQ(mlx5dv_get_cqe_format(title), 3) << "compressed";
  EXPECT_EQ(mlx5dv_get_cqe_opcode(title), MLX5_CQE_RESP_SEND);
  EXPECT_EQ(bytes(&title->byte_cnt, 4), (std::vector<std::uint8_t>{0, 0, 0, 10})) << "mini count";
  // Minis 0..7 in slot 1, minis 8..9 in slot 8; byte_cnt at +4 of each 8-byte mini, BE.
  for (std::uint32_t i = 0; i < 10; ++i) {
    const std::uint8_t* mini = h.rxq->cq.buf + (i < 8 ? 64 : 8 * 64) + (i & 7) * 8;
    const auto len = static_cast<std::uint8_t>(frames[i].size());
    EXPECT_EQ(bytes(mini + 4, 4), (std::vector<std::uint8_t>{0, 0, 0, len})) << i;
  }
  EXPECT_EQ(h.rxq->cq.buf[2 * 64 + 63], 0xf0) << "slot 2 is a hole the device leaves untouched";
  Mbuf* pkts[16];
  ASSERT_EQ(h.rx_burst(pkts, 16), 10);
  for (std::uint32_t i = 0; i < 10; ++i) EXPECT_EQ(seq_of(pkts[i]), i);
  mbuf_free_bulk(pkts, 10);
  for (int s = 0; s < 10; ++s) EXPECT_EQ(h.rxq->cq.buf[s * 64 + 63], 0xf0) << "consumed slot " << s << " invalidated";
}

TEST(Mlx5Golden, StridingCqeAndFiller) {
  Harness h(64);
  h.make_rx(model::RqOptions{.wqe_cnt = 4, .cqe_cnt = 64, .striding = true, .log_stride_size = 6, .log_strides = 2});
  // 4 strides of 64 bytes per WQE: a 150-byte frame takes 3, the next 150-byte frame does not fit
  // in the remaining one, so a filler consumes it.
  const auto f = seq_frame(1, 150 - 42);
  ASSERT_EQ(f.size(), 150u);
  ASSERT_EQ(h.dev.receive(f), model::Device::Rx::kDelivered);
  ASSERT_EQ(h.dev.receive(f), model::Device::Rx::kDelivered);
  auto* c0 = reinterpret_cast<mlx5_cqe64*>(h.rxq->cq.buf);
  auto* c1 = reinterpret_cast<mlx5_cqe64*>(h.rxq->cq.buf + 64);
  auto* c2 = reinterpret_cast<mlx5_cqe64*>(h.rxq->cq.buf + 128);
  EXPECT_EQ(bytes(&c0->byte_cnt, 4), (std::vector<std::uint8_t>{0x00, 0x03, 0x00, 150})) << "3 strides, 150 bytes";
  EXPECT_EQ(bytes(&c1->byte_cnt, 4), (std::vector<std::uint8_t>{0x80, 0x01, 0x00, 0x00})) << "filler of 1 stride";
  EXPECT_EQ(bytes(&c1->wqe_counter, 2), (std::vector<std::uint8_t>{0, 3})) << "first stride index";
  EXPECT_EQ(bytes(&c2->wqe_id, 2), (std::vector<std::uint8_t>{0, 1})) << "second WQE";
  Mbuf* pkts[4];
  ASSERT_EQ(h.rx_burst(pkts, 4), 2);
  EXPECT_EQ(h.rxq->filler_cqes, 1u);
  mbuf_free_bulk(pkts, 2);
}

TEST(Mlx5Golden, TransmitCompletionAndDoorbellRecord) {
  Harness h(64);
  h.make_tx(model::SqOptions{.wqe_cnt = 16, .cqe_cnt = 16}, 2);
  std::vector<Mbuf*> pk;
  for (int i = 0; i < 3; ++i) {
    Mbuf* m = h.pool->alloc();
    auto f = seq_frame(static_cast<std::uint32_t>(i));
    std::memcpy(m->data(), f.data(), f.size());
    m->data_len = static_cast<std::uint32_t>(f.size());
    pk.push_back(m);
  }
  ASSERT_EQ(h.tx_burst(pk.data(), 3), 3);
  EXPECT_EQ(bytes(h.txq->sq.dbrec, 4), (std::vector<std::uint8_t>{0, 0, 0, 3})) << "SQ record: 3 WQEBBs, BE";
  auto* c = reinterpret_cast<mlx5_cqe64*>(h.txq->cq.buf);
  EXPECT_EQ(mlx5dv_get_cqe_opcode(c), MLX5_CQE_REQ);
  EXPECT_EQ(bytes(&c->wqe_counter, 2), (std::vector<std::uint8_t>{0, 1})) << "the second WQE asked for a completion";
  EXPECT_EQ(h.dev.counters().tx_cqes, 1u);
  EXPECT_EQ(h.dev.counters().uar_writes, 1u);
}

// What the model rejects as a NIC would: a send WQE whose DS count cannot hold the eth segment
// with its 18-byte inline header, and doorbell records that go backwards.
TEST(Mlx5Golden, ModelRejectsAShortDsCountAndBackwardRecords) {
  Harness h(64);
  h.make_tx(model::SqOptions{.wqe_cnt = 16, .cqe_cnt = 16}, 1);
  Mbuf* m = h.pool->alloc();
  const auto f = seq_frame(1);
  std::memcpy(m->data(), f.data(), f.size());
  m->data_len = static_cast<std::uint32_t>(f.size());
  build_send_wqe(h.txq->sq.buf, 0, h.txq->sq.qpn, h.txq->lkey, 18, true, m);
  auto* ctrl = reinterpret_cast<mlx5_wqe_ctrl_seg*>(h.txq->sq.buf);
  ctrl->qpn_ds = be32(h.txq->sq.qpn << 8 | 2);  // ctrl + half of the eth segment
  std::atomic_ref<std::uint32_t>(h.txq->sq.dbrec[0]).store(be32(1), std::memory_order_release);
  h.dev.process_tx();
  auto* c = reinterpret_cast<mlx5_cqe64*>(h.txq->cq.buf);
  EXPECT_EQ(mlx5dv_get_cqe_opcode(c), MLX5_CQE_REQ_ERR);
  EXPECT_EQ(reinterpret_cast<mlx5_err_cqe*>(c)->syndrome, MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR);
  EXPECT_EQ(h.dev.counters().tx_frames, 0u);
  EXPECT_TRUE(h.dev.reset_sq(0));
  // A send record moved backwards (the model consumed 0; the record says 0xfff0).
  std::atomic_ref<std::uint32_t>(h.txq->sq.dbrec[0]).store(be32(0xfff0), std::memory_order_release);
  h.dev.process_tx();
  EXPECT_EQ(h.dev.counters().record_errors, 1u);
  EXPECT_EQ(h.dev.counters().tx_error_cqes, 2u);
  mbuf_free(m);

  h.make_rx(model::RqOptions{.wqe_cnt = 8, .cqe_cnt = 8});
  std::atomic_ref<std::uint32_t>(*h.rxq->rq.dbrec).store(be32(0xfffc), std::memory_order_release);
  EXPECT_EQ(h.dev.receive(seq_frame(2)), model::Device::Rx::kNoWqe);
  EXPECT_EQ(h.dev.counters().record_errors, 2u);
  std::atomic_ref<std::uint32_t>(*h.rxq->rq.dbrec).store(be32(8), std::memory_order_release);
  EXPECT_EQ(h.dev.receive(seq_frame(3)), model::Device::Rx::kDelivered);
}

}  // namespace
}  // namespace rawpipe::mlx5::testing
