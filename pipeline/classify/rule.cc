#include "pipeline/classify/rule.hh"

#include <arpa/inet.h>

#include <algorithm>
#include <charconv>
#include <cstring>

namespace rawpipe {
namespace {

std::vector<std::string_view> split_tokens(std::string_view text) {
  std::vector<std::string_view> out;
  std::size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && (text[i] == ' ' || text[i] == '\t')) ++i;
    std::size_t j = i;
    while (j < text.size() && text[j] != ' ' && text[j] != '\t') ++j;
    if (j > i) out.push_back(text.substr(i, j - i));
    i = j;
  }
  return out;
}

bool parse_uint(std::string_view s, unsigned max, unsigned& out) {
  if (s.empty() || s.size() > 10) return false;
  unsigned v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || v > max) return false;
  out = v;
  return true;
}

// The pieces of one `dst`/`src` operand.
struct Endpoint {
  std::optional<IpPrefix> prefix;
  std::optional<std::uint16_t> port;
};

Status bad(std::string_view rule, std::string_view token, std::string_view expected) {
  return Status::errorf("rule '{}': '{}': expected {}", rule, token, expected);
}

Status parse_prefix_len(std::string_view rule, std::string_view token, std::string_view s,
                        IpPrefix& prefix) {
  unsigned len = 0;
  if (!parse_uint(s, prefix.max_len(), len))
    return bad(rule, token, fmt::format("a prefix length from 0 to {} after '/'", prefix.max_len()));
  prefix.len = static_cast<std::uint8_t>(len);
  return Status::ok();
}

Status parse_addr(std::string_view rule, std::string_view token, std::string_view s, bool v6,
                  IpPrefix& prefix) {
  std::string z(s);
  prefix.addr = {};
  if (v6) {
    prefix.family = L3Type::kIpv6;
    if (inet_pton(AF_INET6, z.c_str(), prefix.addr.data()) != 1)
      return bad(rule, token, fmt::format("an IPv6 address, got '{}'", s));
    prefix.len = 128;
  } else {
    prefix.family = L3Type::kIpv4;
    if (inet_pton(AF_INET, z.c_str(), prefix.addr.data()) != 1)
      return bad(rule, token, fmt::format("an IPv4 address a.b.c.d, an IPv6 address in brackets or *, got '{}'", s));
    prefix.len = 32;
  }
  return Status::ok();
}

Status check_host_bits(std::string_view rule, std::string_view token, const IpPrefix& p) {
  IpPrefix masked = p;
  for (unsigned bit = p.len; bit < p.max_len(); ++bit)
    masked.addr[bit / 8] &= static_cast<std::uint8_t>(~(0x80u >> (bit % 8)));
  if (masked.addr != p.addr)
    return bad(rule, token,
               fmt::format("no address bits beyond the prefix length (did you mean {}?)", format_prefix(masked)));
  return Status::ok();
}

Status parse_port(std::string_view rule, std::string_view token, std::string_view s,
                  std::optional<std::uint16_t>& port) {
  if (s == "*") {
    port.reset();
    return Status::ok();
  }
  unsigned v = 0;
  if (!parse_uint(s, 65535, v)) return bad(rule, token, "a port number 0..65535 or * after ':'");
  port = static_cast<std::uint16_t>(v);
  return Status::ok();
}

// ADDR[/LEN][:PORT|:*] where ADDR is a.b.c.d, [v6], [v6/len], * or a bare IPv6 address (no port).
Status parse_operand(std::string_view rule, std::string_view token, Endpoint& out) {
  std::string_view s = token;
  std::string_view addr, len, port;
  bool v6 = false, any_addr = false;
  if (s.starts_with('[')) {
    std::size_t close = s.find(']');
    if (close == std::string_view::npos) return bad(rule, token, "']' closing the IPv6 address");
    addr = s.substr(1, close - 1);
    v6 = true;
    if (auto slash = addr.find('/'); slash != std::string_view::npos) {
      len = addr.substr(slash + 1);
      addr = addr.substr(0, slash);
      if (len.empty()) return bad(rule, token, "a prefix length after '/'");
    }
    std::string_view rest = s.substr(close + 1);
    if (rest.starts_with('/')) {
      if (!len.empty()) return bad(rule, token, "one prefix length, not two");
      std::size_t colon = rest.find(':');
      len = rest.substr(1, colon == std::string_view::npos ? std::string_view::npos : colon - 1);
      if (len.empty()) return bad(rule, token, "a prefix length after '/'");
      rest = colon == std::string_view::npos ? std::string_view() : rest.substr(colon);
    }
    if (!rest.empty()) {
      if (!rest.starts_with(':') || rest.size() == 1)
        return bad(rule, token, "':PORT' or ':*' after the bracketed address");
      port = rest.substr(1);
    }
  } else if (std::count(s.begin(), s.end(), ':') >= 2) {
    // A bare IPv6 address: its colons leave no room for a port.
    v6 = true;
    addr = s;
    if (auto slash = s.find('/'); slash != std::string_view::npos) {
      addr = s.substr(0, slash);
      len = s.substr(slash + 1);
      if (len.empty()) return bad(rule, token, "a prefix length after '/'");
    }
  } else {
    addr = s;
    if (auto colon = s.find(':'); colon != std::string_view::npos) {
      addr = s.substr(0, colon);
      port = s.substr(colon + 1);
      if (port.empty()) return bad(rule, token, "a port number or * after ':'");
    }
    if (auto slash = addr.find('/'); slash != std::string_view::npos) {
      len = addr.substr(slash + 1);
      addr = addr.substr(0, slash);
      if (len.empty()) return bad(rule, token, "a prefix length after '/'");
    }
    any_addr = addr == "*";
    if (any_addr && !len.empty()) return bad(rule, token, "no prefix length after '*'");
  }
  if (addr.empty()) return bad(rule, token, "an address or * before the port");
  if (!any_addr) {
    IpPrefix p;
    RAWPIPE_TRY(parse_addr(rule, token, addr, v6, p));
    if (!len.empty()) RAWPIPE_TRY(parse_prefix_len(rule, token, len, p));
    RAWPIPE_TRY(check_host_bits(rule, token, p));
    // /0 is "any address of this family", which still restricts the family: keep it.
    out.prefix = p;
  }
  if (!port.empty()) RAWPIPE_TRY(parse_port(rule, token, port, out.port));
  return Status::ok();
}

}  // namespace

Result<MatchRule> parse_match_rule(std::string_view text) {
  MatchRule r;
  r.text = std::string(text);
  std::vector<std::string_view> tok = split_tokens(text);
  if (tok.empty()) return Status::error("empty rule: expected a protocol (udp, tcp or any) followed by clauses like 'dst 239.1.1.1:5000'");
  std::size_t i = 0;
  if (tok[0] == "udp") {
    r.ip_proto = 17;
    ++i;
  } else if (tok[0] == "tcp") {
    r.ip_proto = 6;
    ++i;
  } else if (tok[0] == "any") {
    r.ip_proto = kIpProtoAny;
    ++i;
  } else {
    return bad(text, tok[0], "a protocol first: udp, tcp or any");
  }
  bool seen_dst = false, seen_src = false, seen_vlan = false, seen_port = false;
  while (i < tok.size()) {
    std::string_view kw = tok[i];
    bool* seen = kw == "dst" ? &seen_dst : kw == "src" ? &seen_src : kw == "vlan" ? &seen_vlan
                 : kw == "port" ? &seen_port : nullptr;
    if (!seen) return bad(text, kw, "one of the clauses dst, src, vlan, port");
    if (*seen) return bad(text, kw, fmt::format("each clause at most once, '{}' appears twice", kw));
    *seen = true;
    if (i + 1 >= tok.size()) {
      std::string_view what = kw == "vlan" ? "a VLAN id 0..4095" : kw == "port" ? "a port name"
                                                                               : "an address like 10.0.0.1:5000, [ff02::1]:5000 or *:5000";
      return Status::errorf("rule '{}': '{}' at the end: expected {} after it", text, kw, what);
    }
    std::string_view arg = tok[i + 1];
    if (kw == "dst" || kw == "src") {
      Endpoint e;
      RAWPIPE_TRY(parse_operand(text, arg, e));
      (kw == "dst" ? r.dst_ip : r.src_ip) = e.prefix;
      (kw == "dst" ? r.dst_port : r.src_port) = e.port;
    } else if (kw == "vlan") {
      unsigned v = 0;
      if (!parse_uint(arg, 4095, v)) return bad(text, arg, "a VLAN id 0..4095 after 'vlan'");
      r.vlan = static_cast<std::uint16_t>(v);
    } else {
      r.ingress_port_name = std::string(arg);
    }
    i += 2;
  }
  if (r.dst_ip && r.src_ip && r.dst_ip->family != r.src_ip->family)
    return Status::errorf("rule '{}': dst {} and src {} are of different address families", text,
                          format_prefix(*r.dst_ip), format_prefix(*r.src_ip));
  if (r.ip_proto == kIpProtoAny && (r.dst_port || r.src_port))
    return Status::errorf("rule '{}': ports need a protocol that has them: start the rule with udp or tcp", text);
  return r;
}

std::string format_prefix(const IpPrefix& p) {
  char buf[INET6_ADDRSTRLEN] = {};
  inet_ntop(p.family == L3Type::kIpv4 ? AF_INET : AF_INET6, p.addr.data(), buf, sizeof buf);
  if (p.is_host()) return buf;
  return fmt::format("{}/{}", buf, p.len);
}

std::string format_match_rule(const MatchRule& r) {
  std::string out = r.ip_proto == 17 ? "udp" : r.ip_proto == 6 ? "tcp" : "any";
  auto operand = [&](const char* kw, const std::optional<IpPrefix>& p, const std::optional<std::uint16_t>& port) {
    if (!p && !port) return;
    std::string addr = "*";
    if (p) addr = p->family == L3Type::kIpv6 ? fmt::format("[{}]", format_prefix(*p)) : format_prefix(*p);
    out += fmt::format(" {} {}", kw, addr);
    if (r.ip_proto != kIpProtoAny) out += port ? fmt::format(":{}", *port) : ":*";
  };
  operand("dst", r.dst_ip, r.dst_port);
  operand("src", r.src_ip, r.src_port);
  if (r.vlan) out += fmt::format(" vlan {}", *r.vlan);
  if (!r.ingress_port_name.empty()) out += " port " + r.ingress_port_name;
  return out;
}

}  // namespace rawpipe
