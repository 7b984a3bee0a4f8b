// Frame builders for tests: thin wrappers over pipeline/wire/builder.hh that return byte vectors.
//
// Header-only so any test can include it without a build-system change. For byte-exact
// expectations write golden arrays in the test; these helpers are for tests that need "a valid
// UDP frame to this address" and check what the pipeline does with it.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "pipeline/wire/builder.hh"

namespace rawpipe::testing {

inline constexpr wire::MacAddr kTestSrcMac = {0x02, 0x00, 0x00, 0x00, 0x00, 0x01};
inline constexpr wire::MacAddr kTestDstMac = {0x02, 0x00, 0x00, 0x00, 0x00, 0x02};

// The frame, or an empty vector when the spec is invalid (write_frame returned 0).
inline std::vector<std::uint8_t> build_frame(const wire::FrameSpec& spec, std::size_t cap = 9216) {
  std::vector<std::uint8_t> out(cap);
  out.resize(wire::write_frame(spec, out.data(), out.size()));
  return out;
}

// IPv4/UDP, padded to the Ethernet minimum; `vlan` adds one 802.1Q tag with that TCI.
inline std::vector<std::uint8_t> udp4_frame(wire::Ipv4Addr src, wire::Ipv4Addr dst, std::uint16_t sport,
                                            std::uint16_t dport, std::uint16_t payload_len = 18,
                                            std::optional<std::uint16_t> vlan = std::nullopt) {
  wire::FrameSpec s;
  s.eth.src = kTestSrcMac;
  s.eth.dst = kTestDstMac;
  if (vlan) {
    s.eth.vlan_count = 1;
    s.eth.vlans[0].tci = *vlan;
  }
  s.ip_version = 4;
  s.ipv4.src = src;
  s.ipv4.dst = dst;
  s.udp = {sport, dport};
  s.payload_len = payload_len;
  s.min_frame_len = wire::kEthMinFrame;
  return build_frame(s);
}

// IPv6/UDP without extension headers.
inline std::vector<std::uint8_t> udp6_frame(const wire::Ipv6Addr& src, const wire::Ipv6Addr& dst,
                                            std::uint16_t sport, std::uint16_t dport,
                                            std::uint16_t payload_len = 18,
                                            std::optional<std::uint16_t> vlan = std::nullopt) {
  wire::FrameSpec s;
  s.eth.src = kTestSrcMac;
  s.eth.dst = kTestDstMac;
  if (vlan) {
    s.eth.vlan_count = 1;
    s.eth.vlans[0].tci = *vlan;
  }
  s.ip_version = 6;
  s.ipv6.src = src;
  s.ipv6.dst = dst;
  s.udp = {sport, dport};
  s.payload_len = payload_len;
  return build_frame(s);
}

}  // namespace rawpipe::testing
