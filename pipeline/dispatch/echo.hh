// The echo action's packet rewrite: swap Ethernet, IP and UDP source and destination in place,
// like testpmd's 5tswap forwarding mode, so the frame goes back where it came from.
//
// Checksums stay valid without recomputation: the IPv4 header checksum and the UDP checksum are
// one's-complement sums, and swapping two summed fields does not change a sum.
#pragma once

#include <cstring>

#include "rawpipe/mbuf.hh"

namespace rawpipe {

// False (and the packet unchanged) for anything that is not an unfragmented, parsed UDP packet.
inline bool echo_swap(Mbuf* m) noexcept {
  if (m->l4_proto != 17 || m->l4_off == 0 || (m->flags & pkt_flag::kIpFragment)) return false;
  if (m->l3_type != L3Type::kIpv4 && m->l3_type != L3Type::kIpv6) return false;
  std::uint8_t* d = m->data();
  std::uint8_t tmp[16];
  std::memcpy(tmp, d, 6);
  std::memmove(d, d + 6, 6);
  std::memcpy(d + 6, tmp, 6);
  std::uint8_t* l3 = d + m->l3_off;
  if (m->l3_type == L3Type::kIpv4) {
    std::memcpy(tmp, l3 + 12, 4);
    std::memmove(l3 + 12, l3 + 16, 4);
    std::memcpy(l3 + 16, tmp, 4);
  } else {
    std::memcpy(tmp, l3 + 8, 16);
    std::memmove(l3 + 8, l3 + 24, 16);
    std::memcpy(l3 + 24, tmp, 16);
  }
  std::uint8_t* l4 = d + m->l4_off;
  std::memcpy(tmp, l4, 2);
  std::memmove(l4, l4 + 2, 2);
  std::memcpy(l4 + 2, tmp, 2);
  return true;
}

}  // namespace rawpipe
