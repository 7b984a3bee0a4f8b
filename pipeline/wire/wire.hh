// On-wire protocol headers, byte-order helpers and protocol numbers.
//
// Every struct here is the exact byte layout of a header as it appears in a frame. They are packed
// (alignment 1) because headers sit at arbitrary offsets: the IPv4 header starts 14 bytes into a
// frame, 18 or 22 behind VLAN tags, so its 32-bit addresses are never naturally aligned. Accessing a
// packed member makes the compiler emit an unaligned load, which is what we want and is not
// undefined behaviour; never take the address of a multi-byte member.
//
// Multi-byte fields are in network byte order (big-endian) exactly as on the wire; convert with
// ntoh16/ntoh32 or read straight from bytes with load_be16/load_be32.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace rawpipe::wire {

// ---- byte order ----

constexpr std::uint16_t bswap16(std::uint16_t v) noexcept { return __builtin_bswap16(v); }
constexpr std::uint32_t bswap32(std::uint32_t v) noexcept { return __builtin_bswap32(v); }

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "rawpipe targets little-endian hosts");
constexpr std::uint16_t hton16(std::uint16_t v) noexcept { return bswap16(v); }
constexpr std::uint16_t ntoh16(std::uint16_t v) noexcept { return bswap16(v); }
constexpr std::uint32_t hton32(std::uint32_t v) noexcept { return bswap32(v); }
constexpr std::uint32_t ntoh32(std::uint32_t v) noexcept { return bswap32(v); }

inline std::uint16_t load_be16(const std::uint8_t* p) noexcept {
  std::uint16_t v;
  std::memcpy(&v, p, sizeof v);
  return ntoh16(v);
}
inline std::uint32_t load_be32(const std::uint8_t* p) noexcept {
  std::uint32_t v;
  std::memcpy(&v, p, sizeof v);
  return ntoh32(v);
}
inline void store_be16(std::uint8_t* p, std::uint16_t v) noexcept {
  v = hton16(v);
  std::memcpy(p, &v, sizeof v);
}
inline void store_be32(std::uint8_t* p, std::uint32_t v) noexcept {
  v = hton32(v);
  std::memcpy(p, &v, sizeof v);
}

// ---- addresses ----

using MacAddr = std::array<std::uint8_t, 6>;
using Ipv4Addr = std::array<std::uint8_t, 4>;   // network order, as on the wire
using Ipv6Addr = std::array<std::uint8_t, 16>;  // network order, as on the wire

inline constexpr MacAddr kBroadcastMac = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff};

constexpr Ipv4Addr ipv4(std::uint8_t a, std::uint8_t b, std::uint8_t c, std::uint8_t d) noexcept {
  return {a, b, c, d};
}

// ---- EtherTypes (host order) ----

inline constexpr std::uint16_t kEtherTypeIpv4 = 0x0800;
inline constexpr std::uint16_t kEtherTypeArp = 0x0806;
inline constexpr std::uint16_t kEtherTypeVlan = 0x8100;  // 802.1Q C-tag
inline constexpr std::uint16_t kEtherTypeQinQ = 0x88a8;  // 802.1ad S-tag (outer tag of QinQ)
// Pre-standard S-tag TPID still emitted by some switches (Cisco/Juniper "9100" QinQ).
inline constexpr std::uint16_t kEtherTypeQinQLegacy = 0x9100;
inline constexpr std::uint16_t kEtherTypeIpv6 = 0x86dd;

// ---- IP protocol numbers / IPv6 next-header values ----

inline constexpr std::uint8_t kIpProtoHopByHop = 0;
inline constexpr std::uint8_t kIpProtoIcmp = 1;
inline constexpr std::uint8_t kIpProtoTcp = 6;
inline constexpr std::uint8_t kIpProtoUdp = 17;
inline constexpr std::uint8_t kIpProtoRouting = 43;
inline constexpr std::uint8_t kIpProtoFragment = 44;
inline constexpr std::uint8_t kIpProtoIcmpv6 = 58;
inline constexpr std::uint8_t kIpProtoNoNext = 59;
inline constexpr std::uint8_t kIpProtoDestOpts = 60;

// ---- Ethernet and VLAN ----

struct [[gnu::packed]] EthernetHeader {
  std::uint8_t dst[6];
  std::uint8_t src[6];
  std::uint16_t ether_type;  // or the TPID of the first VLAN tag
};
static_assert(sizeof(EthernetHeader) == 14);

// The 4 bytes after a TPID: the tag control information and the next EtherType/TPID.
struct [[gnu::packed]] VlanTag {
  std::uint16_t tci;         // PCP(3) DEI(1) VID(12)
  std::uint16_t ether_type;
};
static_assert(sizeof(VlanTag) == 4);

inline constexpr std::uint16_t kVlanVidMask = 0x0fff;

// ---- IPv4 ----

struct [[gnu::packed]] Ipv4Header {
  std::uint8_t version_ihl;    // version(4) IHL(4), IHL in 32-bit words
  std::uint8_t tos;
  std::uint16_t total_length;  // header + payload, bytes
  std::uint16_t id;
  std::uint16_t frag;          // flags(3) fragment offset(13), offset in 8-byte units
  std::uint8_t ttl;
  std::uint8_t protocol;
  std::uint16_t checksum;
  std::uint8_t src[4];
  std::uint8_t dst[4];
};
static_assert(sizeof(Ipv4Header) == 20);

inline constexpr std::size_t kIpv4MinHeader = 20;
inline constexpr std::size_t kIpv4MaxHeader = 60;
inline constexpr std::uint16_t kIpv4FlagDf = 0x4000;  // in host-order Ipv4Header::frag
inline constexpr std::uint16_t kIpv4FlagMf = 0x2000;
inline constexpr std::uint16_t kIpv4OffsetMask = 0x1fff;

// ---- IPv6 ----

struct [[gnu::packed]] Ipv6Header {
  std::uint32_t ver_tc_flow;     // version(4) traffic class(8) flow label(20)
  std::uint16_t payload_length;  // bytes after this 40-byte header, extension headers included
  std::uint8_t next_header;
  std::uint8_t hop_limit;
  std::uint8_t src[16];
  std::uint8_t dst[16];
};
static_assert(sizeof(Ipv6Header) == 40);

// Hop-by-hop, routing and destination options share this prefix; the whole header is
// (hdr_ext_len + 1) * 8 bytes.
struct [[gnu::packed]] Ipv6ExtHeader {
  std::uint8_t next_header;
  std::uint8_t hdr_ext_len;
};
static_assert(sizeof(Ipv6ExtHeader) == 2);

// The routing header's fixed part (RFC 8200 4.4); type-specific data follows.
struct [[gnu::packed]] Ipv6RoutingHeader {
  std::uint8_t next_header;
  std::uint8_t hdr_ext_len;
  std::uint8_t routing_type;
  std::uint8_t segments_left;
  std::uint32_t type_data;
};
static_assert(sizeof(Ipv6RoutingHeader) == 8);

struct [[gnu::packed]] Ipv6FragmentHeader {
  std::uint8_t next_header;
  std::uint8_t reserved;
  std::uint16_t offset_flags;  // offset(13) in 8-byte units, res(2), M(1)
  std::uint32_t id;
};
static_assert(sizeof(Ipv6FragmentHeader) == 8);

inline constexpr std::uint16_t kIpv6FragOffsetMask = 0xfff8;  // host-order offset_flags
inline constexpr std::uint16_t kIpv6FragMore = 0x0001;

// ---- L4 ----

struct [[gnu::packed]] UdpHeader {
  std::uint16_t src_port;
  std::uint16_t dst_port;
  std::uint16_t length;  // header + payload
  std::uint16_t checksum;
};
static_assert(sizeof(UdpHeader) == 8);

struct [[gnu::packed]] TcpHeader {
  std::uint16_t src_port;
  std::uint16_t dst_port;
  std::uint32_t seq;
  std::uint32_t ack;
  std::uint8_t data_off;  // data offset(4) in 32-bit words, reserved(4)
  std::uint8_t flags;     // CWR ECE URG ACK PSH RST SYN FIN
  std::uint16_t window;
  std::uint16_t checksum;
  std::uint16_t urgent;
};
static_assert(sizeof(TcpHeader) == 20);

inline constexpr std::uint8_t kTcpFin = 0x01;
inline constexpr std::uint8_t kTcpSyn = 0x02;
inline constexpr std::uint8_t kTcpRst = 0x04;
inline constexpr std::uint8_t kTcpPsh = 0x08;
inline constexpr std::uint8_t kTcpAck = 0x10;

// ICMP and ICMPv6 share the first 8 bytes' layout.
struct [[gnu::packed]] IcmpHeader {
  std::uint8_t type;
  std::uint8_t code;
  std::uint16_t checksum;
  std::uint32_t rest;  // identifier/sequence for echo, reserved/flags for ND, ...
};
static_assert(sizeof(IcmpHeader) == 8);
using Icmpv6Header = IcmpHeader;

inline constexpr std::uint8_t kIcmpEchoReply = 0;
inline constexpr std::uint8_t kIcmpEchoRequest = 8;
inline constexpr std::uint8_t kIcmpv6EchoRequest = 128;
inline constexpr std::uint8_t kIcmpv6EchoReply = 129;
inline constexpr std::uint8_t kIcmpv6NeighborSolicit = 135;
inline constexpr std::uint8_t kIcmpv6NeighborAdvert = 136;

// ---- ARP (Ethernet / IPv4 only) ----

struct [[gnu::packed]] ArpHeader {
  std::uint16_t htype;  // 1 = Ethernet
  std::uint16_t ptype;  // 0x0800
  std::uint8_t hlen;    // 6
  std::uint8_t plen;    // 4
  std::uint16_t oper;   // 1 request, 2 reply
  std::uint8_t sha[6];
  std::uint8_t spa[4];
  std::uint8_t tha[6];
  std::uint8_t tpa[4];
};
static_assert(sizeof(ArpHeader) == 28);

inline constexpr std::uint16_t kArpHtypeEthernet = 1;
inline constexpr std::uint16_t kArpOpRequest = 1;
inline constexpr std::uint16_t kArpOpReply = 2;

static_assert(alignof(EthernetHeader) == 1 && alignof(Ipv4Header) == 1 && alignof(Ipv6Header) == 1 &&
              alignof(UdpHeader) == 1 && alignof(TcpHeader) == 1 && alignof(ArpHeader) == 1,
              "wire headers are read at arbitrary offsets");

// Ethernet minimum frame without the FCS: shorter frames are padded by the sender.
inline constexpr std::size_t kEthMinFrame = 60;

}  // namespace rawpipe::wire
