// rawpipe dissect: golden lines for well-formed, VLAN, IPv6, fragmented, malformed and non-IP
// frames; truncated and missing files.
#include "rawpipe/dissect.hh"

#include <pcap/pcap.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <sstream>
#include <vector>

#include "pipeline/wire/builder.hh"
#include <fmt/format.h>

namespace rawpipe {
namespace {

namespace fs = std::filesystem;

void write_pcap(const std::string& file, const std::vector<std::vector<std::uint8_t>>& frames) {
  pcap_t* dead = pcap_open_dead(DLT_EN10MB, 65535);
  pcap_dumper_t* d = pcap_dump_open(dead, file.c_str());
  ASSERT_NE(d, nullptr);
  for (const auto& f : frames) {
    pcap_pkthdr h{};
    h.caplen = h.len = static_cast<bpf_u_int32>(f.size());
    pcap_dump(reinterpret_cast<u_char*>(d), &h, f.data());
  }
  pcap_dump_close(d);
  pcap_close(dead);
}

std::vector<std::uint8_t> build(const wire::FrameSpec& s) {
  std::vector<std::uint8_t> b(2048);
  b.resize(wire::write_frame(s, b.data(), b.size()));
  EXPECT_GT(b.size(), 0u);
  return b;
}

class Dissect : public ::testing::Test {
 protected:
  void SetUp() override { file_ = fs::temp_directory_path() / fmt::format("rawpipe-dissect-{}.pcap", getpid()); }
  void TearDown() override { fs::remove(file_); }
  std::string file_;
};

TEST_F(Dissect, GoldenLines) {
  std::vector<std::vector<std::uint8_t>> frames;
  wire::FrameSpec udp4;
  udp4.ipv4.src = wire::ipv4(10, 0, 0, 1);
  udp4.ipv4.dst = wire::ipv4(239, 1, 1, 1);
  udp4.udp = {1000, 5000};
  udp4.payload_len = 18;
  udp4.min_frame_len = 60;
  frames.push_back(build(udp4));  // 1

  wire::FrameSpec v6 = udp4;
  v6.ip_version = 6;
  v6.ipv6.src = {0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
  v6.ipv6.dst = {0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
  v6.eth.vlan_count = 1;
  v6.eth.vlans[0].tci = 100;
  v6.payload_len = 20;
  frames.push_back(build(v6));  // 2

  wire::FrameSpec frag = udp4;  // a later IPv4 fragment: no ports
  frag.ipv4.frag_offset = 1480;
  frag.ipv4.mf = true;
  frag.l4 = wire::L4Kind::kRaw;
  frag.raw_proto = 17;
  frag.payload_len = 40;
  frames.push_back(build(frag));  // 3

  auto bad_len = build(udp4);  // UDP length beyond the IP packet
  wire::store_be16(bad_len.data() + 14 + 20 + 4, 200);
  frames.push_back(bad_len);  // 4

  auto short_ip = build(udp4);  // cut inside the IPv4 header
  short_ip.resize(14 + 12);
  frames.push_back(short_ip);  // 5

  std::vector<std::uint8_t> arp(64);
  wire::ArpSpec a;
  a.spa = wire::ipv4(10, 0, 0, 1);
  a.tpa = wire::ipv4(10, 0, 0, 2);
  arp.resize(wire::write_arp(a, arp.data(), arp.size()));
  frames.push_back(arp);  // 6

  wire::FrameSpec tcp = udp4;
  tcp.ipv4.dst = wire::ipv4(10, 0, 0, 2);
  tcp.l4 = wire::L4Kind::kTcp;
  tcp.tcp.src_port = 443;
  tcp.tcp.dst_port = 51000;
  frames.push_back(build(tcp));  // 7

  frames.push_back({1, 2, 3});  // 8: runt

  write_pcap(file_, frames);
  std::ostringstream out;
  ASSERT_EQ(run_dissect(file_, out), 0);
  const std::string expected =
      "frame\tlength\tverdict\tvlan\tip\tsrc\tdst\tproto\tmf\tfrag_off\tsport\tdport\tudp_len\n"
      "1\t60\tok\t-\t4\t10.0.0.1\t239.1.1.1\t17\t0\t0\t1000\t5000\t26\n"
      "2\t86\tok\t100\t6\tfd00::1\tff02::1\t17\t0\t0\t1000\t5000\t28\n"
      "3\t74\tok\t-\t4\t10.0.0.1\t239.1.1.1\t17\t1\t1480\t-\t-\t-\n"
      "4\t60\tbad_udp_length\t-\t4\t10.0.0.1\t239.1.1.1\t17\t0\t0\t1000\t5000\t200\n"
      "5\t26\ttruncated_ipv4\t-\t-\t-\t-\t-\t-\t-\t-\t-\t-\n"
      "6\t60\tok\t-\t-\t-\t-\t-\t-\t-\t-\t-\t-\n"
      "7\t72\tok\t-\t4\t10.0.0.1\t10.0.0.2\t6\t0\t0\t443\t51000\t-\n"
      "8\t3\trunt_ethernet\t-\t-\t-\t-\t-\t-\t-\t-\t-\t-\n";
  EXPECT_EQ(out.str(), expected);
}

TEST_F(Dissect, TruncatedFilePrintsWhatItReadAndSaysSo) {
  wire::FrameSpec udp4;
  udp4.udp = {1, 2};
  udp4.payload_len = 100;
  write_pcap(file_, {build(udp4), build(udp4)});
  fs::resize_file(file_, fs::file_size(file_) - 30);
  std::ostringstream out;
  EXPECT_EQ(run_dissect(file_, out), 2);
  std::string s = out.str();
  EXPECT_EQ(std::count(s.begin(), s.end(), '\n'), 2) << s;
}

TEST_F(Dissect, MissingFile) {
  std::ostringstream out;
  EXPECT_EQ(run_dissect("/nonexistent/x.pcap", out), 1);
  EXPECT_TRUE(out.str().empty());
}

}  // namespace
}  // namespace rawpipe
