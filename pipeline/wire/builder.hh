// Frame writer: Ethernet + 0-2 VLAN tags + IPv4/IPv6 (options, extension headers, fragments) +
// UDP/TCP/ICMP/ICMPv6 or raw bytes, with correct lengths and checksums.
//
// Used by production code that makes frames (the synth generator, the echo action, ARP and
// neighbour replies) and by tests. Control-path friendly and allocation-free, so it may also run
// per packet, but a generator that emits the same shape repeatedly should build a template once
// and patch it.
//
// Usage:
//   FrameSpec s;
//   s.eth.dst = ...; s.eth.src = ...;
//   s.eth.vlan_count = 1; s.eth.vlans[0].tci = 100;
//   s.ip_version = 4; s.ipv4.src = ipv4(10,0,0,1); s.ipv4.dst = ipv4(239,1,1,1);
//   s.l4 = L4Kind::kUdp; s.udp = {5000, 6000}; s.payload = data; s.payload_len = n;
//   s.min_frame_len = kEthMinFrame;                      // pad short frames to 60 bytes
//   std::size_t len = write_frame(s, buf, sizeof buf);   // 0: did not fit or spec invalid
//
// Everything a spec leaves at its default makes a well-formed frame. To make a malformed frame,
// build a good one and patch bytes (the offsets are in FrameLayout). Checksums and lengths cover
// what is written: for the first fragment of a larger datagram, patch the UDP length (and the
// checksum, or send none over IPv4) to describe the whole datagram.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "pipeline/wire/wire.hh"

namespace rawpipe::wire {

struct VlanSpec {
  std::uint16_t tpid = 0;  // 0: 0x88a8 for the outer of two tags, 0x8100 otherwise
  std::uint16_t tci = 0;   // PCP/DEI/VID, host order
};

struct EthSpec {
  MacAddr dst{};
  MacAddr src{};
  std::uint8_t vlan_count = 0;  // 0..2; vlans[0] is the outer tag
  VlanSpec vlans[2]{};
};

struct Ipv4Spec {
  Ipv4Addr src{};
  Ipv4Addr dst{};
  std::uint8_t tos = 0;
  std::uint8_t ttl = 64;
  std::uint16_t id = 0;
  bool df = false;
  bool mf = false;
  std::uint16_t frag_offset = 0;  // bytes; must be a multiple of 8
  // Options copied after the fixed header; length must be a multiple of 4 and at most 40.
  const std::uint8_t* options = nullptr;
  std::uint8_t options_len = 0;
};

enum class Ipv6ExtKind : std::uint8_t {
  kHopByHop = kIpProtoHopByHop,
  kRouting = kIpProtoRouting,
  kFragment = kIpProtoFragment,
  kDestOpts = kIpProtoDestOpts,
};

// One IPv6 extension header. Hop-by-hop, routing and destination options are (hdr_ext_len+1)*8
// bytes: `body` (may be null: zeros, which are Pad1 options) fills the bytes after next_header
// and hdr_ext_len, truncated or zero-padded to fit. For routing, body[0] is the routing type and
// body[1] segments left. A fragment header is 8 bytes built from frag_offset/more/frag_id.
struct Ipv6ExtSpec {
  Ipv6ExtKind kind = Ipv6ExtKind::kDestOpts;
  std::uint8_t hdr_ext_len = 0;
  const std::uint8_t* body = nullptr;
  std::uint8_t body_len = 0;
  std::uint16_t frag_offset = 0;  // bytes, multiple of 8
  bool more = false;
  std::uint32_t frag_id = 0;
};

struct Ipv6Spec {
  Ipv6Addr src{};
  Ipv6Addr dst{};  // also the pseudo-header destination for the L4 checksum
  std::uint8_t traffic_class = 0;
  std::uint32_t flow_label = 0;
  std::uint8_t hop_limit = 64;
  std::span<const Ipv6ExtSpec> ext{};  // in wire order
};

enum class L4Kind : std::uint8_t {
  kUdp,     // 8-byte header + payload
  kTcp,     // 20-byte header (no options) + payload
  kIcmp,    // ICMP (IPv4) or ICMPv6 (IPv6): 8-byte header + payload, checksummed
  kRaw,     // payload only, IP protocol `raw_proto` (e.g. a non-first fragment)
};

struct UdpSpec {
  std::uint16_t src_port = 0;
  std::uint16_t dst_port = 0;
  bool checksum = true;  // IPv4 only may send 0 (no checksum); IPv6 always computes one
};

struct TcpSpec {
  std::uint16_t src_port = 0;
  std::uint16_t dst_port = 0;
  std::uint32_t seq = 0;
  std::uint32_t ack = 0;
  std::uint8_t flags = kTcpAck;
  std::uint16_t window = 65535;
};

struct IcmpSpec {
  std::uint8_t type = 0;
  std::uint8_t code = 0;
  std::uint32_t rest = 0;  // host order: id<<16 | seq for echo, flags for ND
};

struct FrameSpec {
  EthSpec eth{};
  // 4 or 6 for IP; 0 writes `ether_type` followed by the payload (ARP has write_arp).
  std::uint8_t ip_version = 4;
  std::uint16_t ether_type = 0;
  Ipv4Spec ipv4{};
  Ipv6Spec ipv6{};
  L4Kind l4 = L4Kind::kUdp;
  std::uint8_t raw_proto = 0;
  UdpSpec udp{};
  TcpSpec tcp{};
  IcmpSpec icmp{};
  // L4 payload; null with a non-zero length writes zeros.
  const std::uint8_t* payload = nullptr;
  std::uint16_t payload_len = 0;
  // Zero padding after the IP packet up to this frame length (Ethernet pads to 60 bytes). The IP
  // lengths do not include it.
  std::uint16_t min_frame_len = 0;
};

// Where write_frame put each layer (offsets from the first byte of the frame).
struct FrameLayout {
  std::uint16_t l3_off = 0;
  std::uint16_t l4_off = 0;       // 0 for ip_version 0
  std::uint16_t payload_off = 0;
  std::uint16_t ip_end = 0;       // end of the IP packet (start of padding)
  std::uint16_t len = 0;          // whole frame
};

// Writes the frame into out[0..cap). Returns its length, or 0 (nothing meaningful written) when
// it does not fit in cap or 65535 bytes, or when the spec is invalid (options not a multiple of 4
// or over 40, more than 2 VLAN tags, more than 8 extension headers, unaligned fragment offset,
// unknown ip_version). MT-safe: touches only `out` and `layout`.
std::size_t write_frame(const FrameSpec& spec, std::uint8_t* out, std::size_t cap,
                        FrameLayout* layout = nullptr) noexcept;

// Writes the Ethernet header and VLAN tags ending in `ether_type`; returns bytes written or 0.
std::size_t write_eth(const EthSpec& eth, std::uint16_t ether_type, std::uint8_t* out,
                      std::size_t cap) noexcept;

struct ArpSpec {
  EthSpec eth{};                      // eth.dst: broadcast for a request, the asker for a reply
  std::uint16_t oper = kArpOpRequest;
  MacAddr sha{};
  Ipv4Addr spa{};
  MacAddr tha{};
  Ipv4Addr tpa{};
  std::uint16_t min_frame_len = kEthMinFrame;
};

// Writes an Ethernet/IPv4 ARP frame; returns its length or 0 when it does not fit.
std::size_t write_arp(const ArpSpec& spec, std::uint8_t* out, std::size_t cap) noexcept;

}  // namespace rawpipe::wire
