// Fault: a capture file ends in the middle of a record. The pcap port delivers the whole records
// before it, counts the damage (rx_file_errors, rx_errors), stops replaying cleanly, and says
// which file and which byte offset in a notice that `rawpipe run` prints; the pipeline's books
// balance.
#include <pcap/pcap.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "pipeline/wire/builder.hh"
#include "tests/fault/fault_support.hh"

namespace rawpipe::fault {
namespace {

namespace fs = std::filesystem;

class PcapTruncated : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / fmt::format("rawpipe-fault-pcap-{}", getpid());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Writes `n` UDP frames of varying size to a classic pcap file; returns each record's size.
  std::vector<std::size_t> write_capture(const std::string& file, unsigned n) {
    pcap_t* dead = pcap_open_dead_with_tstamp_precision(DLT_EN10MB, 65535, PCAP_TSTAMP_PRECISION_NANO);
    pcap_dumper_t* d = pcap_dump_open(dead, file.c_str());
    EXPECT_NE(d, nullptr) << pcap_geterr(dead);
    std::vector<std::size_t> sizes;
    for (unsigned i = 0; d && i < n; ++i) {
      wire::FrameSpec s;
      s.eth.dst = {2, 0, 0, 0, 0, 1};
      s.eth.src = {2, 0, 0, 0, 0, 2};
      s.ipv4.src = wire::ipv4(10, 0, 0, 1);
      s.ipv4.dst = wire::ipv4(10, 0, 0, 2);
      s.udp = {static_cast<std::uint16_t>(1000 + i), 5000};
      s.payload_len = static_cast<std::uint16_t>(20 + (i * 37) % 400);
      std::vector<std::uint8_t> buf(2048);
      buf.resize(wire::write_frame(s, buf.data(), buf.size()));
      pcap_pkthdr h{};
      h.ts.tv_sec = 1;
      h.ts.tv_usec = static_cast<suseconds_t>(i);
      h.caplen = h.len = static_cast<bpf_u_int32>(buf.size());
      pcap_dump(reinterpret_cast<u_char*>(d), &h, buf.data());
      sizes.push_back(buf.size());
    }
    if (d) pcap_dump_close(d);
    pcap_close(dead);
    return sizes;
  }

  std::string config(const std::string& file, unsigned loops) {
    return fmt::format(R"([[pools]]
name = "rx"
count = 1024
huge_pages = "never"

[[ports]]
name = "cap"
pmd = "pcap"
rx_file = "{}"
loop = {}

[[endpoints]]
name = "all"
action = "sink"
match = ["udp dst *:5000"]

[[lcores]]
rx = ["cap:0"]
)",
                       file, loops);
  }

  fs::path dir_;
};

TEST_F(PcapTruncated, CutInsideARecordEndsTheReplayWithTheFileAndOffsetNamed) {
  const std::string file = dir_ / "cut.pcap";
  auto sizes = write_capture(file, 100);
  ASSERT_EQ(sizes.size(), 100u);
  // Record 60 (index 59) keeps its header and half of its bytes.
  std::uint64_t offset = 24;
  for (unsigned i = 0; i < 59; ++i) offset += 16 + sizes[i];
  fs::resize_file(file, offset + 16 + sizes[59] / 2);

  for (unsigned loops : {1u, 3u}) {
    SCOPED_TRACE(fmt::format("loop = {}", loops));
    auto p = make_pipeline(config(file, loops), "pcap_cut.toml");
    ASSERT_TRUE(p);
    ASSERT_TRUE(p->start());
    const std::uint64_t want = 59u * loops;
    ASSERT_TRUE(wait_for([&] {
      PipelineSnapshot s = p->snapshot();
      return ext(p->port(0).stats(), "rx_finished") == 1 && s.total.rx_packets == want &&
             s.total.delivered + s.total.dropped() == want;
    })) << "rx " << p->accounting().rx_packets;
    EXPECT_TRUE(p->running()) << "a damaged file ends the replay, not the pipeline";
    ASSERT_TRUE(p->stop());
    PortStats s = p->port(0).stats();
    EXPECT_EQ(ext(s, "rx_file_errors"), loops) << "one damaged record per pass";
    EXPECT_EQ(rx_errors(s), loops);
    EXPECT_EQ(ext(s, "rx_file_damage_offset"), offset);
    std::vector<std::string> notices = p->port(0).notices();
    ASSERT_EQ(notices.size(), 1u);
    EXPECT_NE(notices[0].find(file), std::string::npos) << notices[0];
    EXPECT_NE(notices[0].find(fmt::format("record 60 starting at byte offset {}", offset)), std::string::npos)
        << notices[0];
    EXPECT_NE(notices[0].find("truncated"), std::string::npos) << "libpcap's reason: " << notices[0];
    Accounting a = p->accounting();
    EXPECT_EQ(a.rx_packets, want);
    EXPECT_EQ(a.delivered, want);
    expect_balanced(a);
  }
}

TEST_F(PcapTruncated, CutInsideARecordHeaderNamesTheRecordStart) {
  const std::string file = dir_ / "header.pcap";
  auto sizes = write_capture(file, 10);
  std::uint64_t offset = 24;
  for (unsigned i = 0; i < 4; ++i) offset += 16 + sizes[i];
  fs::resize_file(file, offset + 9);  // 9 of record 5's 16 header bytes
  auto p = make_pipeline(config(file, 1), "pcap_header.toml");
  ASSERT_TRUE(p);
  ASSERT_TRUE(p->start());
  ASSERT_TRUE(wait_for([&] { return ext(p->port(0).stats(), "rx_finished") == 1 && p->snapshot().total.delivered == 4; }));
  ASSERT_TRUE(p->stop());
  auto notices = p->port(0).notices();
  ASSERT_EQ(notices.size(), 1u);
  EXPECT_NE(notices[0].find(fmt::format("record 5 starting at byte offset {}", offset)), std::string::npos)
      << notices[0];
  expect_balanced(p->accounting());
}

TEST_F(PcapTruncated, RawpipeRunPrintsTheNoticeAndExitsCleanly) {
  const char* bin = std::getenv("RAWPIPE_BIN");
  if (!bin) GTEST_SKIP() << "RAWPIPE_BIN is not set (meson test sets it)";
  const std::string file = dir_ / "app.pcap";
  auto sizes = write_capture(file, 20);
  std::uint64_t offset = 24;
  for (unsigned i = 0; i < 12; ++i) offset += 16 + sizes[i];
  fs::resize_file(file, offset + 20);
  const std::string cfg = dir_ / "app.toml";
  std::ofstream(cfg) << config(file, 1);
  const std::string err = dir_ / "stderr.txt";
  const std::string cmd = fmt::format("'{}' run '{}' --duration 0.5 >/dev/null 2>'{}'", bin, cfg, err);
  const int rc = std::system(cmd.c_str());
  ASSERT_TRUE(WIFEXITED(rc));
  EXPECT_EQ(WEXITSTATUS(rc), 0) << "the run balanced; a damaged input is reported, not a failure";
  std::ifstream in(err);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("port 'cap': capture file '" + file + "' is damaged: record 13 starting at byte offset " +
                      std::to_string(offset)),
            std::string::npos)
      << text;
}

}  // namespace
}  // namespace rawpipe::fault
