// Flow steering rules as ibv_create_flow takes them: an ibv_flow_attr followed by its specs in
// one contiguous buffer (Ethernet, IPv4-ext or IPv6, UDP/TCP, flow-tag action).
//
// Built from the endpoints' MatchRules, so only the pipeline's traffic reaches the raw queues and
// the kernel keeps the rest. The same bytes go to ibv_create_flow on a NIC and to the device
// model, which parses and matches them like the NIC's steering tables.
#pragma once

#include <infiniband/verbs.h>

#include <array>
#include <cstdint>
#include <vector>

#include "pipeline/classify/rule.hh"

namespace rawpipe::mlx5 {

using FlowAttrBytes = std::vector<std::uint8_t>;

struct FlowTarget {
  std::array<std::uint8_t, 6> port_mac{};  // unicast rules match this destination MAC
  std::uint8_t ib_port = 1;
};

// The traffic types a receive-side hash QP serves, one QP per type with the matching hash
// fields: the kernel's mlx5e keeps one TIR per traffic type (en_fs / mlx5e_rss) and DPDK expands
// an RSS flow into one flow per type (mlx5_flow_expand_rss in drivers/net/mlx5/mlx5_flow.c).
enum class RssType : std::uint8_t { kIpv4Udp, kIpv4Tcp, kIpv4Other, kIpv6Udp, kIpv6Tcp, kIpv6Other };
inline constexpr std::size_t kRssTypes = 6;

// The IBV_RX_HASH_* fields the QP of `type` hashes: addresses, plus the ports of its L4.
std::uint64_t rss_hash_fields(RssType type);

// The type whose QP a flow goes to, from its specs: the L3 spec's family and the UDP/TCP spec.
// A flow with no L3 spec (steering = "all") takes the IPv4-other QP: non-IP frames are not
// hashed by any TIR and land on the first queue of the indirection table.
RssType rss_type_of(const FlowAttrBytes& attr);

// One attr per address family the rule covers (a rule without addresses covers IPv4 and IPv6),
// and per L4 protocol: a rule that does not name UDP or TCP becomes a UDP, a TCP and a
// lower-priority "other" flow for each family, so each lands on the hash QP of its type.
std::vector<FlowAttrBytes> build_flow_attrs(const MatchRule& rule, std::uint32_t flow_tag, const FlowTarget& target);

// A rule that takes every frame for this MAC (steering = "all").
FlowAttrBytes build_catch_all_attr(const FlowTarget& target);

// The multicast MAC of a group address (01:00:5e + low 23 bits, or 33:33 + low 32 bits), or
// nullopt when the rule's destination is not a single multicast group.
std::optional<std::array<std::uint8_t, 6>> multicast_mac(const IpPrefix& dst);

inline const ibv_flow_attr* flow_attr(const FlowAttrBytes& b) {
  return reinterpret_cast<const ibv_flow_attr*>(b.data());
}

}  // namespace rawpipe::mlx5
