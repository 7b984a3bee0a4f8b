// pcap PMD: write frames to pcap and pcapng, replay them, loop, timing, truncated files, config.
#include <pcap/pcap.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <vector>

#include "pipeline/buf/pool.hh"
#include "pipeline/config/section.hh"
#include "pipeline/wire/builder.hh"
#include "pipeline/port/registry.hh"
#include "pipeline/port/driver.hh"

namespace rawpipe {
namespace {

namespace fs = std::filesystem;

struct Frame {
  std::vector<std::uint8_t> bytes;
  std::uint64_t ts_ns;
};

std::vector<Frame> make_frames(unsigned n, std::uint64_t ts0, std::uint64_t step_ns) {
  std::vector<Frame> out;
  for (unsigned i = 0; i < n; ++i) {
    std::uint8_t payload[300];
    for (unsigned j = 0; j < sizeof payload; ++j) payload[j] = std::uint8_t(i * 7 + j);
    wire::FrameSpec s;
    s.eth.dst = {2, 0, 0, 0, 0, 1};
    s.eth.src = {2, 0, 0, 0, 0, 2};
    s.ipv4.src = wire::ipv4(10, 0, 0, 1);
    s.ipv4.dst = wire::ipv4(10, 0, 0, 2);
    s.udp = {std::uint16_t(1000 + i), 5000};
    s.payload = payload;
    s.payload_len = std::uint16_t(20 + (i * 37) % 280);
    std::vector<std::uint8_t> buf(2048);
    std::size_t len = wire::write_frame(s, buf.data(), buf.size());
    EXPECT_GT(len, 0u);
    buf.resize(len);
    out.push_back({buf, ts0 + i * step_ns});
  }
  return out;
}

class PcapPmd : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / fmt::format("rawpipe-pcap-test-{}", getpid());
    fs::create_directories(dir_);
    PoolConfig c;
    c.count = 512;
    c.cache_size = 0;
    c.huge_pages = HugePages::kNever;
    auto p = Pool::create(c);
    ASSERT_TRUE(p) << p.message();
    pool_ = std::move(p).value();
  }
  void TearDown() override {
    EXPECT_EQ(pool_->available(), pool_->count()) << "a buffer did not come back";
    fs::remove_all(dir_);
  }

  Result<std::unique_ptr<Port>> open(const std::string& toml) {
    auto sec = ConfigSection::parse_string(toml, "test.toml");
    if (!sec) return sec.status();
    const PmdDriver* d = find_pmd("pcap");
    if (!d) return Status::error("pcap driver not built");
    auto spec = d->parse(sec.value());
    if (!spec) return spec.status();
    RAWPIPE_TRY(sec->finish());
    PortEnv env;
    env.name = "p0";
    env.port_id = 3;
    env.pool = pool_.get();
    auto port = spec.value()->open(env);
    if (port) RAWPIPE_TRY(port.value()->start());
    return port;
  }

  // Sends frames through a transmit-only port into `file`.
  void write_file(const std::string& file, const std::vector<Frame>& frames, std::string_view format = "auto") {
    auto port = open(fmt::format("tx_file = '{}'\ntx_format = '{}'\n", file, format));
    ASSERT_TRUE(port) << port.message();
    TxQueueHandle tx = port.value()->tx_queue(0);
    for (const Frame& f : frames) {
      Mbuf* m = pool_->alloc();
      ASSERT_NE(m, nullptr);
      std::memcpy(m->data(), f.bytes.data(), f.bytes.size());
      m->data_len = static_cast<std::uint32_t>(f.bytes.size());
      m->timestamp_ns = f.ts_ns;
      m->flags = pkt_flag::kTimestamp;
      ASSERT_EQ(tx(&m, 1), 1);
    }
    port.value()->stop();
    PortStats st = port.value()->stats();
    EXPECT_EQ(st.tx_queues[0].tx_packets, frames.size());
  }

  // Receives until the replay finishes (or max_bursts passes).
  std::vector<Frame> replay(Port& port, unsigned max_bursts = 100000) {
    std::vector<Frame> got;
    RxQueueHandle rx = port.rx_queue(0);
    for (unsigned b = 0; b < max_bursts; ++b) {
      Mbuf* pkts[32];
      unsigned n = rx(pkts, 32);
      for (unsigned i = 0; i < n; ++i) {
        EXPECT_EQ(pkts[i]->port, 3);
        EXPECT_TRUE(pkts[i]->flags & pkt_flag::kTimestamp);
        got.push_back({{pkts[i]->data(), pkts[i]->data() + pkts[i]->data_len}, pkts[i]->timestamp_ns});
      }
      mbuf_free_bulk(pkts, n);
      if (n == 0 && port.stats().extended.at("rx_finished")) break;
    }
    return got;
  }

  fs::path dir_;
  std::unique_ptr<Pool> pool_;
};

TEST_F(PcapPmd, PcapRoundTripKeepsBytesAndNanosecondTimestamps) {
  auto frames = make_frames(40, 1700000000123456789ull, 1001);
  std::string file = dir_ / "a.pcap";
  write_file(file, frames);
  struct stat st {};
  ASSERT_EQ(stat(file.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  // libpcap itself sees a nanosecond pcap.
  char err[PCAP_ERRBUF_SIZE];
  pcap_t* p = pcap_open_offline_with_tstamp_precision(file.c_str(), PCAP_TSTAMP_PRECISION_NANO, err);
  ASSERT_NE(p, nullptr) << err;
  EXPECT_EQ(pcap_get_tstamp_precision(p), PCAP_TSTAMP_PRECISION_NANO);
  pcap_close(p);

  auto port = open(fmt::format("rx_file = '{}'\n", file));
  ASSERT_TRUE(port) << port.message();
  auto got = replay(*port.value());
  ASSERT_EQ(got.size(), frames.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].bytes, frames[i].bytes) << "frame " << i;
    EXPECT_EQ(got[i].ts_ns, frames[i].ts_ns) << "frame " << i;
  }
  PortStats s = port.value()->stats();
  EXPECT_EQ(s.rx_queues[0].rx_packets, frames.size());
  EXPECT_EQ(s.extended.at("rx_file_errors"), 0u);
  EXPECT_EQ(s.extended.at("rx_passes"), 1u);
}

TEST_F(PcapPmd, PcapngRoundTrip) {
  auto frames = make_frames(25, 1600000000000000001ull, 999999999);
  std::string file = dir_ / "b.pcapng";
  write_file(file, frames);
  std::ifstream in(file, std::ios::binary);
  std::uint32_t magic = 0;
  in.read(reinterpret_cast<char*>(&magic), 4);
  EXPECT_EQ(magic, 0x0A0D0D0Au) << "not a pcapng section header";
  auto port = open(fmt::format("rx_file = '{}'\n", file));
  ASSERT_TRUE(port) << port.message();
  auto got = replay(*port.value());
  ASSERT_EQ(got.size(), frames.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].bytes, frames[i].bytes) << "frame " << i;
    EXPECT_EQ(got[i].ts_ns, frames[i].ts_ns) << "frame " << i;
  }
}

TEST_F(PcapPmd, LoopsNTimes) {
  auto frames = make_frames(10, 1000, 1000);
  std::string file = dir_ / "c.pcap";
  write_file(file, frames);
  auto port = open(fmt::format("rx_file = '{}'\nloop = 3\n", file));
  ASSERT_TRUE(port) << port.message();
  auto got = replay(*port.value());
  ASSERT_EQ(got.size(), 30u);
  for (std::size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i].bytes, frames[i % 10].bytes);
  EXPECT_EQ(port.value()->stats().extended.at("rx_passes"), 3u);
}

TEST_F(PcapPmd, TruncatedFileEndsWithACountedError) {
  auto frames = make_frames(12, 5000, 1000);
  std::string file = dir_ / "d.pcap";
  write_file(file, frames);
  // Cut the file in the middle of the last record's data.
  auto size = fs::file_size(file);
  fs::resize_file(file, size - frames.back().bytes.size() / 2);
  auto port = open(fmt::format("rx_file = '{}'\nloop = 2\n", file));
  ASSERT_TRUE(port) << port.message();
  auto got = replay(*port.value());
  ASSERT_EQ(got.size(), 22u) << "11 whole frames per pass";
  PortStats s = port.value()->stats();
  EXPECT_EQ(s.extended.at("rx_file_errors"), 2u) << "one truncated record per pass";
  EXPECT_EQ(s.rx_queues[0].rx_errors, 2u);
  EXPECT_EQ(s.extended.at("rx_finished"), 1u);
}

TEST_F(PcapPmd, CutInsideARecordHeader) {
  auto frames = make_frames(3, 5000, 1000);
  std::string file = dir_ / "e.pcap";
  write_file(file, frames);
  fs::resize_file(file, 24 + 16 + frames[0].bytes.size() + 7);  // 7 bytes of the second header
  auto port = open(fmt::format("rx_file = '{}'\n", file));
  ASSERT_TRUE(port) << port.message();
  auto got = replay(*port.value());
  EXPECT_EQ(got.size(), 1u);
  EXPECT_EQ(port.value()->stats().extended.at("rx_file_errors"), 1u);
}

TEST_F(PcapPmd, RecordedTimingSpacesFramesLikeTheFile) {
  auto frames = make_frames(5, 1000000000, 20000000);  // 20 ms apart
  std::string file = dir_ / "f.pcap";
  write_file(file, frames);
  auto port = open(fmt::format("rx_file = '{}'\ntiming = 'recorded'\n", file));
  ASSERT_TRUE(port) << port.message();
  auto t0 = std::chrono::steady_clock::now();
  auto got = replay(*port.value(), 100000000);
  auto elapsed = std::chrono::steady_clock::now() - t0;
  EXPECT_EQ(got.size(), 5u);
  EXPECT_GE(elapsed, std::chrono::milliseconds(80)) << "the last frame is 80 ms after the first";
}

TEST_F(PcapPmd, RateTimingReleasesAtTheConfiguredRate) {
  auto frames = make_frames(21, 0, 0);
  std::string file = dir_ / "g.pcap";
  write_file(file, frames);
  auto port = open(fmt::format("rx_file = '{}'\ntiming = 'rate'\nrate_pps = 200\n", file));
  ASSERT_TRUE(port) << port.message();
  auto t0 = std::chrono::steady_clock::now();
  auto got = replay(*port.value(), 100000000);
  auto elapsed = std::chrono::steady_clock::now() - t0;
  EXPECT_EQ(got.size(), 21u);
  EXPECT_GE(elapsed, std::chrono::milliseconds(95)) << "20 intervals of 5 ms";
}

TEST_F(PcapPmd, ConfigErrorsNameTheKey) {
  auto none = open("loop = 2\n");
  ASSERT_FALSE(none);
  EXPECT_NE(none.message().find("rx_file"), std::string::npos) << none.message();
  auto rate = open("rx_file = '/nonexistent.pcap'\nrate_pps = 5\n");
  ASSERT_FALSE(rate);
  EXPECT_NE(rate.message().find("test.toml:2"), std::string::npos) << rate.message();
  EXPECT_NE(rate.message().find("rate_pps"), std::string::npos) << rate.message();
  auto missing = open("rx_file = '/nonexistent/x.pcap'\n");
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.message().find("/nonexistent/x.pcap"), std::string::npos) << missing.message();
  auto typo = open("rx_file = '/x.pcap'\nloops = 2\n");
  ASSERT_FALSE(typo);
  EXPECT_NE(typo.message().find("loops"), std::string::npos) << typo.message();
}

TEST_F(PcapPmd, RejectsNonEthernetCaptures) {
  std::string file = dir_ / "raw.pcap";
  pcap_t* dead = pcap_open_dead(DLT_RAW, 65535);
  pcap_dumper_t* d = pcap_dump_open(dead, file.c_str());
  ASSERT_NE(d, nullptr);
  pcap_dump_close(d);
  pcap_close(dead);
  auto port = open(fmt::format("rx_file = '{}'\n", file));
  ASSERT_FALSE(port);
  EXPECT_NE(port.message().find("Ethernet"), std::string::npos) << port.message();
}

}  // namespace
}  // namespace rawpipe
