// The whole pipeline over a dpdk port, from a config file: net_pcap replays a capture written here,
// lcores parse, classify and dispatch, the echo endpoint transmits back through the same port into a
// second capture. Exact counts per endpoint and per drop reason, the accounting identity, every
// buffer back in its pool, and the transmitted file read back with libpcap.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <thread>
#include <vector>

#include "rawpipe/config.hh"
#include "rawpipe/pipeline.hh"
#include "pipeline/port/registry.hh"
#include "tests/support/frames.hh"

#ifdef RAWPIPE_HAVE_PMD_PCAP
#include <pcap/pcap.h>
#endif

namespace rawpipe {
namespace {

#if defined(RAWPIPE_HAVE_PMD_DPDK) && defined(RAWPIPE_HAVE_PMD_PCAP)

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / fmt::format("rawpipe_dpdkpl_{}_{}", getpid(), name)).string();
}

void write_pcap(const std::string& path, const std::vector<std::vector<std::uint8_t>>& frames) {
  pcap_t* dead = pcap_open_dead(DLT_EN10MB, 65535);
  pcap_dumper_t* d = pcap_dump_open(dead, path.c_str());
  ASSERT_NE(d, nullptr) << pcap_geterr(dead);
  for (const auto& f : frames) {
    pcap_pkthdr h{};
    h.caplen = h.len = static_cast<bpf_u_int32>(f.size());
    pcap_dump(reinterpret_cast<u_char*>(d), &h, f.data());
  }
  pcap_dump_close(d);
  pcap_close(dead);
}

std::uint64_t drop(const Accounting& a, DropReason r) { return a.drops[static_cast<unsigned>(r)]; }

void run_pipeline(bool copy) {
  // 240 frames to the ring endpoint, 120 to the echo endpoint, 60 matching nothing, 30 runts.
  std::vector<std::vector<std::uint8_t>> frames;
  const wire::Ipv4Addr src{10, 0, 0, 1}, dst{198, 18, 0, 1};
  for (int i = 0; i < 450; ++i) {
    switch (i % 15) {
      case 0: case 1: case 2: case 3: case 4: case 5: case 6: case 7:
        frames.push_back(testing::udp4_frame(src, dst, static_cast<std::uint16_t>(1024 + i), 5000,
                                             static_cast<std::uint16_t>(18 + i % 300)));
        break;
      case 8: case 9: case 10: case 11:
        frames.push_back(testing::udp4_frame(src, dst, static_cast<std::uint16_t>(2000 + i), 6000));
        break;
      case 12: case 13:
        frames.push_back(testing::udp4_frame(src, dst, 7, 7000));
        break;
      default:
        frames.push_back(std::vector<std::uint8_t>(10, 0xab));  // shorter than an Ethernet header
    }
  }
  std::string in = temp_path(copy ? "in_c.pcap" : "in.pcap"), out = temp_path(copy ? "out_c.pcap" : "out.pcap");
  write_pcap(in, frames);

  const std::string config = fmt::format(R"([[pools]]
name = "rx"
count = 2048
buf_size = 2048
huge_pages = "never"

[[ports]]
name = "dp"
pmd = "dpdk"
pool = "rx"
device = "net_pcap7,rx_pcap={},tx_pcap={}"
eal_args = ["--no-huge", "-m", "128", "--log-level=*:error"]
buffers = "{}"

[[endpoints]]
name = "app"
action = "ring"
match = ["udp dst *:5000"]

[[endpoints]]
name = "echo"
action = "echo"
match = ["udp dst *:6000"]

[[lcores]]
rx = ["dp:0"]
burst = 32
)",
                                         in, out, copy ? "copy" : "zero_copy");
  LoadOptions opts;
  opts.find_pmd = find_pmd;
  auto loaded = load_config_string(config, "dpdk_pipeline.toml", opts);
  ASSERT_TRUE(loaded) << loaded.message();
  auto pipeline = Pipeline::create(loaded->plan);
  ASSERT_TRUE(pipeline) << pipeline.message();
  Pipeline& p = *pipeline.value();
  EXPECT_NE(p.port(0).path_report().find(copy ? "copy: one memcpy" : "zero-copy"), std::string::npos)
      << p.port(0).path_report();
  ASSERT_TRUE(p.start());

  std::uint64_t consumed = 0;
  Mbuf* got[64];
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (std::chrono::steady_clock::now() < deadline) {
    unsigned k = p.endpoint_receive(0, got, 64);
    for (unsigned i = 0; i < k; ++i) EXPECT_EQ(got[i]->port, 0u);
    mbuf_free_bulk(got, k);
    consumed += k;
    if (consumed == 240 && p.accounting().rx_packets == frames.size()) break;
    if (k == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_TRUE(p.stop());
  Accounting a = p.accounting();
  EXPECT_EQ(a.rx_packets, frames.size());
  std::uint64_t bytes = 0;
  for (const auto& f : frames) bytes += f.size();
  EXPECT_EQ(a.rx_bytes, bytes);
  EXPECT_EQ(consumed, 240u);
  EXPECT_EQ(a.delivered, 240u);
  EXPECT_EQ(a.transmitted, 120u);
  EXPECT_EQ(drop(a, DropReason::kNoMatch), 60u);
  EXPECT_EQ(drop(a, DropReason::kRuntEthernet), 30u);
  EXPECT_TRUE(a.balanced()) << "rx " << a.rx_packets << " delivered " << a.delivered << " transmitted "
                            << a.transmitted << " dropped " << a.dropped() << " outstanding " << a.outstanding();
  EXPECT_EQ(a.outstanding(), 0u);
  PortStats st = p.port(0).stats();
  EXPECT_EQ(st.extended.at("zero_copy"), copy ? 0u : 1u);
  EXPECT_EQ(st.tx_queues.at(0).tx_packets, 120u);

  // The echo endpoint swapped addresses and ports; the port wrote what it sent.
  char err[PCAP_ERRBUF_SIZE];
  pcap_t* pc = pcap_open_offline(out.c_str(), err);
  ASSERT_NE(pc, nullptr) << err;
  pcap_pkthdr* h;
  const u_char* data;
  unsigned echoed = 0;
  while (pcap_next_ex(pc, &h, &data) == 1) {
    ASSERT_GE(h->caplen, 42u);
    EXPECT_EQ(std::memcmp(data + 26, dst.data(), 4), 0) << "source address is the old destination";
    EXPECT_EQ(std::memcmp(data + 30, src.data(), 4), 0);
    EXPECT_EQ(data[34] * 256 + data[35], 6000) << "source port is the old destination port";
    ++echoed;
  }
  pcap_close(pc);
  EXPECT_EQ(echoed, 120u);
  std::filesystem::remove(in);
  std::filesystem::remove(out);
}

TEST(DpdkPipeline, PcapThroughThePipelineWithExactAccounting) { run_pipeline(false); }

// Copy mode: the lcore thread registers with the EAL for DPDK's mempool cache on its first burst.
TEST(DpdkPipeline, CopyModeGivesTheSameCounts) { run_pipeline(true); }

#else

TEST(DpdkPipeline, PcapThroughThePipelineWithExactAccounting) {
  GTEST_SKIP() << "needs the dpdk and pcap PMDs (libdpdk-dev, libpcap-dev)";
}

TEST(DpdkPipeline, CopyModeGivesTheSameCounts) {
  GTEST_SKIP() << "needs the dpdk and pcap PMDs (libdpdk-dev, libpcap-dev)";
}

#endif

}  // namespace
}  // namespace rawpipe
