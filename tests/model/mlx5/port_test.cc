// The mlx5 ports as the pipeline opens them: "mlx5-model" end to end (config keys, steering from
// endpoint rules, the model on its own thread, exact counts, every buffer back), and the real
// "mlx5" driver's messages on a host without a ConnectX.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <thread>

#include <fmt/format.h>

#include "pipeline/buf/pool.hh"
#include "pipeline/classify/rule.hh"
#include "pipeline/config/section.hh"
#include "pipeline/parse/parse.hh"
#include "pmd/mlx5/probe.hh"
#include "pipeline/port/registry.hh"
#include "pipeline/port/driver.hh"
#include "rawpipe/config.hh"
#include "rawpipe/pipeline.hh"

namespace rawpipe {
namespace {

std::unique_ptr<Pool> make_pool(std::uint32_t count) {
  PoolConfig c;
  c.name = "mlx5-port";
  c.count = count;
  c.huge_pages = HugePages::kNever;
  auto p = Pool::create(c);
  EXPECT_TRUE(p) << p.message();
  return std::move(p).value();
}

Result<std::unique_ptr<PortSpec>> parse(const std::string& pmd, const std::string& toml) {
  auto doc = ConfigSection::parse_string(toml);
  if (!doc) return doc.status();
  const PmdDriver* d = find_pmd(pmd);
  if (!d) return Status::errorf("no driver {}", pmd);
  auto spec = d->parse(doc.value());
  if (!spec) return spec.status();
  RAWPIPE_TRY(doc->finish());
  return spec;
}

SteeringRules rules(std::initializer_list<std::pair<const char*, std::uint32_t>> list) {
  SteeringRules r;
  std::uint16_t ep = 0;
  for (auto [text, tag] : list) {
    auto m = parse_match_rule(text);
    EXPECT_TRUE(m) << m.message();
    r.rules.push_back({m.value(), ep++, tag});
  }
  return r;
}

struct Drained {
  std::uint64_t received = 0;
  std::uint64_t tagged[4] = {};
  std::uint64_t udp_ok = 0;
};

Drained drain(Port& port, std::uint16_t queues, std::uint64_t expect, bool echo) {
  Drained run;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (run.received < expect && std::chrono::steady_clock::now() < deadline) {
    for (std::uint16_t q = 0; q < queues; ++q) {
      Mbuf* pkts[32];
      const std::uint16_t n = port.rx_queue(q)(pkts, 32);
      parse_burst(pkts, n);
      for (std::uint16_t i = 0; i < n; ++i) {
        run.received++;
        if (pkts[i]->flow_tag < 4) run.tagged[pkts[i]->flow_tag]++;
        if (pkts[i]->drop_reason == 0 && pkts[i]->l4_proto == 17 && (pkts[i]->flags & pkt_flag::kL4CsumGood)) run.udp_ok++;
      }
      std::uint16_t sent = echo ? port.tx_queue(0)(pkts, n) : 0;
      mbuf_free_bulk(pkts + sent, n - sent);
    }
  }
  return run;
}

TEST(Mlx5ModelPort, SynthFramesThroughSteeringToTheQueues) {
  auto spec = parse("mlx5-model", R"(
inject_count = 20000
inject_dst = "10.0.0.2:5000"
inject_flows = 64
)");
  ASSERT_TRUE(spec) << spec.message();
  auto pool = make_pool(4096);
  PortEnv env;
  env.name = "m0";
  env.port_id = 1;
  env.rx_queues = 2;
  env.tx_queues = 1;
  env.rx_ring_size = 256;
  env.tx_ring_size = 256;
  env.pool = pool.get();
  auto port = spec.value()->open(env);
  ASSERT_TRUE(port) << port.message();
  Port& p = *port.value();
  EXPECT_EQ(p.pmd_name(), "mlx5-model");
  EXPECT_NE(p.path_report().find("Toeplitz RSS"), std::string::npos) << p.path_report();
  ASSERT_TRUE(p.update_steering(rules({{"udp dst 10.0.0.2:5000", 2}})).is_ok());
  ASSERT_TRUE(p.start().is_ok());
  const Drained run = drain(p, 2, 20000, true);
  EXPECT_EQ(run.received, 20000u);
  EXPECT_EQ(run.tagged[2], 20000u) << "every frame carries its rule's flow tag";
  EXPECT_EQ(run.udp_ok, 20000u);
  const PortStats s = p.stats();
  EXPECT_GT(s.rx_queues[0].rx_packets, 0u) << "RSS spreads 64 flows over both queues";
  EXPECT_GT(s.rx_queues[1].rx_packets, 0u);
  EXPECT_EQ(s.rx_queues[0].rx_packets + s.rx_queues[1].rx_packets, 20000u);
  EXPECT_EQ(s.extended.at("flow_rules"), 1u);
  p.stop();
  EXPECT_EQ(p.stats().extended.at("model_doorbell_order_errors"), 0u);
  EXPECT_EQ(pool->available(), pool->count()) << "stop returns every buffer";
}

// The wire does not stop when the port does. stop() must take the flow rules away and the queues
// out of RDY before the buffers posted in them go back to the pool; otherwise the NIC may write
// the next frames into buffers the pool has handed to someone else. The model flags every WQE
// still posted in a ready RQ whose buffer the driver no longer holds when the queue is stopped.
TEST(Mlx5ModelPort, StopTakesRulesAndQueuesAwayBeforeFreeingPostedBuffers) {
  auto spec = parse("mlx5-model", "inject_count = 100000000\ninject_rate_pps = 100000\ninject_dst = \"10.0.0.2:5000\"\n");
  ASSERT_TRUE(spec) << spec.message();
  auto pool = make_pool(2048);
  PortEnv env;
  env.name = "m2";
  env.rx_ring_size = 256;
  env.tx_ring_size = 64;
  env.pool = pool.get();
  auto port = spec.value()->open(env);
  ASSERT_TRUE(port) << port.message();
  Port& p = *port.value();
  ASSERT_TRUE(p.update_steering(rules({{"udp dst 10.0.0.2:5000", 1}})).is_ok());
  ASSERT_TRUE(p.start().is_ok());
  EXPECT_GE(drain(p, 1, 500, false).received, 500u);
  p.stop();
  EXPECT_EQ(pool->available(), pool->count()) << "stop returns every buffer";
  const std::uint64_t at_stop = p.stats().extended.at("model_frames_injected");
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (p.stats().extended.at("model_frames_injected") < at_stop + 300 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  const PortStats s = p.stats();
  EXPECT_GE(s.extended.at("model_frames_injected"), at_stop + 300) << "the wire kept carrying frames after stop";
  EXPECT_EQ(s.extended.at("model_dma_into_freed_buffer"), 0u) << "no frame was written into a freed buffer";
  EXPECT_GT(s.extended.at("model_rx_to_kernel"), 0u) << "with the rules gone, the kernel gets the frames";
  EXPECT_EQ(s.extended.at("flow_rules"), 0u);
  EXPECT_FALSE(p.start()) << "a stopped port is not restarted";
  EXPECT_EQ(pool->available(), pool->count());
}

// A device in the TCP/UDP inline mode (78 bytes): tx_inline = "l4" by name, echoed frames leave
// through two-WQEBB WQEs and the model, which requires 78 inline bytes, rejects none.
TEST(Mlx5ModelPort, L4InlineModeEndToEnd) {
  auto spec = parse("mlx5-model", "inject_count = 3000\ninject_dst = \"10.0.0.2:5000\"\nmodel_min_inline = \"78\"\n"
                                  "tx_inline = \"l4\"\n");
  ASSERT_TRUE(spec) << spec.message();
  auto pool = make_pool(2048);
  PortEnv env;
  env.name = "m4";
  env.rx_ring_size = 256;
  env.tx_ring_size = 64;
  env.pool = pool.get();
  auto port = spec.value()->open(env);
  ASSERT_TRUE(port) << port.message();
  Port& p = *port.value();
  EXPECT_NE(p.path_report().find("78 inline header bytes"), std::string::npos) << p.path_report();
  ASSERT_TRUE(p.update_steering(rules({{"udp dst 10.0.0.2:5000", 1}})).is_ok());
  ASSERT_TRUE(p.start().is_ok());
  EXPECT_EQ(drain(p, 1, 3000, true).received, 3000u);
  p.stop();
  const PortStats s = p.stats();
  EXPECT_EQ(s.tx_queues[0].tx_errors, 0u);
  EXPECT_GT(s.tx_queues[0].tx_packets, 0u);
  EXPECT_EQ(s.extended.at("tx_queue_resets"), 0u);
  EXPECT_EQ(pool->available(), pool->count());
  EXPECT_FALSE(parse("mlx5-model", "tx_inline = \"l5\"\n")) << "only the device inline modes";
}

TEST(Mlx5ModelPort, UnmatchedFramesStayWithTheKernelAndRulesFollowUpdates) {
  auto spec = parse("mlx5-model", "inject_count = 5000\ninject_dst = \"10.0.0.2:6000\"\ncqe_compression = true\n");
  ASSERT_TRUE(spec) << spec.message();
  auto pool = make_pool(2048);
  PortEnv env;
  env.name = "m1";
  env.rx_ring_size = 128;
  env.tx_ring_size = 128;
  env.pool = pool.get();
  auto port = spec.value()->open(env);
  ASSERT_TRUE(port) << port.message();
  Port& p = *port.value();
  ASSERT_TRUE(p.update_steering(rules({{"udp dst 10.0.0.2:5000", 1}})).is_ok());
  // Replaced at run time by a rule that matches: make-before-break leaves one rule installed.
  ASSERT_TRUE(p.update_steering(rules({{"udp dst *:6000", 3}})).is_ok());
  EXPECT_EQ(p.stats().extended.at("flow_rules"), 2u) << "one rule, one flow per address family";
  ASSERT_TRUE(p.start().is_ok());
  const Drained run = drain(p, 1, 5000, false);
  EXPECT_EQ(run.received, 5000u);
  EXPECT_EQ(run.tagged[3], 5000u);
  EXPECT_GT(p.stats().extended.at("rx_cqe_sessions"), 0u);
  p.stop();
  EXPECT_EQ(p.stats().extended.at("model_rx_to_kernel"), 0u);
  EXPECT_EQ(pool->available(), pool->count());
}

TEST(Mlx5ModelPort, StridingQueue) {
  auto spec = parse("mlx5-model", "inject_count = 3000\ninject_size = 300\nstriding_rq = true\nlog_strides = 4\n");
  ASSERT_TRUE(spec) << spec.message();
  auto pool = make_pool(2048);
  PortEnv env;
  env.name = "m2";
  env.rx_ring_size = 256;
  env.tx_ring_size = 64;
  env.pool = pool.get();
  auto port = spec.value()->open(env);
  ASSERT_TRUE(port) << port.message();
  Port& p = *port.value();
  ASSERT_TRUE(p.update_steering(rules({{"udp dst 10.0.0.2:5000", 1}})).is_ok());
  ASSERT_TRUE(p.start().is_ok());
  const Drained run = drain(p, 1, 3000, false);
  EXPECT_EQ(run.received, 3000u);
  EXPECT_EQ(run.udp_ok, 3000u);
  EXPECT_GT(p.stats().extended.at("rx_filler_cqes"), 0u);
  p.stop();
  EXPECT_EQ(pool->available(), pool->count());
}

TEST(Mlx5ModelPort, ConfigErrorsNameTheKey) {
  auto both = parse("mlx5-model", "cqe_compression = true\nstriding_rq = true\n");
  ASSERT_FALSE(both);
  EXPECT_NE(both.message().find("striding_rq"), std::string::npos) << both.message();
  auto typo = parse("mlx5-model", "cqe_compresion = true\n");
  ASSERT_FALSE(typo);
  EXPECT_NE(typo.message().find("cqe_compresion"), std::string::npos) << typo.message();
  auto dst = parse("mlx5-model", "inject_dst = \"10.0.0.300:5\"\n");
  ASSERT_TRUE(dst) << "address checked when the port opens";
  auto pool = make_pool(256);
  PortEnv env;
  env.name = "bad";
  env.pool = pool.get();
  auto port = dst.value()->open(env);
  ASSERT_FALSE(port);
  EXPECT_NE(port.message().find("inject_dst"), std::string::npos) << port.message();
  auto missing = parse("mlx5", "cqe_compression = true\n");
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.message().find("interface"), std::string::npos) << missing.message();
}

// Sixteen queues on one lcore from a pool the config leaves unsized: it holds the rings, a burst
// per queue and the lcore's cache (pipeline/plan/pool_sizing.hh), and with every received buffer
// replaced before it is handed on, that must be enough to lose nothing. When each queue took up
// to 256 replacements ahead, the queues' stashes held more than the spare buffers and frames were
// dropped as rx_nombuf.
TEST(Mlx5ModelPort, ManyQueuesOnAnUnsizedPoolLoseNothing) {
  constexpr std::uint64_t kFrames = 2000000;
  std::string text = R"([[pools]]
name = "rx"
huge_pages = "never"

[[ports]]
name = "m"
pmd = "mlx5-model"
rx_queues = 16
tx_queues = 0
inject_count = 2000000
inject_flows = 1024
inject_dst = "10.0.0.2:5000"

[[endpoints]]
name = "s"
action = "sink"
match = ["udp dst 10.0.0.2:5000"]

[[lcores]]
rx = [)";
  for (int q = 0; q < 16; ++q) text += fmt::format("{}\"m:{}\"", q ? ", " : "", q);
  text += "]\n";
  LoadOptions o;
  o.find_pmd = &find_pmd;
  auto loaded = load_config_string(text, "many_queues.toml", o);
  ASSERT_TRUE(loaded) << loaded.message();
  EXPECT_EQ(loaded->plan.pools[0].config.count, 16u * 1024 + 16 * 32 + 2 * 256);
  auto created = Pipeline::create(loaded->plan);
  ASSERT_TRUE(created) << created.message();
  Pipeline& p = *created.value();
  ASSERT_TRUE(p.start());
  auto nombuf = [&] {
    std::uint64_t n = 0;
    for (const QueueCounters& q : p.port(0).stats().rx_queues) n += q.rx_nombuf;
    return n;
  };
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (p.accounting().rx_packets + nombuf() < kFrames && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  ASSERT_TRUE(p.stop());
  const Accounting a = p.accounting();
  EXPECT_EQ(nombuf(), 0u);
  EXPECT_EQ(a.rx_packets, kFrames);
  EXPECT_EQ(a.delivered, kFrames);
  for (const PoolUsage& u : a.pools) EXPECT_EQ(u.outstanding, 0u) << u.name;
}

TEST(Mlx5Port, NoConnectXHereSaysWhatIsMissing) {
  // "lo" exists everywhere and is not mlx5_core.
  Status s = probe_mlx5("lo");
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("not mlx5_core"), std::string::npos) << s.message();
  Status none = probe_mlx5("rawpipe-nosuch0");
  ASSERT_FALSE(none.is_ok());
  EXPECT_NE(none.message().find("no network interface"), std::string::npos) << none.message();

  auto spec = parse("mlx5", "interface = \"lo\"\n");
  ASSERT_TRUE(spec) << spec.message();
  auto pool = make_pool(256);
  PortEnv env;
  env.name = "hw0";
  env.pool = pool.get();
  auto port = spec.value()->open(env);
  ASSERT_FALSE(port);
  EXPECT_NE(port.message().find("interface lo"), std::string::npos) << port.message();
  EXPECT_NE(port.message().find("not mlx5_core"), std::string::npos) << port.message();
}

}  // namespace
}  // namespace rawpipe
