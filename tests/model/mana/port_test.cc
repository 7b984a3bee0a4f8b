// The `mana-model` PMD as the pipeline uses it: parse its keys, open, start, poll each queue's
// burst handle, transmit, stop. Exact counts across RSS queues; every buffer back in the pool.
#include <gtest/gtest.h>
#include <pcap/pcap.h>
#include <unistd.h>

#include <filesystem>

#include "pipeline/config/section.hh"
#include "pipeline/parse/parse.hh"
#include "pmd/drivers.hh"
#include "pmd/mana/probe.hh"
#include "tests/model/mana/harness.hh"
#include <fstream>
#include <nlohmann/json.hpp>
#include <fmt/format.h>
#include "tests/support/process.hh"
#include "rawpipe/port_info.hh"
#include "pipeline/port/driver.hh"
#include "pipeline/buf/pool.hh"

namespace rawpipe::mana {
namespace {

std::unique_ptr<Port> open_model(const std::string& toml, Pool* pool, std::uint16_t queues) {
  auto doc = ConfigSection::parse_string(toml, "model.toml");
  EXPECT_TRUE(doc) << doc.message();
  auto table = doc->table("port");
  auto spec = kManaModelDriver.parse(*table);
  EXPECT_TRUE(spec) << spec.message();
  Status fin = table->finish();
  EXPECT_TRUE(fin) << fin.message();
  PortEnv env;
  env.name = "m0";
  env.port_id = 3;
  env.rx_queues = queues;
  env.tx_queues = queues;
  env.rx_ring_size = 256;
  env.tx_ring_size = 256;
  env.pool = pool;
  auto port = spec.value()->open(env);
  EXPECT_TRUE(port) << port.message();
  return std::move(port).value();
}

// Polls every queue until `want` packets arrived (or nothing moves), parses and echoes them.
std::vector<std::uint64_t> drain(Port& port, std::uint16_t queues, std::uint64_t want, std::uint64_t& tx) {
  std::vector<std::uint64_t> per_queue(queues);
  std::uint64_t total = 0;
  Mbuf* pkts[32];
  for (int idle = 0; total < want && idle < 1000;) {
    bool moved = false;
    for (std::uint16_t q = 0; q < queues; ++q) {
      const auto n = port.rx_queue(q)(pkts, 32);
      if (!n) continue;
      moved = true;
      parse_burst(pkts, n);
      for (unsigned i = 0; i < n; ++i) {
        EXPECT_EQ(pkts[i]->drop_reason, 0);
        EXPECT_EQ(pkts[i]->queue, q);
        EXPECT_EQ(pkts[i]->port, 3);
      }
      per_queue[q] += n;
      total += n;
      const auto sent = port.tx_queue(q)(pkts, n);
      tx += sent;
      mbuf_free_bulk(pkts + sent, n - sent);
    }
    idle = moved ? 0 : idle + 1;
  }
  return per_queue;
}

TEST(ManaModelPort, SynthFramesSpreadOverQueuesWithExactCounts) {
  auto pool = test::make_pool(4096);
  auto port = open_model("[port]\nsource = \"synth\"\nframes = 20000\nflows = 64\nframe_size = 128\n", pool.get(), 4);
  ASSERT_TRUE(port);
  EXPECT_NE(port->path_report().find("no flow rules"), std::string::npos) << port->path_report();
  ASSERT_TRUE(port->start());
  std::uint64_t tx = 0;
  auto per_queue = drain(*port, 4, 20000, tx);
  std::uint64_t total = 0;
  for (auto n : per_queue) {
    EXPECT_GT(n, 0u) << "64 flows over 4 queues: every queue gets some";
    total += n;
  }
  EXPECT_EQ(total, 20000u);
  Mbuf* none[4];
  for (std::uint16_t q = 0; q < 4; ++q) EXPECT_EQ(port->rx_queue(q)(none, 4), 0) << "the source is exhausted";
  PortStats s = port->stats();
  std::uint64_t rx = 0, txp = 0;
  for (auto& c : s.rx_queues) rx += c.rx_packets;
  for (std::uint16_t q = 0; q < 4; ++q) port->tx_queue(q)(none, 0);  // reap the last completions
  s = port->stats();
  for (auto& c : s.tx_queues) txp += c.tx_packets;
  EXPECT_EQ(rx, 20000u);
  EXPECT_EQ(txp, tx);
  EXPECT_EQ(s.extended["model_tx_frames"], tx);
  EXPECT_GT(s.extended["rx_coalesced_cqes"], 0u);
  EXPECT_EQ(s.extended["model_violations"], 0u);
  EXPECT_EQ(s.extended["rx_cq_overflow"], 0u);
  port->stop();
  EXPECT_EQ(pool->available(), pool->count());
}

// A wire faster than the driver reposts: frames that find no posted WQE are dropped by the device
// and reported as the loss nic_out_of_buffer (hc_rx_discards_no_wqe on hardware), exactly.
TEST(ManaModelPort, FramesWithoutAPostedWqeAreCountedAsNicLosses) {
  auto pool = test::make_pool(4096);
  auto port = open_model("[port]\nsource = \"synth\"\nframes = 20000\nflows = 64\nwire_burst = 256\n", pool.get(), 1);
  ASSERT_TRUE(port);
  ASSERT_TRUE(port->start());
  std::uint64_t tx = 0;
  const std::uint64_t got = drain(*port, 1, 20000, tx)[0];
  PortStats s = port->stats();
  ASSERT_TRUE(s.losses.count("nic_out_of_buffer")) << "the loss point is missing";
  ASSERT_TRUE(s.losses["nic_out_of_buffer"].has_value()) << "the model's counter is always known";
  const std::uint64_t lost = *s.losses["nic_out_of_buffer"];
  EXPECT_GT(lost, 0u) << "a 256-frame wire burst on a 256-entry ring polled 32 at a time must overrun";
  EXPECT_EQ(lost, s.extended["model_rx_no_wqe"]);
  EXPECT_EQ(got + lost, 20000u) << "every frame the wire carried was received or counted as lost";
  const LossTotals t = loss_totals(lost_before_pipeline(s));
  EXPECT_FALSE(t.lossless());
  EXPECT_EQ(t.frames, lost);
  port->stop();
  EXPECT_EQ(pool->available(), pool->count());
}

// The paced wire (the default) loses nothing and says so with a known zero.
TEST(ManaModelPort, PacedWireReportsAKnownZeroLoss) {
  auto pool = test::make_pool(4096);
  auto port = open_model("[port]\nsource = \"synth\"\nframes = 5000\n", pool.get(), 1);
  ASSERT_TRUE(port);
  ASSERT_TRUE(port->start());
  std::uint64_t tx = 0;
  EXPECT_EQ(drain(*port, 1, 5000, tx)[0], 5000u);
  PortStats s = port->stats();
  ASSERT_TRUE(s.losses.count("nic_out_of_buffer"));
  EXPECT_EQ(s.losses["nic_out_of_buffer"], std::optional<std::uint64_t>(0));
  EXPECT_TRUE(loss_totals(lost_before_pipeline(s)).lossless());
  port->stop();
}

// The run's verdict: rawpipe run on the overrunning model says LOSSY with the exact count.
TEST(ManaModelPort, OverrunTurnsTheRunVerdictLossy) {
  const std::filesystem::path bin = rawpipe::test::rawpipe_binary();
  if (!std::filesystem::exists(bin)) GTEST_SKIP() << bin << " is not built";
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / ("rawpipe-mana-loss-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const std::filesystem::path cfg = dir / "overrun.toml", json = dir / "run.json";
  std::ofstream(cfg) << "[run]\nduration = 2\n[[pools]]\nname = \"rx\"\ncount = 4096\n"
                        "[[ports]]\nname = \"m\"\npmd = \"mana-model\"\nframes = 20000\nwire_burst = 256\n"
                        "[[endpoints]]\nname = \"all\"\naction = \"sink\"\nmatch = [\"udp\"]\n"
                        "[[lcores]]\nrx = [\"m:0\"]\n";
  rawpipe::test::ProcessOutput o = rawpipe::test::run_process({bin.string(), "run", cfg.string(), "--json", json.string()}, dir);
  EXPECT_EQ(o.status, 0) << o.out << o.err;  // on_loss defaults to reporting, not failing
  auto j = nlohmann::json::parse(rawpipe::test::slurp(json), nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << o.out << o.err;
  EXPECT_FALSE(j["lossless"].get<bool>()) << j.dump(2);
  const auto& losses = j["ports"]["m"]["losses"];
  ASSERT_TRUE(losses.contains("nic_out_of_buffer") && losses["nic_out_of_buffer"].is_number()) << losses.dump();
  const std::uint64_t lost = losses["nic_out_of_buffer"].get<std::uint64_t>();
  EXPECT_GT(lost, 0u);
  EXPECT_EQ(j["lost_before_pipeline"].get<std::uint64_t>(), lost) << j.dump(2);
  EXPECT_EQ(j["rx_packets"].get<std::uint64_t>() + lost, 20000u) << j.dump(2);
  EXPECT_NE(o.out.find(fmt::format("LOSSY: {} frames lost before the pipeline", lost)), std::string::npos) << o.out;
  std::filesystem::remove_all(dir);
}

TEST(ManaModelPort, PcapSource) {
  const std::string file =
      (std::filesystem::temp_directory_path() / fmt::format("rawpipe-mana-{}.pcap", getpid())).string();
  {
    pcap_t* dead = pcap_open_dead(DLT_EN10MB, 65535);
    pcap_dumper_t* d = pcap_dump_open(dead, file.c_str());
    ASSERT_NE(d, nullptr);
    for (std::uint32_t i = 0; i < 100; ++i) {
      auto f = test::udp_frame(i, static_cast<std::uint16_t>(20 + i), i % 2 ? 6 : 4);
      pcap_pkthdr h{};
      h.caplen = h.len = static_cast<bpf_u_int32>(f.size());
      pcap_dump(reinterpret_cast<u_char*>(d), &h, f.data());
    }
    pcap_dump_close(d);
    pcap_close(dead);
  }
  auto pool = test::make_pool(2048);
  auto port = open_model(fmt::format("[port]\nsource = \"pcap\"\npcap = \"{}\"\nframes = 250\ncoalesce = 2\n", file),
                         pool.get(), 2);
  std::filesystem::remove(file);
  ASSERT_TRUE(port);
  ASSERT_TRUE(port->start());
  std::uint64_t tx = 0;
  auto per_queue = drain(*port, 2, 250, tx);
  EXPECT_EQ(per_queue[0] + per_queue[1], 250u);
  port->stop();
  EXPECT_EQ(pool->available(), pool->count());
}

TEST(ManaModelPort, BadKeysNameFileLineAndKey) {
  auto doc = ConfigSection::parse_string("[port]\nsource = \"pcap\"\n", "bad.toml");
  auto t = doc->table("port");
  auto spec = kManaModelDriver.parse(*t);
  ASSERT_FALSE(spec);
  EXPECT_NE(spec.message().find("'pcap'"), std::string::npos) << spec.message();

  auto doc2 = ConfigSection::parse_string("[port]\nsource = \"pcap\"\npcap = \"/nonexistent.pcap\"\n", "bad.toml");
  auto t2 = doc2->table("port");
  auto spec2 = kManaModelDriver.parse(*t2);
  ASSERT_TRUE(spec2) << spec2.message();
  auto pool = test::make_pool(512);
  PortEnv env;
  env.name = "m1";
  env.pool = pool.get();
  env.rx_ring_size = env.tx_ring_size = 64;
  auto port = spec2.value()->open(env);
  ASSERT_FALSE(port);
  EXPECT_NE(port.message().find("/nonexistent.pcap"), std::string::npos) << port.message();
}

}  // namespace
}  // namespace rawpipe::mana
