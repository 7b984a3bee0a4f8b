// The key parse hands the classifier for a plain IPv4 UDP frame (parse_packet_keyed): what a
// 3-tuple rule compares, in the classifier's IPv4 3-tuple layout, so that classify needs neither
// the packet's header fields nor its data for it:
//   bits  0-31  destination address, bits 32-39 protocol (17), bits 48-63 destination port,
// both as they load from the frame (little-endian loads of network-order bytes). Bits 40-47 are
// always zero, so kNoUdp4Key, which every other frame gets, is never a key.
#pragma once

#include <cstdint>

namespace rawpipe {

inline constexpr std::uint64_t kNoUdp4Key = ~std::uint64_t{0};

// dst_ports: bytes 30-37 of an untagged IPv4 frame without options (destination address, source
// port, destination port) as one little-endian load.
constexpr std::uint64_t udp4_key(std::uint64_t dst_ports) noexcept {
  constexpr std::uint64_t kDstAndDport = 0xffff'0000'ffff'ffffull;
  constexpr std::uint64_t kUdp = std::uint64_t{17} << 32;
  return (dst_ports & kDstAndDport) | kUdp;
}

}  // namespace rawpipe
