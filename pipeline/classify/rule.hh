// Endpoint match rules: the rule grammar's parsed form, shared by the classifier, the config
// loader and every port that can steer traffic in hardware or in an XDP program.
//
// The grammar is documented in docs/rules.md. In short, a rule is a protocol followed by any of
// these clauses, each at most once, in any order:
//
//   udp | tcp | any                       protocol (any = every IP protocol)
//   dst ADDR[/LEN][:PORT|:*]              destination address prefix and port
//   src ADDR[/LEN][:PORT|:*]              source address prefix and port
//   vlan N                                outer VLAN id 0..4095 (untagged packets never match)
//   port NAME                             ingress port, by its name in the config
//
// ADDR is an IPv4 dotted quad, an IPv6 address in brackets when a port follows ([ff02::1]:5000),
// or * for any address. Multicast groups are ordinary destination addresses (224.0.0.0/4,
// ff00::/8). Examples:
//   udp dst 239.1.1.1:5000 src 10.0.0.0/8:* vlan 100
//   udp dst [ff02::1]:5000
//   udp dst *:9000
//
// Parsing is control path: it returns a Result whose message names the offending token and what
// was expected there.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "rawpipe/status.hh"
#include "pipeline/port/steering.hh"

namespace rawpipe {

[[nodiscard]] Result<MatchRule> parse_match_rule(std::string_view text);

// Canonical text of a rule (what parse_match_rule accepts and would return unchanged).
std::string format_match_rule(const MatchRule& rule);
std::string format_prefix(const IpPrefix& prefix);

}  // namespace rawpipe
