// The XDP steering program's decisions, frame by frame, with BPF_PROG_TEST_RUN: rules go in
// through the driver's own map writer (SteerProgram::set_rules), crafted frames go through the
// verifier-approved program, and the program's counters say whether it matched. Needs root
// (CAP_BPF) but no interface.
#include "pmd/af_xdp/program.hh"

#include <linux/bpf.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "pipeline/classify/rule.hh"
#include "pipeline/wire/builder.hh"
#include "pipeline/port/driver.hh"

namespace rawpipe::af_xdp {
namespace {

using wire::FrameSpec;

class SteerProgramTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root to load BPF programs";
    load(SteerMode::kSteer);
  }

  void load(SteerMode mode) {
    auto p = SteerProgram::load_unattached(mode);
    ASSERT_TRUE(p) << p.message();
    prog_ = std::move(p).value();
  }

  void rules(std::initializer_list<const char*> texts) {
    SteeringRules r;
    std::uint16_t ep = 0;
    for (const char* t : texts) {
      auto m = parse_match_rule(t);
      ASSERT_TRUE(m) << t << ": " << m.message();
      r.rules.push_back({m.value(), ep++, 0});
    }
    auto n = prog_->set_rules(r);
    ASSERT_TRUE(n) << n.message();
  }

  // True when the program matched the frame (redirect attempted), false when it passed it.
  bool steered(const std::uint8_t* frame, std::size_t len) {
    auto before = prog_->counters();
    auto rc = prog_->test_run(frame, len);
    EXPECT_TRUE(rc) << rc.message();
    // No socket in the XSK map here, so a redirect falls back to XDP_PASS either way.
    EXPECT_EQ(rc.value(), XDP_PASS);
    auto after = prog_->counters();
    std::uint64_t redirected = after["xdp_redirected"] - before["xdp_redirected"];
    std::uint64_t passed = after["xdp_passed"] + after["xdp_passed_not_ip"] - before["xdp_passed"] -
                           before["xdp_passed_not_ip"];
    EXPECT_EQ(redirected + passed, 1u) << "every frame is counted exactly once";
    return redirected == 1;
  }

  bool steered(const FrameSpec& spec) {
    std::uint8_t buf[512];
    std::size_t len = wire::write_frame(spec, buf, sizeof(buf));
    EXPECT_GT(len, 0u);
    return steered(buf, len);
  }

  static FrameSpec udp4(wire::Ipv4Addr dst, std::uint16_t port) {
    FrameSpec f;
    f.eth.dst = {2, 0, 0, 0, 0, 1};
    f.eth.src = {2, 0, 0, 0, 0, 2};
    f.ipv4.src = wire::ipv4(10, 9, 9, 9);
    f.ipv4.dst = dst;
    f.udp.src_port = 1111;
    f.udp.dst_port = port;
    f.payload_len = 18;
    return f;
  }

  static FrameSpec udp6(std::uint8_t last, std::uint16_t port) {
    FrameSpec f = udp4({}, port);
    f.ip_version = 6;
    f.ipv6.src = {0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x99};
    f.ipv6.dst = {0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, last};
    return f;
  }

  std::unique_ptr<SteerProgram> prog_;
};

TEST_F(SteerProgramTest, ExactDestinationsMatchAndNeighboursDoNot) {
  ASSERT_NO_FATAL_FAILURE(rules({"udp dst 10.1.0.1:5000", "udp dst [fd00::1]:6000"}));
  EXPECT_TRUE(steered(udp4(wire::ipv4(10, 1, 0, 1), 5000)));
  EXPECT_FALSE(steered(udp4(wire::ipv4(10, 1, 0, 1), 5001)));
  EXPECT_FALSE(steered(udp4(wire::ipv4(10, 1, 0, 2), 5000)));
  EXPECT_TRUE(steered(udp6(1, 6000)));
  EXPECT_FALSE(steered(udp6(2, 6000)));
  EXPECT_FALSE(steered(udp6(1, 6001)));
  FrameSpec tcp = udp4(wire::ipv4(10, 1, 0, 1), 5000);
  tcp.l4 = wire::L4Kind::kTcp;
  tcp.tcp.dst_port = 5000;
  EXPECT_FALSE(steered(tcp)) << "a UDP rule must not take TCP to the same port";
}

TEST_F(SteerProgramTest, VlanTaggedFramesAreSteeredLikeUntagged) {
  ASSERT_NO_FATAL_FAILURE(rules({"udp dst 10.1.0.1:5000", "udp dst [fd00::1]:6000"}));
  FrameSpec one = udp4(wire::ipv4(10, 1, 0, 1), 5000);
  one.eth.vlan_count = 1;
  one.eth.vlans[0].tci = 100;
  EXPECT_TRUE(steered(one));
  FrameSpec two = one;
  two.eth.vlan_count = 2;
  two.eth.vlans[1].tci = 200;
  EXPECT_TRUE(steered(two));
  FrameSpec v6 = udp6(1, 6000);
  v6.eth.vlan_count = 1;
  v6.eth.vlans[0].tci = 7;
  EXPECT_TRUE(steered(v6));
  two.udp.dst_port = 5001;
  EXPECT_FALSE(steered(two));
}

TEST_F(SteerProgramTest, PrefixesWildcardsAndProtocolOnlyRules) {
  ASSERT_NO_FATAL_FAILURE(rules({"tcp dst 10.2.0.0/16", "any dst 10.3.0.1", "udp dst *:9000"}));
  FrameSpec tcp = udp4(wire::ipv4(10, 2, 77, 3), 0);
  tcp.l4 = wire::L4Kind::kTcp;
  tcp.tcp.dst_port = 80;
  EXPECT_TRUE(steered(tcp));
  EXPECT_FALSE(steered(udp4(wire::ipv4(10, 2, 77, 3), 80))) << "the prefix rule is TCP only";
  tcp.ipv4.dst = wire::ipv4(10, 4, 0, 1);
  EXPECT_FALSE(steered(tcp));
  FrameSpec icmp = udp4(wire::ipv4(10, 3, 0, 1), 0);
  icmp.l4 = wire::L4Kind::kIcmp;
  icmp.icmp.type = 8;
  EXPECT_TRUE(steered(icmp)) << "an any-protocol rule takes ICMP too";
  EXPECT_TRUE(steered(udp4(wire::ipv4(192, 168, 1, 1), 9000))) << "any address, IPv4";
  EXPECT_TRUE(steered(udp6(9, 9000))) << "any address, IPv6";
  EXPECT_FALSE(steered(udp4(wire::ipv4(192, 168, 1, 1), 9001)));
}

TEST_F(SteerProgramTest, Ipv6ExtensionHeadersAndFragments) {
  ASSERT_NO_FATAL_FAILURE(rules({"udp dst [fd00::1]:6000", "udp dst 10.1.0.1:5000"}));
  wire::Ipv6ExtSpec dest_opts{};
  dest_opts.kind = wire::Ipv6ExtKind::kDestOpts;
  FrameSpec f = udp6(1, 6000);
  f.ipv6.ext = {&dest_opts, 1};
  EXPECT_TRUE(steered(f)) << "the port is found behind a destination options header";
  // A later fragment has no UDP header: a port rule cannot claim it, the kernel reassembles.
  FrameSpec frag = udp4(wire::ipv4(10, 1, 0, 1), 5000);
  frag.ipv4.frag_offset = 64;
  frag.l4 = wire::L4Kind::kRaw;
  frag.raw_proto = 17;
  frag.payload_len = 16;
  EXPECT_FALSE(steered(frag));
}

TEST_F(SteerProgramTest, NonIpAndTruncatedFramesGoToTheKernel) {
  ASSERT_NO_FATAL_FAILURE(rules({"udp dst *:5000", "any dst 10.3.0.1"}));
  wire::ArpSpec arp;
  arp.eth.dst = wire::kBroadcastMac;
  arp.eth.src = {2, 0, 0, 0, 0, 2};
  arp.tpa = wire::ipv4(10, 3, 0, 1);
  std::uint8_t buf[128];
  std::size_t len = wire::write_arp(arp, buf, sizeof(buf));
  ASSERT_GT(len, 0u);
  EXPECT_FALSE(steered(buf, len));
  std::uint8_t frame[128];
  std::size_t full = wire::write_frame(udp4(wire::ipv4(10, 3, 0, 1), 5000), frame, sizeof(frame));
  // Ethernet header alone, then cut inside the IPv4 header, then inside the UDP header:
  // never read past the end, always passed.
  EXPECT_FALSE(steered(frame, 14));
  EXPECT_FALSE(steered(frame, 30));
  EXPECT_TRUE(steered(frame, full));
}

TEST_F(SteerProgramTest, AllModeTakesEverything) {
  load(SteerMode::kAll);
  wire::ArpSpec arp;
  arp.eth.dst = wire::kBroadcastMac;
  std::uint8_t buf[128];
  std::size_t len = wire::write_arp(arp, buf, sizeof(buf));
  EXPECT_TRUE(steered(buf, len));
  EXPECT_TRUE(steered(udp4(wire::ipv4(1, 2, 3, 4), 1)));
}

TEST_F(SteerProgramTest, ReplacingRulesRemovesTheOldOnes) {
  ASSERT_NO_FATAL_FAILURE(rules({"udp dst 10.1.0.1:5000"}));
  EXPECT_TRUE(steered(udp4(wire::ipv4(10, 1, 0, 1), 5000)));
  ASSERT_NO_FATAL_FAILURE(rules({"udp dst 10.1.0.1:5001"}));
  EXPECT_FALSE(steered(udp4(wire::ipv4(10, 1, 0, 1), 5000)));
  EXPECT_TRUE(steered(udp4(wire::ipv4(10, 1, 0, 1), 5001)));
}

}  // namespace
}  // namespace rawpipe::af_xdp
