// Capture taps: records reach files through the writer thread, snap length, size and time
// rotation, max_files, full lanes counted, drop-reason filter, 0600 files, config errors.
#include <pcap/pcap.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <thread>
#include <vector>

#include "pipeline/buf/pool.hh"
#include "pipeline/capture/tap.hh"
#include "pipeline/config/section.hh"

namespace rawpipe {
namespace {

namespace fs = std::filesystem;

struct Rec {
  std::vector<std::uint8_t> data;
  std::uint32_t len;
  std::uint64_t ts_ns;
};

std::vector<Rec> read_all(const std::string& file) {
  std::vector<Rec> out;
  char err[PCAP_ERRBUF_SIZE];
  pcap_t* p = pcap_open_offline_with_tstamp_precision(file.c_str(), PCAP_TSTAMP_PRECISION_NANO, err);
  EXPECT_NE(p, nullptr) << err;
  if (!p) return out;
  pcap_pkthdr* h;
  const u_char* d;
  int rc;
  while ((rc = pcap_next_ex(p, &h, &d)) == 1)
    out.push_back({{d, d + h->caplen}, h->len, std::uint64_t(h->ts.tv_sec) * 1000000000ull + h->ts.tv_usec});
  EXPECT_EQ(rc, PCAP_ERROR_BREAK) << file << ": " << pcap_geterr(p);
  pcap_close(p);
  return out;
}

class Taps : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / fmt::format("rawpipe-tap-test-{}", getpid());
    fs::create_directories(dir_);
    PoolConfig c;
    c.count = 256;
    c.cache_size = 0;
    c.huge_pages = HugePages::kNever;
    pool_ = std::move(Pool::create(c)).value();
  }
  void TearDown() override {
    EXPECT_EQ(pool_->available(), pool_->count());
    fs::remove_all(dir_);
  }
  // n frames of `len` bytes; byte j of frame i is (i + j) & 0xff.
  std::vector<Mbuf*> frames(unsigned n, std::uint32_t len, std::uint64_t ts0 = 1700000000000000000ull) {
    std::vector<Mbuf*> v(n);
    EXPECT_TRUE(pool_->alloc_bulk(v.data(), n));
    for (unsigned i = 0; i < n; ++i) {
      for (std::uint32_t j = 0; j < len; ++j) v[i]->data()[j] = std::uint8_t(i + j);
      v[i]->data_len = len;
      v[i]->timestamp_ns = ts0 + i;
      v[i]->flags = pkt_flag::kTimestamp;
    }
    return v;
  }
  fs::path dir_;
  std::unique_ptr<Pool> pool_;
};

TEST_F(Taps, SizeRotationSnapLengthAndPrivateFiles) {
  TapConfig c;
  c.name = "t";
  c.path = dir_ / "cap.pcap";
  c.snaplen = 128;
  c.rotate_bytes = 4096;
  c.lane_bytes = 1 << 16;
  auto w = TapWriter::create(c);
  ASSERT_TRUE(w) << w.message();
  Tap& lane = w.value()->add_lane();
  ASSERT_TRUE(w.value()->start());
  auto v = frames(100, 200);
  for (unsigned i = 0; i < 100; i += 10) tap_burst(lane, v.data() + i, 10);
  ASSERT_TRUE(w.value()->stop()) << "stop";
  mbuf_free_bulk(v.data(), 100);
  TapStats s = w.value()->stats();
  EXPECT_EQ(s.captured, 100u);
  EXPECT_EQ(s.dropped, 0u);
  EXPECT_EQ(s.written, 100u);
  auto files = w.value()->files();
  ASSERT_GE(files.size(), 4u) << "100 records of 144 bytes in 4096-byte files";
  EXPECT_EQ(files[0], (dir_ / "cap-00000.pcap").string());
  EXPECT_EQ(s.files, files.size());
  unsigned i = 0;
  for (const auto& f : files) {
    EXPECT_LE(fs::file_size(f), 4096u) << f;
    struct stat st {};
    ASSERT_EQ(stat(f.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0600u) << f;
    for (const Rec& r : read_all(f)) {
      ASSERT_EQ(r.data.size(), 128u);
      EXPECT_EQ(r.len, 200u);
      EXPECT_EQ(r.ts_ns, 1700000000000000000ull + i);
      for (std::uint32_t j = 0; j < 128; ++j) ASSERT_EQ(r.data[j], std::uint8_t(i + j));
      ++i;
    }
  }
  EXPECT_EQ(i, 100u);
}

TEST_F(Taps, TimeRotationAndMaxFiles) {
  TapConfig c;
  c.name = "t";
  c.path = dir_ / "cap.pcapng";
  c.format = CaptureFormat::kPcapng;
  c.rotate_seconds = 0.03;
  c.max_files = 2;
  c.snaplen = 2048;
  c.lane_bytes = 1 << 16;
  auto w = TapWriter::create(c);
  ASSERT_TRUE(w) << w.message();
  Tap& lane = w.value()->add_lane();
  ASSERT_TRUE(w.value()->start());
  auto v = frames(6, 80);
  for (unsigned i = 0; i < 6; ++i) {
    tap_burst(lane, &v[i], 1);
    // Each record is in a file before the next is sent, and more than 30 ms apart from it, however
    // late a loaded machine runs the writer thread.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (w.value()->stats().written < i + 1 && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_TRUE(w.value()->stop());
  mbuf_free_bulk(v.data(), 6);
  EXPECT_GE(w.value()->stats().files, 4u) << "a new file on the first record after each 30 ms";
  auto files = w.value()->files();
  ASSERT_EQ(files.size(), 2u) << "max_files keeps the newest two";
  unsigned on_disk = 0;
  for (const auto& e : fs::directory_iterator(dir_)) on_disk += e.path().extension() == ".pcapng";
  EXPECT_EQ(on_disk, 2u);
  auto last = read_all(files.back());
  ASSERT_FALSE(last.empty());
  EXPECT_EQ(last.back().data.size(), 80u);
  EXPECT_EQ(last.back().data[0], 5);
}

TEST_F(Taps, FullLaneCountsWhatItCouldNotTake) {
  TapConfig c;
  c.name = "t";
  c.path = dir_ / "full.pcap";
  c.snaplen = 2048;
  c.lane_bytes = 1 << 16;  // 65536 / (24 + 1500 rounded) = 42 records
  auto w = TapWriter::create(c);
  ASSERT_TRUE(w) << w.message();
  Tap& lane = w.value()->add_lane();
  auto v = frames(100, 1500);
  tap_burst(lane, v.data(), 100);  // writer not started: nothing drains
  TapStats s = w.value()->stats();
  EXPECT_EQ(s.captured + s.dropped, 100u);
  EXPECT_GT(s.dropped, 0u);
  EXPECT_GT(s.captured, 30u);
  ASSERT_TRUE(w.value()->stop());  // drains what the lane holds
  EXPECT_EQ(read_all(c.path).size(), s.captured);
  mbuf_free_bulk(v.data(), 100);
}

TEST_F(Taps, DropStageKeepsOnlyTheChosenReasons) {
  auto sec = ConfigSection::parse_string(
      fmt::format("path = '{}'\nstage = 'drops'\ndrop_reasons = ['no_match', 'bad_udp_length']\n",
                  (dir_ / "drops.pcapng").string()),
      "taps.toml");
  ASSERT_TRUE(sec);
  auto c = parse_tap_config(sec.value(), "drops");
  ASSERT_TRUE(c) << c.message();
  ASSERT_TRUE(sec->finish());
  EXPECT_EQ(c->format, CaptureFormat::kPcapng);
  auto w = TapWriter::create(c.value());
  ASSERT_TRUE(w) << w.message();
  Tap& lane = w.value()->add_lane();
  ASSERT_TRUE(w.value()->start());
  auto v = frames(3, 64);
  v[0]->drop_reason = static_cast<std::uint8_t>(DropReason::kNoMatch);
  v[1]->drop_reason = static_cast<std::uint8_t>(DropReason::kFilterDrop);
  v[2]->drop_reason = static_cast<std::uint8_t>(DropReason::kBadUdpLength);
  tap_burst(lane, v.data(), 3);
  ASSERT_TRUE(w.value()->stop());
  auto recs = read_all(c->path);
  ASSERT_EQ(recs.size(), 2u);
  EXPECT_EQ(recs[0].data[0], 0);
  EXPECT_EQ(recs[1].data[0], 2);
  mbuf_free_bulk(v.data(), 3);
}

TEST_F(Taps, ConfigErrorsNameTheKey) {
  auto sec = ConfigSection::parse_string("path = '/tmp/x.pcap'\nstage = 'rx'\ndrop_reasons = ['no_match']\n", "t.toml");
  ASSERT_TRUE(sec);
  auto c = parse_tap_config(sec.value(), "x");
  ASSERT_FALSE(c);
  EXPECT_NE(c.message().find("t.toml:3"), std::string::npos) << c.message();
  auto sec2 = ConfigSection::parse_string("path = '/tmp/x.pcap'\nstage = 'drops'\ndrop_reasons = ['nope']\n", "t.toml");
  auto c2 = parse_tap_config(sec2.value(), "x");
  ASSERT_FALSE(c2);
  EXPECT_NE(c2.message().find("no_match"), std::string::npos) << "lists the known reasons: " << c2.message();
  TapConfig bad;
  bad.name = "b";
  bad.path = "/nonexistent-dir/x.pcap";
  auto w = TapWriter::create(bad);
  ASSERT_FALSE(w);
  EXPECT_NE(w.message().find("/nonexistent-dir/x.pcap"), std::string::npos) << w.message();
}

}  // namespace
}  // namespace rawpipe
