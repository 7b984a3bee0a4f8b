// The mlx5 receive and transmit data path against the device model: exact counts and payloads,
// every counter wrap on tiny rings, compressed sessions, striding RQ, error CQEs with recovery,
// and the model on its own thread.
#include <gtest/gtest.h>

#include <cstring>

#include "pipeline/parse/parse.hh"
#include "tests/model/mlx5/harness.hh"

namespace rawpipe::mlx5::testing {
namespace {

using model::RqOptions;
using model::SqOptions;

// Injects frames as the queue's ring allows and drains with rx_burst until every frame arrived.
// Each received buffer is checked against the frame of the same position (bytes and length),
// handed to `each` and freed. Returns how many arrived.
template <typename Each>
std::size_t pump(Harness& h, const std::vector<std::vector<std::uint8_t>>& frames, bool burst_inject,
                 std::uint16_t burst, Each&& each) {
  std::size_t got = 0, next = 0;
  int idle = 0;
  std::size_t round = 0;
  while (got < frames.size() && idle < 1000) {
    if (next < frames.size()) {
      if (burst_inject) {
        // Uneven arrivals: sometimes the driver catches up with the device and polls slots the
        // device has not written in this pass (where a stale hole would show).
        const std::size_t chunk = 1 + (++round * 7) % 23;
        next += h.dev.receive_burst(std::span(frames).subspan(next, std::min(frames.size() - next, chunk)), true);
      } else {
        while (next < frames.size() && h.dev.receive(frames[next]) == model::Device::Rx::kDelivered) ++next;
      }
    }
    Mbuf* pkts[256];
    const std::uint16_t n = h.rx_burst(pkts, burst);
    for (std::uint16_t i = 0; i < n; ++i) {
      const auto& f = frames[got + i];
      EXPECT_EQ(pkts[i]->data_len, f.size()) << got + i;
      EXPECT_EQ(std::memcmp(pkts[i]->data(), f.data(), std::min<std::size_t>(f.size(), pkts[i]->data_len)), 0) << got + i;
      each(pkts[i], got + i);
    }
    mbuf_free_bulk(pkts, n);
    got += n;
    idle = n ? 0 : idle + 1;
  }
  if (got != frames.size()) {
    auto c = h.dev.counters();
    ADD_FAILURE() << "stalled: next " << next << " got " << got << " cq_ci " << h.rxq->cq_ci << " rq_ci "
                  << h.rxq->rq_ci << " zip.left " << h.rxq->zip.left << " delivered " << c.rx_delivered << " no_wqe "
                  << c.rx_no_wqe << " cq_full " << c.rx_cq_full << " sessions " << c.sessions << " fillers "
                  << c.fillers << " nombuf " << h.rxq->stats.rx_nombuf;
  }
  return got;
}

TEST(Mlx5Rx, EndToEndExactCountsPayloadsAndMetadata) {
  Harness h;
  h.make_rx(RqOptions{.wqe_cnt = 256, .cqe_cnt = 256});
  std::vector<std::vector<std::uint8_t>> frames;
  for (std::uint32_t i = 0; i < 3000; ++i) frames.push_back(seq_frame(i, static_cast<std::uint16_t>(18 + i % 1400)));
  const std::size_t got = pump(h, frames, false, 32, [](Mbuf* m, std::size_t i) {
    parse_burst(&m, 1);
    EXPECT_EQ(m->drop_reason, 0);
    EXPECT_EQ(m->l4_proto, 17);
    EXPECT_EQ(m->payload_len, 18 + i % 1400);
    EXPECT_EQ(seq_of(m), i);
    EXPECT_EQ(m->port, 3);
    EXPECT_TRUE(m->flags & pkt_flag::kL3CsumGood);
    EXPECT_TRUE(m->flags & pkt_flag::kL4CsumGood);
  });
  EXPECT_EQ(got, 3000u);
  EXPECT_EQ(h.rxq->stats.rx_packets, 3000u);
  EXPECT_EQ(h.dev.counters().rx_delivered, 3000u);
  h.release();
  EXPECT_EQ(h.pool->available(), h.pool->count()) << "every buffer returns";
}

// The CQE's L3_OK/L4_OK bits say "verified good"; a clear bit can also mean "not checked" (IP
// options, fragments, tunnels), so like DPDK's rxq_cq_to_ol_flags (drivers/net/mlx5/mlx5_rx.c)
// the port reports good or not verified, never bad: software decides.
TEST(Mlx5Rx, ChecksumsAreGoodOrNotVerifiedNeverBad) {
  Harness h;
  h.make_rx(RqOptions{.wqe_cnt = 16, .cqe_cnt = 16});
  auto f = rawpipe::testing::udp4_frame(wire::ipv4(10, 0, 0, 1), wire::ipv4(10, 0, 0, 2), 1, 2, 30);
  f[14 + 10] ^= 0x55;  // IPv4 header checksum
  auto g = rawpipe::testing::udp4_frame(wire::ipv4(10, 0, 0, 1), wire::ipv4(10, 0, 0, 2), 1, 2, 30);
  g[14 + 20 + 6] ^= 0x01;  // UDP checksum
  ASSERT_EQ(h.dev.receive(f), model::Device::Rx::kDelivered);
  ASSERT_EQ(h.dev.receive(g), model::Device::Rx::kDelivered);
  Mbuf* pkts[4];
  ASSERT_EQ(h.rx_burst(pkts, 4), 2);
  for (Mbuf* m : {pkts[0], pkts[1]})
    EXPECT_FALSE(m->flags & (pkt_flag::kL3CsumBad | pkt_flag::kL4CsumBad)) << "an mlx5 CQE never proves a bad checksum";
  EXPECT_FALSE(pkts[0]->flags & pkt_flag::kL3CsumGood);
  EXPECT_TRUE(pkts[1]->flags & pkt_flag::kL3CsumGood);
  EXPECT_FALSE(pkts[1]->flags & pkt_flag::kL4CsumGood);
  mbuf_free_bulk(pkts, 2);
}

// Each received frame's RQ slot gets a replacement before the frame is handed on, from buffers
// the queue takes ahead. It may take one burst's worth, no more: the pool's other queues need the
// rest (a pool is sized for its rings plus a burst per queue), and DPDK's mlx5_rx_burst holds none.
TEST(Mlx5Rx, AQueueTakesAheadNoMoreThanTheBurstAskedFor) {
  Harness h(256 + 64);
  h.make_rx(RqOptions{.wqe_cnt = 256, .cqe_cnt = 256});
  ASSERT_EQ(h.pool->available(), 64u);
  Mbuf* pkts[32];
  ASSERT_EQ(h.rx_burst(pkts, 32), 0);
  EXPECT_EQ(h.pool->available(), 32u) << "an empty poll of 32 readies 32 replacements and leaves the rest";
  for (std::uint32_t i = 0; i < 10; ++i) ASSERT_EQ(h.dev.receive(seq_frame(i)), model::Device::Rx::kDelivered);
  ASSERT_EQ(h.rx_burst(pkts, 32), 10);
  mbuf_free_bulk(pkts, 10);
  EXPECT_EQ(h.pool->available(), 42u);
  ASSERT_EQ(h.rx_burst(pkts, 8), 0);
  EXPECT_EQ(h.pool->available(), 42u) << "a smaller burst takes nothing while 22 are ready";
  ASSERT_EQ(h.rx_burst(pkts, 32), 0);
  EXPECT_EQ(h.pool->available(), 32u) << "the next burst of 32 tops the 22 up to 32";
}

// A pool with fewer spare buffers than a burst still gives the queue every one of them.
TEST(Mlx5Rx, ANearlyEmptyPoolLendsEveryBufferItHas) {
  Harness h(256 + 5);
  h.make_rx(RqOptions{.wqe_cnt = 256, .cqe_cnt = 256});
  for (std::uint32_t i = 0; i < 5; ++i) ASSERT_EQ(h.dev.receive(seq_frame(i)), model::Device::Rx::kDelivered);
  Mbuf* pkts[32];
  ASSERT_EQ(h.rx_burst(pkts, 32), 5);
  EXPECT_EQ(h.rxq->stats.rx_nombuf, 0u);
  for (std::uint32_t i = 0; i < 5; ++i) EXPECT_EQ(seq_of(pkts[i]), i);
  mbuf_free_bulk(pkts, 5);
  ASSERT_EQ(h.dev.receive(seq_frame(5)), model::Device::Rx::kDelivered);
  ASSERT_EQ(h.rx_burst(pkts, 32), 1);
  mbuf_free_bulk(pkts, 1);
  h.release();
  EXPECT_EQ(h.pool->available(), h.pool->count());
}

TEST(Mlx5Rx, TinyRingsWrapEveryCounter) {
  // 70000 WQEs through an 8-entry RQ and CQ: the 16-bit WQE counter and the CQ parity wrap many
  // times (the 24-bit CQ index wraps after 2^24; see CqIndexWrapsAt24Bits).
  Harness h(256);
  h.make_rx(RqOptions{.wqe_cnt = 8, .cqe_cnt = 8});
  std::vector<std::vector<std::uint8_t>> frames;
  for (std::uint32_t i = 0; i < 70000; ++i) frames.push_back(seq_frame(i));
  std::size_t next = 0, got = 0;
  while (got < frames.size()) {
    while (next < frames.size() && h.dev.receive(frames[next]) == model::Device::Rx::kDelivered) ++next;
    Mbuf* pkts[8];
    const std::uint16_t n = h.rx_burst(pkts, 8);
    for (std::uint16_t i = 0; i < n; ++i) ASSERT_EQ(seq_of(pkts[i]), got + i);
    got += n;
    mbuf_free_bulk(pkts, n);
    ASSERT_TRUE(n || next < frames.size() || got == frames.size());
  }
  EXPECT_EQ(h.rxq->rq_ci, 70000u);
  EXPECT_EQ(h.dev.counters().rx_delivered, 70000u);
}

TEST(Mlx5Rx, CqIndexWrapsAt24Bits) {
  // 2^24 + 1000 CQEs through an 8-entry CQ: the consumer index the driver publishes in the CQ
  // doorbell record wraps its 24 bits, and the model's room check must follow it.
  Harness h(256);
  h.make_rx(RqOptions{.wqe_cnt = 8, .cqe_cnt = 8});
  const auto frame = seq_frame(5);
  constexpr std::uint32_t kTotal = (1u << 24) + 1000;
  std::uint32_t got = 0;
  bool saw_wrap = false;
  while (got < kTotal) {
    for (int i = 0; i < 8 && h.dev.receive(frame) == model::Device::Rx::kDelivered; ++i) {
    }
    Mbuf* pkts[8];
    const std::uint16_t n = h.rx_burst(pkts, 8);
    ASSERT_GT(n, 0);
    got += n;
    mbuf_free_bulk(pkts, n);
    if (be32(*h.rxq->cq.dbrec) < 16 && got > 16) saw_wrap = true;
  }
  EXPECT_TRUE(saw_wrap) << "the CQ doorbell record went through 0xffffff -> 0";
  EXPECT_EQ(be32(*h.rxq->cq.dbrec), h.rxq->cq_ci & kCqCiMask);
  EXPECT_GE(h.rxq->cq_ci, 1u << 24);
  const auto c = h.dev.counters();
  EXPECT_EQ(c.rx_delivered, got);
  EXPECT_EQ(c.rx_error_cqes, 0u);
}

TEST(Mlx5Rx, CompressedSessionsDeliverEveryPacketAndInvalidateHoles) {
  // A 16-entry CQ with sessions of up to 16 packets: every slot becomes a title, a mini array or
  // a hole over thousands of passes, so a hole left valid would surface as a stale packet.
  Harness h(512);
  h.make_rx(RqOptions{.wqe_cnt = 16, .cqe_cnt = 16, .compression = true});
  std::vector<std::vector<std::uint8_t>> frames;
  for (std::uint32_t i = 0; i < 40000; ++i) frames.push_back(seq_frame(i, static_cast<std::uint16_t>(18 + i % 300)));
  // Odd burst size: sessions span bursts.
  const std::size_t got = pump(h, frames, true, 7, [](Mbuf* m, std::size_t i) { EXPECT_EQ(seq_of(m), i); });
  EXPECT_EQ(got, frames.size());
  EXPECT_GT(h.dev.counters().sessions, 1000u);
  EXPECT_EQ(h.rxq->compressed_sessions, h.dev.counters().sessions);
}

TEST(Mlx5Rx, StridingRqCountsStridesAndSkipsFillers) {
  Harness h(1024);
  // 64-byte strides, 8 per WQE (512 bytes): most frames leave a remainder a filler consumes.
  h.make_rx(RqOptions{.wqe_cnt = 4, .cqe_cnt = 64, .striding = true, .log_stride_size = 6, .log_strides = 3});
  std::vector<std::vector<std::uint8_t>> frames;
  for (std::uint32_t i = 0; i < 20000; ++i) frames.push_back(seq_frame(i, static_cast<std::uint16_t>(18 + (i * 37) % 400)));
  const std::size_t got = pump(h, frames, false, 16, [](Mbuf* m, std::size_t i) { EXPECT_EQ(seq_of(m), i); });
  EXPECT_EQ(got, frames.size());
  EXPECT_GT(h.dev.counters().fillers, 100u);
  EXPECT_EQ(h.rxq->filler_cqes, h.dev.counters().fillers);
  EXPECT_EQ(h.rxq->wqe_id_mismatch, 0u);
  h.release();
  EXPECT_EQ(h.pool->available(), h.pool->count());
}

TEST(Mlx5Rx, UnmatchedTrafficStaysWithTheKernel) {
  Harness h;
  h.make_rx(RqOptions{.wqe_cnt = 16, .cqe_cnt = 16}, false);
  auto rule = parse_match_rule("udp dst 10.0.0.2:5000");
  ASSERT_TRUE(rule) << rule.message();
  FlowTarget t;
  t.port_mac = kPortMac;
  for (auto& a : build_flow_attrs(rule.value(), 77, t)) h.dev.create_flow(h.rq_id, flow_attr(a));
  auto mine = seq_frame(1);
  auto other = rawpipe::testing::udp4_frame(wire::ipv4(10, 0, 0, 1), wire::ipv4(10, 0, 0, 2), 1000, 5001);
  EXPECT_EQ(h.dev.receive(mine), model::Device::Rx::kDelivered);
  EXPECT_EQ(h.dev.receive(other), model::Device::Rx::kToKernel);
  Mbuf* pkts[4];
  ASSERT_EQ(h.rx_burst(pkts, 4), 1);
  EXPECT_EQ(pkts[0]->flow_tag, 77u);
  EXPECT_TRUE(pkts[0]->flags & pkt_flag::kFlowTag);
  mbuf_free(pkts[0]);
}

TEST(Mlx5Rx, CriticalErrorCqeIsCountedBySyndromeAndTheQueueRecovers) {
  Harness h(256);
  h.make_rx(RqOptions{.wqe_cnt = 16, .cqe_cnt = 32});
  std::vector<Mbuf*> got;
  Mbuf* pkts[32];
  for (std::uint32_t i = 0; i < 5; ++i) ASSERT_EQ(h.dev.receive(seq_frame(i)), model::Device::Rx::kDelivered);
  h.dev.fail_next_rx(h.rq_id, kSyndromeLocalProt);
  EXPECT_EQ(h.dev.receive(seq_frame(99)), model::Device::Rx::kErrorCqe);
  EXPECT_EQ(h.dev.receive(seq_frame(100)), model::Device::Rx::kQueueError);
  std::uint16_t n = h.rx_burst(pkts, 32);
  got.insert(got.end(), pkts, pkts + n);
  EXPECT_EQ(n, 5);
  EXPECT_EQ(h.rxq->syndromes.count[kSyndromeLocalProt], 1u);
  EXPECT_EQ(h.rxq->stats.rx_errors, 1u);
  // The next burst resets the queue, consumes the flush CQEs and reposts every WQE.
  n = h.rx_burst(pkts, 32);
  EXPECT_EQ(n, 0);
  EXPECT_EQ(h.rxq->resets, 1u);
  EXPECT_EQ(h.rxq->syndromes.count[kSyndromeWrFlush], 10u) << "the other 10 posted WQEs were flushed";
  for (std::uint32_t i = 5; i < 40; ++i) {
    ASSERT_EQ(h.dev.receive(seq_frame(i)), model::Device::Rx::kDelivered) << i;
    n = h.rx_burst(pkts, 32);
    ASSERT_EQ(n, 1);
    got.push_back(pkts[0]);
  }
  for (std::size_t i = 0; i < got.size(); ++i) EXPECT_EQ(seq_of(got[i]), i);
  mbuf_free_bulk(got.data(), static_cast<unsigned>(got.size()));
  h.release();
  EXPECT_EQ(h.pool->available(), h.pool->count()) << "recovery leaks nothing";
}

// A frame longer than the buffer is a LOCAL_LENGTH error: not one DPDK resets on
// (mlx5_rx_err_handle). The CQE is skipped, its WQE retired, and frames before and after it in
// the same burst are delivered; the queue is never reset and no WQE is flushed.
TEST(Mlx5Rx, OversizedFrameSkipsItsCqeAndTheQueueGoesOn) {
  Harness h(256);
  h.make_rx(RqOptions{.wqe_cnt = 8, .cqe_cnt = 16});
  std::vector<std::uint8_t> big(h.pool->data_room() + 1, 0);
  std::memcpy(big.data(), kPortMac.data(), 6);
  ASSERT_EQ(h.dev.receive(seq_frame(1)), model::Device::Rx::kDelivered);
  EXPECT_EQ(h.dev.receive(big), model::Device::Rx::kErrorCqe);
  ASSERT_EQ(h.dev.receive(seq_frame(2)), model::Device::Rx::kDelivered) << "the RQ is not in the error state";
  Mbuf* pkts[8];
  ASSERT_EQ(h.rx_burst(pkts, 8), 2);
  EXPECT_EQ(seq_of(pkts[0]), 1u);
  EXPECT_EQ(seq_of(pkts[1]), 2u);
  EXPECT_EQ(h.rxq->syndromes.count[kSyndromeLocalLength], 1u);
  EXPECT_EQ(h.rxq->syndromes.count[kSyndromeWrFlush], 0u);
  EXPECT_EQ(h.rxq->stats.rx_errors, 1u);
  EXPECT_EQ(h.rxq->skipped_error_cqes, 1u);
  mbuf_free_bulk(pkts, 2);
  // The ring keeps going round: the spoiled WQE was reposted with its own buffer.
  for (std::uint32_t i = 3; i < 40; ++i) {
    ASSERT_EQ(h.dev.receive(seq_frame(i)), model::Device::Rx::kDelivered) << i;
    ASSERT_EQ(h.rx_burst(pkts, 8), 1);
    EXPECT_EQ(seq_of(pkts[0]), i);
    mbuf_free(pkts[0]);
  }
  EXPECT_EQ(h.rxq->resets, 0u);
  h.release();
  EXPECT_EQ(h.pool->available(), h.pool->count());
}

// The striding (multi-packet) RQ follows the same syndrome rules: DPDK's mlx5_rx_burst_mprq goes
// through the mlx5_rx_err_handle the cyclic burst uses (DPDK 38f72e50). A frame longer than a whole
// WQE's strides is LOCAL_LENGTH: its CQE is skipped, the strides its byte_cnt reports (here the
// rest of a WQE already holding a frame) are consumed as mlx5_rx_burst_mprq's skip_cnt is, the
// WQE is retired and reposted, and the queue goes on without a reset.
TEST(Mlx5Rx, StridingRqSkipsANonCriticalErrorAndRetiresItsWqe) {
  Harness h(256);
  // 64-byte strides, 8 per WQE: 512 bytes a WQE.
  h.make_rx(RqOptions{.wqe_cnt = 4, .cqe_cnt = 64, .striding = true, .log_stride_size = 6, .log_strides = 3});
  std::vector<std::uint8_t> big(600, 0);
  std::memcpy(big.data(), kPortMac.data(), 6);
  ASSERT_EQ(h.dev.receive(seq_frame(1)), model::Device::Rx::kDelivered);
  EXPECT_EQ(h.dev.receive(big), model::Device::Rx::kErrorCqe);
  ASSERT_EQ(h.dev.receive(seq_frame(2)), model::Device::Rx::kDelivered) << "the RQ is not in the error state";
  Mbuf* pkts[8];
  ASSERT_EQ(h.rx_burst(pkts, 8), 2);
  EXPECT_EQ(seq_of(pkts[0]), 1u);
  EXPECT_EQ(seq_of(pkts[1]), 2u);
  mbuf_free_bulk(pkts, 2);
  EXPECT_EQ(h.rxq->syndromes.count[kSyndromeLocalLength], 1u);
  EXPECT_EQ(h.rxq->syndromes.count[kSyndromeWrFlush], 0u);
  EXPECT_EQ(h.rxq->stats.rx_errors, 1u);
  EXPECT_EQ(h.rxq->skipped_error_cqes, 1u);
  // Many times round the 4-WQE ring: the driver's WQE index stays the device's, so every frame is
  // read from the strides it landed in.
  for (std::uint32_t i = 3; i < 200; ++i) {
    ASSERT_EQ(h.dev.receive(seq_frame(i, static_cast<std::uint16_t>(18 + (i * 37) % 300))), model::Device::Rx::kDelivered) << i;
    ASSERT_EQ(h.rx_burst(pkts, 8), 1) << i;
    EXPECT_EQ(seq_of(pkts[0]), i);
    mbuf_free(pkts[0]);
  }
  EXPECT_EQ(h.rxq->resets, 0u);
  EXPECT_EQ(h.rxq->wqe_id_mismatch, 0u);
  h.release();
  EXPECT_EQ(h.pool->available(), h.pool->count());
}

// A critical syndrome on the striding RQ still resets it (LOCAL_PROT), flushes what was posted, and
// the queue receives again afterwards.
TEST(Mlx5Rx, StridingRqResetsOnACriticalSyndrome) {
  Harness h(256);
  h.make_rx(RqOptions{.wqe_cnt = 4, .cqe_cnt = 64, .striding = true, .log_stride_size = 6, .log_strides = 3});
  Mbuf* pkts[8];
  ASSERT_EQ(h.dev.receive(seq_frame(0)), model::Device::Rx::kDelivered);
  h.dev.fail_next_rx(h.rq_id, kSyndromeLocalProt);
  EXPECT_EQ(h.dev.receive(seq_frame(99)), model::Device::Rx::kErrorCqe);
  EXPECT_EQ(h.dev.receive(seq_frame(100)), model::Device::Rx::kQueueError);
  ASSERT_EQ(h.rx_burst(pkts, 8), 1);
  EXPECT_EQ(seq_of(pkts[0]), 0u);
  mbuf_free(pkts[0]);
  EXPECT_EQ(h.rxq->syndromes.count[kSyndromeLocalProt], 1u);
  EXPECT_EQ(h.rx_burst(pkts, 8), 0);
  EXPECT_EQ(h.rxq->resets, 1u);
  EXPECT_GT(h.rxq->syndromes.count[kSyndromeWrFlush], 0u);
  for (std::uint32_t i = 1; i < 100; ++i) {
    ASSERT_EQ(h.dev.receive(seq_frame(i)), model::Device::Rx::kDelivered) << i;
    ASSERT_EQ(h.rx_burst(pkts, 8), 1) << i;
    EXPECT_EQ(seq_of(pkts[0]), i);
    mbuf_free(pkts[0]);
  }
  EXPECT_EQ(h.rxq->skipped_error_cqes, 0u);
  h.release();
  EXPECT_EQ(h.pool->available(), h.pool->count());
}

std::vector<Mbuf*> tx_packets(Harness& h, std::uint32_t first, std::uint32_t n, std::uint16_t flags = 0) {
  std::vector<Mbuf*> v;
  for (std::uint32_t i = 0; i < n; ++i) {
    Mbuf* m = h.pool->alloc();
    auto f = seq_frame(first + i, static_cast<std::uint16_t>(18 + (first + i) % 200));
    std::memcpy(m->data(), f.data(), f.size());
    m->data_len = static_cast<std::uint32_t>(f.size());
    m->tx_flags = flags;
    v.push_back(m);
  }
  return v;
}

TEST(Mlx5Tx, FramesLeaveIntactAndBuffersReturnOnCompletion) {
  // Every inline mode a device may require: none, L2 (18), L3 (58) and L4 (78, frames shorter
  // than that go wholly inline); L3/L4 WQEs take two WQEBBs.
  for (std::uint16_t inl : {std::uint16_t{18}, std::uint16_t{0}, kInlineL3, kInlineL4}) {
    Harness h(512);
    h.make_tx(SqOptions{.wqe_cnt = 64, .cqe_cnt = 16, .min_inline = inl}, 8);
    std::uint32_t sent = 0;
    for (int round = 0; round < 100; ++round) {
      auto pk = tx_packets(h, sent, 20);
      std::uint16_t k = h.tx_burst(pk.data(), 20);
      for (std::uint16_t i = k; i < 20; ++i) mbuf_free(pk[i]);
      sent += k;
    }
    auto frames = h.dev.take_sent();
    ASSERT_EQ(frames.size(), sent);
    for (std::uint32_t i = 0; i < sent; ++i) {
      auto f = seq_frame(i, static_cast<std::uint16_t>(18 + i % 200));
      ASSERT_EQ(frames[i], f) << "frame " << i << " inline " << inl;
    }
    EXPECT_EQ(h.dev.counters().doorbell_order_errors, 0u);
    EXPECT_EQ(h.dev.counters().tx_error_cqes, 0u) << "inline " << inl;
    EXPECT_EQ(h.txq->stats.tx_packets, sent);
    h.release();
    EXPECT_EQ(h.pool->available(), h.pool->count());
  }
}

// Two-WQEBB WQEs through an 8-WQEBB ring: the WQE counter and the ring wrap thousands of times,
// each WQE that would cross the ring end is preceded by a NOP, and completions retire whole WQEs.
// Every third frame is 30 bytes (wholly inline, one WQEBB), so two-WQEBB WQEs land on odd slots.
std::vector<std::uint8_t> mixed_frame(std::uint32_t seq) {
  if (seq % 3 != 2) return seq_frame(seq, static_cast<std::uint16_t>(18 + seq % 200));
  std::vector<std::uint8_t> f(30);
  for (std::size_t i = 0; i < f.size(); ++i) f[i] = static_cast<std::uint8_t>(seq * 7 + i);
  return f;
}

TEST(Mlx5Tx, L4InlineWqesSpanTwoWqebbsAndNeverCrossTheRingEnd) {
  Harness h(256);
  h.make_tx(SqOptions{.wqe_cnt = 8, .cqe_cnt = 8, .min_inline = kInlineL4}, 1);
  std::uint32_t sent = 0;
  while (sent < 20000) {
    std::vector<Mbuf*> pk;
    for (std::uint32_t i = 0; i < 3; ++i) {
      Mbuf* m = h.pool->alloc();
      const auto f = mixed_frame(sent + i);
      std::memcpy(m->data(), f.data(), f.size());
      m->data_len = static_cast<std::uint32_t>(f.size());
      pk.push_back(m);
    }
    std::uint16_t k = h.tx_burst(pk.data(), 3);
    for (std::uint16_t i = k; i < 3; ++i) mbuf_free(pk[i]);
    // A refused frame is sent again first next time, so the sequence stays in order.
    sent += k;
    auto frames = h.dev.take_sent();
    for (std::size_t i = 0; i < frames.size(); ++i) {
      const std::uint32_t seq = sent - static_cast<std::uint32_t>(frames.size()) + static_cast<std::uint32_t>(i);
      ASSERT_EQ(frames[i], mixed_frame(seq)) << seq;
    }
  }
  EXPECT_EQ(h.dev.counters().tx_frames, sent);
  EXPECT_EQ(h.dev.counters().tx_error_cqes, 0u);
  EXPECT_GT(h.txq->ring_pads, 0u);
  EXPECT_EQ(h.dev.counters().tx_nops, h.txq->ring_pads) << "the model saw each padding NOP";
  EXPECT_EQ(h.dev.counters().doorbell_order_errors, 0u);
  h.release();
  EXPECT_EQ(h.pool->available(), h.pool->count());
}

// A device in the IP inline mode rejects a WQE with only the L2 header inline.
TEST(Mlx5Tx, AnInlineHeaderShorterThanTheDevicesModeIsRejected) {
  Harness h(64);
  h.make_tx(SqOptions{.wqe_cnt = 16, .cqe_cnt = 16, .min_inline = kInlineL3}, 1);
  h.txq->inline_bytes = kEthL2InlineHeader;  // the driver believes L2 is enough
  auto pk = tx_packets(h, 0, 1);
  ASSERT_EQ(h.tx_burst(pk.data(), 1), 1);
  EXPECT_EQ(h.dev.counters().tx_error_cqes, 1u);
  EXPECT_EQ(h.dev.counters().tx_frames, 0u);
  h.release();
}

TEST(Mlx5Tx, TinySqWrapsTheWqeCounter) {
  Harness h(256);
  h.make_tx(SqOptions{.wqe_cnt = 8, .cqe_cnt = 8}, 2);
  std::uint32_t sent = 0;
  while (sent < 70000) {
    auto pk = tx_packets(h, sent, 3);
    std::uint16_t k = h.tx_burst(pk.data(), 3);
    for (std::uint16_t i = k; i < 3; ++i) mbuf_free(pk[i]);
    sent += k;
    if (sent % 999 == 0) h.dev.take_sent();
  }
  EXPECT_EQ(h.dev.counters().tx_frames, sent);
  EXPECT_EQ(h.dev.counters().tx_error_cqes, 0u);
  h.release();
  EXPECT_EQ(h.pool->available(), h.pool->count());
}

TEST(Mlx5Tx, DummySendPostsANopTheNicDrops) {
  Harness h(64);
  h.make_tx(SqOptions{.wqe_cnt = 16, .cqe_cnt = 8}, 4);
  auto pk = tx_packets(h, 0, 4);
  pk[1]->tx_flags = tx_flag::kDummy;
  ASSERT_EQ(h.tx_burst(pk.data(), 4), 4);
  EXPECT_EQ(h.txq->dummy_sends, 1u);
  EXPECT_EQ(h.txq->stats.tx_packets, 3u);
  EXPECT_EQ(h.dev.counters().tx_nops, 1u);
  EXPECT_EQ(h.dev.take_sent().size(), 3u);
  h.release();
  EXPECT_EQ(h.pool->available(), h.pool->count());
}

TEST(Mlx5Tx, ErrorCqeResetsTheQueueAndLeaksNothing) {
  Harness h(256);
  h.make_tx(SqOptions{.wqe_cnt = 16, .cqe_cnt = 8}, 4);
  auto pk = tx_packets(h, 0, 6);
  ASSERT_EQ(h.tx_burst(pk.data(), 6), 6);
  h.dev.fail_next_tx(h.sq_id, kSyndromeLocalProt);
  pk = tx_packets(h, 6, 4);
  ASSERT_EQ(h.tx_burst(pk.data(), 4), 4);  // the first of these fails on the device
  pk = tx_packets(h, 10, 2);
  const std::uint16_t k = h.tx_burst(pk.data(), 2);  // sees the error CQE, resets, then posts
  EXPECT_EQ(h.txq->syndromes.count[kSyndromeLocalProt], 1u);
  EXPECT_EQ(h.txq->resets, 1u);
  EXPECT_EQ(h.txq->stats.tx_errors, 4u) << "the failed WQE and the three behind it";
  EXPECT_EQ(k, 2);
  EXPECT_EQ(h.dev.take_sent().size(), 8u);  // 6 before, 2 after the reset
  h.release();
  EXPECT_EQ(h.pool->available(), h.pool->count());
}

TEST(Mlx5Tx, ForeignPoolBuffersAreCopiedIntoTheRegisteredPool) {
  Harness h(64);
  Harness other(16);
  h.make_tx(SqOptions{.wqe_cnt = 16, .cqe_cnt = 8}, 1);
  auto pk = tx_packets(other, 0, 2);
  ASSERT_EQ(h.tx_burst(pk.data(), 2), 2);
  EXPECT_EQ(h.txq->foreign_copies, 2u);
  EXPECT_EQ(h.dev.take_sent().size(), 2u);
  EXPECT_EQ(other.pool->available(), other.pool->count());
  h.release();
  EXPECT_EQ(h.pool->available(), h.pool->count());
}

TEST(Mlx5Model, OwnThreadDeliversEverythingInOrder) {
  Harness h(1024);
  h.make_rx(RqOptions{.wqe_cnt = 64, .cqe_cnt = 64, .compression = true});
  h.make_tx(SqOptions{.wqe_cnt = 64, .cqe_cnt = 16}, 8);
  std::vector<std::vector<std::uint8_t>> frames;
  for (std::uint32_t i = 0; i < 100000; ++i) frames.push_back(seq_frame(i));
  h.dev.start_thread(frames);
  std::uint32_t got = 0;
  std::uint32_t echoed = 0;
  while (got < frames.size()) {
    Mbuf* pkts[32];
    const std::uint16_t n = h.rx_burst(pkts, 32);
    for (std::uint16_t i = 0; i < n; ++i) ASSERT_EQ(seq_of(pkts[i]), got + i);
    got += n;
    // Echo what arrived: the model's thread also completes the sends.
    const std::uint16_t k = h.tx_burst(pkts, n);
    echoed += k;
    for (std::uint16_t i = k; i < n; ++i) mbuf_free(pkts[i]);
  }
  // Let the model finish the transmits, then stop it before reading.
  while (h.dev.counters().tx_wqes < echoed) std::this_thread::yield();
  h.dev.stop_thread();
  EXPECT_EQ(h.dev.counters().rx_delivered, frames.size());
  EXPECT_EQ(h.dev.counters().tx_frames, echoed);
  EXPECT_EQ(h.dev.counters().doorbell_order_errors, 0u);
  h.release();
  EXPECT_EQ(h.pool->available(), h.pool->count());
}

}  // namespace
}  // namespace rawpipe::mlx5::testing

namespace rawpipe::mlx5::testing {
namespace {

using model::RqOptions;

// Toeplitz as Microsoft's RSS specification defines it, written here from the specification
// (not from the model) so the model's choice of input fields is what is tested.
std::uint32_t reference_toeplitz(const std::uint8_t* key, const std::vector<std::uint8_t>& in) {
  std::uint32_t result = 0;
  std::uint32_t window = std::uint32_t(key[0]) << 24 | std::uint32_t(key[1]) << 16 | std::uint32_t(key[2]) << 8 | key[3];
  for (std::size_t i = 0; i < in.size(); ++i) {
    for (int b = 7; b >= 0; --b) {
      if (in[i] & (1u << b)) result ^= window;
      window = window << 1 | ((key[i + 4] >> b) & 1u);
    }
  }
  return result;
}

constexpr std::uint8_t kKey[40] = {0x6d, 0x5a, 0x56, 0xda, 0x25, 0x5b, 0x0e, 0xc2, 0x41, 0x67, 0x25, 0x3d, 0x43, 0xa3,
                                   0x8f, 0xb0, 0xd0, 0xca, 0x2b, 0xcb, 0xae, 0x7b, 0x30, 0xb4, 0x77, 0xcb, 0x2d, 0xa3,
                                   0x80, 0x30, 0xf2, 0x0c, 0x6a, 0x42, 0xb7, 0x3b, 0xbe, 0xac, 0x01, 0xfa};

TEST(Mlx5Rss, ARuleWithoutAProtocolExpandsIntoOneFlowPerTrafficType) {
  FlowTarget t;
  t.port_mac = kPortMac;
  auto any = parse_match_rule("any dst 10.0.0.2");
  ASSERT_TRUE(any) << any.message();
  const auto v4 = build_flow_attrs(any.value(), 0, t);
  ASSERT_EQ(v4.size(), 3u);
  EXPECT_EQ(rss_type_of(v4[0]), RssType::kIpv4Udp);
  EXPECT_EQ(rss_type_of(v4[1]), RssType::kIpv4Tcp);
  EXPECT_EQ(rss_type_of(v4[2]), RssType::kIpv4Other);
  EXPECT_LT(flow_attr(v4[0])->priority, flow_attr(v4[2])->priority) << "UDP and TCP win over the L3-only flow";
  EXPECT_EQ(flow_attr(v4[0])->priority, flow_attr(v4[1])->priority);
  auto udp = parse_match_rule("udp dst *:5000");
  ASSERT_TRUE(udp);
  const auto both = build_flow_attrs(udp.value(), 0, t);
  ASSERT_EQ(both.size(), 2u);
  EXPECT_EQ(rss_type_of(both[0]), RssType::kIpv4Udp);
  EXPECT_EQ(rss_type_of(both[1]), RssType::kIpv6Udp);
  EXPECT_EQ(rss_type_of(build_catch_all_attr(t)), RssType::kIpv4Other);
  // The fields each type's QP is created with (ibv_rx_hash_fields).
  EXPECT_EQ(rss_hash_fields(RssType::kIpv4Udp),
            std::uint64_t(IBV_RX_HASH_SRC_IPV4 | IBV_RX_HASH_DST_IPV4 | IBV_RX_HASH_SRC_PORT_UDP | IBV_RX_HASH_DST_PORT_UDP));
  EXPECT_EQ(rss_hash_fields(RssType::kIpv6Tcp),
            std::uint64_t(IBV_RX_HASH_SRC_IPV6 | IBV_RX_HASH_DST_IPV6 | IBV_RX_HASH_SRC_PORT_TCP | IBV_RX_HASH_DST_PORT_TCP));
  EXPECT_EQ(rss_hash_fields(RssType::kIpv6Other), std::uint64_t(IBV_RX_HASH_SRC_IPV6 | IBV_RX_HASH_DST_IPV6));
}

std::uint32_t cqe_hash_after(Harness& h, const std::vector<std::uint8_t>& frame, std::uint64_t fields) {
  FlowTarget t;
  t.port_mac = kPortMac;
  const auto attr = build_catch_all_attr(t);
  const int flow = h.dev.create_flow(h.rq_id, flow_attr(attr), fields);
  EXPECT_EQ(h.dev.receive(frame), model::Device::Rx::kDelivered);
  h.dev.destroy_flow(flow);
  Mbuf* m;
  EXPECT_EQ(h.rx_burst(&m, 1), 1);
  const std::uint32_t hash = m->rss_hash;
  mbuf_free(m);
  return hash;
}

TEST(Mlx5Rss, TheModelHashesOnlyTheFieldsOfTheQpTheFlowIsAttachedTo) {
  Harness h(256);
  h.make_rx(RqOptions{.wqe_cnt = 16, .cqe_cnt = 16}, false);
  const std::uint16_t rqs[] = {h.rq_id};
  h.dev.set_rss(kKey, rqs);
  const auto f4 = seq_frame(1, 18, 1234);  // 10.0.0.1:1234 -> 10.0.0.2:5000
  const std::vector<std::uint8_t> addrs = {10, 0, 0, 1, 10, 0, 0, 2};
  std::vector<std::uint8_t> with_ports = addrs;
  for (std::uint8_t b : {0x04, 0xd2, 0x13, 0x88}) with_ports.push_back(b);
  EXPECT_EQ(cqe_hash_after(h, f4, rss_hash_fields(RssType::kIpv4Udp)), reference_toeplitz(kKey, with_ports));
  EXPECT_EQ(cqe_hash_after(h, f4, rss_hash_fields(RssType::kIpv4Other)), reference_toeplitz(kKey, addrs))
      << "an address-only QP does not hash the ports";
  EXPECT_EQ(cqe_hash_after(h, f4, rss_hash_fields(RssType::kIpv4Tcp)), reference_toeplitz(kKey, addrs))
      << "a TCP QP hashes no UDP ports";
  wire::Ipv6Addr a{}, b{};
  a[0] = b[0] = 0xfd;
  a[15] = 1;
  b[15] = 2;
  auto f6 = rawpipe::testing::udp6_frame(a, b, 1234, 5000);
  std::memcpy(f6.data(), kPortMac.data(), 6);
  EXPECT_EQ(cqe_hash_after(h, f6, rss_hash_fields(RssType::kIpv4Udp)), 0u) << "an IPv4 QP does not hash IPv6";
  std::vector<std::uint8_t> v6(a.begin(), a.end());
  v6.insert(v6.end(), b.begin(), b.end());
  EXPECT_EQ(cqe_hash_after(h, f6, rss_hash_fields(RssType::kIpv6Other)), reference_toeplitz(kKey, v6));
  h.release();
}

}  // namespace
}  // namespace rawpipe::mlx5::testing

namespace rawpipe::mlx5::testing {
namespace {

// A compressed session written by hand in the hardware layout: a title with a stripped VLAN
// and two minis, then a plain CQE with another non-error opcode (RESP_SEND_IMM). Minis carry no VLAN field,
// so both packets take the title's TCI (mlx5e_decompress_cqe copies the title into each);
// only REQ_ERR/RESP_ERR are errors (DPDK check_cqe_error).
TEST(Mlx5Rx, MinisTakeTheTitlesVlanAndOnlyErrorOpcodesAreErrors) {
  Harness h(64);
  h.make_rx(RqOptions{.wqe_cnt = 8, .cqe_cnt = 16, .compression = true}, false);
  auto* title = reinterpret_cast<Cqe64*>(h.rxq->cq.buf);
  title->vlan_info = be16(0x2064);
  title->l4_hdr_type_etc = kCqeVlanStripped | kCqeL3Ipv4;
  title->byte_cnt = be32(2);
  auto* minis = reinterpret_cast<MiniCqe8*>(h.rxq->cq.buf + 64 * mini_array_slot(0));
  minis[0].byte_cnt = be32(60);
  minis[1].byte_cnt = be32(61);
  // Slot 1 holds the minis; its op_own must not look like a CQE of its own before the title.
  auto* plain = reinterpret_cast<Cqe64*>(h.rxq->cq.buf + 64 * 2);
  plain->byte_cnt = be32(62);
  std::atomic_ref<std::uint8_t>(plain->op_own).store(static_cast<std::uint8_t>(MLX5_CQE_RESP_SEND_IMM << 4), std::memory_order_release);
  std::atomic_ref<std::uint8_t>(title->op_own)
      .store(static_cast<std::uint8_t>(kCqeRespSend << 4 | kCqeFormatCompressed << 2), std::memory_order_release);
  Mbuf* pkts[8];
  ASSERT_EQ(h.rx_burst(pkts, 8), 3);
  for (int i = 0; i < 2; ++i) {
    EXPECT_TRUE(pkts[i]->flags & pkt_flag::kVlan) << i;
    EXPECT_EQ(pkts[i]->vlan_tci[0], 0x2064) << "mini " << i << " takes the title's VLAN";
  }
  EXPECT_EQ(pkts[0]->data_len, 60u);
  EXPECT_EQ(pkts[1]->data_len, 61u);
  EXPECT_EQ(pkts[2]->data_len, 62u) << "RESP_SEND_IMM is not an error CQE";
  EXPECT_EQ(h.rxq->stats.rx_errors, 0u);
  EXPECT_FALSE(h.rxq->needs_reset);
  mbuf_free_bulk(pkts, 3);
  h.release();
}

}  // namespace
}  // namespace rawpipe::mlx5::testing
