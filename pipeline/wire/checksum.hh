// Internet checksum (RFC 1071) for IPv4 headers and UDP/TCP/ICMP/ICMPv6 over IPv4 and IPv6.
//
// Sums are kept unfolded in 64 bits in host order of big-endian 16-bit words, so partial sums over
// pieces (pseudo header, header, payload) add up before one final fold. Values returned by the
// *_checksum functions are in host order; write them with store_be16.
#pragma once

#include <cstddef>
#include <cstdint>

#include "pipeline/wire/wire.hh"

namespace rawpipe::wire {

// Adds the bytes at p to sum as big-endian 16-bit words; an odd trailing byte is the high half of
// a word padded with zero, as RFC 1071 says. Pieces after the first must start at an even offset
// of the checksummed message.
inline std::uint64_t csum_add(std::uint64_t sum, const std::uint8_t* p, std::size_t len) noexcept {
  while (len >= 8) {
    sum += load_be32(p);
    sum += load_be32(p + 4);
    p += 8;
    len -= 8;
  }
  while (len >= 2) {
    sum += load_be16(p);
    p += 2;
    len -= 2;
  }
  if (len) sum += std::uint32_t(p[0]) << 8;
  return sum;
}

// Folds a sum to 16 bits and complements it: the value to store in a checksum field.
constexpr std::uint16_t csum_fold(std::uint64_t sum) noexcept {
  while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
  return static_cast<std::uint16_t>(~sum & 0xffff);
}

// Checksum of an IPv4 header of ihl_bytes with its checksum field taken as zero. Verifying a
// received header: ipv4_header_checksum over it with the field in place yields 0.
inline std::uint16_t ipv4_header_checksum(const std::uint8_t* hdr, std::size_t ihl_bytes) noexcept {
  std::uint64_t sum = csum_add(0, hdr, 10);
  sum = csum_add(sum, hdr + 12, ihl_bytes - 12);
  return csum_fold(sum);
}
inline bool ipv4_header_checksum_ok(const std::uint8_t* hdr, std::size_t ihl_bytes) noexcept {
  return csum_fold(csum_add(0, hdr, ihl_bytes)) == 0;
}

inline std::uint64_t ipv4_pseudo_sum(const std::uint8_t* src4, const std::uint8_t* dst4, std::uint8_t proto,
                                     std::size_t l4_len) noexcept {
  std::uint64_t sum = csum_add(0, src4, 4);
  sum = csum_add(sum, dst4, 4);
  return sum + proto + l4_len;
}
inline std::uint64_t ipv6_pseudo_sum(const std::uint8_t* src16, const std::uint8_t* dst16, std::uint8_t proto,
                                     std::size_t l4_len) noexcept {
  std::uint64_t sum = csum_add(0, src16, 16);
  sum = csum_add(sum, dst16, 16);
  return sum + proto + l4_len;
}

// Checksum of an L4 segment (its checksum field must be zero or is included on purpose: a segment
// with a correct checksum in place yields 0). ICMPv4 has no pseudo header: use icmpv4_checksum.
inline std::uint16_t l4_checksum_ipv4(const std::uint8_t* src4, const std::uint8_t* dst4, std::uint8_t proto,
                                      const std::uint8_t* l4, std::size_t len) noexcept {
  return csum_fold(csum_add(ipv4_pseudo_sum(src4, dst4, proto, len), l4, len));
}
inline std::uint16_t l4_checksum_ipv6(const std::uint8_t* src16, const std::uint8_t* dst16, std::uint8_t proto,
                                      const std::uint8_t* l4, std::size_t len) noexcept {
  return csum_fold(csum_add(ipv6_pseudo_sum(src16, dst16, proto, len), l4, len));
}
inline std::uint16_t icmpv4_checksum(const std::uint8_t* icmp, std::size_t len) noexcept {
  return csum_fold(csum_add(0, icmp, len));
}

// UDP transmits a computed checksum of 0 as 0xffff: 0 means "no checksum" (IPv4 only).
constexpr std::uint16_t udp_checksum_on_wire(std::uint16_t c) noexcept { return c == 0 ? 0xffff : c; }

}  // namespace rawpipe::wire
