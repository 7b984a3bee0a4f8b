// Parse stage: finds the layers of each received frame and flags malformed ones.
//
// For every packet, parse fills (see Mbuf, offsets from the first data byte):
//   vlan_count, vlan_tci[2]  0-2 802.1Q/802.1ad tags (TPID 0x8100, 0x88a8 or 0x9100), outer first;
//   l3_off                   first byte after the Ethernet header and tags, for every frame that
//                            has a complete Ethernet header and at most two complete tags;
//   l3_type                  kIpv4 / kIpv6, or kNone for anything else (ARP, LLDP, ...). Non-IP
//                            frames are not malformed: drop_reason stays 0 and classify decides;
//   l4_proto                 IPv4 protocol, or the IPv6 next header after the extension headers;
//   l4_off                   start of that protocol's header; 0 for non-first fragments, IPv6
//                            "no next header" and non-IP frames;
//   payload_off/payload_len  UDP: after the 8-byte header, length from the UDP header.
//                            TCP: after the header including options, up to the end of the IP
//                            packet. ICMP/ICMPv6: after the 8-byte header when it is complete.
//                            In a first fragment the length is what this fragment carries.
//                            0/0 otherwise;
//   frag_off                 fragment offset in bytes;
//   flags                    the parse bits of pkt_flag (kVlan, kQinQ, kIpFragment,
//                            kMoreFragments, kIpOptions, kMulticast, kBroadcast); the PMD's bits
//                            are kept. kIpOptions means IPv4 options or any IPv6 extension header.
//                            An IPv6 fragment header with offset 0 and M clear (an atomic
//                            fragment, RFC 6946) is not a fragment;
//   drop_reason              0, or the DropReason of the first check that failed. When the PMD
//                            flagged a bad IPv4 header checksum (kL3CsumBad) or bad UDP/TCP
//                            checksum (kL4CsumBad) on an otherwise well-formed packet, parse turns
//                            that into kBadL3Checksum / kBadL4Checksum.
//
// Lengths are checked before every read: nothing past data_len is ever touched (frames longer than
// 65535 bytes are parsed as their first 65535 bytes, since offsets are 16-bit). Ethernet padding
// after the IP packet is allowed; all L3/L4 lengths are bounded by the IP packet, not the frame.
//
// Thread-safety: a packet's owner parses it; no shared state, no allocation.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "rawpipe/mbuf.hh"
#include "rawpipe/compiler.hh"
#include "rawpipe/drop_reason.hh"
#include "pipeline/wire/wire.hh"
#include "pipeline/parse/udp4_key.hh"

namespace rawpipe {

// Parses n packets in place (fields above) and returns the sum of their data_len. The receive has
// already asked for the frames' data where it was not in this core's cache (pipeline/port/port.hh).
std::uint64_t parse_burst(Mbuf* const* pkts, unsigned n) noexcept;

// parse_burst() that also writes keys[i] = parse_packet_keyed(pkts[i]), for the classifier.
std::uint64_t parse_burst(Mbuf* const* pkts, unsigned n, std::uint64_t* keys) noexcept;

// Single-packet form of parse_burst, inlined into callers that already loop over packets.
RAWPIPE_ALWAYS_INLINE void parse_packet(Mbuf* m) noexcept;

namespace parse_detail {

inline constexpr std::uint16_t kParseFlags = pkt_flag::kVlan | pkt_flag::kQinQ | pkt_flag::kIpFragment |
                                             pkt_flag::kMoreFragments | pkt_flag::kIpOptions |
                                             pkt_flag::kMulticast | pkt_flag::kBroadcast;

// Longest IPv6 extension header chain walked; real chains have at most ~6 (RFC 8200 4.1), longer
// ones are a resource attack on whoever walks them.
inline constexpr unsigned kMaxIpv6ExtHeaders = 8;

RAWPIPE_ALWAYS_INLINE bool is_vlan_tpid(std::uint16_t et) noexcept {
  return et == wire::kEtherTypeVlan || et == wire::kEtherTypeQinQ || et == wire::kEtherTypeQinQLegacy;
}

// Next-header values that parse walks as IPv6 extension headers: 0, 43, 44, 60.
RAWPIPE_ALWAYS_INLINE bool is_ipv6_ext(std::uint8_t nh) noexcept {
  constexpr std::uint64_t kMask = (1ull << wire::kIpProtoHopByHop) | (1ull << wire::kIpProtoRouting) |
                                  (1ull << wire::kIpProtoFragment) | (1ull << wire::kIpProtoDestOpts);
  return nh < 64 && ((kMask >> nh) & 1);
}

// L4 at d[l4 .. ip_end). `fragment`: a first fragment, whose UDP length covers the whole datagram.
RAWPIPE_ALWAYS_INLINE DropReason parse_l4(Mbuf* m, const std::uint8_t* d, unsigned l4, unsigned ip_end,
                                          std::uint8_t proto, bool fragment) noexcept {
  m->l4_off = static_cast<std::uint16_t>(l4);
  const unsigned avail = ip_end - l4;
  if (RAWPIPE_LIKELY(proto == wire::kIpProtoUdp)) {
    if (RAWPIPE_UNLIKELY(avail < sizeof(wire::UdpHeader))) return DropReason::kTruncatedUdp;
    const unsigned ulen = wire::load_be16(d + l4 + 4);
    if (RAWPIPE_UNLIKELY(ulen < sizeof(wire::UdpHeader) || (ulen > avail && !fragment)))
      return DropReason::kBadUdpLength;
    m->payload_off = static_cast<std::uint16_t>(l4 + sizeof(wire::UdpHeader));
    const unsigned carried = fragment && ulen > avail ? avail : ulen;
    m->payload_len = static_cast<std::uint16_t>(carried - sizeof(wire::UdpHeader));
    return DropReason::kNone;
  }
  if (proto == wire::kIpProtoTcp) {
    if (RAWPIPE_UNLIKELY(avail < sizeof(wire::TcpHeader))) return DropReason::kTruncatedTcp;
    const unsigned doff = (d[l4 + 12] >> 4) * 4u;
    if (RAWPIPE_UNLIKELY(doff < sizeof(wire::TcpHeader))) return DropReason::kBadTcpHeader;
    if (RAWPIPE_UNLIKELY(doff > avail)) return DropReason::kTruncatedTcp;
    m->payload_off = static_cast<std::uint16_t>(l4 + doff);
    m->payload_len = static_cast<std::uint16_t>(avail - doff);
    return DropReason::kNone;
  }
  if ((proto == wire::kIpProtoIcmp || proto == wire::kIpProtoIcmpv6) && avail >= sizeof(wire::IcmpHeader)) {
    m->payload_off = static_cast<std::uint16_t>(l4 + sizeof(wire::IcmpHeader));
    m->payload_len = static_cast<std::uint16_t>(avail - sizeof(wire::IcmpHeader));
  }
  return DropReason::kNone;
}

RAWPIPE_ALWAYS_INLINE DropReason parse_ipv4(Mbuf* m, const std::uint8_t* d, unsigned l3, unsigned len,
                                            std::uint16_t& flags) noexcept {
  m->l3_type = L3Type::kIpv4;
  const unsigned avail = len - l3;
  if (RAWPIPE_UNLIKELY(avail < wire::kIpv4MinHeader)) return DropReason::kTruncatedIpv4;
  const std::uint8_t* ip = d + l3;
  const unsigned vihl = ip[0];
  const unsigned total = wire::load_be16(ip + 2);
  unsigned ihl = wire::kIpv4MinHeader;
  if (RAWPIPE_LIKELY(vihl == 0x45)) {  // version 4 without options: only the length to check
    if (RAWPIPE_UNLIKELY(total < wire::kIpv4MinHeader || total > avail)) return DropReason::kBadIpv4TotalLength;
  } else {
    ihl = (vihl & 0xf) * 4u;
    // The three header checks folded into one reason, tested once (VPP ip4_input_check_x1 style).
    const DropReason r = (vihl >> 4) != 4                             ? DropReason::kBadIpv4Version
                         : (ihl < wire::kIpv4MinHeader || ihl > avail) ? DropReason::kBadIpv4Ihl
                         : (total < ihl || total > avail)              ? DropReason::kBadIpv4TotalLength
                                                                       : DropReason::kNone;
    if (RAWPIPE_UNLIKELY(r != DropReason::kNone)) return r;
    flags |= ihl > wire::kIpv4MinHeader ? pkt_flag::kIpOptions : 0;
  }
  const std::uint8_t proto = ip[9];
  m->l4_proto = proto;
  // 224.0.0.0/4: one unsigned compare.
  flags |= static_cast<std::uint8_t>(ip[16] - 0xe0u) < 0x10u ? pkt_flag::kMulticast : 0;
  const unsigned frag = wire::load_be16(ip + 6);
  const unsigned ip_end = l3 + total;
  if (RAWPIPE_LIKELY((frag & (wire::kIpv4FlagMf | wire::kIpv4OffsetMask)) == 0))
    return parse_l4(m, d, l3 + ihl, ip_end, proto, false);
  const unsigned foff = (frag & wire::kIpv4OffsetMask) * 8u;
  flags |= pkt_flag::kIpFragment | ((frag & wire::kIpv4FlagMf) ? pkt_flag::kMoreFragments : 0);
  m->frag_off = static_cast<std::uint16_t>(foff);
  if (foff != 0) return DropReason::kNone;  // later fragments carry no L4 header
  return parse_l4(m, d, l3 + ihl, ip_end, proto, true);
}

RAWPIPE_ALWAYS_INLINE DropReason parse_ipv6(Mbuf* m, const std::uint8_t* d, unsigned l3, unsigned len,
                                            std::uint16_t& flags) noexcept {
  m->l3_type = L3Type::kIpv6;
  const unsigned avail = len - l3;
  if (RAWPIPE_UNLIKELY(avail < sizeof(wire::Ipv6Header))) return DropReason::kTruncatedIpv6;
  const std::uint8_t* ip = d + l3;
  const unsigned plen = wire::load_be16(ip + 4);
  const DropReason r = (ip[0] >> 4) != 6                         ? DropReason::kBadIpv6Version
                       : plen > avail - sizeof(wire::Ipv6Header) ? DropReason::kBadIpv6PayloadLength
                                                                 : DropReason::kNone;
  if (RAWPIPE_UNLIKELY(r != DropReason::kNone)) return r;
  flags |= ip[24] == 0xff ? pkt_flag::kMulticast : 0;
  const unsigned ip_end = l3 + sizeof(wire::Ipv6Header) + plen;
  unsigned off = l3 + sizeof(wire::Ipv6Header);
  std::uint8_t nh = ip[6];
  bool fragment = false;
  if (RAWPIPE_UNLIKELY(is_ipv6_ext(nh))) {
    flags |= pkt_flag::kIpOptions;
    for (unsigned i = 0;; ++i) {
      if (i == kMaxIpv6ExtHeaders) return DropReason::kBadIpv6ExtHeader;
      if (nh == wire::kIpProtoFragment) {
        if (ip_end - off < sizeof(wire::Ipv6FragmentHeader)) return DropReason::kBadIpv6ExtHeader;
        const unsigned of = wire::load_be16(d + off + 2);
        nh = d[off];
        off += sizeof(wire::Ipv6FragmentHeader);
        const unsigned foff = of & wire::kIpv6FragOffsetMask;
        if (foff != 0 || (of & wire::kIpv6FragMore)) {
          fragment = true;
          flags |= pkt_flag::kIpFragment | ((of & wire::kIpv6FragMore) ? pkt_flag::kMoreFragments : 0);
          m->frag_off = static_cast<std::uint16_t>(foff);
          if (foff != 0) {  // later fragments carry no L4 header, nor further headers to walk
            m->l4_proto = nh;
            return DropReason::kNone;
          }
        }
      } else {
        // RFC 8200 4.3: hop-by-hop options may only follow the IPv6 header directly.
        if (nh == wire::kIpProtoHopByHop && i != 0) return DropReason::kBadIpv6ExtHeader;
        if (ip_end - off < sizeof(wire::Ipv6ExtHeader)) return DropReason::kBadIpv6ExtHeader;
        const unsigned elen = (d[off + 1] + 1u) * 8u;
        if (ip_end - off < elen) return DropReason::kBadIpv6ExtHeader;
        nh = d[off];
        off += elen;
      }
      if (!is_ipv6_ext(nh)) break;
    }
  }
  m->l4_proto = nh;
  if (nh == wire::kIpProtoNoNext) return DropReason::kNone;
  return parse_l4(m, d, off, ip_end, nh, fragment);
}

RAWPIPE_ALWAYS_INLINE DropReason parse_frame(Mbuf* m, const std::uint8_t* d, unsigned len,
                                             std::uint16_t& flags) noexcept {
  if (RAWPIPE_UNLIKELY(len < sizeof(wire::EthernetHeader))) return DropReason::kRuntEthernet;
  // Destination MAC and the first two source bytes in one load (the frame has 14).
  std::uint64_t head;
  std::memcpy(&head, d, 8);
  flags |= (head & 0xffffffffffffull) == 0xffffffffffffull ? pkt_flag::kBroadcast : 0;
  unsigned off = 12;  // the EtherType or TPID being looked at
  std::uint16_t et = wire::load_be16(d + off);
  if (RAWPIPE_LIKELY(et == wire::kEtherTypeIpv4)) {  // the common case skips the tag test
    m->l3_off = sizeof(wire::EthernetHeader);
    return parse_ipv4(m, d, sizeof(wire::EthernetHeader), len, flags);
  }
  if (RAWPIPE_UNLIKELY(is_vlan_tpid(et))) {
    unsigned n = 0;
    do {
      if (n == 2) return DropReason::kTooManyVlans;
      if (len - off < 2 + sizeof(wire::VlanTag)) return DropReason::kTruncatedVlan;
      m->vlan_tci[n] = wire::load_be16(d + off + 2);
      et = wire::load_be16(d + off + 4);
      off += sizeof(wire::VlanTag);
      m->vlan_count = static_cast<std::uint8_t>(++n);
      // Set per tag so that a frame dropped for a bad later tag still shows the tags it had.
      flags |= pkt_flag::kVlan | (n == 2 ? pkt_flag::kQinQ : 0);
    } while (is_vlan_tpid(et));
  }
  const unsigned l3 = off + 2;
  m->l3_off = static_cast<std::uint16_t>(l3);
  if (RAWPIPE_LIKELY(et == wire::kEtherTypeIpv4)) return parse_ipv4(m, d, l3, len, flags);
  if (et == wire::kEtherTypeIpv6) return parse_ipv6(m, d, l3, len, flags);
  return DropReason::kNone;
}

// A frame a capture file cut short (pkt_flag::kCutByCapture, set by the pcap port) that ran out of
// bytes before its IP datagram did: the cut explains the failure, nothing in the headers
// contradicts anything else. Once the IP length check has passed the whole datagram was captured,
// so every later reason stays what it is. Only the error path calls this.
[[gnu::cold]] inline DropReason cut_or(DropReason r, const std::uint8_t* d, const Mbuf* m) noexcept {
  switch (r) {
    case DropReason::kRuntEthernet:
    case DropReason::kTruncatedVlan:
    case DropReason::kTruncatedIpv4:
    case DropReason::kTruncatedIpv6:
    case DropReason::kBadIpv6PayloadLength:  // only ever "beyond the frame"
      return DropReason::kCutByCapture;
    case DropReason::kBadIpv4Ihl:  // below 20 is malformed; beyond the frame is the cut
      return (d[m->l3_off] & 0xf) * 4u >= wire::kIpv4MinHeader ? DropReason::kCutByCapture : r;
    case DropReason::kBadIpv4TotalLength:  // below the header is malformed; beyond the frame is the cut
      return wire::load_be16(d + m->l3_off + 2) >= (d[m->l3_off] & 0xf) * 4u ? DropReason::kCutByCapture : r;
    default:
      return r;
  }
}

// The frame most traffic is: untagged Ethernet, IPv4 without options or fragmentation, UDP, with
// consistent lengths, no checksum verdict from the PMD, a unicast destination MAC and a unicast
// destination address. Recognised with a handful of loads and one combined test, and written with
// no field stored twice (the VPP ip4-input "x1 fast path" idea); anything else, including every
// malformed frame and every frame that gets the kBroadcast or kMulticast flag, goes through
// parse_frame, which gives this frame the same result (tests/unit/parse compares the two on
// mutated frames). On success `dst_ports` holds the frame's bytes 30-37 (destination address,
// source port, destination port) as loaded.
RAWPIPE_ALWAYS_INLINE bool parse_plain_udp4(Mbuf* m, const std::uint8_t* d, unsigned len,
                                            std::uint64_t& dst_ports) noexcept {
  constexpr unsigned kEth = sizeof(wire::EthernetHeader);
  constexpr unsigned kL4 = kEth + wire::kIpv4MinHeader;
  constexpr unsigned kHeaders = kL4 + sizeof(wire::UdpHeader);
  if (RAWPIPE_UNLIKELY(len < kHeaders)) return false;
  // Header bytes compared as they lie in the frame, several fields per compare: the EtherType with
  // the version/IHL byte, and the fragment bits with the protocol (little-endian loads of
  // big-endian bytes, hence the byte order of the constants).
  static_assert(std::endian::native == std::endian::little);
  std::uint32_t type_vihl;  // EtherType (2 bytes), version/IHL, TOS
  std::memcpy(&type_vihl, d + kEth - 2, 4);
  std::uint32_t frag_ttl_proto;  // flags/fragment offset (2 bytes), TTL, protocol
  std::memcpy(&frag_ttl_proto, d + kEth + 6, 4);
  std::memcpy(&dst_ports, d + kEth + 16, 8);
  constexpr std::uint32_t kIpv4NoOptions = 0x450008u;    // 08 00 45
  constexpr std::uint32_t kMfOffsetProto = 0xff00ff3fu;  // MF + offset bits, protocol byte
  constexpr std::uint32_t kWholeUdp = std::uint32_t{wire::kIpProtoUdp} << 24;
  // Signed, so that one compare each bounds the UDP length by the IP length and that by the frame.
  const int total = wire::load_be16(d + kEth + 2);
  const int ulen = wire::load_be16(d + kL4 + 4);
  // A broadcast MAC has the group bit set; an IP multicast address starts with 1110.
  const bool group_mac = (d[0] & 1u) != 0;
  const bool multicast_ip = (dst_ports & 0xf0u) == 0xe0u;
  const bool plain = (type_vihl & 0xffffffu) == kIpv4NoOptions && (frag_ttl_proto & kMfOffsetProto) == kWholeUdp &&
                     ulen >= static_cast<int>(sizeof(wire::UdpHeader)) &&
                     ulen + static_cast<int>(wire::kIpv4MinHeader) <= total &&
                     total <= static_cast<int>(len - kEth) && !group_mac && !multicast_ip &&
                     (m->flags & (pkt_flag::kL3CsumBad | pkt_flag::kL4CsumBad)) == 0;
  if (RAWPIPE_UNLIKELY(!plain)) return false;
  const std::uint16_t flags = m->flags & ~kParseFlags;
  // The twenty bytes from l3_off to drop_reason in three stores instead of a store per field.
  static_assert(offsetof(Mbuf, l4_off) == offsetof(Mbuf, l3_off) + 2 &&
                offsetof(Mbuf, payload_off) == offsetof(Mbuf, l3_off) + 4 &&
                offsetof(Mbuf, payload_len) == offsetof(Mbuf, l3_off) + 6 &&
                offsetof(Mbuf, vlan_tci) == offsetof(Mbuf, l3_off) + 8 &&
                offsetof(Mbuf, flags) == offsetof(Mbuf, l3_off) + 12 &&
                offsetof(Mbuf, frag_off) == offsetof(Mbuf, l3_off) + 14 &&
                offsetof(Mbuf, l3_type) == offsetof(Mbuf, l3_off) + 16 &&
                offsetof(Mbuf, l4_proto) == offsetof(Mbuf, l3_off) + 17 &&
                offsetof(Mbuf, vlan_count) == offsetof(Mbuf, l3_off) + 18 &&
                offsetof(Mbuf, drop_reason) == offsetof(Mbuf, l3_off) + 19 && sizeof(L3Type) == 1);
  const std::uint64_t offsets = std::uint64_t{kEth} | std::uint64_t{kL4} << 16 | std::uint64_t{kHeaders} << 32 |
                                std::uint64_t(static_cast<unsigned>(ulen) - sizeof(wire::UdpHeader)) << 48;
  const std::uint64_t tags_flags_frag = std::uint64_t{flags} << 32;  // no tags, not a fragment
  const std::uint32_t kinds = static_cast<std::uint32_t>(L3Type::kIpv4) | std::uint32_t{wire::kIpProtoUdp} << 8;
  auto* fields = reinterpret_cast<std::uint8_t*>(m) + offsetof(Mbuf, l3_off);
  std::memcpy(fields, &offsets, 8);
  std::memcpy(fields + 8, &tags_flags_frag, 8);
  std::memcpy(fields + 16, &kinds, 4);  // l3_type, l4_proto, no VLAN, no drop
  return true;
}

}  // namespace parse_detail

// The general parse: every header kind and every check. parse_packet() takes it for every frame
// the fast path does not recognise; tests call it directly to compare.
RAWPIPE_ALWAYS_INLINE void parse_packet_general(Mbuf* m) noexcept {
  const std::uint8_t* d = m->data();
  const unsigned len = m->data_len < 0xffffu ? m->data_len : 0xffffu;
  std::uint16_t flags = m->flags & ~parse_detail::kParseFlags;
  m->l3_off = 0;
  m->l4_off = 0;
  m->payload_off = 0;
  m->payload_len = 0;
  m->vlan_tci[0] = 0;
  m->vlan_tci[1] = 0;
  m->frag_off = 0;
  m->l3_type = L3Type::kNone;
  m->l4_proto = 0;
  m->vlan_count = 0;
  DropReason r = parse_detail::parse_frame(m, d, len, flags);
  if (RAWPIPE_UNLIKELY((flags & (pkt_flag::kL3CsumBad | pkt_flag::kL4CsumBad)) != 0) && r == DropReason::kNone) {
    if ((flags & pkt_flag::kL3CsumBad) && m->l3_type == L3Type::kIpv4)
      r = DropReason::kBadL3Checksum;
    else if ((flags & pkt_flag::kL4CsumBad) && m->l4_off != 0 &&
             (m->l4_proto == wire::kIpProtoUdp || m->l4_proto == wire::kIpProtoTcp))
      r = DropReason::kBadL4Checksum;
  }
  if (RAWPIPE_UNLIKELY((flags & pkt_flag::kCutByCapture) != 0) && r != DropReason::kNone) r = parse_detail::cut_or(r, d, m);
  m->flags = flags;
  m->drop_reason = static_cast<std::uint8_t>(r);
}

RAWPIPE_ALWAYS_INLINE void parse_packet(Mbuf* m) noexcept {
  const unsigned len = m->data_len < 0xffffu ? m->data_len : 0xffffu;
  std::uint64_t dst_ports;
  if (RAWPIPE_LIKELY(parse_detail::parse_plain_udp4(m, m->data(), len, dst_ports))) return;
  parse_packet_general(m);
}

// parse_packet() that also returns the packet's UDP 3-tuple key (udp4_key.hh): the destination
// address and port of a plain IPv4 UDP frame, which the fast path has just loaded, or kNoUdp4Key.
// `general` parses the other frames: parse_packet_general itself, or an out-of-line copy of it
// for a loop that should not carry the general parse's registers and loads around its fast path.
template <typename General>
RAWPIPE_ALWAYS_INLINE std::uint64_t parse_packet_keyed(Mbuf* m, General&& general) noexcept {
  const unsigned len = m->data_len < 0xffffu ? m->data_len : 0xffffu;
  std::uint64_t dst_ports;
  if (RAWPIPE_LIKELY(parse_detail::parse_plain_udp4(m, m->data(), len, dst_ports))) return udp4_key(dst_ports);
  general(m);
  return kNoUdp4Key;
}

}  // namespace rawpipe
