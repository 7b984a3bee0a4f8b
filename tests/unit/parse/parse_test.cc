#include "pipeline/parse/parse.hh"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <random>
#include <string>
#include <vector>

#include "pipeline/buf/pool.hh"
#include "pipeline/wire/builder.hh"
#include "tests/support/golden_frames.hh"
#include "tests/support/guarded_pool.hh"

namespace rawpipe {
namespace {

namespace g = testing::golden;
using namespace pkt_flag;
using Bytes = std::vector<std::uint8_t>;

Bytes bytes_of(std::span<const std::uint8_t> s) { return Bytes(s.begin(), s.end()); }

// Every frame is parsed in a buffer whose last byte sits right before a PROT_NONE page, so a read
// past data_len crashes the test instead of passing unnoticed.
class ParseTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    guarded_ = testing::GuardedPool::create(4096).release();
    ASSERT_NE(guarded_, nullptr);
  }
  static void TearDownTestSuite() {
    delete guarded_;
    guarded_ = nullptr;
  }

  static Mbuf* parse(std::span<const std::uint8_t> frame, std::uint16_t rx_flags = 0) {
    Mbuf* m = guarded_->place(frame);
    m->flags = rx_flags;
    parse_packet(m);
    return m;
  }
  static DropReason reason(std::span<const std::uint8_t> frame, std::uint16_t rx_flags = 0) {
    return static_cast<DropReason>(parse(frame, rx_flags)->drop_reason);
  }

  static testing::GuardedPool* guarded_;
};
testing::GuardedPool* ParseTest::guarded_ = nullptr;

std::string reason_name(std::uint8_t r) {
  return r < kDropReasonCount ? std::string(kDropReasonNames[r]) : "invalid(" + std::to_string(r) + ")";
}

#define EXPECT_REASON(frame, want) \
  EXPECT_EQ(reason_name(static_cast<std::uint8_t>(reason(frame))), reason_name(static_cast<std::uint8_t>(want)))

// ---- the harness itself ----

TEST_F(ParseTest, GuardPageFaultsOnTheFirstByteAfterTheFrame) {
  Mbuf* m = guarded_->place(g::kUdp4);
  EXPECT_EQ(m->data() + m->data_len, guarded_->guard());
  EXPECT_DEATH(
      {
        volatile const std::uint8_t* p = guarded_->guard();
        (void)*p;
      },
      "");
}

// ---- the IPv4/UDP fast path against the general parse ----

// What parse writes, as one comparable value.
struct Parsed {
  std::uint16_t l3_off, l4_off, payload_off, payload_len, vlan0, vlan1, flags, frag_off;
  std::uint8_t l3_type, l4_proto, vlan_count, drop_reason;
  bool operator==(const Parsed&) const = default;
};
Parsed parsed(const Mbuf* m) {
  return {m->l3_off, m->l4_off, m->payload_off, m->payload_len, m->vlan_tci[0], m->vlan_tci[1], m->flags, m->frag_off,
          static_cast<std::uint8_t>(m->l3_type), m->l4_proto, m->vlan_count, m->drop_reason};
}

TEST_F(ParseTest, FastPathAgreesWithTheGeneralParseOnMutatedUdpFrames) {
  // Mutations aimed at exactly what the fast path tests (EtherType, version/IHL, flags and
  // fragment offset, protocol, both lengths, the MAC and multicast bits) plus random bytes and
  // random truncation, with and without the PMD's checksum verdicts.
  const std::array<unsigned, 12> hot = {0, 5, 12, 13, 14, 16, 17, 20, 21, 23, 30, 38};
  std::mt19937 rng(7);
  unsigned fast = 0;
  unsigned keyed_frames = 0;
  for (int iter = 0; iter < 20000; ++iter) {
    Bytes f = bytes_of(g::kUdp4);
    const int edits = static_cast<int>(rng() % 3);
    for (int e = 0; e < edits; ++e) {
      const unsigned at = rng() % 2 ? hot[rng() % hot.size()] : static_cast<unsigned>(rng() % f.size());
      f[at] = static_cast<std::uint8_t>(rng() % 4 ? rng() : (rng() % 2 ? 0 : 0xff));
    }
    if (rng() % 8 == 0) f.resize(rng() % (f.size() + 1));
    const std::uint16_t rx_flags = rng() % 16 == 0 ? (rng() % 2 ? kL3CsumBad : kL4CsumBad) : kRssHash;
    Mbuf* m = guarded_->place(f);
    m->flags = rx_flags;
    const std::uint64_t key = parse_packet_keyed(m, parse_packet_general);
    const Parsed keyed = parsed(m);
    m = parse(f, rx_flags);
    const Parsed quick = parsed(m);
    m = guarded_->place(f);
    m->flags = rx_flags;
    parse_packet_general(m);
    ASSERT_EQ(quick, parsed(m)) << "iteration " << iter << ", " << f.size() << " bytes";
    ASSERT_EQ(keyed, parsed(m)) << "iteration " << iter << ", " << f.size() << " bytes";
    // A key only for an untagged, unfragmented IPv4 UDP frame parse kept, and then exactly its
    // destination address and port.
    if (key != kNoUdp4Key) {
      ASSERT_EQ(quick.drop_reason, 0) << "iteration " << iter;
      ASSERT_EQ(quick.l4_proto, wire::kIpProtoUdp) << "iteration " << iter;
      ASSERT_EQ(quick.l3_off, 14) << "iteration " << iter;
      ASSERT_EQ(quick.l4_off, 34) << "iteration " << iter;
      ASSERT_EQ(quick.flags & (kIpFragment | kVlan), 0) << "iteration " << iter;
      const std::uint64_t dst = std::uint64_t{f[30]} | std::uint64_t{f[31]} << 8 | std::uint64_t{f[32]} << 16 |
                                std::uint64_t{f[33]} << 24;
      const std::uint64_t dport = std::uint64_t{f[36]} | std::uint64_t{f[37]} << 8;
      ASSERT_EQ(key, dst | std::uint64_t{17} << 32 | dport << 48) << "iteration " << iter;
      ++keyed_frames;
    }
    fast += quick.drop_reason == 0 && quick.l4_proto == wire::kIpProtoUdp && quick.vlan_count == 0;
  }
  EXPECT_GT(fast, 5000u);  // the unmutated shape stays common enough to exercise the fast path
  EXPECT_GT(keyed_frames, 5000u);
}

// ---- golden frames: every field ----

struct Expect {
  std::string_view name;
  std::span<const std::uint8_t> frame;
  std::uint16_t l3_off, l4_off, payload_off, payload_len;
  std::uint8_t vlan_count;
  std::uint16_t tci0, tci1;
  std::uint16_t flags;
  std::uint16_t frag_off;
  L3Type l3;
  std::uint8_t l4_proto;
};

constexpr L3Type k4 = L3Type::kIpv4;
constexpr L3Type k6 = L3Type::kIpv6;

const Expect kGolden[] = {
    // name, frame, l3, l4, payload_off, payload_len, vlans, tci0, tci1, flags, frag_off, l3, proto
    {"Udp4", g::kUdp4, 14, 34, 42, 8, 0, 0, 0, 0, 0, k4, 17},
    {"Udp4Vlan", g::kUdp4Vlan, 18, 38, 46, 8, 1, 0x2064, 0, kVlan, 0, k4, 17},
    {"Udp4QinQ", g::kUdp4QinQ, 22, 42, 50, 8, 2, 0x0064, 0xa0c8, kVlan | kQinQ, 0, k4, 17},
    {"Udp4Options", g::kUdp4Options, 14, 42, 50, 8, 0, 0, 0, kIpOptions | kMulticast, 0, k4, 17},
    // A first fragment's UDP length (52) covers the whole datagram; payload_len is what it carries.
    {"Udp4FragFirst", g::kUdp4FragFirst, 14, 34, 42, 16, 0, 0, 0, kIpFragment | kMoreFragments, 0, k4, 17},
    {"Udp4FragMiddle", g::kUdp4FragMiddle, 14, 0, 0, 0, 0, 0, 0, kIpFragment | kMoreFragments, 24, k4, 17},
    {"Udp4FragLast", g::kUdp4FragLast, 14, 0, 0, 0, 0, 0, 0, kIpFragment, 48, k4, 17},
    {"Tcp4", g::kTcp4, 14, 34, 54, 8, 0, 0, 0, 0, 0, k4, 6},
    {"Tcp4Mss", g::kTcp4Mss, 14, 34, 58, 8, 0, 0, 0, 0, 0, k4, 6},
    {"Icmp4", g::kIcmp4, 14, 34, 42, 8, 0, 0, 0, 0, 0, k4, 1},
    {"Udp6", g::kUdp6, 14, 54, 62, 8, 0, 0, 0, 0, 0, k6, 17},
    {"Udp6VlanMulticast", g::kUdp6VlanMulticast, 18, 58, 66, 8, 1, 5, 0, kVlan | kMulticast, 0, k6, 17},
    {"Udp6HopByHop", g::kUdp6HopByHop, 14, 62, 70, 8, 0, 0, 0, kIpOptions, 0, k6, 17},
    {"Udp6Routing", g::kUdp6Routing, 14, 78, 86, 8, 0, 0, 0, kIpOptions, 0, k6, 17},
    {"Udp6DestOpts", g::kUdp6DestOpts, 14, 62, 70, 8, 0, 0, 0, kIpOptions, 0, k6, 17},
    {"Udp6FragFirst", g::kUdp6FragFirst, 14, 62, 70, 16, 0, 0, 0, kIpOptions | kIpFragment | kMoreFragments, 0, k6, 17},
    {"Udp6FragLast", g::kUdp6FragLast, 14, 0, 0, 0, 0, 0, 0, kIpOptions | kIpFragment, 24, k6, 17},
    // The chain ends in an atomic fragment header (offset 0, M clear): not a fragment (RFC 6946).
    {"Udp6Chain", g::kUdp6Chain, 14, 94, 102, 8, 0, 0, 0, kIpOptions, 0, k6, 17},
    {"Tcp6", g::kTcp6, 14, 54, 74, 0, 0, 0, 0, 0, 0, k6, 6},
    {"Icmp6", g::kIcmp6, 14, 54, 62, 4, 0, 0, 0, 0, 0, k6, 58},
    {"Arp", g::kArp, 14, 0, 0, 0, 0, 0, 0, kBroadcast, 0, L3Type::kNone, 0},
};

TEST_F(ParseTest, GoldenFramesParseEveryField) {
  static_assert(std::size(kGolden) == std::size(g::kAll), "every golden frame has an expectation");
  for (const Expect& e : kGolden) {
    SCOPED_TRACE(std::string(e.name));
    Mbuf* m = parse(e.frame);
    EXPECT_EQ(reason_name(m->drop_reason), "none");
    EXPECT_EQ(m->l3_off, e.l3_off);
    EXPECT_EQ(m->l4_off, e.l4_off);
    EXPECT_EQ(m->payload_off, e.payload_off);
    EXPECT_EQ(m->payload_len, e.payload_len);
    EXPECT_EQ(m->vlan_count, e.vlan_count);
    EXPECT_EQ(m->vlan_tci[0], e.tci0);
    EXPECT_EQ(m->vlan_tci[1], e.tci1);
    EXPECT_EQ(m->flags, e.flags) << std::hex << "got 0x" << m->flags << " want 0x" << e.flags;
    EXPECT_EQ(m->frag_off, e.frag_off);
    EXPECT_EQ(m->l3_type, e.l3);
    EXPECT_EQ(m->l4_proto, e.l4_proto);
  }
}

TEST_F(ParseTest, PayloadOffsetPointsAtThePayloadBytes) {
  Mbuf* m = parse(g::kUdp4Vlan);
  ASSERT_EQ(m->payload_len, 8);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(m->data() + m->payload_off), m->payload_len), "rawpipe!");
  m = parse(g::kUdp6Chain);
  ASSERT_EQ(m->payload_len, 8);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(m->data() + m->payload_off), m->payload_len), "rawpipe!");
  m = parse(g::kTcp4Mss);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(m->data() + m->payload_off), m->payload_len), "rawpipe!");
}

TEST_F(ParseTest, LegacyQinQTpidAndTagsInAnyOrderAreVlans) {
  Bytes f = bytes_of(g::kUdp4QinQ);
  f[12] = 0x91;  // 0x9100 outer
  f[13] = 0x00;
  Mbuf* m = parse(f);
  EXPECT_EQ(reason_name(m->drop_reason), "none");
  EXPECT_EQ(m->vlan_count, 2);
  EXPECT_EQ(m->l3_off, 22);
  f[12] = 0x81;  // two 802.1Q tags
  m = parse(f);
  EXPECT_EQ(m->vlan_count, 2);
  EXPECT_EQ(m->flags & (kVlan | kQinQ), kVlan | kQinQ);
}

TEST_F(ParseTest, NonIpFramesAreNotMalformed) {
  Mbuf* m = parse(g::kArp);
  EXPECT_EQ(m->drop_reason, 0);
  EXPECT_EQ(m->l3_type, L3Type::kNone);
  // ARP behind a tag: l3_off still finds the ARP header.
  const std::uint8_t tagged_arp[] = {
      0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02, 0x00, 0x00, 0x00, 0x00, 0x01, 0x81, 0x00, 0x00, 0x07,
      0x08, 0x06, 0x00, 0x01, 0x08, 0x00, 0x06, 0x04, 0x00, 0x01, 0x02, 0x00, 0x00, 0x00, 0x00, 0x01,
      0xc0, 0x00, 0x02, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xc0, 0x00, 0x02, 0xfe,
  };
  m = parse(tagged_arp);
  EXPECT_EQ(m->drop_reason, 0);
  EXPECT_EQ(m->vlan_count, 1);
  EXPECT_EQ(m->vlan_tci[0], 7);
  EXPECT_EQ(m->l3_off, 18);
  EXPECT_EQ(m->l3_type, L3Type::kNone);
  EXPECT_EQ(m->flags, kVlan | kBroadcast);
  // LLDP (0x88cc) with nothing after the EtherType: a bare Ethernet header is a whole frame.
  const std::uint8_t lldp[] = {0x01, 0x80, 0xc2, 0x00, 0x00, 0x0e, 0x02, 0x00,
                               0x00, 0x00, 0x00, 0x01, 0x88, 0xcc};
  m = parse(lldp);
  EXPECT_EQ(m->drop_reason, 0);
  EXPECT_EQ(m->l3_off, 14);
  EXPECT_EQ(m->flags, 0);
}

TEST_F(ParseTest, EthernetPaddingAfterTheIpPacketIsAllowed) {
  // kUdp4 is 50 bytes of IP packet padded to 60.
  Mbuf* m = parse(g::kUdp4);
  EXPECT_EQ(m->drop_reason, 0);
  EXPECT_EQ(m->payload_off + m->payload_len, 50);
  Bytes f = bytes_of(g::kUdp6);
  f.resize(f.size() + 30, 0xee);
  m = parse(f);
  EXPECT_EQ(m->drop_reason, 0);
  EXPECT_EQ(m->payload_len, 8);
}

TEST_F(ParseTest, UdpLengthShorterThanIpPayloadIsAccepted) {
  // Like Linux: the UDP length wins when it is shorter; the IP payload's tail is ignored.
  Bytes f = bytes_of(g::kUdp4);
  f[38] = 0x00;
  f[39] = 0x0c;  // UDP length 12 of 16
  Mbuf* m = parse(f);
  EXPECT_EQ(m->drop_reason, 0);
  EXPECT_EQ(m->payload_len, 4);
}

TEST_F(ParseTest, IPv6NoNextHeaderHasNoL4) {
  Bytes f = bytes_of(g::kUdp6DestOpts);
  f[54] = 59;  // destination options -> no next header
  Mbuf* m = parse(f);
  EXPECT_EQ(m->drop_reason, 0);
  EXPECT_EQ(m->l4_proto, 59);
  EXPECT_EQ(m->l4_off, 0);
  EXPECT_EQ(m->flags, kIpOptions);
}

TEST_F(ParseTest, UnknownL4ProtocolIsIdentifiedWithoutPayload) {
  Bytes f = bytes_of(g::kUdp4);
  f[23] = 47;  // GRE
  f[24] = 0;   // the header checksum is not parse's concern
  Mbuf* m = parse(f);
  EXPECT_EQ(m->drop_reason, 0);
  EXPECT_EQ(m->l4_proto, 47);
  EXPECT_EQ(m->l4_off, 34);
  EXPECT_EQ(m->payload_off, 0);
  EXPECT_EQ(m->payload_len, 0);
}

TEST_F(ParseTest, BroadcastAndMulticastFlags) {
  Bytes f = bytes_of(g::kUdp4);
  std::fill(f.begin(), f.begin() + 6, 0xff);
  EXPECT_EQ(parse(f)->flags, kBroadcast);
  f[5] = 0xfe;  // one bit short of broadcast
  EXPECT_EQ(parse(f)->flags, 0);
  f = bytes_of(g::kUdp4);
  f[30] = 224;  // 224.51.100.7
  EXPECT_EQ(parse(f)->flags, kMulticast);
  f[30] = 240;  // class E is not multicast
  EXPECT_EQ(parse(f)->flags, 0);
  f[30] = 223;
  EXPECT_EQ(parse(f)->flags, 0);
  f = bytes_of(g::kUdp6);
  f[38] = 0xff;
  f[39] = 0x05;
  EXPECT_EQ(parse(f)->flags, kMulticast);
  f[38] = 0xfe;
  EXPECT_EQ(parse(f)->flags, 0);
}

TEST_F(ParseTest, ReceiveFlagsAreKeptAndStaleParseResultsCleared) {
  Mbuf* m = guarded_->place(g::kUdp4);
  m->flags = kRssHash | kTimestamp | kL4CsumGood | kVlan | kQinQ | kMulticast | kIpFragment;
  m->vlan_count = 2;
  m->vlan_tci[0] = 1;
  m->vlan_tci[1] = 2;
  m->frag_off = 99;
  m->l4_proto = 99;
  m->drop_reason = 7;
  m->l3_type = L3Type::kIpv6;
  parse_packet(m);
  EXPECT_EQ(m->flags, kRssHash | kTimestamp | kL4CsumGood);
  EXPECT_EQ(m->vlan_count, 0);
  EXPECT_EQ(m->vlan_tci[0], 0);
  EXPECT_EQ(m->vlan_tci[1], 0);
  EXPECT_EQ(m->frag_off, 0);
  EXPECT_EQ(m->l4_proto, 17);
  EXPECT_EQ(m->drop_reason, 0);
  EXPECT_EQ(m->l3_type, L3Type::kIpv4);

  m = guarded_->place(g::kArp);
  m->l4_off = 40;
  m->payload_off = 50;
  m->payload_len = 3;
  parse_packet(m);
  EXPECT_EQ(m->l4_off, 0);
  EXPECT_EQ(m->payload_off, 0);
  EXPECT_EQ(m->payload_len, 0);
}

// ---- malformed frames: every reason parse produces ----

Bytes patched(std::span<const std::uint8_t> base, std::initializer_list<std::pair<std::size_t, std::uint8_t>> patches) {
  Bytes f = bytes_of(base);
  for (auto [at, v] : patches) f.at(at) = v;
  return f;
}
Bytes prefix(std::span<const std::uint8_t> base, std::size_t n) { return Bytes(base.begin(), base.begin() + n); }

TEST_F(ParseTest, RuntEthernet) {
  EXPECT_REASON(Bytes{}, DropReason::kRuntEthernet);
  EXPECT_REASON(prefix(g::kUdp4, 13), DropReason::kRuntEthernet);
  EXPECT_EQ(parse(prefix(g::kUdp4, 13))->l3_off, 0);
}

TEST_F(ParseTest, TruncatedVlan) {
  EXPECT_REASON(prefix(g::kUdp4Vlan, 14), DropReason::kTruncatedVlan);
  EXPECT_REASON(prefix(g::kUdp4Vlan, 17), DropReason::kTruncatedVlan);
  EXPECT_REASON(prefix(g::kUdp4QinQ, 21), DropReason::kTruncatedVlan);  // inside the second tag
  Mbuf* m = parse(prefix(g::kUdp4QinQ, 21));
  EXPECT_EQ(m->vlan_count, 1);
  EXPECT_EQ(m->vlan_tci[0], 0x0064);
  EXPECT_EQ(m->flags, kVlan);
  // The tag and the EtherType after it are complete: what is missing is the IPv4 header.
  EXPECT_REASON(prefix(g::kUdp4Vlan, 18), DropReason::kTruncatedIpv4);
}

TEST_F(ParseTest, TooManyVlans) {
  const std::uint8_t three_tags[] = {
      0x02, 0x00, 0x00, 0x00, 0x00, 0x02, 0x02, 0x00, 0x00, 0x00, 0x00, 0x01,
      0x88, 0xa8, 0x00, 0x64,  // S-tag VID 100
      0x81, 0x00, 0x00, 0xc8,  // C-tag VID 200
      0x81, 0x00, 0x01, 0x2c,  // a third tag, VID 300
      0x08, 0x00, 0x45, 0x00, 0x00, 0x14, 0x00, 0x00, 0x00, 0x00, 0x40, 0x3b, 0x00, 0x00,
      0xc0, 0x00, 0x02, 0x01, 0xc6, 0x33, 0x64, 0x07,
  };
  Mbuf* m = parse(three_tags);
  EXPECT_EQ(reason_name(m->drop_reason), "too_many_vlans");
  EXPECT_EQ(m->vlan_count, 2);
  EXPECT_EQ(m->vlan_tci[0], 100);
  EXPECT_EQ(m->vlan_tci[1], 200);
  EXPECT_EQ(m->flags, kVlan | kQinQ);
  EXPECT_EQ(m->l3_off, 0);  // never found
  // The third TPID is the last thing read: a frame ending right after it is still "too many".
  EXPECT_REASON(prefix(three_tags, 22), DropReason::kTooManyVlans);
}

TEST_F(ParseTest, TruncatedIpv4) {
  EXPECT_REASON(prefix(g::kUdp4, 14), DropReason::kTruncatedIpv4);
  EXPECT_REASON(prefix(g::kUdp4, 33), DropReason::kTruncatedIpv4);
  EXPECT_EQ(parse(prefix(g::kUdp4, 33))->l3_type, L3Type::kIpv4);
}

TEST_F(ParseTest, BadIpv4Version) {
  EXPECT_REASON(patched(g::kUdp4, {{14, 0x65}}), DropReason::kBadIpv4Version);
  EXPECT_REASON(patched(g::kUdp4, {{14, 0x05}}), DropReason::kBadIpv4Version);
}

TEST_F(ParseTest, BadIpv4Ihl) {
  EXPECT_REASON(patched(g::kUdp4, {{14, 0x44}}), DropReason::kBadIpv4Ihl);  // 16 bytes
  EXPECT_REASON(patched(g::kUdp4, {{14, 0x40}}), DropReason::kBadIpv4Ihl);  // 0
  // 60-byte header in a frame with 46 bytes after Ethernet.
  EXPECT_REASON(patched(g::kUdp4, {{14, 0x4f}}), DropReason::kBadIpv4Ihl);
  // The options of kUdp4Options reach byte 42; cut at 41.
  EXPECT_REASON(prefix(g::kUdp4Options, 41), DropReason::kBadIpv4Ihl);
}

TEST_F(ParseTest, BadIpv4TotalLength) {
  EXPECT_REASON(patched(g::kUdp4, {{16, 0x00}, {17, 0x13}}), DropReason::kBadIpv4TotalLength);  // 19 < 20
  EXPECT_REASON(patched(g::kUdp4Options, {{16, 0x00}, {17, 0x1b}}), DropReason::kBadIpv4TotalLength);  // 27 < 28
  EXPECT_REASON(patched(g::kUdp4, {{16, 0x00}, {17, 0x2f}}), DropReason::kBadIpv4TotalLength);  // 47 > 46
  EXPECT_REASON(patched(g::kUdp4, {{16, 0xff}, {17, 0xff}}), DropReason::kBadIpv4TotalLength);
  // Exactly the frame: fine (UDP then checks its own length against 46 - 20).
  EXPECT_REASON(patched(g::kUdp4, {{16, 0x00}, {17, 0x2e}}), DropReason::kNone);
}

TEST_F(ParseTest, TruncatedIpv6) {
  EXPECT_REASON(prefix(g::kUdp6, 14), DropReason::kTruncatedIpv6);
  EXPECT_REASON(prefix(g::kUdp6, 53), DropReason::kTruncatedIpv6);
  EXPECT_REASON(prefix(g::kUdp6VlanMulticast, 57), DropReason::kTruncatedIpv6);
}

TEST_F(ParseTest, BadIpv6Version) {
  EXPECT_REASON(patched(g::kUdp6, {{14, 0x40}}), DropReason::kBadIpv6Version);
  EXPECT_REASON(patched(g::kUdp6, {{14, 0x70}}), DropReason::kBadIpv6Version);
}

TEST_F(ParseTest, BadIpv6PayloadLength) {
  EXPECT_REASON(patched(g::kUdp6, {{19, 0x11}}), DropReason::kBadIpv6PayloadLength);  // 17 > 16
  EXPECT_REASON(patched(g::kUdp6, {{18, 0xff}}), DropReason::kBadIpv6PayloadLength);
}

// An IPv6/UDP frame with `n` destination options headers of 8 bytes each.
Bytes ipv6_with_dest_opts(unsigned n) {
  Bytes f(g::kUdp6, g::kUdp6 + 54);  // Ethernet + IPv6 header
  const unsigned plen = n * 8 + 8;
  f[18] = static_cast<std::uint8_t>(plen >> 8);
  f[19] = static_cast<std::uint8_t>(plen);
  f[20] = n ? 60 : 17;
  for (unsigned i = 0; i < n; ++i) {
    const std::uint8_t next = i + 1 < n ? 60 : 17;
    f.insert(f.end(), {next, 0, 1, 4, 0, 0, 0, 0});  // PadN
  }
  f.insert(f.end(), {0x04, 0xd2, 0x13, 0x88, 0x00, 0x08, 0x00, 0x00});  // UDP, empty
  return f;
}

TEST_F(ParseTest, BadIpv6ExtHeader) {
  // The hop-by-hop header claims 32 bytes of the 24-byte payload.
  EXPECT_REASON(patched(g::kUdp6HopByHop, {{55, 3}}), DropReason::kBadIpv6ExtHeader);
  // Payload length cut so that only one byte of an extension header is inside the packet.
  EXPECT_REASON(patched(g::kUdp6HopByHop, {{18, 0}, {19, 1}}), DropReason::kBadIpv6ExtHeader);
  // Fragment header with 4 of its 8 bytes.
  EXPECT_REASON(patched(g::kUdp6FragLast, {{18, 0}, {19, 4}}), DropReason::kBadIpv6ExtHeader);
  // Hop-by-hop anywhere but first (RFC 8200 4.3).
  EXPECT_REASON(patched(g::kUdp6Chain, {{62, 0}}), DropReason::kBadIpv6ExtHeader);
  // The chain bound: 8 headers are walked, a 9th is refused.
  EXPECT_REASON(ipv6_with_dest_opts(8), DropReason::kNone);
  EXPECT_EQ(parse(ipv6_with_dest_opts(8))->l4_off, 54 + 64);
  EXPECT_REASON(ipv6_with_dest_opts(9), DropReason::kBadIpv6ExtHeader);
  EXPECT_REASON(ipv6_with_dest_opts(40), DropReason::kBadIpv6ExtHeader);
}

TEST_F(ParseTest, TruncatedUdp) {
  // IPv4 total length leaves 7 bytes for UDP; the frame's padding does not count.
  EXPECT_REASON(patched(g::kUdp4, {{17, 27}}), DropReason::kTruncatedUdp);
  EXPECT_REASON(patched(g::kUdp4, {{17, 20}}), DropReason::kTruncatedUdp);
  EXPECT_REASON(patched(g::kUdp6, {{19, 7}}), DropReason::kTruncatedUdp);
  // A first fragment too short for the UDP header.
  EXPECT_REASON(patched(g::kUdp4FragFirst, {{17, 0x18}}), DropReason::kTruncatedUdp);
}

TEST_F(ParseTest, BadUdpLength) {
  EXPECT_REASON(patched(g::kUdp4, {{39, 7}}), DropReason::kBadUdpLength);
  EXPECT_REASON(patched(g::kUdp4, {{39, 0}}), DropReason::kBadUdpLength);
  EXPECT_REASON(patched(g::kUdp4, {{39, 17}}), DropReason::kBadUdpLength);  // 17 > 16, padding does not count
  EXPECT_REASON(patched(g::kUdp6, {{59, 17}}), DropReason::kBadUdpLength);
  EXPECT_REASON(patched(g::kUdp6Chain, {{99, 0xff}}), DropReason::kBadUdpLength);
  // First fragments may claim more than they carry, but not less than a header.
  EXPECT_REASON(patched(g::kUdp4FragFirst, {{39, 0xff}}), DropReason::kNone);
  EXPECT_REASON(patched(g::kUdp4FragFirst, {{39, 4}}), DropReason::kBadUdpLength);
}

TEST_F(ParseTest, TruncatedTcp) {
  // 19 bytes of TCP header.
  EXPECT_REASON(patched(g::kTcp4, {{17, 39}}), DropReason::kTruncatedTcp);
  EXPECT_REASON(prefix(g::kTcp6, 73), DropReason::kBadIpv6PayloadLength);  // the IP check comes first
  EXPECT_REASON(patched(g::kTcp6, {{19, 19}}), DropReason::kTruncatedTcp);
  // Data offset 15 words (60 bytes) in a 28-byte segment.
  EXPECT_REASON(patched(g::kTcp4, {{46, 0xf0}}), DropReason::kTruncatedTcp);
  // kTcp4Mss's option cut off by the IP length.
  EXPECT_REASON(patched(g::kTcp4Mss, {{17, 42}}), DropReason::kTruncatedTcp);
}

TEST_F(ParseTest, BadTcpHeader) {
  EXPECT_REASON(patched(g::kTcp4, {{46, 0x40}}), DropReason::kBadTcpHeader);
  EXPECT_REASON(patched(g::kTcp6, {{66, 0x00}}), DropReason::kBadTcpHeader);
}

TEST_F(ParseTest, PortReportedChecksumErrorsBecomeDropReasons) {
  EXPECT_REASON(g::kUdp4, DropReason::kNone);
  EXPECT_EQ(reason(g::kUdp4, kL3CsumBad), DropReason::kBadL3Checksum);
  EXPECT_EQ(reason(g::kUdp4, kL4CsumBad), DropReason::kBadL4Checksum);
  EXPECT_EQ(reason(g::kTcp6, kL4CsumBad), DropReason::kBadL4Checksum);
  EXPECT_EQ(reason(g::kUdp6, kL3CsumBad), DropReason::kNone);  // IPv6 has no header checksum
  EXPECT_EQ(reason(g::kArp, kL3CsumBad | kL4CsumBad), DropReason::kNone);
  EXPECT_EQ(reason(g::kIcmp4, kL4CsumBad), DropReason::kNone);
  EXPECT_EQ(reason(g::kUdp4FragMiddle, kL4CsumBad), DropReason::kNone);
  // A structural fault is reported as such, not as the checksum the NIC could not verify.
  EXPECT_EQ(reason(patched(g::kUdp4, {{14, 0x44}}), kL3CsumBad), DropReason::kBadIpv4Ihl);
  // The checksum flags themselves stay: they are the port's facts.
  EXPECT_EQ(parse(g::kUdp4, kL3CsumBad)->flags, kL3CsumBad);
}

// ---- every prefix of every golden frame ----

// What a frame cut to `len` bytes must be reported as, from the layout of the full frame.
DropReason expected_for_prefix(const Expect& e, std::size_t len) {
  if (len < 14) return DropReason::kRuntEthernet;
  for (unsigned t = 0; t < e.vlan_count; ++t)
    if (len < 12 + 4 * t + 6) return DropReason::kTruncatedVlan;
  const std::size_t l3 = e.l3_off;
  if (e.l3 == L3Type::kNone) return DropReason::kNone;
  const std::uint8_t* ip = e.frame.data() + l3;
  if (e.l3 == L3Type::kIpv4) {
    const std::size_t ihl = (ip[0] & 0xf) * 4u;
    const std::size_t end = l3 + ((std::size_t(ip[2]) << 8) | ip[3]);
    if (len < l3 + 20) return DropReason::kTruncatedIpv4;
    if (len < l3 + ihl) return DropReason::kBadIpv4Ihl;
    if (len < end) return DropReason::kBadIpv4TotalLength;
    return DropReason::kNone;
  }
  const std::size_t end = l3 + 40 + ((std::size_t(ip[4]) << 8) | ip[5]);
  if (len < l3 + 40) return DropReason::kTruncatedIpv6;
  if (len < end) return DropReason::kBadIpv6PayloadLength;
  return DropReason::kNone;
}

TEST_F(ParseTest, EveryPrefixOfEveryGoldenFrameIsReportedAndNeverOverread) {
  unsigned checked = 0;
  for (const Expect& e : kGolden) {
    for (std::size_t len = 0; len <= e.frame.size(); ++len) {
      SCOPED_TRACE(std::string(e.name) + " cut to " + std::to_string(len));
      Mbuf* m = parse(e.frame.first(len));
      const DropReason want = expected_for_prefix(e, len);
      ASSERT_EQ(reason_name(m->drop_reason), reason_name(static_cast<std::uint8_t>(want)));
      EXPECT_LE(m->l3_off, len);
      EXPECT_LE(m->l4_off, len);
      EXPECT_LE(m->payload_off + m->payload_len, len);
      if (want == DropReason::kNone) {
        // Only Ethernet padding was cut: the parse is the full frame's.
        EXPECT_EQ(m->l4_off, e.l4_off);
        EXPECT_EQ(m->payload_len, e.payload_len);
      }
      ++checked;
    }
  }
  EXPECT_GT(checked, 1400u);
}

// ---- random corruption: invariants, no overread ----

TEST_F(ParseTest, CorruptedFramesKeepEveryOffsetInsideTheFrame) {
  std::mt19937 rng(12345);
  std::array<unsigned, kDropReasonCount> seen{};
  for (unsigned iter = 0; iter < 200000; ++iter) {
    const auto& base = g::kAll[rng() % std::size(g::kAll)].bytes;
    Bytes f(base.begin(), base.end());
    const unsigned flips = 1 + rng() % 4;
    for (unsigned k = 0; k < flips; ++k) f[rng() % f.size()] = static_cast<std::uint8_t>(rng());
    f.resize(rng() % (f.size() + 1));
    Mbuf* m = parse(f);
    ASSERT_LT(m->drop_reason, kDropReasonCount);
    ++seen[m->drop_reason];
    ASSERT_LE(m->l3_off, f.size());
    ASSERT_LE(m->l4_off, f.size());
    ASSERT_LE(m->payload_off + m->payload_len, f.size());
    ASSERT_LE(m->vlan_count, 2);
    if (m->drop_reason == 0 && m->l4_off != 0) {
      ASSERT_GE(m->l4_off, m->l3_off);
    }
  }
  EXPECT_GT(seen[0], 1000u);
  EXPECT_GT(seen[static_cast<unsigned>(DropReason::kBadIpv4TotalLength)], 100u);
}

// ---- burst form ----

TEST(ParseBurst, MatchesThePerPacketFormForEveryBurstSize) {
  PoolConfig c;
  c.name = "parse-burst";
  c.count = 64;
  c.cache_size = 0;
  c.huge_pages = HugePages::kNever;
  auto pool = Pool::create(c);
  ASSERT_TRUE(pool) << pool.message();
  constexpr unsigned kN = 2 * std::size(g::kAll);
  Mbuf* bufs[kN];
  ASSERT_TRUE((*pool)->alloc_bulk(bufs, kN));
  auto fill = [&] {
    for (unsigned i = 0; i < kN; ++i) {
      const auto& b = g::kAll[i % std::size(g::kAll)].bytes;
      std::copy(b.begin(), b.end(), bufs[i]->data());
      bufs[i]->data_len = static_cast<std::uint32_t>(b.size() - (i >= std::size(g::kAll) ? 3 : 0));
      bufs[i]->drop_reason = 0xee;
    }
  };
  for (unsigned n : {0u, 1u, 3u, 4u, 5u, 9u, kN}) {
    SCOPED_TRACE("burst of " + std::to_string(n));
    fill();
    parse_burst(bufs, n);
    for (unsigned i = 0; i < kN; ++i) {
      if (i >= n) {
        EXPECT_EQ(bufs[i]->drop_reason, 0xee) << "packet " << i << " is outside the burst";
        continue;
      }
      const std::uint16_t l3 = bufs[i]->l3_off, l4 = bufs[i]->l4_off, po = bufs[i]->payload_off;
      const std::uint8_t dr = bufs[i]->drop_reason;
      parse_packet(bufs[i]);
      EXPECT_EQ(bufs[i]->l3_off, l3);
      EXPECT_EQ(bufs[i]->l4_off, l4);
      EXPECT_EQ(bufs[i]->payload_off, po);
      EXPECT_EQ(bufs[i]->drop_reason, dr);
    }
  }
  // The frames cut by 3 bytes: IP-carrying ones lose part of their IP packet unless it was padding.
  fill();
  parse_burst(bufs, kN);
  EXPECT_EQ(bufs[std::size(g::kAll)]->drop_reason, 0);  // kUdp4 cut into its 10 bytes of padding
  EXPECT_EQ(reason_name(bufs[std::size(g::kAll) + 1]->drop_reason), "none");  // kUdp4Vlan: 6 bytes of padding
  EXPECT_EQ(reason_name(bufs[std::size(g::kAll) + 2]->drop_reason), "bad_ipv4_total_length");  // kUdp4QinQ
  mbuf_free_bulk(bufs, kN);
  EXPECT_EQ((*pool)->available(), 64u);
}

}  // namespace
}  // namespace rawpipe
