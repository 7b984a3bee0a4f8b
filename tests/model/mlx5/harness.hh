// A pool, a device model and one receive/transmit queue wired the way the mlx5 port wires them,
// for data-path tests that drive the burst functions directly.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "pipeline/buf/pool.hh"
#include "pmd/mlx5/flow.hh"
#include "pmd/mlx5/hw.hh"
#include "pmd/mlx5/model/device.hh"
#include "pmd/mlx5/rx.hh"
#include "pmd/mlx5/tx.hh"
#include "tests/support/frames.hh"

namespace rawpipe::mlx5::testing {

inline constexpr wire::MacAddr kPortMac = rawpipe::testing::kTestDstMac;

struct Harness {
  std::unique_ptr<Pool> pool;
  model::Device dev;
  std::unique_ptr<RxQueue> rxq;
  std::unique_ptr<TxQueue> txq;
  std::vector<Mbuf*> rx_elts, tx_elts;
  std::unique_ptr<std::uint8_t[]> mprq;
  RxBurstFn rx = nullptr;
  TxBurstFn tx = nullptr;
  std::uint16_t rq_id = 0, sq_id = 0;

  explicit Harness(std::uint32_t pool_count = 4096, std::uint32_t buf_size = 2048) {
    PoolConfig c;
    c.name = "mlx5-test";
    c.count = pool_count;
    c.buf_size = buf_size;
    c.cache_size = 0;
    c.huge_pages = HugePages::kNever;
    auto p = Pool::create(c);
    EXPECT_TRUE(p) << p.message();
    pool = std::move(p).value();
  }
  ~Harness() { release(); }

  // Receive queue on the model, with a flow rule taking every frame to the port's MAC.
  void make_rx(const model::RqOptions& o, bool install_catch_all = true) {
    rxq = std::make_unique<RxQueue>();
    RxQueue& q = *rxq;
    rq_id = dev.create_rq(o, q.rq, q.cq);
    q.pool = pool.get();
    q.sink = dev.sink();
    q.lkey = dev.reg_mr(pool->region(), pool->region_bytes());
    q.data_room = pool->data_room();
    q.queue_id = 0;
    q.port_id = 3;
    q.control = {this, [](void* ctx, std::uint16_t) { return static_cast<Harness*>(ctx)->dev.reset_rq(0); }};
    if (o.striding) {
      q.stride_size = 1u << o.log_stride_size;
      q.strides_per_wqe = 1u << o.log_strides;
      const std::size_t bytes = std::size_t(o.wqe_cnt) * q.stride_size * q.strides_per_wqe;
      mprq.reset(new std::uint8_t[bytes]);
      q.mprq_buf = mprq.get();
      const std::uint32_t mkey = dev.reg_mr(q.mprq_buf, bytes);
      q.lkey = mkey;
    } else {
      rx_elts.assign(o.wqe_cnt, nullptr);
      q.elts = rx_elts.data();
    }
    Status s = rx_setup(q, true);
    ASSERT_TRUE(s.is_ok()) << s.message();
    rx = rx_burst_function(o.striding ? RxMode::kStriding : RxMode::kCyclic, o.compression, true);
    if (install_catch_all) {
      FlowTarget t;
      t.port_mac = kPortMac;
      auto attr = build_catch_all_attr(t);
      dev.create_flow(rq_id, flow_attr(attr));
    }
  }

  void make_tx(const model::SqOptions& o, std::uint16_t comp_every = 4) {
    txq = std::make_unique<TxQueue>();
    TxQueue& q = *txq;
    sq_id = dev.create_sq(o, q.sq, q.cq);
    q.pool = pool.get();
    q.sink = dev.sink();
    q.lkey = dev.reg_mr(pool->region(), pool->region_bytes());
    q.inline_bytes = o.min_inline;
    q.comp_every = comp_every;
    q.control = {this, [](void* ctx, std::uint16_t) { return static_cast<Harness*>(ctx)->dev.reset_sq(0); }};
    tx_elts.assign(o.wqe_cnt, nullptr);
    q.elts = tx_elts.data();
    Status s = tx_setup(q);
    ASSERT_TRUE(s.is_ok()) << s.message();
    tx = tx_burst_function(true);
  }

  std::uint16_t rx_burst(Mbuf** pkts, std::uint16_t n) { return rx(rxq.get(), pkts, n); }
  std::uint16_t tx_burst(Mbuf** pkts, std::uint16_t n) { return tx(txq.get(), pkts, n); }

  void release() {
    if (rxq) rx_release(*rxq);
    if (txq) tx_release(*txq);
    rxq.reset();
    txq.reset();
  }
};

// A UDP frame to the port's MAC whose payload starts with a 32-bit sequence number.
inline std::vector<std::uint8_t> seq_frame(std::uint32_t seq, std::uint16_t payload_len = 18, std::uint16_t sport = 1000) {
  auto f = rawpipe::testing::udp4_frame(wire::ipv4(10, 0, 0, 1), wire::ipv4(10, 0, 0, 2), sport, 5000, payload_len);
  const std::size_t off = 14 + 20 + 8;
  f[off] = static_cast<std::uint8_t>(seq >> 24);
  f[off + 1] = static_cast<std::uint8_t>(seq >> 16);
  f[off + 2] = static_cast<std::uint8_t>(seq >> 8);
  f[off + 3] = static_cast<std::uint8_t>(seq);
  // Fix the UDP checksum for the new payload bytes: zero means "none" on IPv4.
  f[14 + 20 + 6] = 0;
  f[14 + 20 + 7] = 0;
  return f;
}

inline std::uint32_t seq_of(const Mbuf* m) {
  const std::uint8_t* p = m->data() + 14 + 20 + 8;
  return std::uint32_t(p[0]) << 24 | std::uint32_t(p[1]) << 16 | std::uint32_t(p[2]) << 8 | p[3];
}

}  // namespace rawpipe::mlx5::testing
