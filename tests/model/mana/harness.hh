// Test wiring: the MANA data path on the device model, set up as the control path would from
// manadv_init_obj, plus frame builders.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <vector>

#include "pipeline/buf/pool.hh"
#include "pipeline/wire/builder.hh"
#include "pmd/mana/model/device.hh"
#include "pmd/mana/setup.hh"

namespace rawpipe::mana::test {

inline std::unique_ptr<Pool> make_pool(std::uint32_t count, std::uint32_t buf_size = 2048) {
  PoolConfig c;
  c.name = "mana-test";
  c.count = count;
  c.buf_size = buf_size;
  c.cache_size = 0;
  c.huge_pages = HugePages::kNever;
  auto p = Pool::create(c);
  EXPECT_TRUE(p) << p.message();
  return std::move(p).value();
}

struct HarnessConfig {
  ModelOptions model{};
  std::uint32_t rx_wqes = 64;
  std::uint32_t rx_cq = 64;
  std::uint32_t tx_wqes = 64;
  std::uint32_t tx_cq = 64;
  std::uint32_t pool_count = 512;
  bool check_cq = true;
};

struct Harness {
  explicit Harness(HarnessConfig c = {}) : cfg(c), model(c.model) {
    pool = make_pool(c.pool_count);
    lkey = model.register_mr(pool->region(), pool->region_bytes());
    rx_cq_id = model.create_cq(c.rx_cq);
    rq_id = model.create_rq(c.rx_wqes, rx_cq_id);
    tx_cq_id = model.create_cq(c.tx_cq);
    sq_id = model.create_sq(c.tx_wqes, tx_cq_id);

    QueueSetup rs;
    model.describe_wq(rq_id, rs.wq);
    model.describe_cq(rx_cq_id, rs.cq);
    rs.db_page = model.db_page();
    rs.db_sink = model.doorbell_sink();
    rs.lkey = lkey;
    rs.pool = pool.get();
    rs.port_id = 7;
    rs.queue_id = 0;
    rs.require_cq_covers_wq = c.check_cq;
    Status s = setup_rx_queue(rx, rs);
    EXPECT_TRUE(s) << s.message();

    QueueSetup ts;
    model.describe_wq(sq_id, ts.wq);
    model.describe_cq(tx_cq_id, ts.cq);
    ts.db_page = model.db_page();
    ts.db_sink = model.doorbell_sink();
    ts.lkey = lkey;
    ts.mr_begin = pool->region();
    ts.mr_end = pool->region() + pool->region_bytes();
    ts.vp_offset = model.vp_offset();
    ts.require_cq_covers_wq = c.check_cq;
    s = setup_tx_queue(tx, ts);
    EXPECT_TRUE(s) << s.message();
    rx_refill<rdma::ModelDoorbell>(rx);
  }

  std::uint16_t rx_burst(Mbuf** pkts, std::uint16_t n) { return mana::rx_burst<rdma::ModelDoorbell>(&rx, pkts, n); }
  std::uint16_t tx_burst(Mbuf** pkts, std::uint16_t n) { return mana::tx_burst<rdma::ModelDoorbell>(&tx, pkts, n); }

  // Everything the driver holds goes back; then the pool must be whole.
  void release() {
    rx_release_all(rx);
    tx_release_all(tx);
  }

  HarnessConfig cfg;
  std::unique_ptr<Pool> pool;
  ManaModel model;
  std::uint32_t lkey = 0, rx_cq_id = 0, rq_id = 0, tx_cq_id = 0, sq_id = 0;
  RxQueue rx;
  TxQueue tx;
};

// A UDP frame whose payload starts with a 32-bit sequence number.
inline std::vector<std::uint8_t> udp_frame(std::uint32_t seq, std::uint16_t payload_len = 18, int ip_version = 4,
                                           int vlan = -1, bool tcp = false) {
  wire::FrameSpec s;
  s.eth.dst = {0x02, 0, 0, 0, 0, 1};
  s.eth.src = {0x02, 0, 0, 0, 0, 2};
  if (vlan >= 0) {
    s.eth.vlan_count = 1;
    s.eth.vlans[0].tci = static_cast<std::uint16_t>(vlan);
  }
  s.ip_version = static_cast<std::uint8_t>(ip_version);
  s.ipv4.src = wire::ipv4(10, 0, 0, static_cast<std::uint8_t>(seq % 200 + 1));
  s.ipv4.dst = wire::ipv4(239, 1, 1, 1);
  s.ipv6.src[0] = 0xfd;
  s.ipv6.src[15] = static_cast<std::uint8_t>(seq);
  s.ipv6.dst[0] = 0xff;
  s.ipv6.dst[1] = 0x02;
  s.ipv6.dst[15] = 1;
  s.l4 = tcp ? wire::L4Kind::kTcp : wire::L4Kind::kUdp;
  s.udp = {static_cast<std::uint16_t>(1000 + seq % 64), 5000, true};
  s.tcp.src_port = static_cast<std::uint16_t>(1000 + seq % 64);
  s.tcp.dst_port = 5000;
  std::vector<std::uint8_t> payload(std::max<std::uint16_t>(payload_len, 4));
  std::memcpy(payload.data(), &seq, 4);
  s.payload = payload.data();
  s.payload_len = static_cast<std::uint16_t>(payload.size());
  s.min_frame_len = 60;
  std::vector<std::uint8_t> out(2048);
  out.resize(wire::write_frame(s, out.data(), out.size()));
  EXPECT_FALSE(out.empty());
  return out;
}

}  // namespace rawpipe::mana::test
