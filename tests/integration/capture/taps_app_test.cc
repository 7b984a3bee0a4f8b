// Capture taps through the rawpipe binary: `rawpipe run` a synth config with taps at every stage
// (one with size rotation) and check with tshark that every file reads and holds exactly the
// expected frames; then replay one tap's file through the pcap port with a tap of its own.
// Needs no privileges; skips when tshark is not installed.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "tests/support/process.hh"

namespace {

namespace fs = std::filesystem;
using namespace rawpipe::test;

bool have_tshark() { return system("tshark --version >/dev/null 2>&1") == 0; }

class TapsApp : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!have_tshark()) GTEST_SKIP() << "tshark is not installed (Debian package tshark)";
    fs::path build = build_dir();
    ASSERT_FALSE(build.empty()) << "cannot find meson-info above this test";
    bin_ = rawpipe_binary();
    ASSERT_TRUE(fs::exists(bin_)) << bin_ << " is not built";
    tmp_ = fs::temp_directory_path() / ("rawpipe-taps-app-" + std::to_string(getpid()));
    fs::create_directories(tmp_);
  }
  void TearDown() override {
    if (!tmp_.empty()) fs::remove_all(tmp_);
  }

  // Frames tshark reads from `file`, with a check that it read the file to its end cleanly.
  std::uint64_t tshark_frames(const std::string& file, const std::string& filter = "") {
    std::vector<std::string> args = {"tshark", "-n", "-r", file, "-T", "fields", "-e", "frame.number"};
    if (!filter.empty()) {
      args.push_back("-Y");
      args.push_back(filter);
    }
    fs::path sub = tmp_ / "tshark";
    fs::create_directories(sub);
    ProcessOutput o = run_process(args, sub);
    EXPECT_EQ(o.status, 0) << file << ": " << o.err;
    EXPECT_EQ(o.err.find("appears to have been cut short"), std::string::npos) << o.err;
    std::uint64_t n = 0;
    std::istringstream in(o.out);
    for (std::string line; std::getline(in, line);) n += !line.empty();
    return n;
  }

  nlohmann::json run_config(const std::string& text, const std::string& name) {
    const fs::path cfg = tmp_ / (name + ".toml"), json = tmp_ / (name + ".json");
    std::ofstream(cfg) << text;
    ProcessOutput o = run_process({bin_.string(), "run", cfg.string(), "--duration", "1.5", "--json", json.string()}, tmp_);
    EXPECT_EQ(o.status, 0) << o.out << o.err;
    auto j = nlohmann::json::parse(slurp(json), nullptr, false);
    EXPECT_FALSE(j.is_discarded()) << o.out << o.err;
    return j;
  }

  fs::path bin_, tmp_;
};

TEST_F(TapsApp, EveryStageAndEveryRotatedFileReadsInTshark) {
  // Seed 0 cycles 5 flows (ports 5000..5004), every 10th frame malformed (always the fifth flow's
  // turn): 4000 to port 5000 (delivered), 14000 unmatched (no_match), 2000 bad_ipv4_ihl.
  const std::string t = tmp_.string();
  auto j = run_config(R"([[pools]]
name = "rx"
count = 8192
[[ports]]
name = "s"
pmd = "synth"
packets = 20000
rate_pps = 400000
dst_ports = 5
seed = 0
malformed_fraction = 0.1
malformed_kinds = ["bad_ihl"]
[[endpoints]]
name = "five"
action = "sink"
match = ["udp dst *:5000"]
[[lcores]]
rx = ["s:0"]
[[taps]]
name = "rx"
stage = "rx"
path = ")" + t + R"(/rx.pcap"
rotate_bytes = 262144
[[taps]]
name = "filtered"
stage = "filtered"
path = ")" + t + R"(/filtered.pcapng"
snaplen = 60
[[taps]]
name = "drops"
stage = "drops"
path = ")" + t + R"(/drops.pcapng"
[[taps]]
name = "no_match"
stage = "drops"
drop_reasons = ["no_match"]
path = ")" + t + R"(/nomatch.pcap"
)",
                      "synth");
  ASSERT_TRUE(j.contains("taps")) << j.dump();
  EXPECT_EQ(j["rx_packets"].get<std::uint64_t>(), 20000u);
  EXPECT_TRUE(j["balanced"].get<bool>());
  struct Expect {
    const char* tap;
    std::uint64_t frames;
  };
  for (Expect x : {Expect{"rx", 20000}, Expect{"filtered", 4000}, Expect{"drops", 16000}, Expect{"no_match", 14000}}) {
    SCOPED_TRACE(x.tap);
    const auto& tj = j["taps"][x.tap];
    EXPECT_EQ(tj["lost"].get<std::uint64_t>(), 0u);
    EXPECT_EQ(tj["written"].get<std::uint64_t>(), x.frames);
    std::uint64_t total = 0;
    for (const auto& f : tj["files"]) {
      const std::string file = f.get<std::string>();
      struct stat st {};
      ASSERT_EQ(stat(file.c_str(), &st), 0) << file;
      EXPECT_EQ(st.st_mode & 0777, 0600u) << file;
      total += tshark_frames(file);
    }
    EXPECT_EQ(total, x.frames);
  }
  // Rotation: 20000 records of 80 bytes in 256 KiB files.
  EXPECT_GE(j["taps"]["rx"]["files"].size(), 6u);
  EXPECT_EQ(j["taps"]["rx"]["files"][0].get<std::string>(), t + "/rx-00000.pcap");
  // Every delivered frame goes to port 5000; the snap length cut them to 60 bytes.
  EXPECT_EQ(tshark_frames(t + "/filtered.pcapng", "udp.dstport == 5000 && frame.cap_len == 60"), 4000u);
  // pcapng drop records carry their reason as a comment.
  EXPECT_EQ(tshark_frames(t + "/drops.pcapng", "frame.comment == \"bad_ipv4_ihl\""), 2000u);
  EXPECT_EQ(tshark_frames(t + "/drops.pcapng", "frame.comment == \"no_match\""), 14000u);

  // Replay the unmatched frames through the pcap port; its rx tap holds the same frames again.
  auto r = run_config(R"([[pools]]
name = "rx"
count = 4096
[[ports]]
name = "file"
pmd = "pcap"
rx_file = ")" + t + R"(/nomatch.pcap"
[[endpoints]]
name = "all"
action = "sink"
match = ["udp dst *:5001"]
[[lcores]]
rx = ["file:0"]
idle_sleep_us = 100
[[taps]]
name = "replay"
path = ")" + t + R"(/replay.pcap"
)",
                      "replay");
  EXPECT_EQ(r["rx_packets"].get<std::uint64_t>(), 14000u);
  EXPECT_EQ(r["taps"]["replay"]["written"].get<std::uint64_t>(), 14000u);
  EXPECT_EQ(tshark_frames(t + "/replay.pcap"), 14000u);
  EXPECT_EQ(tshark_frames(t + "/replay.pcap", "udp.dstport == 5001"), 4000u);
}

}  // namespace
