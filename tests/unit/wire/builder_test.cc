#include "pipeline/wire/builder.hh"

#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "rawpipe/mbuf.hh"
#include "pipeline/parse/parse.hh"
#include "pipeline/wire/checksum.hh"
#include "tests/support/golden_frames.hh"
#include "tests/support/guarded_pool.hh"

namespace rawpipe::wire {
namespace {

namespace g = rawpipe::testing::golden;
using Bytes = std::vector<std::uint8_t>;

const std::uint8_t kPayload[] = {'r', 'a', 'w', 'p', 'i', 'p', 'e', '!'};

Ipv6Addr doc6(std::uint8_t last) {
  Ipv6Addr a{0x20, 0x01, 0x0d, 0xb8};
  a[15] = last;
  return a;
}

// The common spec of the golden frames.
FrameSpec base4() {
  FrameSpec s;
  s.eth.dst = {0x02, 0, 0, 0, 0, 0x02};
  s.eth.src = {0x02, 0, 0, 0, 0, 0x01};
  s.ip_version = 4;
  s.ipv4.src = ipv4(192, 0, 2, 1);
  s.ipv4.dst = ipv4(198, 51, 100, 7);
  s.ipv4.id = 0x1234;
  s.udp = {1234, 5000};
  s.payload = kPayload;
  s.payload_len = sizeof kPayload;
  return s;
}
FrameSpec base6() {
  FrameSpec s = base4();
  s.ip_version = 6;
  s.ipv6.src = doc6(1);
  s.ipv6.dst = doc6(2);
  s.ipv6.flow_label = 0x12345;
  return s;
}

Bytes build(const FrameSpec& s, FrameLayout* layout = nullptr) {
  Bytes out(2048);
  out.resize(write_frame(s, out.data(), out.size(), layout));
  return out;
}
Bytes bytes_of(std::span<const std::uint8_t> s) { return Bytes(s.begin(), s.end()); }

TEST(Builder, Udp4MatchesGoldenAndReportsLayout) {
  FrameSpec s = base4();
  s.min_frame_len = 60;
  FrameLayout l;
  EXPECT_EQ(build(s, &l), bytes_of(g::kUdp4));
  EXPECT_EQ(l.l3_off, 14);
  EXPECT_EQ(l.l4_off, 34);
  EXPECT_EQ(l.payload_off, 42);
  EXPECT_EQ(l.ip_end, 50);
  EXPECT_EQ(l.len, 60);
}

TEST(Builder, VlanTagsMatchGolden) {
  FrameSpec s = base4();
  s.eth.vlan_count = 1;
  s.eth.vlans[0].tci = 0x2064;
  s.min_frame_len = 60;
  EXPECT_EQ(build(s), bytes_of(g::kUdp4Vlan));
  s = base4();
  s.eth.vlan_count = 2;  // default TPIDs: 0x88a8 outside, 0x8100 inside
  s.eth.vlans[0].tci = 0x0064;
  s.eth.vlans[1].tci = 0xa0c8;
  EXPECT_EQ(build(s), bytes_of(g::kUdp4QinQ));
  s.eth.vlans[0].tpid = kEtherTypeQinQLegacy;
  Bytes legacy = build(s);
  EXPECT_EQ(legacy[12], 0x91);
  EXPECT_EQ(legacy[13], 0x00);
}

TEST(Builder, Ipv4OptionsMatchGolden) {
  FrameSpec s = base4();
  const std::uint8_t opt[] = {0x94, 0x04, 0x00, 0x00, 0x01, 0x01, 0x01, 0x00};
  s.ipv4.options = opt;
  s.ipv4.options_len = sizeof opt;
  s.ipv4.dst = ipv4(239, 1, 1, 1);
  s.eth.dst = {0x01, 0x00, 0x5e, 0x01, 0x01, 0x01};
  s.ipv4.ttl = 1;
  EXPECT_EQ(build(s), bytes_of(g::kUdp4Options));
}

TEST(Builder, Ipv4FragmentsMatchGolden) {
  static const std::uint8_t zeros[24] = {};
  FrameSpec s = base4();
  s.ipv4.mf = true;
  s.payload = zeros;
  s.payload_len = 16;
  s.udp.checksum = false;
  Bytes first = build(s);
  // The builder checksums and sizes what it writes; a first fragment's UDP length describes the
  // whole 52-byte datagram, which the golden frame carries.
  ASSERT_EQ(load_be16(first.data() + 38), 24);
  store_be16(first.data() + 38, 52);
  EXPECT_EQ(first, bytes_of(g::kUdp4FragFirst));

  std::uint8_t middle[24];
  for (int i = 0; i < 24; ++i) middle[i] = static_cast<std::uint8_t>(i);
  s = base4();
  s.ipv4.mf = true;
  s.ipv4.frag_offset = 24;
  s.l4 = L4Kind::kRaw;
  s.raw_proto = kIpProtoUdp;
  s.payload = middle;
  s.payload_len = 24;
  FrameLayout l;
  EXPECT_EQ(build(s, &l), bytes_of(g::kUdp4FragMiddle));
  EXPECT_EQ(l.l4_off, 0);
  EXPECT_EQ(l.payload_off, 34);

  s = base4();
  s.ipv4.frag_offset = 48;
  s.l4 = L4Kind::kRaw;
  s.raw_proto = kIpProtoUdp;
  s.payload_len = 4;
  s.min_frame_len = 60;
  EXPECT_EQ(build(s), bytes_of(g::kUdp4FragLast));
}

TEST(Builder, TcpAndIcmpMatchGolden) {
  FrameSpec s = base4();
  s.l4 = L4Kind::kTcp;
  s.tcp = {1234, 80, 0x01020304, 0x05060708, kTcpAck | kTcpPsh, 8192};
  EXPECT_EQ(build(s), bytes_of(g::kTcp4));
  s = base4();
  s.l4 = L4Kind::kIcmp;
  s.icmp = {kIcmpEchoRequest, 0, 0x00010002};
  EXPECT_EQ(build(s), bytes_of(g::kIcmp4));
  s = base6();
  s.l4 = L4Kind::kTcp;
  s.tcp = {443, 50000, 1, 0, kTcpSyn, 1024};
  s.payload_len = 0;
  EXPECT_EQ(build(s), bytes_of(g::kTcp6));
  s = base6();
  s.l4 = L4Kind::kIcmp;
  s.icmp = {kIcmpv6EchoRequest, 0, 0x00070001};
  s.payload_len = 4;
  EXPECT_EQ(build(s), bytes_of(g::kIcmp6));
}

TEST(Builder, Ipv6MatchesGolden) {
  EXPECT_EQ(build(base6()), bytes_of(g::kUdp6));
  FrameSpec s = base6();
  s.eth.vlan_count = 1;
  s.eth.vlans[0].tci = 5;
  s.ipv6.dst = Ipv6Addr{0xff, 0x02};
  s.ipv6.dst[15] = 0xfb;
  s.eth.dst = {0x33, 0x33, 0, 0, 0, 0xfb};
  EXPECT_EQ(build(s), bytes_of(g::kUdp6VlanMulticast));
}

TEST(Builder, Ipv6ExtensionHeadersMatchGolden) {
  {
    FrameSpec s = base6();
    const std::uint8_t router_alert[] = {0x05, 0x02, 0x00, 0x00, 0x01, 0x00};
    Ipv6ExtSpec e[1];
    e[0].kind = Ipv6ExtKind::kHopByHop;
    e[0].body = router_alert;
    e[0].body_len = sizeof router_alert;
    s.ipv6.ext = e;
    EXPECT_EQ(build(s), bytes_of(g::kUdp6HopByHop));
  }
  {
    FrameSpec s = base6();
    std::uint8_t srh[22] = {4, 0, 0, 0, 0, 0};  // type 4, segments left 0, last entry 0, flags, tag
    const Ipv6Addr seg = doc6(2);
    std::copy(seg.begin(), seg.end(), srh + 6);
    Ipv6ExtSpec e[1];
    e[0].kind = Ipv6ExtKind::kRouting;
    e[0].hdr_ext_len = 2;
    e[0].body = srh;
    e[0].body_len = sizeof srh;
    s.ipv6.ext = e;
    EXPECT_EQ(build(s), bytes_of(g::kUdp6Routing));
  }
  {
    FrameSpec s = base6();
    const std::uint8_t padn[] = {0x01, 0x04, 0, 0, 0, 0};
    Ipv6ExtSpec e[1];
    e[0].kind = Ipv6ExtKind::kDestOpts;
    e[0].body = padn;
    e[0].body_len = sizeof padn;
    s.ipv6.ext = e;
    EXPECT_EQ(build(s), bytes_of(g::kUdp6DestOpts));
  }
  {
    FrameSpec s = base6();
    Ipv6ExtSpec e[4];
    e[0].kind = Ipv6ExtKind::kHopByHop;
    e[1].kind = Ipv6ExtKind::kDestOpts;
    e[1].hdr_ext_len = 1;
    const std::uint8_t rpl[] = {0x03, 0x00};
    e[2].kind = Ipv6ExtKind::kRouting;
    e[2].body = rpl;
    e[2].body_len = sizeof rpl;
    e[3].kind = Ipv6ExtKind::kFragment;
    e[3].frag_id = 7;
    s.ipv6.ext = e;
    EXPECT_EQ(build(s), bytes_of(g::kUdp6Chain));
  }
}

TEST(Builder, Ipv6FragmentsMatchGolden) {
  static const std::uint8_t zeros[16] = {};
  FrameSpec s = base6();
  Ipv6ExtSpec e[1];
  e[0].kind = Ipv6ExtKind::kFragment;
  e[0].more = true;
  e[0].frag_id = 0xabcdef01;
  s.ipv6.ext = e;
  s.payload = zeros;
  s.payload_len = 16;
  Bytes first = build(s);
  // As for IPv4: the golden first fragment carries the whole datagram's UDP length (32) and the
  // checksum over all of it (tshark verified it after reassembly).
  ASSERT_EQ(load_be16(first.data() + 66), 24);
  store_be16(first.data() + 66, 32);
  store_be16(first.data() + 68, 0x7bcb);
  EXPECT_EQ(first, bytes_of(g::kUdp6FragFirst));

  const std::uint8_t tail[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  s = base6();
  e[0].more = false;
  e[0].frag_offset = 24;
  s.ipv6.ext = e;
  s.l4 = L4Kind::kRaw;
  s.raw_proto = kIpProtoUdp;
  s.payload = tail;
  s.payload_len = 8;
  EXPECT_EQ(build(s), bytes_of(g::kUdp6FragLast));
}

TEST(Builder, ArpMatchesGolden) {
  ArpSpec a;
  a.eth.dst = kBroadcastMac;
  a.eth.src = {0x02, 0, 0, 0, 0, 0x01};
  a.sha = a.eth.src;
  a.spa = ipv4(192, 0, 2, 1);
  a.tpa = ipv4(192, 0, 2, 254);
  Bytes out(64);
  out.resize(write_arp(a, out.data(), out.size()));
  EXPECT_EQ(out, bytes_of(g::kArp));
  EXPECT_EQ(write_arp(a, out.data(), 41), 0u);
}

TEST(Builder, UdpChecksumZeroIsSentAsAllOnes) {
  // Find a 2-byte payload whose UDP checksum computes to 0; the builder must write 0xffff.
  FrameSpec s = base4();
  std::uint8_t pl[2];
  s.payload = pl;
  s.payload_len = 2;
  bool found = false;
  for (unsigned v = 0; v < 65536 && !found; ++v) {
    pl[0] = static_cast<std::uint8_t>(v >> 8);
    pl[1] = static_cast<std::uint8_t>(v);
    Bytes f = build(s);
    if (load_be16(f.data() + 40) == 0xffff) {
      found = true;
      // With 0xffff in place the segment still verifies (ones' complement has two zeros).
      EXPECT_EQ(l4_checksum_ipv4(f.data() + 26, f.data() + 30, 17, f.data() + 34, 10), 0);
    }
    ASSERT_NE(load_be16(f.data() + 40), 0) << "payload " << v;
  }
  EXPECT_TRUE(found);
  s.udp.checksum = false;
  EXPECT_EQ(load_be16(build(s).data() + 40), 0);
}

TEST(Builder, RejectsInvalidSpecsAndShortBuffers) {
  std::uint8_t buf[2048];
  FrameSpec s = base4();
  const std::uint8_t opt[44] = {};
  s.ipv4.options = opt;
  s.ipv4.options_len = 3;
  EXPECT_EQ(write_frame(s, buf, sizeof buf), 0u);
  s.ipv4.options_len = 44;
  EXPECT_EQ(write_frame(s, buf, sizeof buf), 0u);
  s.ipv4.options_len = 40;
  EXPECT_EQ(write_frame(s, buf, sizeof buf), 14u + 60 + 8 + 8);
  s = base4();
  s.ipv4.frag_offset = 12;
  EXPECT_EQ(write_frame(s, buf, sizeof buf), 0u);
  s = base4();
  s.eth.vlan_count = 3;
  EXPECT_EQ(write_frame(s, buf, sizeof buf), 0u);
  s = base4();
  s.ip_version = 5;
  EXPECT_EQ(write_frame(s, buf, sizeof buf), 0u);
  s = base4();
  EXPECT_EQ(write_frame(s, buf, 49), 0u);
  EXPECT_EQ(write_frame(s, buf, 50), 50u);
  s.min_frame_len = 60;
  EXPECT_EQ(write_frame(s, buf, 59), 0u);
  s = base6();
  Ipv6ExtSpec e[9];
  s.ipv6.ext = e;
  EXPECT_EQ(write_frame(s, buf, sizeof buf), 0u);
  e[0].kind = Ipv6ExtKind::kFragment;
  e[0].frag_offset = 4;
  s.ipv6.ext = std::span<const Ipv6ExtSpec>(e, 1);
  EXPECT_EQ(write_frame(s, buf, sizeof buf), 0u);
}

TEST(Builder, NonIpFrameCarriesThePayloadAfterTheEtherType) {
  FrameSpec s;
  s.ip_version = 0;
  s.ether_type = 0x88cc;
  const std::uint8_t tlv[] = {0x02, 0x07, 0x04, 1, 2, 3, 4, 5, 6};
  s.payload = tlv;
  s.payload_len = sizeof tlv;
  FrameLayout l;
  Bytes f = build(s, &l);
  ASSERT_EQ(f.size(), 14u + sizeof tlv);
  EXPECT_EQ(load_be16(f.data() + 12), 0x88cc);
  EXPECT_EQ(f[14], 0x02);
  EXPECT_EQ(l.l4_off, 0);
}

// Whatever the builder makes, parse must take apart into the layout the builder reported.
TEST(Builder, RandomSpecsParseBackToTheirLayout) {
  auto guarded = rawpipe::testing::GuardedPool::create(4096);
  ASSERT_NE(guarded, nullptr);
  std::mt19937 rng(7);
  std::uint8_t opts[40];
  for (auto& b : opts) b = 1;  // NOP
  std::uint8_t payload[1200] = {};
  unsigned built = 0;
  for (unsigned iter = 0; iter < 5000; ++iter) {
    FrameSpec s = rng() % 2 ? base4() : base6();
    s.eth.vlan_count = static_cast<std::uint8_t>(rng() % 3);
    s.eth.vlans[0].tci = static_cast<std::uint16_t>(rng());
    s.eth.vlans[1].tci = static_cast<std::uint16_t>(rng());
    s.l4 = static_cast<L4Kind>(rng() % 3);  // UDP, TCP, ICMP
    s.payload = payload;
    s.payload_len = static_cast<std::uint16_t>(rng() % sizeof payload);
    s.min_frame_len = rng() % 2 ? 60 : 0;
    s.ipv4.options = opts;
    s.ipv4.options_len = static_cast<std::uint8_t>((rng() % 11) * 4);
    Ipv6ExtSpec ext[6];
    const unsigned n_ext = rng() % 7;
    for (unsigned i = 0; i < n_ext; ++i) {
      const Ipv6ExtKind kinds[] = {Ipv6ExtKind::kDestOpts, Ipv6ExtKind::kRouting, Ipv6ExtKind::kFragment};
      ext[i].kind = i == 0 && rng() % 2 ? Ipv6ExtKind::kHopByHop : kinds[rng() % 3];
      ext[i].hdr_ext_len = static_cast<std::uint8_t>(rng() % 4);
    }
    s.ipv6.ext = std::span<const Ipv6ExtSpec>(ext, n_ext);
    FrameLayout l;
    Bytes f = build(s, &l);
    ASSERT_FALSE(f.empty());
    Mbuf* m = guarded->place(f);
    parse_packet(m);
    ASSERT_EQ(m->drop_reason, 0) << "iteration " << iter;
    EXPECT_EQ(m->l3_off, l.l3_off);
    EXPECT_EQ(m->l4_off, l.l4_off);
    EXPECT_EQ(m->payload_off, l.payload_off);
    EXPECT_EQ(m->payload_len, s.payload_len);
    EXPECT_EQ(m->vlan_count, s.eth.vlan_count);
    if (s.ip_version == 4) {
      EXPECT_TRUE(ipv4_header_checksum_ok(f.data() + l.l3_off, l.l4_off - l.l3_off));
      if (s.l4 != L4Kind::kIcmp) {
        EXPECT_EQ(l4_checksum_ipv4(f.data() + l.l3_off + 12, f.data() + l.l3_off + 16, m->l4_proto,
                                   f.data() + l.l4_off, l.ip_end - l.l4_off), 0);
      } else {
        EXPECT_EQ(icmpv4_checksum(f.data() + l.l4_off, l.ip_end - l.l4_off), 0);
      }
    } else {
      EXPECT_EQ(l4_checksum_ipv6(f.data() + l.l3_off + 8, f.data() + l.l3_off + 24, m->l4_proto,
                                 f.data() + l.l4_off, l.ip_end - l.l4_off), 0);
    }
    ++built;
  }
  EXPECT_EQ(built, 5000u);
}

}  // namespace
}  // namespace rawpipe::wire
