// Software completion of CHECKSUM_PARTIAL frames seen on AF_PACKET (what the kernel's
// skb_checksum_help does before a frame leaves a device without checksum offload).
#include <cstring>

#include "pmd/af_packet/af_packet.hh"

namespace rawpipe::af_packet {
namespace {

inline std::uint16_t load_be16(const std::uint8_t* p) noexcept { return std::uint16_t(p[0] << 8 | p[1]); }

std::uint32_t sum16(const std::uint8_t* p, std::uint32_t len, std::uint32_t sum) noexcept {
  std::uint64_t s = sum;
  while (len >= 2) {
    s += load_be16(p);
    p += 2;
    len -= 2;
  }
  if (len) s += std::uint32_t(p[0]) << 8;
  while (s >> 16) s = (s & 0xffff) + (s >> 16);
  return static_cast<std::uint32_t>(s);
}

}  // namespace

bool complete_partial_checksum(std::uint8_t* frame, std::uint32_t len) noexcept {
  std::uint32_t off = 12;
  if (len < off + 2) return false;
  std::uint16_t type = load_be16(frame + off);
  for (int tags = 0; (type == 0x8100 || type == 0x88a8) && tags < 2; ++tags) {
    off += 4;
    if (len < off + 2) return false;
    type = load_be16(frame + off);
  }
  off += 2;
  std::uint32_t l4 = 0, l4_end = 0;
  std::uint8_t proto = 0;
  if (type == 0x0800) {
    if (len < off + 20 || (frame[off] >> 4) != 4) return false;
    std::uint32_t ihl = (frame[off] & 0x0f) * 4u;
    std::uint32_t total = load_be16(frame + off + 2);
    if (ihl < 20 || total < ihl || off + total > len) return false;
    if (load_be16(frame + off + 6) & 0x3fff) return false;  // a fragment carries no whole L4 header
    proto = frame[off + 9];
    l4 = off + ihl;
    l4_end = off + total;
  } else if (type == 0x86dd) {
    if (len < off + 40 || (frame[off] >> 4) != 6) return false;
    proto = frame[off + 6];
    l4 = off + 40;
    l4_end = l4 + load_be16(frame + off + 4);
    if (l4_end > len) return false;
  } else {
    return false;
  }
  std::uint32_t field;
  if (proto == 17)
    field = 6;
  else if (proto == 6)
    field = 16;
  else
    return false;
  if (l4 + field + 2 > l4_end) return false;
  // The field already holds the folded pseudo-header sum; summing the L4 bytes over it gives the
  // full sum.
  std::uint16_t csum = static_cast<std::uint16_t>(~sum16(frame + l4, l4_end - l4, 0));
  if (proto == 17 && csum == 0) csum = 0xffff;  // 0 means "no checksum" for UDP over IPv4
  frame[l4 + field] = std::uint8_t(csum >> 8);
  frame[l4 + field + 1] = std::uint8_t(csum);
  return true;
}

}  // namespace rawpipe::af_packet
