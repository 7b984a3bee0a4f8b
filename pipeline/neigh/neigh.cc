#include "pipeline/neigh/neigh.hh"

#include <arpa/inet.h>

#include <cstring>
#include <string>

#include "pipeline/wire/builder.hh"
#include "pipeline/wire/checksum.hh"

namespace rawpipe {
namespace {

constexpr std::uint8_t kNdOptSourceLla = 1;
constexpr std::uint8_t kNdOptTargetLla = 2;
constexpr std::uint32_t kNaSolicited = 0x40000000u;  // host-order ICMPv6 "rest" word: R S O flags
constexpr std::uint32_t kNaOverride = 0x20000000u;
constexpr std::uint8_t kNdHopLimit = 255;           // RFC 4861 7.1.1: anything else was forwarded

struct L2 {
  wire::EthSpec eth;  // tags of the request; addresses filled by the caller
  std::uint32_t l3 = 0;
  std::uint16_t type = 0;
};

bool read_l2(const std::uint8_t* f, std::uint32_t len, L2& l2) noexcept {
  if (len < 14) return false;
  std::uint32_t off = 12;
  std::uint16_t type = wire::load_be16(f + off);
  while (type == wire::kEtherTypeVlan || type == wire::kEtherTypeQinQ || type == wire::kEtherTypeQinQLegacy) {
    if (l2.eth.vlan_count == 2 || len < off + 6) return false;
    l2.eth.vlans[l2.eth.vlan_count].tpid = type;
    l2.eth.vlans[l2.eth.vlan_count].tci = wire::load_be16(f + off + 2);
    ++l2.eth.vlan_count;
    off += 4;
    type = wire::load_be16(f + off);
  }
  l2.l3 = off + 2;
  l2.type = type;
  return true;
}

NeighResult arp(const NeighTable& t, const std::uint8_t* f, std::uint32_t len, L2& l2, std::uint8_t* out,
                std::uint32_t cap) noexcept {
  const std::uint8_t* a = f + l2.l3;
  if (len < l2.l3 + sizeof(wire::ArpHeader)) return {NeighOutcome::kMalformed, 0};
  if (wire::load_be16(a) != wire::kArpHtypeEthernet || wire::load_be16(a + 2) != wire::kEtherTypeIpv4 || a[4] != 6 ||
      a[5] != 4)
    return {NeighOutcome::kMalformed, 0};
  if (wire::load_be16(a + 6) != wire::kArpOpRequest) return {NeighOutcome::kNotNeighbour, 0};
  const std::uint8_t* sha = a + 8;
  const std::uint8_t* spa = a + 14;
  const std::uint8_t* tpa = a + 24;
  // A gratuitous announcement (sender == target) asks nothing.
  if (!std::memcmp(spa, tpa, 4)) return {NeighOutcome::kNotNeighbour, 0};
  const NeighAddress* ours = t.find_ipv4(tpa);
  if (!ours) return {NeighOutcome::kNotOurs, 0};
  wire::ArpSpec r;
  r.eth = l2.eth;
  std::memcpy(r.eth.dst.data(), sha, 6);
  r.eth.src = ours->mac;
  r.oper = wire::kArpOpReply;
  r.sha = ours->mac;
  std::memcpy(r.spa.data(), ours->ip.data(), 4);
  std::memcpy(r.tha.data(), sha, 6);
  std::memcpy(r.tpa.data(), spa, 4);  // 0.0.0.0 for an address probe (RFC 5227): still answered
  std::size_t n = wire::write_arp(r, out, cap);
  return n ? NeighResult{NeighOutcome::kReplied, static_cast<std::uint32_t>(n)} : NeighResult{NeighOutcome::kMalformed, 0};
}

NeighResult ns(const NeighTable& t, const std::uint8_t* f, std::uint32_t len, L2& l2, std::uint8_t* out,
               std::uint32_t cap) noexcept {
  const std::uint8_t* ip = f + l2.l3;
  if (len < l2.l3 + 40 || (ip[0] >> 4) != 6) return {NeighOutcome::kNotNeighbour, 0};
  if (ip[6] != wire::kIpProtoIcmpv6) return {NeighOutcome::kNotNeighbour, 0};  // NS never has extension headers
  const std::uint32_t plen = wire::load_be16(ip + 4);
  if (len < l2.l3 + 40 + plen || plen < 8) return {NeighOutcome::kNotNeighbour, 0};
  const std::uint8_t* icmp = ip + 40;
  if (icmp[0] != wire::kIcmpv6NeighborSolicit) return {NeighOutcome::kNotNeighbour, 0};
  if (icmp[1] != 0 || ip[7] != kNdHopLimit || plen < 24) return {NeighOutcome::kMalformed, 0};
  if (wire::l4_checksum_ipv6(ip + 8, ip + 24, wire::kIpProtoIcmpv6, icmp, plen) != 0)
    return {NeighOutcome::kMalformed, 0};
  const std::uint8_t* target = icmp + 8;
  if (target[0] == 0xff) return {NeighOutcome::kMalformed, 0};  // a target is never multicast
  static constexpr std::uint8_t kUnspecified[16] = {};
  const bool dad = !std::memcmp(ip + 8, kUnspecified, 16);
  // Where to answer: the source link-layer option if present (must be absent for DAD), else
  // the frame's source.
  const std::uint8_t* dst_mac = f + 6;
  for (std::uint32_t o = 24; o + 2 <= plen;) {
    const std::uint32_t olen = icmp[o + 1] * 8u;
    if (olen == 0 || o + olen > plen) return {NeighOutcome::kMalformed, 0};
    if (icmp[o] == kNdOptSourceLla && olen >= 8) {
      if (dad) return {NeighOutcome::kMalformed, 0};
      dst_mac = icmp + o + 2;
    }
    o += olen;
  }
  const NeighAddress* ours = t.find_ipv6(target);
  if (!ours) return {NeighOutcome::kNotOurs, 0};
  std::uint8_t body[24];
  std::memcpy(body, ours->ip.data(), 16);
  body[16] = kNdOptTargetLla;
  body[17] = 1;
  std::memcpy(body + 18, ours->mac.data(), 6);
  wire::FrameSpec s;
  s.eth = l2.eth;
  s.eth.src = ours->mac;
  s.ip_version = 6;
  std::memcpy(s.ipv6.src.data(), ours->ip.data(), 16);
  if (dad) {
    // RFC 4861 7.2.4: answer a duplicate-address probe to all nodes, not solicited.
    static constexpr wire::Ipv6Addr kAllNodes = {0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
    s.ipv6.dst = kAllNodes;
    s.eth.dst = {0x33, 0x33, 0, 0, 0, 1};
  } else {
    std::memcpy(s.ipv6.dst.data(), ip + 8, 16);
    std::memcpy(s.eth.dst.data(), dst_mac, 6);
  }
  s.ipv6.hop_limit = kNdHopLimit;
  s.l4 = wire::L4Kind::kIcmp;
  s.icmp.type = wire::kIcmpv6NeighborAdvert;
  s.icmp.code = 0;
  s.icmp.rest = kNaOverride | (dad ? 0 : kNaSolicited);
  s.payload = body;
  s.payload_len = sizeof body;
  std::size_t n = wire::write_frame(s, out, cap);
  return n ? NeighResult{NeighOutcome::kReplied, static_cast<std::uint32_t>(n)} : NeighResult{NeighOutcome::kMalformed, 0};
}

}  // namespace

Result<NeighAddress> parse_neigh_address(std::string_view text, const wire::MacAddr& mac) {
  NeighAddress a;
  a.mac = mac;
  std::string s(text);
  if (inet_pton(AF_INET, s.c_str(), a.ip.data()) == 1) {
    a.family = L3Type::kIpv4;
  } else if (inet_pton(AF_INET6, s.c_str(), a.ip.data()) == 1) {
    a.family = L3Type::kIpv6;
  } else {
    return Status::errorf("'{}' is not an IPv4 or IPv6 address", text);
  }
  const bool multicast = a.family == L3Type::kIpv4 ? (a.ip[0] & 0xf0) == 0xe0 : a.ip[0] == 0xff;
  if (multicast) return Status::errorf("'{}' is a multicast address; neighbour discovery answers for unicast ones", text);
  return a;
}

Result<NeighTable> NeighTable::create(const std::vector<NeighAddress>& addresses) {
  if (addresses.size() > kMaxAddresses)
    return Status::errorf("{} neighbour addresses configured; at most {}", addresses.size(), kMaxAddresses);
  NeighTable t;
  for (const NeighAddress& a : addresses) {
    for (std::size_t i = 0; i < t.count_; ++i)
      if (t.addrs_[i].family == a.family && t.addrs_[i].ip == a.ip && t.addrs_[i].mac != a.mac)
        return Status::error("one address is configured with two different MAC addresses");
    t.addrs_[t.count_++] = a;
  }
  return t;
}

const NeighAddress* NeighTable::find_ipv4(const std::uint8_t* ip4) const noexcept {
  for (std::size_t i = 0; i < count_; ++i)
    if (addrs_[i].family == L3Type::kIpv4 && !std::memcmp(addrs_[i].ip.data(), ip4, 4)) return &addrs_[i];
  return nullptr;
}

const NeighAddress* NeighTable::find_ipv6(const std::uint8_t* ip6) const noexcept {
  for (std::size_t i = 0; i < count_; ++i)
    if (addrs_[i].family == L3Type::kIpv6 && !std::memcmp(addrs_[i].ip.data(), ip6, 16)) return &addrs_[i];
  return nullptr;
}

NeighResult neigh_respond(const NeighTable& table, const std::uint8_t* frame, std::uint32_t len, std::uint8_t* out,
                          std::uint32_t cap) noexcept {
  L2 l2;
  if (!read_l2(frame, len, l2)) return {NeighOutcome::kNotNeighbour, 0};
  if (l2.type == wire::kEtherTypeArp) return arp(table, frame, len, l2, out, cap);
  if (l2.type == wire::kEtherTypeIpv6) return ns(table, frame, len, l2, out, cap);
  return {NeighOutcome::kNotNeighbour, 0};
}

NeighOutcome neigh_respond(const NeighTable& table, const Mbuf* request, Mbuf* reply) noexcept {
  NeighResult r = neigh_respond(table, request->data(), request->data_len, reply->data(),
                                reply->buf_len - reply->data_off);
  if (r.outcome == NeighOutcome::kReplied) {
    reply->data_len = r.len;
    reply->port = request->port;
    reply->queue = request->queue;
  }
  return r.outcome;
}

}  // namespace rawpipe
