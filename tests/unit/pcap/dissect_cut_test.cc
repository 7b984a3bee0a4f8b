// Captures cut by their snap length: `rawpipe dissect` against tshark on the same files. Each frame
// is written whole and again cut at several snap lengths (inside the IPv4 header, inside the UDP
// header, after the headers); for every frame the verdicts must agree: both see it whole and
// well-formed ("ok"), both see it cut with consistent headers ("cut_by_capture"; tshark: nothing
// wrong but caplen < len), or both call it malformed (tshark: an expert error or warning of the
// Malformed or Protocol groups). Where dissect prints addresses and ports, tshark shows the same.
// Skips when tshark is not installed.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "rawpipe/config.hh"
#include "rawpipe/dissect.hh"
#include "rawpipe/pipeline.hh"
#include "tests/support/process.hh"

namespace {

namespace fs = std::filesystem;
using Bytes = std::vector<std::uint8_t>;

void put16(Bytes& b, std::size_t at, unsigned v) {
  b[at] = std::uint8_t(v >> 8);
  b[at + 1] = std::uint8_t(v);
}

std::uint16_t checksum(const std::uint8_t* p, std::size_t n) {
  std::uint32_t s = 0;
  for (std::size_t i = 0; i + 1 < n; i += 2) s += (p[i] << 8) | p[i + 1];
  while (s >> 16) s = (s & 0xffff) + (s >> 16);
  return std::uint16_t(~s);
}

Bytes eth(unsigned ethertype) {
  Bytes b = {0x02, 0, 0, 0, 0, 0x02, 0x02, 0, 0, 0, 0, 0x01, 0, 0};
  put16(b, 12, ethertype);
  return b;
}

// Payload bytes that no heuristic dissector of tshark claims.
Bytes udp(unsigned payload, int ulen = -1) {
  Bytes b(8 + payload, 0x5a);
  put16(b, 0, 40001);
  put16(b, 2, 40002);
  put16(b, 4, ulen < 0 ? 8 + payload : unsigned(ulen));
  put16(b, 6, 0);  // no checksum (IPv4 allows it; tshark's checksum findings are left out below)
  return b;
}

// Header and payload in one allocation (GCC 12 misreads an insert after a 20-byte initializer).
Bytes with_payload(const std::uint8_t* header, std::size_t n, const Bytes& payload) {
  Bytes b(n + payload.size());
  std::memcpy(b.data(), header, n);
  if (!payload.empty()) std::memcpy(b.data() + n, payload.data(), payload.size());
  return b;
}

Bytes ipv4(const Bytes& payload, int total = -1, unsigned ihl_words = 5) {
  const std::uint8_t base[20] = {std::uint8_t(0x40 | ihl_words), 0, 0, 0, 0, 1, 0, 0, 64, 17, 0, 0, 10, 0, 0, 1, 198, 18, 0, 7};
  Bytes h = with_payload(base, 20, payload);
  put16(h, 2, total < 0 ? unsigned(20 + payload.size()) : unsigned(total));
  put16(h, 10, checksum(h.data(), 20));
  return h;
}

Bytes ipv6(const Bytes& payload, int plen = -1) {
  const std::uint8_t base[40] = {0x60, 0, 0, 0, 0, 0, 17, 64, 0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01,
                                 0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x02};
  Bytes h = with_payload(base, 40, payload);
  put16(h, 4, plen < 0 ? unsigned(payload.size()) : unsigned(plen));
  return h;
}

Bytes frame(unsigned ethertype, const Bytes& l3) {
  const Bytes e = eth(ethertype);
  Bytes f = with_payload(e.data(), e.size(), l3);
  if (f.size() < 60) f.resize(60, 0);
  return f;
}

std::vector<Bytes> frames() {
  return {
      frame(0x0800, ipv4(udp(200))),                 // well-formed
      frame(0x0800, ipv4(udp(200), 400)),            // IPv4 total length past the frame on the wire
      frame(0x0800, ipv4(udp(200), 10)),             // total length below the header
      frame(0x0800, ipv4(udp(20, 300))),             // UDP length past the IP payload
      frame(0x86dd, ipv6(udp(200))),                 // IPv6, well-formed
      frame(0x86dd, ipv6(udp(200), 600)),            // IPv6 payload length past the frame
      frame(0x0800, ipv4(udp(10))),                  // short, never cut below 60
      frame(0x0800, ipv4(udp(200, 100))),            // UDP shorter than the IP payload: allowed
      frame(0x0800, ipv4(udp(200), -1, 3)),          // IHL below 5
      frame(0x0800, ipv4(udp(200, 4))),              // UDP length below 8
      frame(0x0800, ipv4(udp(1400))),                // large, well-formed
      frame(0x86dd, ipv6(udp(100, 300))),            // IPv6 with a UDP length past its payload
  };
}

// Each record keeps min(snaps[i], frame size) bytes: one file can hold every cut of every frame.
void write_pcap(const fs::path& path, const std::vector<Bytes>& fs_, const std::vector<std::uint32_t>& snaps) {
  std::ofstream out(path, std::ios::binary);
  auto u32 = [&](std::uint32_t v) { out.write(reinterpret_cast<const char*>(&v), 4); };
  auto u16 = [&](std::uint16_t v) { out.write(reinterpret_cast<const char*>(&v), 2); };
  u32(0xa1b2c3d4);
  u16(2);
  u16(4);
  u32(0);
  u32(0);
  u32(65535);
  u32(1);  // Ethernet
  for (std::size_t i = 0; i < fs_.size(); ++i) {
    const std::uint32_t cap = std::min<std::uint32_t>(snaps[i], std::uint32_t(fs_[i].size()));
    u32(std::uint32_t(i));
    u32(0);
    u32(cap);
    u32(std::uint32_t(fs_[i].size()));
    out.write(reinterpret_cast<const char*>(fs_[i].data()), cap);
  }
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : s) {
    if (c == sep) {
      out.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  out.push_back(cur);
  return out;
}

struct Shark {
  std::string verdict;  // ok, cut_by_capture, malformed
  std::string src, sport;
};

// tshark's view of each frame. Expert findings of the Checksum group are left out: rawpipe does
// not verify checksums in software.
std::map<int, Shark> tshark_view(const fs::path& file, const fs::path& scratch) {
  constexpr unsigned kGroupMalformed = 0x07000000, kGroupProtocol = 0x09000000, kSeverityWarn = 0x00600000;
  rawpipe::test::ProcessOutput o = rawpipe::test::run_process(
      {"tshark", "-n", "-r", file.string(), "-T", "fields", "-E", "separator=|", "-E", "occurrence=a", "-E",
       "aggregator=,", "-e", "frame.number", "-e", "frame.len", "-e", "frame.cap_len", "-e", "_ws.malformed", "-e",
       "_ws.expert.severity", "-e", "_ws.expert.group", "-e", "ip.src", "-e", "ipv6.src", "-e", "udp.srcport"},
      scratch);
  EXPECT_EQ(o.status, 0) << o.err;
  std::map<int, Shark> out;
  std::istringstream in(o.out);
  for (std::string line; std::getline(in, line);) {
    const auto f = split(line, '|');
    if (f.size() < 9) continue;
    Shark s;
    bool malformed = !f[3].empty();
    const auto sev = split(f[4], ','), grp = split(f[5], ',');
    for (std::size_t i = 0; i < sev.size() && i < grp.size(); ++i) {
      if (sev[i].empty() || grp[i].empty()) continue;
      const unsigned severity = unsigned(std::stoul(sev[i])), group = unsigned(std::stoul(grp[i]));
      if (severity >= kSeverityWarn && (group == kGroupMalformed || group == kGroupProtocol)) malformed = true;
    }
    s.verdict = malformed ? "malformed" : f[2] != f[1] ? "cut_by_capture" : "ok";
    s.src = !f[6].empty() ? split(f[6], ',')[0] : split(f[7], ',')[0];
    s.sport = split(f[8], ',')[0];
    out[std::stoi(f[0])] = s;
  }
  return out;
}

class DissectCut : public ::testing::Test {
 protected:
  void SetUp() override {
    if (system("command -v tshark >/dev/null 2>&1") != 0) GTEST_SKIP() << "tshark is not installed";
    tmp_ = fs::temp_directory_path() / ("rawpipe-dissect-cut-" + std::to_string(getpid()));
    fs::create_directories(tmp_);
  }
  void TearDown() override {
    if (!tmp_.empty()) fs::remove_all(tmp_);
  }
  fs::path tmp_;
};

TEST_F(DissectCut, EveryFrameAgreesWithTsharkAtEverySnapLength) {
  int compared = 0, cut = 0, malformed_cut = 0;
  // Every frame whole (65535) and cut inside the IPv4 header (30: addresses gone), inside the UDP
  // header (38), after the IPv6 header (54) and after every header (64); one file, one tshark run.
  std::vector<Bytes> records;
  std::vector<std::uint32_t> snaps;
  for (std::uint32_t snap : {65535u, 30u, 38u, 54u, 64u})
    for (const Bytes& f : frames()) {
      records.push_back(f);
      snaps.push_back(snap);
    }
  const fs::path file = tmp_ / "cuts.pcap";
  write_pcap(file, records, snaps);
  std::ostringstream text;
  ASSERT_EQ(rawpipe::run_dissect(file.string(), text), 0);
  const auto shark = tshark_view(file, tmp_);
  ASSERT_EQ(shark.size(), records.size()) << "tshark read a different number of frames";
  std::istringstream lines(text.str());
  std::string line;
  std::getline(lines, line);  // header
  {
    while (std::getline(lines, line)) {
      const auto c = split(line, '\t');
      ASSERT_EQ(c.size(), 13u) << line;
      const int n = std::stoi(c[0]);
      const std::uint32_t snap = snaps.at(std::size_t(n - 1));
      const std::string mine = c[2] == "ok" || c[2] == "cut_by_capture" ? c[2] : "malformed";
      const Shark& s = shark.at(n);
      EXPECT_EQ(mine, s.verdict) << "snap " << snap << " frame " << n << ": dissect says " << c[2] << "\n" << line;
      if (c[5] != "-") {
        EXPECT_EQ(c[5], s.src) << "snap " << snap << " frame " << n << "\n" << line;
      }
      if (c[10] != "-") {
        EXPECT_EQ(c[10], s.sport) << "snap " << snap << " frame " << n << "\n" << line;
      }
      ++compared;
      cut += c[2] == "cut_by_capture";
      malformed_cut += mine == "malformed" && records[std::size_t(n - 1)].size() > snap;
    }
  }
  EXPECT_EQ(compared, 5 * int(frames().size()));
  // The comparison covers both kinds of cut frame: consistent ones, and ones whose captured headers
  // still contradict each other.
  EXPECT_GT(cut, 20);
  EXPECT_GT(malformed_cut, 5);
}

TEST_F(DissectCut, ACutFrameIsDecodedAsFarAsItsBytesGo) {
  const fs::path file = tmp_ / "cut.pcap";
  write_pcap(file, {frame(0x0800, ipv4(udp(200)))}, {64});
  std::ostringstream text;
  ASSERT_EQ(rawpipe::run_dissect(file.string(), text), 0);
  EXPECT_NE(text.str().find("1\t242\tcut_by_capture\t-\t4\t10.0.0.1\t198.18.0.7\t17\t0\t0\t40001\t40002\t208\n"),
            std::string::npos)
      << text.str();
}

// The pcap port replays the same cut capture: a frame that ran out of bytes before its IP datagram
// did is dropped as cut_by_capture, never as malformed; a contradiction the captured bytes show
// (total length below the header, IHL below 5, a UDP length past an uncut datagram) keeps its reason.
TEST(PcapPortCut, CutFramesAreDroppedAsCutByCaptureAndMalformedOnesKeepTheirReason) {
  const fs::path dir = fs::temp_directory_path() / ("rawpipe-pcap-cut-" + std::to_string(getpid()));
  fs::create_directories(dir);
  write_pcap(dir / "cut.pcap", frames(), std::vector<std::uint32_t>(frames().size(), 64));
  const std::string text = "[[pools]]\nname = 'rx'\ncount = 256\n[[ports]]\nname = 'f'\npmd = 'pcap'\nrx_file = '" +
                           (dir / "cut.pcap").string() +
                           "'\n[[endpoints]]\nname = 'e'\naction = 'sink'\nmatch = ['udp']\n[[lcores]]\nrx = ['f:0']\n";
  auto loaded = rawpipe::load_config_string(text, "cut.toml", {});
  ASSERT_TRUE(loaded) << loaded.message();
  auto created = rawpipe::Pipeline::create(loaded->plan);
  ASSERT_TRUE(created) << created.message();
  auto& p = *created.value();
  ASSERT_TRUE(p.start());
  for (int i = 0; i < 500 && p.snapshot().total.rx_packets < frames().size(); ++i) usleep(10000);
  ASSERT_TRUE(p.stop());
  const rawpipe::Accounting a = p.accounting();
  fs::remove_all(dir);
  using rawpipe::DropReason;
  auto drops = [&](DropReason r) { return a.drops[static_cast<std::size_t>(r)]; };
  ASSERT_EQ(a.rx_packets, frames().size());
  EXPECT_TRUE(a.balanced());
  // Frames 1, 2, 5, 6, 8, 10, 11 and 12 are longer than 64 bytes and their datagrams were cut.
  EXPECT_EQ(drops(DropReason::kCutByCapture), 8u);
  EXPECT_EQ(drops(DropReason::kBadIpv4TotalLength), 1u);  // frame 3: total length 10
  EXPECT_EQ(drops(DropReason::kBadIpv4Ihl), 1u);          // frame 9
  EXPECT_EQ(drops(DropReason::kBadUdpLength), 1u);        // frame 4, 62 bytes: not cut
  EXPECT_EQ(a.delivered, 1u);                             // frame 7
}

}  // namespace
