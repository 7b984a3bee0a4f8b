// The dpdk port over DPDK's software devices, unprivileged: the EAL runs with --no-huge in IOVA-as-VA
// mode and without shared files. Every test checks exact packet and byte counts, that the buffers
// are the pool's own slots (zero-copy) or counted copies, and that stop() returns every buffer.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "pipeline/buf/pool.hh"
#include "pipeline/config/section.hh"
#include "pipeline/port/registry.hh"

#ifdef RAWPIPE_HAVE_PMD_PCAP
#include <pcap/pcap.h>
#include "pipeline/port/driver.hh"
#endif

#ifdef RAWPIPE_HAVE_PMD_DPDK
#include <rte_mbuf.h>
#include <rte_mempool.h>

#include "pmd/dpdk/bridge.hh"
#endif

namespace rawpipe {
namespace {

// One EAL per process: every port in this file gives the same arguments.
constexpr const char* kEalArgs = R"(eal_args = ["--no-huge", "-m", "128", "--log-level=*:error"])";
constexpr std::uint32_t kPoolCount = 4096;
// Sent slots a transmitting thread's cache may hold: 1.5 times the bridge's transmit cache of 128
// (pmd/dpdk/bridge.hh), which a pool of this size gets.
constexpr std::size_t kTransmitCacheMost = 192;

std::unique_ptr<Pool> make_pool(std::uint32_t count = kPoolCount) {
  PoolConfig c;
  c.name = "dpdk_test";
  c.count = count;
  c.cache_size = 0;
  c.huge_pages = HugePages::kNever;
  // Padded slots, as the config loader makes a dpdk port's pool: the zero-copy bridge finds a
  // slot from its shadow's buf_addr, whatever the stride.
  c.exact_stride = false;
  auto p = Pool::create(c);
  EXPECT_TRUE(p) << p.message();
  return std::move(p).value();
}

struct Opened {
  std::unique_ptr<Port> port;
  std::string error;
};

Opened open_port(const std::string& keys, Pool* pool, std::uint16_t rxq = 1, std::uint16_t txq = 1) {
  Opened out;
  const PmdDriver* drv = find_pmd("dpdk");
  if (!drv) {
    out.error = "dpdk driver not registered";
    return out;
  }
  auto section = ConfigSection::parse_string(std::string(kEalArgs) + "\n" + keys, "test.toml");
  if (!section) {
    out.error = section.message();
    return out;
  }
  auto spec = drv->parse(section.value());
  if (!spec) {
    out.error = spec.message();
    return out;
  }
  if (Status st = section->finish(); !st) {
    out.error = st.message();
    return out;
  }
  PortEnv env;
  env.port_id = 7;
  env.name = "dp";
  env.rx_queues = rxq;
  env.tx_queues = txq;
  env.rx_ring_size = 512;
  env.tx_ring_size = 512;
  env.pool = pool;
  auto port = spec.value()->open(env);
  if (!port) {
    out.error = port.message();
    return out;
  }
  out.port = std::move(port).value();
  return out;
}

// A frame whose bytes say which frame it is, so order and content can be checked after a trip.
std::vector<std::uint8_t> pattern_frame(std::uint32_t seq, std::size_t len) {
  std::vector<std::uint8_t> f(len);
  for (std::size_t i = 0; i < len; ++i) f[i] = static_cast<std::uint8_t>(seq * 7 + i);
  std::memcpy(f.data(), &seq, sizeof(seq));
  return f;
}

std::size_t frame_len(std::uint32_t seq) { return 60 + (seq * 37) % 1400; }

Mbuf* pool_frame(Pool* pool, std::uint32_t seq, std::size_t len) {
  Mbuf* m = pool->alloc();
  if (!m) return nullptr;
  auto f = pattern_frame(seq, len);
  std::memcpy(m->data(), f.data(), len);
  m->data_len = static_cast<std::uint32_t>(len);
  return m;
}

#ifndef RAWPIPE_HAVE_PMD_DPDK
#define REQUIRE_DPDK() GTEST_SKIP() << "the dpdk PMD is not built (libdpdk-dev missing or -Dpmd_dpdk=disabled)"
#else
#define REQUIRE_DPDK() (void)0
#endif

// Most tests open one port over a fresh pool, start it, and end by stopping it and checking that
// every slot came back.
class DpdkPort : public ::testing::Test {
 protected:
  // The port over a pool of `count` slots, started; nullptr (with the failure recorded) if not.
  Port* start_port(const std::string& keys, std::uint32_t count = kPoolCount, std::uint16_t rxq = 1,
                   std::uint16_t txq = 1) {
    pool_ = make_pool(count);
    opened_ = open_port(keys, pool_.get(), rxq, txq);
    if (!opened_.port) {
      ADD_FAILURE() << opened_.error;
      return nullptr;
    }
    if (!opened_.port->start()) {
      ADD_FAILURE() << "the port did not start";
      return nullptr;
    }
    return opened_.port.get();
  }
  void stop_and_expect_every_slot_back() {
    opened_.port->stop();
    EXPECT_EQ(pool_->available(), pool_->count());
  }
  // Bursts of up to 32 until three polls in a row bring nothing.
  std::vector<Mbuf*> receive_until_idle(std::uint16_t queue = 0) {
    std::vector<Mbuf*> got;
    RxQueueHandle rx = opened_.port->rx_queue(queue);
    for (int idle = 0; idle < 3;) {
      Mbuf* pkts[32];
      const std::uint16_t k = rx(pkts, 32);
      idle = k == 0 ? idle + 1 : 0;
      got.insert(got.end(), pkts, pkts + k);
    }
    return got;
  }

  std::unique_ptr<Pool> pool_;
  Opened opened_;
};

TEST_F(DpdkPort, NullRxGivesExactBurstsOfPoolSlots) {
  REQUIRE_DPDK();
  Port* port = start_port(R"(device = "net_null0,size=64")");
  ASSERT_NE(port, nullptr);
  Pool* pool = pool_.get();
  EXPECT_NE(port->path_report().find("zero-copy"), std::string::npos) << port->path_report();
  RxQueueHandle rx = port->rx_queue(0);
  constexpr unsigned kBursts = 100;
  Mbuf* pkts[32];
  for (unsigned b = 0; b < kBursts; ++b) {
    ASSERT_EQ(rx(pkts, 32), 32u) << "burst " << b;
    for (Mbuf* m : pkts) {
      ASSERT_TRUE(pool->contains(m));
      EXPECT_EQ(reinterpret_cast<std::uint8_t*>(m), reinterpret_cast<std::uint8_t*>(pool->slot_of(m)));
      EXPECT_EQ(m->pool, pool);
      EXPECT_EQ(m->data_len, 64u);
      EXPECT_EQ(m->data_off, kMbufHeaderSize + 128u);  // DPDK's headroom lands on rawpipe's
      EXPECT_EQ(m->port, 7u);
      EXPECT_EQ(m->refcnt.load(), 1);
    }
    mbuf_free_bulk(pkts, 32);
  }
  PortStats st = port->stats();
  ASSERT_EQ(st.rx_queues.size(), 1u);
  EXPECT_EQ(st.rx_queues[0].rx_packets, kBursts * 32);
  EXPECT_EQ(st.rx_queues[0].rx_bytes, kBursts * 32 * 64);
  EXPECT_EQ(st.extended.at("zero_copy"), 1u);
  EXPECT_EQ(st.extended.at("rx_copied"), 0u);
  EXPECT_EQ(st.extended.at("ethdev.ipackets"), kBursts * 32);
  // IOVA-as-VA with 4 KiB pages: the pool can be registered, so a PCI device could DMA into it.
  EXPECT_EQ(st.extended.at("pool_extmem_registered"), 1u);
  EXPECT_TRUE(port->link().up);
  EXPECT_TRUE(port->caps().tx);
  port->stop();
  EXPECT_FALSE(port->link().up);
  EXPECT_EQ(pool->available(), kPoolCount);
  // Counters survive the stop, device counters included.
  EXPECT_EQ(port->stats().extended.at("ethdev.ipackets"), kBursts * 32);
}

// A slot goes round DPDK and the pipeline many times: what the pipeline wrote into its header on
// one trip (parse results, a drop reason, an endpoint) must not show on the next.
TEST_F(DpdkPort, ReceivedSlotsComeWithFreshHeaders) {
  REQUIRE_DPDK();
  Port* port = start_port(R"(device = "net_null0,size=64")", 1024);  // each slot comes round three times
  ASSERT_NE(port, nullptr);
  RxQueueHandle rx = port->rx_queue(0);
  Mbuf* pkts[32];
  for (unsigned b = 0; b < 96; ++b) {
    ASSERT_EQ(rx(pkts, 32), 32u) << "burst " << b;
    for (Mbuf* m : pkts) {
      ASSERT_EQ(m->drop_reason, 0) << "burst " << b;
      ASSERT_EQ(m->endpoint, Mbuf::kNoEndpoint) << "burst " << b;
      ASSERT_EQ(m->l3_off, 0) << "burst " << b;
      ASSERT_EQ(m->flow_tag, 0u) << "burst " << b;
      ASSERT_EQ(m->timestamp_ns, 0u) << "burst " << b;
      ASSERT_EQ(m->refcnt.load(), 1) << "burst " << b;
      // What parse, classify and a drop leave behind.
      m->drop_reason = 3;
      m->endpoint = 5;
      m->l3_off = 14;
      m->flow_tag = 99;
      m->timestamp_ns = 1234;
    }
    mbuf_free_bulk(pkts, 32);
  }
  stop_and_expect_every_slot_back();
}

TEST_F(DpdkPort, NullTxTakesEverythingAndReturnsSlots) {
  REQUIRE_DPDK();
  Port* port = start_port(R"(device = "net_null0")");
  ASSERT_NE(port, nullptr);
  Pool* pool = pool_.get();
  TxQueueHandle tx = port->tx_queue(0);
  std::uint64_t bytes = 0;
  std::uint32_t seq = 0;
  for (unsigned b = 0; b < 40; ++b) {
    Mbuf* pkts[25];
    for (Mbuf*& m : pkts) {
      std::size_t len = frame_len(seq);
      m = pool_frame(pool, seq++, len);
      ASSERT_NE(m, nullptr);
      bytes += len;
    }
    ASSERT_EQ(tx(pkts, 25), 25u);
  }
  // net_null frees each one at once, into this thread's transmit cache: a bounded pile is still out.
  EXPECT_LE(pool->in_use(), kTransmitCacheMost);
  PortStats st = port->stats();
  EXPECT_EQ(st.tx_queues[0].tx_packets, 1000u);
  EXPECT_EQ(st.tx_queues[0].tx_bytes, bytes);
  EXPECT_EQ(st.extended.at("tx_copied"), 0u);
  EXPECT_EQ(st.extended.at("ethdev.opackets"), 1000u);
  stop_and_expect_every_slot_back();  // the stopping thread's cache comes back
}

// An lcore that transmits and ends: the slots its transmit cache held come back with the thread,
// with no stop, and each of them can be received into again (its shadow belongs to the receive
// mempool again, raw).
TEST_F(DpdkPort, SlotsSentByAThreadComeBackWhenItEnds) {
  REQUIRE_DPDK();
  Port* port = start_port(R"(device = "net_null0")");
  ASSERT_NE(port, nullptr);
  Pool* pool = pool_.get();
  TxQueueHandle tx = port->tx_queue(0);
  std::size_t out_after_sending = 0;
  std::thread lcore([&] {
    std::uint32_t seq = 0;
    for (unsigned b = 0; b < 100; ++b) {
      Mbuf* pkts[32];
      for (Mbuf*& m : pkts) m = pool_frame(pool, seq++, 60);
      EXPECT_EQ(tx(pkts, 32), 32u);
    }
    out_after_sending = pool->in_use();
  });
  lcore.join();
  EXPECT_GT(out_after_sending, 0u) << "nothing was held in the transmit cache: the cache went untested";
  EXPECT_LE(out_after_sending, kTransmitCacheMost);
  EXPECT_EQ(pool->available(), kPoolCount);
  // Every slot received into again: the whole pool, through the receive mempool.
  std::vector<Mbuf*> got;
  RxQueueHandle rx = port->rx_queue(0);
  while (got.size() < kPoolCount) {
    Mbuf* pkts[32];
    const std::uint16_t k = rx(pkts, 32);
    if (k == 0) break;
    got.insert(got.end(), pkts, pkts + k);
  }
  EXPECT_EQ(got.size(), kPoolCount);
  EXPECT_EQ(port->stats().extended.at("rx_copied"), 0u);
  mbuf_free_bulk(got.data(), static_cast<unsigned>(got.size()));
  stop_and_expect_every_slot_back();
}

TEST_F(DpdkPort, CopyModeCopiesAndSaysSo) {
  REQUIRE_DPDK();
  Port* port = start_port("device = \"net_null0,size=128\"\nbuffers = \"copy\"");
  ASSERT_NE(port, nullptr);
  Pool* pool = pool_.get();
  EXPECT_NE(port->path_report().find("copy: one memcpy"), std::string::npos) << port->path_report();
  Mbuf* pkts[32];
  for (unsigned b = 0; b < 10; ++b) {
    ASSERT_EQ(port->rx_queue(0)(pkts, 32), 32u);
    for (Mbuf* m : pkts) {
      EXPECT_TRUE(pool->contains(m));
      EXPECT_EQ(m->data_len, 128u);
    }
    // Send them back out: the copy path on transmit.
    ASSERT_EQ(port->tx_queue(0)(pkts, 32), 32u);
  }
  PortStats st = port->stats();
  EXPECT_EQ(st.extended.at("zero_copy"), 0u);
  EXPECT_EQ(st.extended.at("rx_copied"), 320u);
  EXPECT_EQ(st.extended.at("tx_copied"), 320u);
  EXPECT_EQ(st.rx_queues[0].rx_bytes, 320u * 128);
  EXPECT_EQ(st.tx_queues[0].tx_bytes, 320u * 128);
  stop_and_expect_every_slot_back();
}

TEST_F(DpdkPort, RingLoopsBackTheSameSlotsInOrder) {
  REQUIRE_DPDK();
  Port* port = start_port(R"(device = "net_ring0")");
  ASSERT_NE(port, nullptr);
  Pool* pool = pool_.get();
  constexpr std::uint32_t kFrames = 500;
  std::vector<Mbuf*> sent;
  std::uint64_t bytes = 0;
  for (std::uint32_t seq = 0; seq < kFrames;) {
    Mbuf* pkts[32];
    std::uint16_t n = 0;
    for (; n < 32 && seq < kFrames; ++n, ++seq) {
      pkts[n] = pool_frame(pool, seq, frame_len(seq));
      ASSERT_NE(pkts[n], nullptr);
      bytes += frame_len(seq);
      sent.push_back(pkts[n]);
    }
    ASSERT_EQ(port->tx_queue(0)(pkts, n), n);
  }
  EXPECT_EQ(pool->in_use(), kFrames);  // in the ring, owned by DPDK
  std::vector<Mbuf*> got = receive_until_idle();
  ASSERT_EQ(got.size(), kFrames);
  std::uint64_t got_bytes = 0;
  for (std::uint32_t i = 0; i < kFrames; ++i) {
    EXPECT_EQ(got[i], sent[i]) << "frame " << i << " did not come back in its own slot";
    ASSERT_EQ(got[i]->data_len, frame_len(i));
    auto want = pattern_frame(i, frame_len(i));
    EXPECT_EQ(std::memcmp(got[i]->data(), want.data(), want.size()), 0) << "frame " << i;
    got_bytes += got[i]->data_len;
  }
  EXPECT_EQ(got_bytes, bytes);
  PortStats st = port->stats();
  EXPECT_EQ(st.rx_queues[0].rx_packets, kFrames);
  EXPECT_EQ(st.tx_queues[0].tx_packets, kFrames);
  EXPECT_EQ(st.rx_queues[0].rx_bytes, bytes);
  EXPECT_EQ(st.tx_queues[0].tx_bytes, bytes);
  EXPECT_EQ(st.extended.at("rx_copied") + st.extended.at("tx_copied"), 0u);
  mbuf_free_bulk(got.data(), static_cast<unsigned>(got.size()));
  stop_and_expect_every_slot_back();
}

TEST_F(DpdkPort, SharedBufferIsCopiedOnTransmit) {
  REQUIRE_DPDK();
  Port* port = start_port(R"(device = "net_ring0")");
  ASSERT_NE(port, nullptr);
  Pool* pool = pool_.get();
  Mbuf* m = pool_frame(pool, 9, 100);
  mbuf_ref(m);  // a second holder: its slot must not travel through DPDK
  ASSERT_EQ(port->tx_queue(0)(&m, 1), 1u);
  EXPECT_EQ(m->refcnt.load(), 1);  // the transmit released its reference
  Mbuf* back = nullptr;
  ASSERT_EQ(port->rx_queue(0)(&back, 1), 1u);
  EXPECT_NE(back, m);
  ASSERT_EQ(back->data_len, 100u);
  EXPECT_EQ(std::memcmp(back->data(), m->data(), 100), 0);
  EXPECT_EQ(port->stats().extended.at("tx_copied"), 1u);
  mbuf_free(back);
  mbuf_free(m);
  stop_and_expect_every_slot_back();
}

TEST_F(DpdkPort, StopReturnsBuffersStillInTheDevice) {
  REQUIRE_DPDK();
  Port* port = start_port(R"(device = "net_ring0")");
  ASSERT_NE(port, nullptr);
  Pool* pool = pool_.get();
  Mbuf* pkts[64];
  for (std::uint32_t i = 0; i < 64; ++i) pkts[i] = pool_frame(pool, i, 80);
  ASSERT_EQ(port->tx_queue(0)(pkts, 64), 64u);
  EXPECT_EQ(pool->in_use(), 64u);
  stop_and_expect_every_slot_back();
  // The port comes back after a stop, with the device probed afresh.
  ASSERT_TRUE(port->start());
  ASSERT_EQ(port->tx_queue(0)(pkts, 0), 0u);
  Mbuf* one = pool_frame(pool, 1, 70);
  ASSERT_EQ(port->tx_queue(0)(&one, 1), 1u);
  Mbuf* back = nullptr;
  ASSERT_EQ(port->rx_queue(0)(&back, 1), 1u);
  EXPECT_EQ(back, one);
  mbuf_free(back);
  stop_and_expect_every_slot_back();
}

#ifdef RAWPIPE_HAVE_PMD_DPDK
// The bridge's mempool hands shadows out untouched, so every shadow of a free slot must be in the
// state rte_mbuf_raw_alloc promises (refcnt 1, one segment, no next) plus the pinned-buffer flag
// and the default headroom, whatever its slot went through: a transmit from a moved data_off, a
// receive of that frame, a transmit the device refused, and rawpipe's own free of each.
TEST_F(DpdkPort, ShadowsOfFreeSlotsAreRawWhateverTheirSlotsWentThrough) {
  Port* port = start_port(R"(device = "net_ring0")");
  ASSERT_NE(port, nullptr);
  Pool* pool = pool_.get();
  constexpr std::uint32_t kShift = 6;  // a header pushed in front, as a VLAN insert would
  // More than net_ring's ring holds, so the last bursts are refused and stay with us.
  constexpr std::uint32_t kFrames = 1200;
  std::vector<Mbuf*> refused;
  std::uint32_t accepted = 0;
  for (std::uint32_t seq = 0; seq < kFrames;) {
    Mbuf* pkts[32];
    std::uint16_t n = 0;
    for (; n < 32 && seq < kFrames; ++n, ++seq) {
      Mbuf* m = pool->alloc();
      ASSERT_NE(m, nullptr);
      m->data_off += kShift;
      std::memset(m->data(), 0x5a, 64);
      m->data_len = 64;
      pkts[n] = m;
    }
    const std::uint16_t sent = port->tx_queue(0)(pkts, n);
    accepted += sent;
    refused.insert(refused.end(), pkts + sent, pkts + n);
  }
  ASSERT_FALSE(refused.empty()) << "net_ring took all " << kFrames << " frames: the refused path went untested";
  ASSERT_GT(accepted, 0u);
  mbuf_free_bulk(refused.data(), static_cast<unsigned>(refused.size()));
  std::vector<Mbuf*> received = receive_until_idle();
  for (const Mbuf* m : received) EXPECT_EQ(m->data_off, kMbufHeaderSize + RTE_PKTMBUF_HEADROOM + kShift);
  ASSERT_EQ(received.size(), accepted);
  mbuf_free_bulk(received.data(), static_cast<unsigned>(received.size()));
  ASSERT_EQ(pool->available(), kPoolCount);

  auto bridge = dpdk::MbufBridge::get(pool);
  ASSERT_TRUE(bridge) << bridge.message();
  std::vector<rte_mbuf*> all(kPoolCount);
  ASSERT_EQ(rte_mempool_get_bulk(bridge.value()->mempool(), reinterpret_cast<void**>(all.data()), kPoolCount), 0);
  unsigned not_raw = 0;
  for (const rte_mbuf* m : all) {
    const bool raw = m->pool == bridge.value()->mempool() && rte_mbuf_refcnt_read(m) == 1 && m->next == nullptr &&
                     m->nb_segs == 1 && m->ol_flags == RTE_MBUF_F_EXTERNAL && m->data_off == RTE_PKTMBUF_HEADROOM;
    if (!raw && not_raw++ < 3)
      ADD_FAILURE() << "shadow of slot " << dpdk::MbufBridge::slot_of(m)->index << ": refcnt " << rte_mbuf_refcnt_read(m)
                    << ", next " << m->next << ", nb_segs " << m->nb_segs << ", ol_flags 0x" << std::hex << m->ol_flags
                    << std::dec << ", data_off " << m->data_off
                    << (m->pool == bridge.value()->mempool() ? "" : ", pool not the receive mempool");
  }
  EXPECT_EQ(not_raw, 0u) << "of " << kPoolCount << " shadows handed out";
  rte_mempool_put_bulk(bridge.value()->mempool(), reinterpret_cast<void* const*>(all.data()), kPoolCount);
  stop_and_expect_every_slot_back();
}
#else
TEST_F(DpdkPort, ShadowsOfFreeSlotsAreRawWhateverTheirSlotsWentThrough) { REQUIRE_DPDK(); }
#endif

TEST_F(DpdkPort, TwoQueuesSayHowTheySpreadFlows) {
  REQUIRE_DPDK();
  Port* port = start_port(R"(device = "net_null0")", kPoolCount, 2, 2);
  ASSERT_NE(port, nullptr);
  // net_null advertises RSS hash functions (it keeps a redirection table it never uses).
  EXPECT_TRUE(port->caps().rss);
  EXPECT_NE(port->path_report().find("RSS over 2 queues"), std::string::npos) << port->path_report();
  Mbuf* pkts[16];
  for (std::uint16_t q = 0; q < 2; ++q)
    for (int b = 0; b < 5; ++b) {
      ASSERT_EQ(port->rx_queue(q)(pkts, 16), 16u);
      for (Mbuf* m : pkts) EXPECT_EQ(m->queue, q);
      ASSERT_EQ(port->tx_queue(q)(pkts, 16), 16u);
    }
  PortStats st = port->stats();
  ASSERT_EQ(st.rx_queues.size(), 2u);
  EXPECT_EQ(st.rx_queues[0].rx_packets, 80u);
  EXPECT_EQ(st.rx_queues[1].rx_packets, 80u);
  EXPECT_EQ(st.tx_queues[1].tx_packets, 80u);
  stop_and_expect_every_slot_back();
}

TEST_F(DpdkPort, PortsOverOnePoolShareTheBridge) {
  REQUIRE_DPDK();
  auto pool = make_pool();
  auto a = open_port(R"(device = "net_ring0")", pool.get());
  auto b = open_port(R"(device = "net_null0")", pool.get());
  ASSERT_TRUE(a.port) << a.error;
  ASSERT_TRUE(b.port) << b.error;
  ASSERT_TRUE(a.port->start());
  ASSERT_TRUE(b.port->start());
  Mbuf* pkts[32];
  ASSERT_EQ(b.port->rx_queue(0)(pkts, 32), 32u);
  // Received on one port, sent on the other without a copy.
  ASSERT_EQ(a.port->tx_queue(0)(pkts, 32), 32u);
  EXPECT_EQ(a.port->stats().extended.at("tx_copied"), 0u);
  ASSERT_EQ(a.port->rx_queue(0)(pkts, 32), 32u);
  mbuf_free_bulk(pkts, 32);
  a.port->stop();
  b.port->stop();
  EXPECT_EQ(pool->available(), kPoolCount);
}

TEST_F(DpdkPort, ConfigErrorsNameTheKey) {
  REQUIRE_DPDK();
  auto pool = make_pool(64);
  auto missing = open_port("", pool.get());
  EXPECT_FALSE(missing.port);
  EXPECT_NE(missing.error.find("device"), std::string::npos) << missing.error;
  auto bad_mode = open_port("device = \"net_null0\"\nbuffers = \"sometimes\"", pool.get());
  EXPECT_FALSE(bad_mode.port);
  EXPECT_NE(bad_mode.error.find("buffers"), std::string::npos) << bad_mode.error;
  auto unknown = open_port("device = \"net_null0\"\nburst = 4", pool.get());
  EXPECT_FALSE(unknown.port);
  EXPECT_NE(unknown.error.find("burst"), std::string::npos) << unknown.error;
  auto no_driver = open_port(R"(device = "net_nosuchdriver0")", pool.get());
  EXPECT_FALSE(no_driver.port);
  EXPECT_NE(no_driver.error.find("cannot"), std::string::npos) << no_driver.error;
  auto queues = open_port(R"(device = "net_ring0")", pool.get(), 64, 1);
  EXPECT_FALSE(queues.port);
  EXPECT_NE(queues.error.find("rx_queues"), std::string::npos) << queues.error;
}

TEST_F(DpdkPort, OneDeviceCannotBackTwoPorts) {
  REQUIRE_DPDK();
  auto pool = make_pool();
  auto a = open_port(R"(device = "net_null0")", pool.get());
  ASSERT_TRUE(a.port) << a.error;
  auto b = open_port(R"(device = "net_null0")", pool.get());
  EXPECT_FALSE(b.port);
  EXPECT_NE(b.error.find("already used"), std::string::npos) << b.error;
}

TEST_F(DpdkPort, EalArgumentsMustAgree) {
  REQUIRE_DPDK();
  auto pool = make_pool(64);
  // Make sure the EAL runs, then ask for different arguments.
  { auto a = open_port(R"(device = "net_null0")", pool.get()); ASSERT_TRUE(a.port) << a.error; }
  const PmdDriver* drv = find_pmd("dpdk");
  auto section = ConfigSection::parse_string("device = \"net_null1\"\neal_args = [\"--no-huge\"]", "x.toml");
  ASSERT_TRUE(section);
  auto spec = drv->parse(section.value());
  ASSERT_TRUE(spec) << spec.message();
  PortEnv env;
  env.pool = pool.get();
  auto port = spec.value()->open(env);
  ASSERT_FALSE(port);
  EXPECT_NE(port.message().find("same eal_args"), std::string::npos) << port.message();
}

#ifdef RAWPIPE_HAVE_PMD_PCAP

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / fmt::format("rawpipe_dpdk_{}_{}", getpid(), name)).string();
}

struct Written {
  std::uint64_t frames = 0;
  std::uint64_t bytes = 0;
};

Written write_pcap(const std::string& path, std::uint32_t frames) {
  Written w;
  pcap_t* dead = pcap_open_dead(DLT_EN10MB, 65535);
  pcap_dumper_t* d = pcap_dump_open(dead, path.c_str());
  EXPECT_NE(d, nullptr) << pcap_geterr(dead);
  for (std::uint32_t seq = 0; seq < frames; ++seq) {
    std::size_t len = seq % 5 == 0 ? 1514 : frame_len(seq);
    auto f = pattern_frame(seq, len);
    pcap_pkthdr h{};
    h.ts.tv_sec = seq;
    h.caplen = h.len = static_cast<bpf_u_int32>(len);
    pcap_dump(reinterpret_cast<u_char*>(d), &h, f.data());
    ++w.frames;
    w.bytes += len;
  }
  pcap_dump_close(d);
  pcap_close(dead);
  return w;
}

TEST_F(DpdkPort, PcapRxReadsEveryFrameOfAFile) {
  REQUIRE_DPDK();
  std::string in = temp_path("in.pcap");
  constexpr std::uint32_t kFrames = 300;
  Written w = write_pcap(in, kFrames);
  Port* port = start_port(fmt::format("device = \"net_pcap0,rx_pcap={}\"", in));
  ASSERT_NE(port, nullptr);
  std::vector<Mbuf*> got = receive_until_idle();
  std::uint32_t seq = 0;
  std::uint64_t bytes = 0;
  for (; seq < got.size(); ++seq) {
    std::size_t len = seq % 5 == 0 ? 1514 : frame_len(seq);
    ASSERT_EQ(got[seq]->data_len, len) << "frame " << seq;
    auto want = pattern_frame(seq, len);
    EXPECT_EQ(std::memcmp(got[seq]->data(), want.data(), len), 0) << "frame " << seq;
    bytes += len;
  }
  mbuf_free_bulk(got.data(), static_cast<unsigned>(got.size()));
  EXPECT_EQ(seq, w.frames);
  EXPECT_EQ(bytes, w.bytes);
  PortStats st = port->stats();
  EXPECT_EQ(st.rx_queues[0].rx_packets, w.frames);
  EXPECT_EQ(st.rx_queues[0].rx_bytes, w.bytes);
  EXPECT_EQ(st.extended.at("rx_copied"), 0u);
  stop_and_expect_every_slot_back();
  std::filesystem::remove(in);
}

TEST_F(DpdkPort, PcapTxWritesWhatWasSent) {
  REQUIRE_DPDK();
  std::string in = temp_path("empty.pcap");
  std::string out = temp_path("out.pcap");
  write_pcap(in, 0);
  Port* port = start_port(fmt::format("device = \"net_pcap1,rx_pcap={},tx_pcap={}\"", in, out));
  ASSERT_NE(port, nullptr);
  Pool* pool = pool_.get();
  constexpr std::uint32_t kFrames = 200;
  std::uint64_t bytes = 0;
  for (std::uint32_t seq = 0; seq < kFrames;) {
    Mbuf* pkts[20];
    std::uint16_t n = 0;
    for (; n < 20; ++n, ++seq) {
      pkts[n] = pool_frame(pool, seq, frame_len(seq));
      bytes += frame_len(seq);
    }
    ASSERT_EQ(port->tx_queue(0)(pkts, n), n);
  }
  EXPECT_EQ(port->stats().tx_queues[0].tx_bytes, bytes);
  stop_and_expect_every_slot_back();  // closes the dumper: the file is complete

  char err[PCAP_ERRBUF_SIZE];
  pcap_t* p = pcap_open_offline(out.c_str(), err);
  ASSERT_NE(p, nullptr) << err;
  pcap_pkthdr* h;
  const u_char* data;
  std::uint32_t seq = 0;
  std::uint64_t read_bytes = 0;
  while (pcap_next_ex(p, &h, &data) == 1) {
    ASSERT_EQ(h->caplen, frame_len(seq)) << "frame " << seq;
    auto want = pattern_frame(seq, h->caplen);
    EXPECT_EQ(std::memcmp(data, want.data(), h->caplen), 0) << "frame " << seq;
    read_bytes += h->caplen;
    ++seq;
  }
  pcap_close(p);
  EXPECT_EQ(seq, kFrames);
  EXPECT_EQ(read_bytes, bytes);
  std::filesystem::remove(in);
  std::filesystem::remove(out);
}

#else

TEST_F(DpdkPort, PcapRxReadsEveryFrameOfAFile) {
  GTEST_SKIP() << "built without the pcap PMD (-Dpmd_pcap=disabled)";
}

TEST_F(DpdkPort, PcapTxWritesWhatWasSent) {
  GTEST_SKIP() << "built without the pcap PMD (-Dpmd_pcap=disabled)";
}

#endif  // RAWPIPE_HAVE_PMD_PCAP

}  // namespace
}  // namespace rawpipe
