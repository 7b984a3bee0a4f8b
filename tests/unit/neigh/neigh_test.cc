// ARP and neighbour-discovery responder: golden reply bytes, VLAN tags kept, DAD answered to all
// nodes, foreign targets and malformed requests left alone.
#include "pipeline/neigh/neigh.hh"

#include <gtest/gtest.h>

#include <vector>

#include "pipeline/wire/builder.hh"
#include "pipeline/wire/checksum.hh"

namespace rawpipe {
namespace {

const wire::MacAddr kOurMac = {0x02, 0xaa, 0xbb, 0xcc, 0xdd, 0x01};
const wire::MacAddr kPeerMac = {0x02, 0, 0, 0, 0, 0x02};
const wire::Ipv6Addr kOurIp6 = {0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
const wire::Ipv6Addr kPeerIp6 = {0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2};

NeighTable table() {
  auto a = parse_neigh_address("10.0.0.1", kOurMac);
  auto b = parse_neigh_address("fd00::1", kOurMac);
  EXPECT_TRUE(a && b);
  auto t = NeighTable::create({a.value(), b.value()});
  EXPECT_TRUE(t) << t.message();
  return t.value();
}

std::vector<std::uint8_t> arp_request(std::uint8_t target_last, std::uint8_t vlans = 0) {
  wire::ArpSpec s;
  s.eth.dst = wire::kBroadcastMac;
  s.eth.src = kPeerMac;
  s.eth.vlan_count = vlans;
  s.eth.vlans[0].tci = 7;
  s.sha = kPeerMac;
  s.spa = wire::ipv4(10, 0, 0, 2);
  s.tpa = wire::ipv4(10, 0, 0, target_last);
  std::vector<std::uint8_t> f(128);
  f.resize(wire::write_arp(s, f.data(), f.size()));
  return f;
}

std::vector<std::uint8_t> neighbour_solicit(const wire::Ipv6Addr& src, const wire::Ipv6Addr& target, bool slla,
                                            std::uint8_t hop_limit = 255) {
  std::uint8_t body[24] = {};
  std::memcpy(body, target.data(), 16);
  body[16] = 1;
  body[17] = 1;
  std::memcpy(body + 18, kPeerMac.data(), 6);
  wire::FrameSpec s;
  s.eth.dst = {0x33, 0x33, 0xff, target[13], target[14], target[15]};
  s.eth.src = kPeerMac;
  s.ip_version = 6;
  s.ipv6.src = src;
  s.ipv6.dst = {0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0xff, target[13], target[14], target[15]};
  s.ipv6.hop_limit = hop_limit;
  s.l4 = wire::L4Kind::kIcmp;
  s.icmp.type = wire::kIcmpv6NeighborSolicit;
  s.payload = body;
  s.payload_len = slla ? 24 : 16;
  std::vector<std::uint8_t> f(256);
  f.resize(wire::write_frame(s, f.data(), f.size()));
  return f;
}

TEST(Neigh, ArpReplyGoldenBytes) {
  NeighTable t = table();
  auto req = arp_request(1);
  std::uint8_t out[128];
  NeighResult r = neigh_respond(t, req.data(), static_cast<std::uint32_t>(req.size()), out, sizeof out);
  ASSERT_EQ(r.outcome, NeighOutcome::kReplied);
  const std::uint8_t golden[60] = {
      0x02, 0x00, 0x00, 0x00, 0x00, 0x02, 0x02, 0xaa, 0xbb, 0xcc, 0xdd, 0x01, 0x08, 0x06,  // Ethernet
      0x00, 0x01, 0x08, 0x00, 0x06, 0x04, 0x00, 0x02,                                      // ARP reply
      0x02, 0xaa, 0xbb, 0xcc, 0xdd, 0x01, 0x0a, 0x00, 0x00, 0x01,                          // sha, spa (ours)
      0x02, 0x00, 0x00, 0x00, 0x00, 0x02, 0x0a, 0x00, 0x00, 0x02,                          // tha, tpa (asker)
  };  // zero padding to 60 bytes
  ASSERT_EQ(r.len, sizeof golden);
  EXPECT_EQ(std::vector<std::uint8_t>(out, out + r.len), std::vector<std::uint8_t>(golden, golden + sizeof golden));
}

TEST(Neigh, ArpReplyKeepsTheVlanTag) {
  NeighTable t = table();
  auto req = arp_request(1, 1);
  std::uint8_t out[128];
  NeighResult r = neigh_respond(t, req.data(), static_cast<std::uint32_t>(req.size()), out, sizeof out);
  ASSERT_EQ(r.outcome, NeighOutcome::kReplied);
  EXPECT_EQ(wire::load_be16(out + 12), 0x8100);
  EXPECT_EQ(wire::load_be16(out + 14), 7);
  EXPECT_EQ(wire::load_be16(out + 16), 0x0806);
  EXPECT_EQ(wire::load_be16(out + 18 + 6), wire::kArpOpReply);
}

TEST(Neigh, NeighbourAdvertisementGoldenBytes) {
  NeighTable t = table();
  auto req = neighbour_solicit(kPeerIp6, kOurIp6, true);
  std::uint8_t out[128];
  NeighResult r = neigh_respond(t, req.data(), static_cast<std::uint32_t>(req.size()), out, sizeof out);
  ASSERT_EQ(r.outcome, NeighOutcome::kReplied);
  // Computed independently (the checksum by a separate RFC 1071 implementation).
  const std::uint8_t golden[86] = {
      0x02, 0x00, 0x00, 0x00, 0x00, 0x02, 0x02, 0xaa, 0xbb, 0xcc, 0xdd, 0x01, 0x86, 0xdd,  // Ethernet
      0x60, 0x00, 0x00, 0x00, 0x00, 0x20, 0x3a, 0xff,                                      // IPv6, hop limit 255
      0xfd, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01,
      0xfd, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02,
      0x88, 0x00, 0x83, 0x24, 0x60, 0x00, 0x00, 0x00,                                      // NA, S and O set
      0xfd, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01,
      0x02, 0x01, 0x02, 0xaa, 0xbb, 0xcc, 0xdd, 0x01,                                      // target link-layer
  };
  ASSERT_EQ(r.len, sizeof golden);
  EXPECT_EQ(std::vector<std::uint8_t>(out, out + r.len), std::vector<std::uint8_t>(golden, golden + sizeof golden));
}

TEST(Neigh, DuplicateAddressProbeIsAnsweredToAllNodes) {
  NeighTable t = table();
  auto req = neighbour_solicit(wire::Ipv6Addr{}, kOurIp6, false);
  std::uint8_t out[128];
  NeighResult r = neigh_respond(t, req.data(), static_cast<std::uint32_t>(req.size()), out, sizeof out);
  ASSERT_EQ(r.outcome, NeighOutcome::kReplied);
  const std::uint8_t all_nodes_mac[6] = {0x33, 0x33, 0, 0, 0, 1};
  EXPECT_EQ(std::memcmp(out, all_nodes_mac, 6), 0);
  EXPECT_EQ(out[14 + 24], 0xff);
  EXPECT_EQ(out[14 + 39], 0x01);
  EXPECT_EQ(out[14 + 40 + 4], 0x20) << "override only, not solicited";
  EXPECT_EQ(wire::load_be16(out + 14 + 40 + 2), 0xc123);
}

TEST(Neigh, LeavesOtherTrafficAlone) {
  NeighTable t = table();
  std::uint8_t out[128];
  auto foreign = arp_request(9);
  EXPECT_EQ(neigh_respond(t, foreign.data(), std::uint32_t(foreign.size()), out, sizeof out).outcome,
            NeighOutcome::kNotOurs);
  auto other_ns = neighbour_solicit(kPeerIp6, kPeerIp6, true);
  EXPECT_EQ(neigh_respond(t, other_ns.data(), std::uint32_t(other_ns.size()), out, sizeof out).outcome,
            NeighOutcome::kNotOurs);
  wire::FrameSpec udp;
  udp.udp = {1, 2};
  std::vector<std::uint8_t> u(128);
  u.resize(wire::write_frame(udp, u.data(), u.size()));
  EXPECT_EQ(neigh_respond(t, u.data(), std::uint32_t(u.size()), out, sizeof out).outcome, NeighOutcome::kNotNeighbour);
  auto reply = arp_request(1);
  wire::store_be16(reply.data() + 14 + 6, wire::kArpOpReply);
  EXPECT_EQ(neigh_respond(t, reply.data(), std::uint32_t(reply.size()), out, sizeof out).outcome,
            NeighOutcome::kNotNeighbour);
}

TEST(Neigh, MalformedRequestsAreNotAnswered) {
  NeighTable t = table();
  std::uint8_t out[128];
  auto forwarded = neighbour_solicit(kPeerIp6, kOurIp6, true, 64);  // hop limit not 255
  EXPECT_EQ(neigh_respond(t, forwarded.data(), std::uint32_t(forwarded.size()), out, sizeof out).outcome,
            NeighOutcome::kMalformed);
  auto bad_sum = neighbour_solicit(kPeerIp6, kOurIp6, true);
  bad_sum[14 + 40 + 2] ^= 0x01;
  EXPECT_EQ(neigh_respond(t, bad_sum.data(), std::uint32_t(bad_sum.size()), out, sizeof out).outcome,
            NeighOutcome::kMalformed);
  auto short_arp = arp_request(1);
  EXPECT_EQ(neigh_respond(t, short_arp.data(), 14 + 20, out, sizeof out).outcome, NeighOutcome::kMalformed);
  for (std::uint32_t cut = 0; cut < forwarded.size(); ++cut) {
    auto ns = neighbour_solicit(kPeerIp6, kOurIp6, true);
    NeighResult r = neigh_respond(t, ns.data(), cut, out, sizeof out);
    EXPECT_NE(r.outcome, NeighOutcome::kReplied) << "cut at " << cut;
  }
  std::uint8_t tiny[8];
  auto ok = arp_request(1);
  EXPECT_EQ(neigh_respond(t, ok.data(), std::uint32_t(ok.size()), tiny, sizeof tiny).outcome, NeighOutcome::kMalformed)
      << "no room for the reply";
}

TEST(Neigh, AddressParsing) {
  EXPECT_FALSE(parse_neigh_address("10.0.0", kOurMac));
  EXPECT_FALSE(parse_neigh_address("239.1.1.1", kOurMac));
  EXPECT_FALSE(parse_neigh_address("ff02::1", kOurMac));
  auto a = parse_neigh_address("fd00::1", kOurMac);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->family, L3Type::kIpv6);
}

}  // namespace
}  // namespace rawpipe
