#include "pipeline/port/steering.hh"

#include <cstring>

namespace rawpipe {

bool IpPrefix::contains(const std::uint8_t* a) const noexcept {
  unsigned full = len / 8;
  if (std::memcmp(addr.data(), a, full) != 0) return false;
  unsigned rem = len % 8;
  if (rem == 0) return true;
  std::uint8_t mask = static_cast<std::uint8_t>(0xff00u >> rem);
  return (a[full] & mask) == addr[full];
}

L3Type MatchRule::family() const noexcept {
  if (dst_ip) return dst_ip->family;
  if (src_ip) return src_ip->family;
  return L3Type::kNone;
}

}  // namespace rawpipe
