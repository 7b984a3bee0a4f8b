// What a port is asked to steer to its queues: the match description of every endpoint rule,
// bound to its endpoint. This is a type of the port interface, not of the classifier: a driver
// (flow rules, an XDP program, socket joins) reads it without knowing how the classifier stores or
// parses rules. The classifier builds its tables from the same type (pipeline/classify/rule.hh
// parses the rule grammar into it).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "rawpipe/mbuf.hh"

namespace rawpipe {

// ip_proto value meaning "any IP protocol" (0 is IPv6 hop-by-hop, which parse never reports as
// the last header, so it is free to mean "unspecified").
inline constexpr std::uint8_t kIpProtoAny = 0;

struct IpPrefix {
  L3Type family = L3Type::kIpv4;
  std::array<std::uint8_t, 16> addr{};  // network order; IPv4 uses the first 4 bytes, rest zero
  std::uint8_t len = 0;                 // prefix length in bits: 0..32 (IPv4) or 0..128 (IPv6)

  std::uint8_t max_len() const noexcept { return family == L3Type::kIpv4 ? 32 : 128; }
  bool is_host() const noexcept { return len == max_len(); }
  // True when `a` (same family, network order) lies inside this prefix.
  bool contains(const std::uint8_t* a) const noexcept;
  bool operator==(const IpPrefix&) const = default;
};

struct MatchRule {
  std::uint8_t ip_proto = kIpProtoAny;     // 17 UDP, 6 TCP, kIpProtoAny
  std::optional<IpPrefix> dst_ip, src_ip;  // unset: any address of either family
  std::optional<std::uint16_t> dst_port, src_port;  // host order; unset: any
  std::optional<std::uint16_t> vlan;       // outer VLAN id
  std::optional<std::uint16_t> ingress_port;  // port id; the engine fills it from ingress_port_name
  std::string text;                        // the rule as written, for messages and stats
  std::string ingress_port_name;           // `port NAME` as written; empty when absent

  // The address family the rule is restricted to, or kNone when it matches both.
  L3Type family() const noexcept;
};

// One rule bound to an endpoint. flow_tag is what the port should write into Mbuf::flow_tag for
// traffic it steers with this rule (hardware flow marks); 0 means none.
struct SteeringRule {
  MatchRule match;
  std::uint16_t endpoint = 0;
  std::uint32_t flow_tag = 0;
};

// Every endpoint's rules, in config order; what Port::update_steering receives.
struct SteeringRules {
  std::vector<SteeringRule> rules;
};

}  // namespace rawpipe
