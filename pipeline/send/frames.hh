// Frames the application's send path makes or finishes: a UDP datagram for sendto, the ARP
// request or neighbour solicitation that resolves its destination, and the IPv4/UDP/TCP checksums
// of a frame the application filled itself (RAWPIPE_SEND_CSUM), computed in software so a
// kernel peer accepts the frame on every port (none of them is asked to offload).
// All built with pipeline/wire/builder.hh; no allocation, MT-safe (they touch only `out`).
#pragma once

#include <cstddef>
#include <cstdint>

#include "pipeline/wire/wire.hh"
#include "rawpipe/mbuf.hh"

namespace rawpipe::send {

struct UdpDatagram {
  L3Type family = L3Type::kIpv4;
  wire::MacAddr src_mac{}, dst_mac{};
  std::uint8_t src_ip[16] = {}, dst_ip[16] = {};  // network order; IPv4 in the first 4 bytes
  std::uint16_t src_port = 0, dst_port = 0;       // host order
  const std::uint8_t* payload = nullptr;
  std::size_t payload_len = 0;
};

// Writes Ethernet/IPv4-or-IPv6/UDP with checksums into out[0..cap); returns the frame length, or
// 0 when it does not fit (or the payload is over 65507 bytes).
std::size_t write_udp(const UdpDatagram& d, std::uint8_t* out, std::size_t cap) noexcept;

// An ARP request (IPv4) or a neighbour solicitation to the solicited-node group (IPv6) asking
// for `target`, from our address `src_ip` at `src_mac`. Returns the frame length or 0.
std::size_t write_solicit(L3Type family, const wire::MacAddr& src_mac, const std::uint8_t* src_ip,
                          const std::uint8_t* target, std::uint8_t* out, std::size_t cap) noexcept;

// The Ethernet address a multicast or broadcast IP maps to (RFC 1112 01:00:5e, RFC 2464 33:33,
// ff:ff:.. for 255.255.255.255); false for a unicast address.
bool group_mac(L3Type family, const std::uint8_t* ip, wire::MacAddr* out) noexcept;

// Fills the IPv4 header checksum and the UDP/TCP checksum (over IPv4, or IPv6 without extension
// headers) of frame[0..len). Fragments get only the IPv4 header checksum. Returns false when the
// frame is no IP packet it can read (nothing written).
bool fill_checksums(std::uint8_t* frame, std::uint32_t len) noexcept;

}  // namespace rawpipe::send
