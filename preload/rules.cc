#include "preload/rules.hh"

#include <arpa/inet.h>

#include <charconv>
#include <cstring>

namespace rawpipe::preload {
namespace {

std::vector<std::string_view> split_ws(std::string_view s) {
  std::vector<std::string_view> out;
  std::size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && (s[i] == ' ' || s[i] == '\t' || s[i] == '\r')) ++i;
    std::size_t j = i;
    while (j < s.size() && s[j] != ' ' && s[j] != '\t' && s[j] != '\r') ++j;
    if (j > i) out.push_back(s.substr(i, j - i));
    i = j;
  }
  return out;
}

bool parse_u16(std::string_view s, std::uint16_t* out) {
  unsigned v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || v > 65535) return false;
  *out = static_cast<std::uint16_t>(v);
  return true;
}

bool parse_ports(std::string_view s, OffloadRule* r) {
  if (s == "*") return true;
  const auto dash = s.find('-');
  if (dash == std::string_view::npos) {
    if (!parse_u16(s, &r->port_first)) return false;
    r->port_last = r->port_first;
    return true;
  }
  return parse_u16(s.substr(0, dash), &r->port_first) && parse_u16(s.substr(dash + 1), &r->port_last) &&
         r->port_first <= r->port_last;
}

bool parse_address(std::string addr, OffloadRule* r, std::string* error) {
  if (addr == "*") return true;
  unsigned max_prefix = 32;
  std::string len;
  if (const auto slash = addr.find('/'); slash != std::string::npos) {
    len = addr.substr(slash + 1);
    addr.resize(slash);
  }
  if (inet_pton(AF_INET, addr.c_str(), r->addr) == 1) {
    r->family = 4;
  } else if (inet_pton(AF_INET6, addr.c_str(), r->addr) == 1) {
    r->family = 6;
    max_prefix = 128;
  } else {
    *error = "'" + addr + "' is not an IPv4 or IPv6 address (write * for any address, [IPV6] for IPv6)";
    return false;
  }
  r->prefix = static_cast<std::uint8_t>(max_prefix);
  if (!len.empty()) {
    unsigned v = 0;
    auto [p, ec] = std::from_chars(len.data(), len.data() + len.size(), v);
    if (ec != std::errc() || p != len.data() + len.size() || v > max_prefix) {
      *error = std::string("prefix length '") + len + std::string("' is not 0..") + std::to_string(max_prefix);
      return false;
    }
    r->prefix = static_cast<std::uint8_t>(v);
  }
  return true;
}

bool prefix_match(const std::uint8_t* a, const std::uint8_t* b, unsigned bits) {
  const unsigned bytes = bits / 8, rest = bits % 8;
  if (std::memcmp(a, b, bytes) != 0) return false;
  if (!rest) return true;
  const std::uint8_t mask = static_cast<std::uint8_t>(0xff << (8 - rest));
  return (a[bytes] & mask) == (b[bytes] & mask);
}

}  // namespace

bool parse_offload_rule(std::string_view line, OffloadRule* out, std::string* error) {
  const auto words = split_ws(line);
  const std::string quoted = std::string("'") + std::string(line) + "': ";
  if (words.size() != 4 || words[0] != "use") {
    *error = quoted + "expected 'use <rawpipe|vma|os> <udp|udp_r> <address>:<ports>'";
    return false;
  }
  OffloadRule r;
  r.text = std::string(line);
  if (words[1] == "rawpipe" || words[1] == "vma") {
    r.offload = true;
  } else if (words[1] == "os") {
    r.offload = false;
  } else {
    *error = quoted + std::string("target '") + std::string(words[1]) + "' is not rawpipe, vma or os";
    return false;
  }
  if (words[2] != "udp" && words[2] != "udp_r") {
    *error = quoted + std::string("protocol '") + std::string(words[2]) +
             "' is not offloaded (only udp and udp_r, receiving UDP sockets, are; TCP stays on the kernel)";
    return false;
  }
  std::string_view spec = words[3];
  std::string addr;
  std::string_view ports;
  if (!spec.empty() && spec[0] == '[') {
    const auto close = spec.find(']');
    if (close == std::string_view::npos) {
      *error = quoted + "'[' without ']' around an IPv6 address";
      return false;
    }
    addr = std::string(spec.substr(1, close - 1));
    std::string_view rest = spec.substr(close + 1);
    if (!rest.empty() && rest[0] == '/') {  // [IPV6]/LEN:ports
      const auto colon = rest.find(':');
      addr += std::string(rest.substr(0, colon));
      rest = colon == std::string_view::npos ? std::string_view{} : rest.substr(colon);
    }
    if (rest.size() < 2 || rest[0] != ':') {
      *error = quoted + "expected ':<ports>' after the IPv6 address";
      return false;
    }
    ports = rest.substr(1);
  } else {
    const auto colon = spec.rfind(':');
    if (colon == std::string_view::npos) {
      *error = quoted + "expected <address>:<ports> (use * for any port)";
      return false;
    }
    addr = std::string(spec.substr(0, colon));
    ports = spec.substr(colon + 1);
  }
  std::string why;
  if (!parse_address(addr, &r, &why)) {
    *error = quoted + why;
    return false;
  }
  if (!parse_ports(ports, &r)) {
    *error = quoted + std::string("ports '") + std::string(ports) + "' are not *, PORT or FIRST-LAST (0..65535)";
    return false;
  }
  *out = std::move(r);
  return true;
}

bool parse_offload_rules(std::string_view text, std::vector<OffloadRule>* out, std::string* error) {
  std::size_t i = 0;
  while (i <= text.size()) {
    std::size_t j = text.find_first_of(";\n", i);
    if (j == std::string_view::npos) j = text.size();
    std::string_view line = text.substr(i, j - i);
    if (const auto hash = line.find('#'); hash != std::string_view::npos) line = line.substr(0, hash);
    if (!split_ws(line).empty()) {
      while (!line.empty() && (line.front() == ' ' || line.front() == '\t')) line.remove_prefix(1);
      while (!line.empty() && (line.back() == ' ' || line.back() == '\t' || line.back() == '\r')) line.remove_suffix(1);
      OffloadRule r;
      if (!parse_offload_rule(line, &r, error)) return false;
      out->push_back(std::move(r));
    }
    i = j + 1;
  }
  return true;
}

Decision decide(const std::vector<OffloadRule>& rules, int family, const std::uint8_t* addr, std::uint16_t port,
                const OffloadRule** matched) {
  for (const OffloadRule& r : rules) {
    if (port < r.port_first || port > r.port_last) continue;
    if (r.family != 0) {
      if (r.family != family) continue;
      if (!prefix_match(r.addr, addr, r.prefix)) continue;
    }
    if (matched) *matched = &r;
    return r.offload ? Decision::kOffload : Decision::kKernel;
  }
  return Decision::kNoRule;
}

}  // namespace rawpipe::preload
