// Hex digits in config values (MAC addresses, RSS keys, byte strings), read the same way everywhere.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

namespace rawpipe {

// 0-15 for a hex digit of either case, -1 for anything else.
constexpr int hex_digit(char c) noexcept {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Pairs of hex digits ("0001ff" is 00 01 ff) into `out`; false, with `out` unspecified, for an odd
// count or anything that is not a digit.
inline bool hex_bytes(std::string_view text, std::vector<std::uint8_t>& out) {
  if (text.size() % 2 != 0) return false;
  out.clear();
  for (std::size_t i = 0; i < text.size(); i += 2) {
    const int hi = hex_digit(text[i]), lo = hex_digit(text[i + 1]);
    if (hi < 0 || lo < 0) return false;
    out.push_back(static_cast<std::uint8_t>(hi << 4 | lo));
  }
  return true;
}

}  // namespace rawpipe
