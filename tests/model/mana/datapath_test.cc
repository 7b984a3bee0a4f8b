// The MANA data path against the device model: exact counts end to end through parse, coalesced
// CQEs split across bursts, wraps of rings and owner bits, CQ overflow detection, truncation, TX
// CQE suppression, error CQEs and checksum offload.
#include <gtest/gtest.h>

#include <cstring>
#include <deque>
#include <vector>

#include "pipeline/parse/parse.hh"
#include "pipeline/wire/checksum.hh"
#include "tests/model/mana/harness.hh"

namespace rawpipe::mana {
namespace {

using test::Harness;
using test::HarnessConfig;
using test::udp_frame;

std::uint32_t seq_of(const Mbuf* m) {
  std::uint32_t s;
  std::memcpy(&s, m->data() + m->payload_off, 4);
  return s;
}

// Feeds `total` frames (UDP/TCP over IPv4/IPv6, some VLAN-tagged) through model -> rx_burst ->
// parse and checks every packet arrives once, in order, intact, with the model's metadata.
void run_end_to_end(HarnessConfig cfg, std::uint32_t total, std::uint16_t burst) {
  Harness h(cfg);
  std::deque<std::vector<std::uint8_t>> inflight;
  std::uint32_t sent = 0, received = 0;
  std::uint64_t bytes = 0;
  Mbuf* pkts[256];
  while (received < total) {
    // The NIC gets frames only while WQEs are posted (no drops in this test).
    std::vector<std::vector<std::uint8_t>> batch;
    const std::uint32_t room = h.model.rq_available(h.rq_id);
    for (std::uint32_t i = 0; i < room && sent < total; ++i, ++sent) {
      const int kind = sent % 5;
      batch.push_back(udp_frame(sent, static_cast<std::uint16_t>(18 + sent % 300), kind == 1 ? 6 : 4,
                                kind == 2 ? 100 + static_cast<int>(sent % 7) : -1, kind == 3));
    }
    std::vector<std::span<const std::uint8_t>> spans(batch.begin(), batch.end());
    ASSERT_EQ(h.model.receive(h.rq_id, spans), spans.size());
    for (auto& f : batch) inflight.push_back(std::move(f));

    const std::uint16_t n = h.rx_burst(pkts, burst);
    parse_burst(pkts, n);
    for (std::uint16_t i = 0; i < n; ++i) {
      Mbuf* m = pkts[i];
      ASSERT_FALSE(inflight.empty());
      const auto want = std::move(inflight.front());
      inflight.pop_front();
      ASSERT_EQ(m->drop_reason, 0) << "packet " << received;
      ASSERT_EQ(seq_of(m), received);
      // The stripped VLAN tag is put back (PCP 0 here), so the frame is byte-identical.
      ASSERT_EQ(std::vector<std::uint8_t>(m->data(), m->data() + m->data_len), want) << "packet " << received;
      EXPECT_EQ(m->port, 7);
      EXPECT_TRUE(m->flags & pkt_flag::kL4CsumGood);
      EXPECT_FALSE(m->flags & (pkt_flag::kL3CsumBad | pkt_flag::kL4CsumBad));
      EXPECT_EQ(bool(m->flags & pkt_flag::kL3CsumGood), m->l3_type == L3Type::kIpv4);
      ASSERT_TRUE(m->flags & pkt_flag::kRssHash);
      EXPECT_EQ(m->rss_hash, rss_of(cfg.model.rss_key.data(), want.data(), static_cast<std::uint32_t>(want.size()),
                                    true).hash);
      EXPECT_EQ(m->l4_proto, received % 5 == 3 ? 6 : 17);
      bytes += m->data_len;
      ++received;
    }
    mbuf_free_bulk(pkts, n);
  }
  EXPECT_EQ(h.rx.counters.packets.load(), total);
  EXPECT_EQ(h.rx.counters.bytes.load(), bytes);
  EXPECT_EQ(h.model.stats(h.rq_id).rx_frames, total);
  EXPECT_EQ(h.model.stats(h.rq_id).rx_no_wqe, 0u);
  EXPECT_EQ(h.rx.counters.cqes.load(), h.model.stats(h.rq_id).cqes);
  EXPECT_EQ(h.rx.counters.cq_overflow.load(), 0u);
  EXPECT_EQ(h.rx.counters.vlan_reinserted.load(), total / 5 + (total % 5 > 2 ? 1 : 0));
  if (cfg.model.coalesce > 1) {
    EXPECT_GT(h.rx.counters.coalesced_cqes.load(), 0u);
    EXPECT_LT(h.rx.counters.cqes.load(), total);
  } else {
    EXPECT_EQ(h.rx.counters.cqes.load(), total);
  }
  EXPECT_TRUE(h.model.violations(h.rq_id).empty()) << h.model.violations(h.rq_id).front();
  EXPECT_EQ(h.model.unknown_doorbells(), 0u);
  h.release();
  EXPECT_EQ(h.pool->available(), h.pool->count());
}

TEST(ManaDatapath, EndToEndCoalescedExactCounts) {
  HarnessConfig c;
  c.model.coalesce = 4;
  run_end_to_end(c, 5000, 32);
}

TEST(ManaDatapath, BurstEndsInsideACoalescedCqe) {
  HarnessConfig c;
  c.model.coalesce = 4;
  run_end_to_end(c, 3001, 3);  // bursts of 3 stop inside 4-packet CQEs and resume there
}

TEST(ManaDatapath, OneCqePerPacketWithoutCoalescing) {
  HarnessConfig c;
  c.model.coalesce = 1;
  run_end_to_end(c, 1000, 32);
}

TEST(ManaDatapath, SmallQueuesWrapRingsAndOwnerBits) {
  HarnessConfig c;
  c.model.coalesce = 3;
  c.rx_wqes = 8;
  c.rx_cq = 8;
  c.pool_count = 64;
  // 20000 packets over an 8-entry CQ: thousands of passes, so the 3-bit owner wraps hundreds of times.
  run_end_to_end(c, 20000, 5);
}

// An overflowed CQ, as DPDK's gdma_poll_completion_queue (drivers/net/mana/gdma.c) treats it: the
// entry at the head has owner bits of neither the previous pass nor the current one; the poll stops
// there (what it read before stays read) and nothing is latched, so every later poll looks at the
// entry again and goes on once it reads as current. The kernel's mana_gd_read_cqe detects it the
// same way. With 3-bit owner bits an entry written 8 passes later reads as current again: that
// is when DPDK goes on, so that is when rawpipe must.
TEST(ManaDatapath, CqOverflowStopsTheBurstNotTheQueue) {
  HarnessConfig c;
  c.model.coalesce = 1;
  c.rx_wqes = 64;
  c.rx_cq = 4;  // deliberately smaller than the RQ (setup refuses this unless told not to check)
  c.check_cq = false;
  Harness h(c);
  std::uint32_t seq = 0;
  auto receive = [&](std::uint32_t n) {
    for (std::uint32_t i = 0; i < n; ++i) {
      auto f = udp_frame(seq++);
      ASSERT_EQ(h.model.receive_one(h.rq_id, f.data(), static_cast<std::uint32_t>(f.size())), 1u);
    }
  };
  Mbuf* pkts[32];
  receive(2);
  ASSERT_EQ(h.rx_burst(pkts, 32), 2);
  mbuf_free_bulk(pkts, 2);
  // Completions 2..8 into 4 slots without a poll: slot 2 (the head) now holds pass 1's entry.
  receive(7);
  EXPECT_EQ(h.rx_burst(pkts, 32), 0);
  EXPECT_EQ(h.rx.counters.cq_overflow.load(), 1u);
  // Not latched: the next burst polls the entry again, and stops again.
  EXPECT_EQ(h.rx_burst(pkts, 32), 0);
  EXPECT_EQ(h.rx.counters.cq_overflow.load(), 2u);
  // Completions up to 34: slot 2 last written on pass 8, whose owner bits (8 + 1) & 7 = 1 are
  // those of pass 0 the driver expects there; slot 3, last written on pass 7 (owner 0), reads as
  // "no new entry" and ends the burst without an overflow.
  receive(35 - seq);
  ASSERT_EQ(h.rx_burst(pkts, 32), 1);
  EXPECT_EQ(h.rx.counters.cq_overflow.load(), 2u);
  mbuf_free(pkts[0]);
  h.release();
  EXPECT_EQ(h.pool->available(), h.pool->count());
}

TEST(ManaDatapath, SetupRefusesACqSmallerThanItsQueue) {
  ManaModel model;
  auto pool = test::make_pool(64);
  QueueSetup s;
  const std::uint32_t cq = model.create_cq(8);
  model.describe_wq(model.create_rq(16, cq), s.wq);
  model.describe_cq(cq, s.cq);
  s.db_page = model.db_page();
  s.pool = pool.get();
  RxQueue q;
  Status st = setup_rx_queue(q, s);
  ASSERT_FALSE(st);
  EXPECT_NE(st.message().find("smaller than its 16 WQEs"), std::string::npos) << st.message();
}

TEST(ManaDatapath, TruncatedFrameRetiresOneWqe) {
  Harness h;
  auto big = udp_frame(1, 1900);  // longer than the 2048-byte buffer's data room
  auto ok = udp_frame(2);
  std::span<const std::uint8_t> frames[] = {big, ok};
  ASSERT_EQ(h.model.receive(h.rq_id, frames), 2u);
  Mbuf* pkts[8];
  const auto n = h.rx_burst(pkts, 8);
  ASSERT_EQ(n, 1);
  parse_burst(pkts, 1);
  EXPECT_EQ(seq_of(pkts[0]), 2u);
  EXPECT_EQ(h.rx.counters.truncated.load(), 1u);
  EXPECT_EQ(h.rx.posted(), h.rx.target_posted);  // both WQEs replaced
  mbuf_free(pkts[0]);
  h.model.inject_rx_cqe(h.rq_id, kCqeRxObjectFence);  // consumes no WQE
  EXPECT_EQ(h.rx_burst(pkts, 8), 0);
  EXPECT_EQ(h.rx.counters.fences.load(), 1u);
  h.release();
  EXPECT_EQ(h.pool->available(), h.pool->count());
}

TEST(ManaDatapath, EmptyPoolDefersRefill) {
  HarnessConfig c;
  c.rx_wqes = 32;
  c.rx_cq = 32;
  c.pool_count = 40;
  Harness h(c);
  std::vector<Mbuf*> held;
  for (Mbuf* m; (m = h.pool->alloc());) held.push_back(m);
  for (std::uint32_t i = 0; i < 4; ++i) {
    auto f = udp_frame(i);
    h.model.receive_one(h.rq_id, f.data(), static_cast<std::uint32_t>(f.size()));
  }
  Mbuf* pkts[8];
  ASSERT_EQ(h.rx_burst(pkts, 8), 4);
  EXPECT_EQ(h.rx.counters.refill_failed.load(), 1u);
  EXPECT_EQ(h.rx.posted(), 28u);
  mbuf_free_bulk(held.data(), static_cast<unsigned>(held.size()));
  EXPECT_EQ(h.rx_burst(pkts + 4, 4), 0);  // refills on the next burst
  EXPECT_EQ(h.rx.posted(), 32u);
  mbuf_free_bulk(pkts, 4);
  h.release();
  EXPECT_EQ(h.pool->available(), h.pool->count());
}

std::vector<Mbuf*> tx_packets(Harness& h, unsigned n) {
  std::vector<Mbuf*> v(n);
  EXPECT_TRUE(h.pool->alloc_bulk(v.data(), n));
  for (unsigned i = 0; i < n; ++i) {
    auto f = udp_frame(i);
    std::memcpy(v[i]->data(), f.data(), f.size());
    v[i]->data_len = static_cast<std::uint32_t>(f.size());
  }
  return v;
}

TEST(ManaDatapath, TxSuppressesAllButTheLastCqeOfABurst) {
  test::HarnessConfig c;
  c.model.capture_tx = true;
  Harness h(c);
  auto v = tx_packets(h, 32);
  ASSERT_EQ(h.tx_burst(v.data(), 32), 32);
  const auto ms = h.model.stats(h.sq_id);
  EXPECT_EQ(ms.tx_frames, 32u);
  EXPECT_EQ(ms.tx_suppressed, 31u);
  EXPECT_EQ(ms.cqes, 1u);
  EXPECT_EQ(h.tx.outstanding(), 32u);
  EXPECT_EQ(tx_reap(h.tx), 32u);  // one CQE retires the whole burst
  EXPECT_EQ(h.tx.counters.packets.load(), 32u);
  EXPECT_EQ(h.tx.counters.cqes.load(), 1u);
  ASSERT_EQ(h.model.sent(h.sq_id).size(), 32u);
  EXPECT_EQ(h.model.sent(h.sq_id)[5], udp_frame(5));
  EXPECT_TRUE(h.model.violations(h.sq_id).empty());
  h.release();
  EXPECT_EQ(h.pool->available(), h.pool->count());
}

TEST(ManaDatapath, TxErrorCqesAreCountedByTypeAndRetireTheirWqes) {
  Harness h;
  // WQEs 0..2 fail with MTU drops (0 and 1 are suppressed: error CQEs come anyway).
  h.model.fail_next_tx(h.sq_id, 3, kCqeTxMtuDrop);
  auto v = tx_packets(h, 8);
  ASSERT_EQ(h.tx_burst(v.data(), 8), 8);
  EXPECT_EQ(h.model.stats(h.sq_id).cqes, 4u);  // three errors + the burst's OK
  EXPECT_EQ(tx_reap(h.tx), 8u);
  EXPECT_EQ(h.tx.counters.errors.load(), 3u);
  EXPECT_EQ(h.tx.counters.packets.load(), 5u);
  EXPECT_EQ(h.tx.counters.error_types[kCqeTxMtuDrop - kFirstTxError].load(), 3u);
  // An error in the middle of a suppressed run: WQE 2 of 5 fails; 0 and 1 succeeded silently
  // and are retired by the error CQE's WQE offset, 3 and 4 by the burst's OK CQE.
  auto w = tx_packets(h, 5);
  h.model.fail_next_tx(h.sq_id, 1, kCqeTxVlanTaggingViolation, 2);
  ASSERT_EQ(h.tx_burst(w.data(), 5), 5);
  EXPECT_EQ(h.model.stats(h.sq_id).cqes, 6u);
  tx_reap(h.tx);
  EXPECT_EQ(h.tx.outstanding(), 0u);
  EXPECT_EQ(h.tx.counters.errors.load(), 4u);
  EXPECT_EQ(h.tx.counters.packets.load(), 9u);
  EXPECT_EQ(h.tx.counters.error_types[kCqeTxVlanTaggingViolation - kFirstTxError].load(), 1u);
  h.release();
  EXPECT_EQ(h.pool->available(), h.pool->count());
}

// tx_wqe_offset is in 32-byte units. An error CQE for WQE 3 of a suppressed burst of 8, while the
// NIC still holds WQEs 4..7, retires exactly 0..3 and frees none of the buffers 4..7 point at.
// Run after the ring has wrapped so the offset is checked modulo the ring, not as an index.
TEST(ManaDatapath, TxErrorMidBurstRetiresUpToItsWqeOffsetAndNoFurther) {
  HarnessConfig c;
  c.tx_wqes = 16;
  c.tx_cq = 16;
  Harness h(c);
  for (int round = 0; round < 20; ++round) {
    auto v = tx_packets(h, 7);
    ASSERT_EQ(h.tx_burst(v.data(), 7), 7);
    ASSERT_EQ(tx_reap(h.tx), 7u);
  }
  ASSERT_GT(h.tx.sq.head, h.tx.sq.capacity_bu()) << "the ring must have wrapped";
  const std::size_t free_before = h.pool->available();
  auto v = tx_packets(h, 8);
  h.model.hold_tx(h.sq_id, 4);
  h.model.fail_next_tx(h.sq_id, 1, kCqeTxMtuDrop, 3);
  ASSERT_EQ(h.tx_burst(v.data(), 8), 8);
  EXPECT_EQ(h.model.stats(h.sq_id).tx_errors, 1u);
  EXPECT_EQ(tx_reap(h.tx), 4u) << "the error CQE names WQE 3: WQEs 0..3 retire, 4..7 stay with the NIC";
  EXPECT_EQ(h.tx.outstanding(), 4u);
  EXPECT_EQ(h.tx.counters.errors.load(), 1u);
  EXPECT_EQ(h.pool->available(), free_before - 4) << "buffers of WQEs the NIC has not read stay out of the pool";
  for (int i = 4; i < 8; ++i) EXPECT_EQ(h.tx.bufs[(h.tx.desc_tail + i - 4) & h.tx.bufs_mask], v[i]);
  h.model.release_tx(h.sq_id);
  EXPECT_EQ(tx_reap(h.tx), 4u);
  EXPECT_EQ(h.tx.outstanding(), 0u);
  EXPECT_EQ(h.pool->available(), free_before);
  EXPECT_TRUE(h.model.violations(h.sq_id).empty());
  h.release();
  EXPECT_EQ(h.pool->available(), h.pool->count());
}

TEST(ManaDatapath, TxCompletionOffsetCountsBasicUnits) {
  // The model's error CQE for the WQE at BU 5 carries 5, not 160.
  Harness h;
  auto v = tx_packets(h, 6);
  h.model.hold_tx(h.sq_id, 6);
  h.model.fail_next_tx(h.sq_id, 1, kCqeTxSaDrop, 5);
  ASSERT_EQ(h.tx_burst(v.data(), 6), 6);
  const auto* e = reinterpret_cast<const Cqe*>(h.tx.cq.buf);
  const auto* oob = reinterpret_cast<const TxCompOob*>(e->client);
  EXPECT_EQ(tx_comp_wqe_offset(oob->offsets), 5u);
  EXPECT_EQ(tx_reap(h.tx), 6u);
  h.release();
}

TEST(ManaDatapath, TxErrorOnTheLastWqeRetiresTheSilentRunBeforeIt) {
  Harness h;
  auto v = tx_packets(h, 4);
  // Only the burst's last (unsuppressed) WQE fails, so no CQE_TX_OKAY comes at all: the error
  // CQE's WQE offset must retire the three suppressed successes before it.
  h.model.fail_next_tx(h.sq_id, 1, kCqeTxSaDrop, 3);
  ASSERT_EQ(h.tx_burst(v.data(), 4), 4);
  EXPECT_EQ(h.model.stats(h.sq_id).cqes, 1u);
  EXPECT_EQ(tx_reap(h.tx), 4u);
  EXPECT_EQ(h.tx.outstanding(), 0u);
  EXPECT_EQ(h.tx.counters.packets.load(), 3u);
  EXPECT_EQ(h.tx.counters.errors.load(), 1u);
  EXPECT_EQ(h.tx.counters.error_types[kCqeTxSaDrop - kFirstTxError].load(), 1u);
  h.release();
  EXPECT_EQ(h.pool->available(), h.pool->count());
}

TEST(ManaDatapath, TxRingWrapsWithSmallQueues) {
  HarnessConfig c;
  c.tx_wqes = 8;
  c.tx_cq = 8;
  c.rx_wqes = 8;
  c.rx_cq = 8;
  c.pool_count = 64;
  Harness h(c);
  std::uint64_t sent = 0;
  for (int round = 0; round < 3000; ++round) {
    auto v = tx_packets(h, 5);
    const auto k = h.tx_burst(v.data(), 5);
    sent += k;
    mbuf_free_bulk(v.data() + k, 5 - k);  // what the queue did not take stays ours
  }
  tx_reap(h.tx);
  EXPECT_EQ(h.tx.counters.packets.load(), sent);
  EXPECT_GT(sent, 3000u * 4);
  EXPECT_EQ(h.model.stats(h.sq_id).tx_frames, sent);
  EXPECT_EQ(h.tx.counters.cq_overflow.load(), 0u);
  EXPECT_TRUE(h.model.violations(h.sq_id).empty());
  h.release();
  EXPECT_EQ(h.pool->available(), h.pool->count());
}

// The transmit side of DPDK's overflow rule (gdma_poll_completion_queue stops, nothing latched):
// a reap that meets an overflowed CQ stops there and sending goes on as far as the SQ has room;
// WQEs whose completions were lost keep their buffers until stop.
TEST(ManaDatapath, TxCqOverflowStopsTheReapNotTheQueue) {
  HarnessConfig c;
  c.tx_wqes = 16;
  c.tx_cq = 4;  // deliberately smaller than the SQ
  c.check_cq = false;
  Harness h(c);
  h.model.hold_tx(h.sq_id, 0);  // the NIC takes nothing for now
  for (std::uint32_t i = 0; i < 9; ++i) {
    auto v = tx_packets(h, 1);
    ASSERT_EQ(h.tx_burst(v.data(), 1), 1);
  }
  h.model.release_tx(h.sq_id);  // 9 completions into 4 slots: slot 0 holds pass 2's entry
  const std::uint32_t free_before = h.pool->available();
  auto v = tx_packets(h, 1);
  EXPECT_EQ(h.tx_burst(v.data(), 1), 1) << "the queue still sends after an overflow";
  EXPECT_EQ(h.tx.counters.cq_overflow.load(), 1u);
  EXPECT_EQ(h.model.stats(h.sq_id).tx_frames, 10u);
  EXPECT_EQ(h.pool->available(), free_before - 1) << "no buffer of a WQE whose completion was lost is freed";
  tx_reap(h.tx);
  EXPECT_EQ(h.tx.counters.cq_overflow.load(), 2u) << "every reap looks again";
  EXPECT_TRUE(h.model.violations(h.sq_id).empty());
  h.release();
  EXPECT_EQ(h.pool->available(), h.pool->count());
}

TEST(ManaDatapath, TxChecksumOffloadPrefillsThePseudoHeader) {
  HarnessConfig c;
  c.model.capture_tx = true;
  Harness h(c);
  Mbuf* pkts[3];
  ASSERT_TRUE(h.pool->alloc_bulk(pkts, 3));
  const std::vector<std::uint8_t> frames[3] = {udp_frame(1, 100, 4), udp_frame(2, 77, 6), udp_frame(3, 64, 4, -1, true)};
  for (int i = 0; i < 3; ++i) {
    std::memcpy(pkts[i]->data(), frames[i].data(), frames[i].size());
    pkts[i]->data_len = static_cast<std::uint32_t>(frames[i].size());
  }
  parse_burst(pkts, 3);
  for (Mbuf* m : pkts) {
    // Spoil the checksums the NIC is asked to compute.
    std::uint8_t* l4 = m->data() + m->l4_off;
    l4[m->l4_proto == 17 ? 6 : 16] ^= 0x5a;
    if (m->l3_type == L3Type::kIpv4) m->data()[m->l3_off + 10] ^= 0x33;
    m->tx_flags = tx_flag::kL3Csum | tx_flag::kL4Csum;
  }
  ASSERT_EQ(h.tx_burst(pkts, 3), 3);
  EXPECT_EQ(h.tx.counters.csum_offloaded.load(), 3u);
  EXPECT_EQ(h.model.stats(h.sq_id).pseudo_csum_missing, 0u);
  const auto& sent = h.model.sent(h.sq_id);
  ASSERT_EQ(sent.size(), 3u);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(sent[i], frames[i]) << "frame " << i << " checksums differ from the builder's";
  EXPECT_TRUE(h.model.violations(h.sq_id).empty());
  tx_reap(h.tx);
  h.release();
  EXPECT_EQ(h.pool->available(), h.pool->count());
}

TEST(ManaDatapath, TxRefusesBuffersOutsideTheRegisteredRegion) {
  Harness h;
  auto other = test::make_pool(8);
  auto v = tx_packets(h, 2);
  Mbuf* foreign = other->alloc();
  foreign->data_len = 60;
  Mbuf* burst[3] = {v[0], foreign, v[1]};
  EXPECT_EQ(h.tx_burst(burst, 3), 1);
  EXPECT_EQ(h.tx.counters.not_registered.load(), 1u);
  mbuf_free(foreign);
  mbuf_free(v[1]);
  tx_reap(h.tx);
  EXPECT_EQ(h.tx.counters.packets.load(), 1u);  // the one WQE was unsuppressed
  h.release();
  EXPECT_EQ(h.pool->available(), h.pool->count());
}

}  // namespace
}  // namespace rawpipe::mana
