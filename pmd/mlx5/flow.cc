#include "pmd/mlx5/flow.hh"

#include <arpa/inet.h>

#include <cstring>

namespace rawpipe::mlx5 {
namespace {

class Builder {
 public:
  explicit Builder(std::uint8_t port, std::uint16_t priority) {
    bytes_.resize(sizeof(ibv_flow_attr));
    auto* a = reinterpret_cast<ibv_flow_attr*>(bytes_.data());
    a->type = IBV_FLOW_ATTR_NORMAL;
    a->priority = priority;
    a->port = port;
  }
  template <typename Spec>
  Spec& add() {
    const std::size_t off = bytes_.size();
    bytes_.resize(off + sizeof(Spec));  // value-initialised: every filter and mask byte starts zero
    auto* a = reinterpret_cast<ibv_flow_attr*>(bytes_.data());
    ++a->num_of_specs;
    return *reinterpret_cast<Spec*>(bytes_.data() + off);
  }
  FlowAttrBytes finish() {
    reinterpret_cast<ibv_flow_attr*>(bytes_.data())->size = static_cast<std::uint16_t>(bytes_.size());
    return std::move(bytes_);
  }

 private:
  FlowAttrBytes bytes_;
};

void prefix_mask(const IpPrefix& p, std::uint8_t* mask, std::size_t bytes) {
  std::memset(mask, 0, bytes);
  for (unsigned bit = 0; bit < p.len && bit < bytes * 8; ++bit) mask[bit / 8] |= static_cast<std::uint8_t>(0x80u >> (bit % 8));
}

// `proto` is the L4 protocol this flow matches (the rule's own, or one of its expansions);
// `demote` lowers its priority by one (the "other" flow of an expanded rule, so the UDP and TCP
// flows of the same rule win for their traffic).
FlowAttrBytes build_one(const MatchRule& r, L3Type family, std::uint8_t proto, bool demote, std::uint32_t tag,
                        const FlowTarget& t) {
  const bool five_tuple = r.dst_ip && r.dst_port && (r.src_ip || r.src_port);
  // libvma's convention: more specific rules get the smaller (stronger) priority value.
  Builder b(t.ib_port, static_cast<std::uint16_t>((five_tuple ? 0 : 1) + (demote ? 1 : 0)));
  auto& eth = b.add<ibv_flow_spec_eth>();
  eth.type = IBV_FLOW_SPEC_ETH;
  eth.size = sizeof(ibv_flow_spec_eth);
  std::optional<std::array<std::uint8_t, 6>> group;
  if (r.dst_ip) group = multicast_mac(*r.dst_ip);
  const auto& dmac = group ? *group : t.port_mac;
  std::memcpy(eth.val.dst_mac, dmac.data(), 6);
  std::memset(eth.mask.dst_mac, 0xff, 6);
  eth.val.ether_type = htons(family == L3Type::kIpv4 ? 0x0800 : 0x86dd);
  eth.mask.ether_type = 0xffff;
  if (r.vlan) {
    eth.val.vlan_tag = htons(*r.vlan);
    eth.mask.vlan_tag = htons(0x0fff);
  }
  if (family == L3Type::kIpv4) {
    auto& ip = b.add<ibv_flow_spec_ipv4_ext>();
    ip.type = IBV_FLOW_SPEC_IPV4_EXT;
    ip.size = sizeof(ibv_flow_spec_ipv4_ext);
    if (r.dst_ip) {
      std::memcpy(&ip.val.dst_ip, r.dst_ip->addr.data(), 4);
      prefix_mask(*r.dst_ip, reinterpret_cast<std::uint8_t*>(&ip.mask.dst_ip), 4);
      ip.val.dst_ip &= ip.mask.dst_ip;
    }
    if (r.src_ip) {
      std::memcpy(&ip.val.src_ip, r.src_ip->addr.data(), 4);
      prefix_mask(*r.src_ip, reinterpret_cast<std::uint8_t*>(&ip.mask.src_ip), 4);
      ip.val.src_ip &= ip.mask.src_ip;
    }
    if (proto != kIpProtoAny) {
      ip.val.proto = proto;
      ip.mask.proto = 0xff;
    }
  } else {
    auto& ip = b.add<ibv_flow_spec_ipv6>();
    ip.type = IBV_FLOW_SPEC_IPV6;
    ip.size = sizeof(ibv_flow_spec_ipv6);
    if (r.dst_ip) {
      prefix_mask(*r.dst_ip, ip.mask.dst_ip, 16);
      for (int i = 0; i < 16; ++i) ip.val.dst_ip[i] = r.dst_ip->addr[i] & ip.mask.dst_ip[i];
    }
    if (r.src_ip) {
      prefix_mask(*r.src_ip, ip.mask.src_ip, 16);
      for (int i = 0; i < 16; ++i) ip.val.src_ip[i] = r.src_ip->addr[i] & ip.mask.src_ip[i];
    }
    if (proto != kIpProtoAny) {
      ip.val.next_hdr = proto;
      ip.mask.next_hdr = 0xff;
    }
  }
  if (proto == 17 || proto == 6) {
    auto& l4 = b.add<ibv_flow_spec_tcp_udp>();
    l4.type = proto == 17 ? IBV_FLOW_SPEC_UDP : IBV_FLOW_SPEC_TCP;
    l4.size = sizeof(ibv_flow_spec_tcp_udp);
    if (r.dst_port) {
      l4.val.dst_port = htons(*r.dst_port);
      l4.mask.dst_port = 0xffff;
    }
    if (r.src_port) {
      l4.val.src_port = htons(*r.src_port);
      l4.mask.src_port = 0xffff;
    }
  }
  if (tag) {
    auto& a = b.add<ibv_flow_spec_action_tag>();
    a.type = IBV_FLOW_SPEC_ACTION_TAG;
    a.size = sizeof(ibv_flow_spec_action_tag);
    a.tag_id = tag;
  }
  return b.finish();
}

}  // namespace

std::optional<std::array<std::uint8_t, 6>> multicast_mac(const IpPrefix& dst) {
  if (!dst.is_host()) return std::nullopt;
  if (dst.family == L3Type::kIpv4 && (dst.addr[0] & 0xf0) == 0xe0)
    return std::array<std::uint8_t, 6>{0x01, 0x00, 0x5e, static_cast<std::uint8_t>(dst.addr[1] & 0x7f), dst.addr[2],
                                       dst.addr[3]};
  if (dst.family == L3Type::kIpv6 && dst.addr[0] == 0xff)
    return std::array<std::uint8_t, 6>{0x33, 0x33, dst.addr[12], dst.addr[13], dst.addr[14], dst.addr[15]};
  return std::nullopt;
}

std::vector<FlowAttrBytes> build_flow_attrs(const MatchRule& rule, std::uint32_t flow_tag, const FlowTarget& target) {
  std::vector<FlowAttrBytes> out;
  const L3Type fam = rule.family();
  for (L3Type f : {L3Type::kIpv4, L3Type::kIpv6}) {
    if (fam != L3Type::kNone && fam != f) continue;
    if (rule.ip_proto != kIpProtoAny) {
      out.push_back(build_one(rule, f, rule.ip_proto, false, flow_tag, target));
      continue;
    }
    // DPDK's RSS expansion: one flow per L4 type, the L3-only one a step weaker.
    out.push_back(build_one(rule, f, 17, false, flow_tag, target));
    out.push_back(build_one(rule, f, 6, false, flow_tag, target));
    out.push_back(build_one(rule, f, kIpProtoAny, true, flow_tag, target));
  }
  return out;
}

std::uint64_t rss_hash_fields(RssType type) {
  const bool v4 = type == RssType::kIpv4Udp || type == RssType::kIpv4Tcp || type == RssType::kIpv4Other;
  std::uint64_t f = v4 ? (IBV_RX_HASH_SRC_IPV4 | IBV_RX_HASH_DST_IPV4) : (IBV_RX_HASH_SRC_IPV6 | IBV_RX_HASH_DST_IPV6);
  if (type == RssType::kIpv4Udp || type == RssType::kIpv6Udp) f |= IBV_RX_HASH_SRC_PORT_UDP | IBV_RX_HASH_DST_PORT_UDP;
  if (type == RssType::kIpv4Tcp || type == RssType::kIpv6Tcp) f |= IBV_RX_HASH_SRC_PORT_TCP | IBV_RX_HASH_DST_PORT_TCP;
  return f;
}

RssType rss_type_of(const FlowAttrBytes& attr) {
  const auto* a = flow_attr(attr);
  std::size_t off = sizeof(ibv_flow_attr);
  bool v6 = false;
  int l4 = 0;  // 17, 6 or 0
  for (unsigned i = 0; i < a->num_of_specs && off + 8 <= attr.size(); ++i) {
    // Specs are packed back to back at 4-byte offsets, but ibv_flow_spec is an 8-byte aligned
    // union: only its header is copied out.
    decltype(ibv_flow_spec::hdr) hdr;
    std::memcpy(&hdr, attr.data() + off, sizeof hdr);
    const std::uint32_t type = hdr.type & ~IBV_FLOW_SPEC_INNER;
    if (type == IBV_FLOW_SPEC_IPV6) v6 = true;
    if (type == IBV_FLOW_SPEC_UDP) l4 = 17;
    if (type == IBV_FLOW_SPEC_TCP) l4 = 6;
    if (hdr.size == 0) break;
    off += hdr.size;
  }
  if (l4 == 17) return v6 ? RssType::kIpv6Udp : RssType::kIpv4Udp;
  if (l4 == 6) return v6 ? RssType::kIpv6Tcp : RssType::kIpv4Tcp;
  return v6 ? RssType::kIpv6Other : RssType::kIpv4Other;
}

FlowAttrBytes build_catch_all_attr(const FlowTarget& target) {
  Builder b(target.ib_port, 3);
  auto& eth = b.add<ibv_flow_spec_eth>();
  eth.type = IBV_FLOW_SPEC_ETH;
  eth.size = sizeof(ibv_flow_spec_eth);
  std::memcpy(eth.val.dst_mac, target.port_mac.data(), 6);
  std::memset(eth.mask.dst_mac, 0xff, 6);
  return b.finish();
}

}  // namespace rawpipe::mlx5
