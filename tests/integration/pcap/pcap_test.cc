// Capture files end to end, checked with tshark (Wireshark's reader, not ours):
//  - a capture replayed by the pcap port through the pipeline (parse, classify, forward) into a
//    pcap port's transmit file is frame-for-frame identical, timestamps included, in pcap and
//    pcapng;
//  - capture taps rotated by size produce files tshark reads, holding every frame once.
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <sstream>
#include <thread>

#include "pipeline/buf/pool.hh"
#include "pipeline/capture/tap.hh"
#include "pipeline/capture/writer.hh"
#include "rawpipe/config.hh"
#include "rawpipe/pipeline.hh"
#include "pipeline/wire/builder.hh"
#include "pipeline/port/registry.hh"
#include "tests/support/netns.hh"
#include "pipeline/port/driver.hh"

namespace rawpipe {
namespace {

namespace fs = std::filesystem;

std::optional<std::string> tshark_missing() {
  if (!test::command_output({"tshark", "--version"})) return std::string("tshark is not installed (apt-get install tshark)");
  return std::nullopt;
}

// Well-formed frames of several kinds: IPv4 and IPv6 UDP of many sizes, VLAN-tagged, TCP, ARP.
std::vector<std::vector<std::uint8_t>> mixed_frames(unsigned n) {
  std::vector<std::vector<std::uint8_t>> out;
  for (unsigned i = 0; i < n; ++i) {
    std::vector<std::uint8_t> b(2048);
    std::size_t len = 0;
    if (i % 10 == 9) {
      wire::ArpSpec a;
      a.spa = wire::ipv4(10, 0, 0, std::uint8_t(i));
      a.tpa = wire::ipv4(10, 0, 0, 1);
      len = wire::write_arp(a, b.data(), b.size());
    } else {
      std::vector<std::uint8_t> payload(i * 7 % 1400);
      for (std::size_t j = 0; j < payload.size(); ++j) payload[j] = std::uint8_t(i ^ j);
      wire::FrameSpec s;
      s.eth.src = {2, 0, 0, 0, 0, std::uint8_t(i)};
      s.eth.dst = {2, 0, 0, 0, 0, 0xfe};
      s.ip_version = i % 3 == 1 ? 6 : 4;
      s.ipv4.src = wire::ipv4(10, 1, 0, std::uint8_t(i));
      s.ipv4.dst = wire::ipv4(10, 2, 0, 1);
      s.ipv6.src[0] = 0xfd;
      s.ipv6.src[15] = std::uint8_t(i);
      s.ipv6.dst[0] = 0xfd;
      s.ipv6.dst[15] = 1;
      if (i % 4 == 2) {
        s.eth.vlan_count = 1;
        s.eth.vlans[0].tci = std::uint16_t(100 + i % 7);
      }
      s.l4 = i % 5 == 3 ? wire::L4Kind::kTcp : wire::L4Kind::kUdp;
      s.udp = {std::uint16_t(1000 + i), 5000};
      s.tcp.src_port = std::uint16_t(2000 + i);
      s.tcp.dst_port = 80;
      s.payload = payload.data();
      s.payload_len = std::uint16_t(payload.size());
      s.min_frame_len = 60;
      len = wire::write_frame(s, b.data(), b.size());
    }
    EXPECT_GT(len, 0u);
    b.resize(len);
    out.push_back(std::move(b));
  }
  return out;
}

// What tshark says about every frame: epoch time (ns), wire length and the bytes.
Result<std::string> tshark_frames(const std::string& file) {
  return test::command_output({"tshark", "-r", file, "-n", "-T", "fields", "-e", "frame.time_epoch", "-e",
                               "frame.len", "-e", "frame.cap_len", "-e", "frame.protocols"});
}

Result<std::string> tshark_hex(const std::string& file) {
  return test::command_output({"tshark", "-r", file, "-n", "-x", "-P", "-T", "text", "--disable-protocol", "all"});
}

class PcapRoundTrip : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / fmt::format("rawpipe-pcap-it-{}", getpid());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_P(PcapRoundTrip, ReplayThroughThePipelineIsFrameIdentical) {
  if (auto why = tshark_missing()) GTEST_SKIP() << *why;
  if (!find_pmd("pcap")) GTEST_SKIP() << "the pcap PMD is not built (libpcap-dev missing)";
  const std::string in = dir_ / "in.pcap";
  const std::string out = dir_ / ("out." + GetParam());
  auto frames = mixed_frames(300);
  {
    auto w = CaptureWriter::create(in, CaptureFormat::kPcap, 65535);
    ASSERT_TRUE(w) << w.message();
    for (std::size_t i = 0; i < frames.size(); ++i)
      ASSERT_TRUE(w.value()->write(1700000000000000000ull + i * 123457, frames[i].data(),
                                   std::uint32_t(frames[i].size()), std::uint32_t(frames[i].size())));
    ASSERT_TRUE(w.value()->close());
  }
  const std::string toml = fmt::format(R"(
[run]
default_action = "endpoint"
default_endpoint = "fwd"

[[pools]]
name = "rx"
count = 2048
huge_pages = "never"

[[ports]]
name = "in"
pmd = "pcap"
rx_file = "{}"

[[ports]]
name = "out"
pmd = "pcap"
tx_file = "{}"

[[endpoints]]
name = "fwd"
action = "forward"
port = "out"

[[lcores]]
rx = ["in:0", "out:0"]
)",
                                       in, out);
  LoadOptions opt;
  opt.find_pmd = &find_pmd;
  auto cfg = load_config_string(toml, "pcap.toml", opt);
  ASSERT_TRUE(cfg) << cfg.message();
  auto pipeline = Pipeline::create(cfg->plan);
  ASSERT_TRUE(pipeline) << pipeline.message();
  ASSERT_TRUE(pipeline.value()->start());
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  Port& in_port = pipeline.value()->port(*pipeline.value()->port_id("in"));
  while (!in_port.stats().extended.at("rx_finished") && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ASSERT_TRUE(pipeline.value()->stop());
  Accounting acc = pipeline.value()->accounting();
  EXPECT_TRUE(acc.balanced());
  EXPECT_EQ(acc.rx_packets, frames.size());
  EXPECT_EQ(acc.transmitted, frames.size());
  pipeline.value().reset();  // closes the output file

  auto a = tshark_frames(in);
  auto b = tshark_frames(out);
  ASSERT_TRUE(a) << a.message();
  ASSERT_TRUE(b) << b.message();
  EXPECT_EQ(std::count(a->begin(), a->end(), '\n'), 300);
  EXPECT_EQ(a.value(), b.value());
  auto ha = tshark_hex(in);
  auto hb = tshark_hex(out);
  ASSERT_TRUE(ha && hb);
  EXPECT_GT(ha->size(), 300u * 60u) << "a hex dump of every frame";
  EXPECT_EQ(ha.value(), hb.value()) << "frame bytes differ";
  auto fmt_line = test::command_output({"capinfos", "-t", out});
  if (fmt_line) {
    EXPECT_NE(fmt_line->find(GetParam() == "pcapng" ? "pcapng" : "pcap"), std::string::npos) << *fmt_line;
  }
}

INSTANTIATE_TEST_SUITE_P(Formats, PcapRoundTrip, ::testing::Values("pcap", "pcapng"));

TEST(CaptureRotation, FilesTsharkReadsWithEveryFrameOnce) {
  if (auto why = tshark_missing()) GTEST_SKIP() << *why;
  const fs::path dir = fs::temp_directory_path() / fmt::format("rawpipe-rot-it-{}", getpid());
  fs::create_directories(dir);
  PoolConfig pc;
  pc.count = 512;
  pc.cache_size = 0;
  pc.huge_pages = HugePages::kNever;
  auto pool = std::move(Pool::create(pc)).value();
  for (std::string ext : {"pcap", "pcapng"}) {
    TapConfig c;
    c.name = "rot";
    c.path = dir / ("tap." + ext);
    c.format = capture_format_for_path(c.path);
    c.snaplen = 256;
    c.rotate_bytes = 16384;
    auto w = TapWriter::create(c);
    ASSERT_TRUE(w) << w.message();
    Tap& lane = w.value()->add_lane();
    ASSERT_TRUE(w.value()->start());
    auto frames = mixed_frames(400);
    for (std::size_t i = 0; i < frames.size(); i += 16) {
      Mbuf* burst[16];
      unsigned n = 0;
      for (std::size_t j = i; j < std::min(frames.size(), i + 16); ++j) {
        Mbuf* m = pool->alloc();
        ASSERT_NE(m, nullptr);
        std::memcpy(m->data(), frames[j].data(), frames[j].size());
        m->data_len = std::uint32_t(frames[j].size());
        burst[n++] = m;
      }
      tap_burst(lane, burst, n);
      mbuf_free_bulk(burst, n);
    }
    ASSERT_TRUE(w.value()->stop());
    auto files = w.value()->files();
    ASSERT_GT(files.size(), 5u) << ext;
    std::size_t total = 0;
    for (const auto& f : files) {
      auto out = test::command_output({"tshark", "-r", f, "-n", "-T", "fields", "-e", "frame.cap_len", "-e", "frame.len"});
      ASSERT_TRUE(out) << f << ": " << out.message();
      std::istringstream lines(out.value());
      std::size_t cap, len;
      while (lines >> cap >> len) {
        EXPECT_LE(cap, 256u);
        EXPECT_EQ(cap, std::min<std::size_t>(len, 256));
        ++total;
      }
    }
    EXPECT_EQ(total, 400u) << ext;
  }
  EXPECT_EQ(pool->available(), pool->count());
  fs::remove_all(dir);
}

}  // namespace
}  // namespace rawpipe
