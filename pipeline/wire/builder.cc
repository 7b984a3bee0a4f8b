#include "pipeline/wire/builder.hh"

#include <cstring>

#include "pipeline/wire/checksum.hh"

namespace rawpipe::wire {
namespace {

constexpr std::size_t kMaxExtHeaders = 8;

std::size_t ext_size(const Ipv6ExtSpec& e) noexcept {
  return e.kind == Ipv6ExtKind::kFragment ? sizeof(Ipv6FragmentHeader) : (std::size_t(e.hdr_ext_len) + 1) * 8;
}

std::size_t l4_header_size(L4Kind k) noexcept {
  switch (k) {
    case L4Kind::kUdp: return sizeof(UdpHeader);
    case L4Kind::kTcp: return sizeof(TcpHeader);
    case L4Kind::kIcmp: return sizeof(IcmpHeader);
    case L4Kind::kRaw: return 0;
  }
  return 0;
}

std::uint8_t l4_proto(const FrameSpec& s) noexcept {
  switch (s.l4) {
    case L4Kind::kUdp: return kIpProtoUdp;
    case L4Kind::kTcp: return kIpProtoTcp;
    case L4Kind::kIcmp: return s.ip_version == 6 ? kIpProtoIcmpv6 : kIpProtoIcmp;
    case L4Kind::kRaw: return s.raw_proto;
  }
  return 0;
}

// Writes the L4 header (checksum zero) and payload at p; returns bytes written.
std::size_t write_l4(const FrameSpec& s, std::uint8_t* p) noexcept {
  const std::size_t hl = l4_header_size(s.l4);
  const std::size_t len = hl + s.payload_len;
  switch (s.l4) {
    case L4Kind::kUdp:
      store_be16(p, s.udp.src_port);
      store_be16(p + 2, s.udp.dst_port);
      store_be16(p + 4, static_cast<std::uint16_t>(len));
      store_be16(p + 6, 0);
      break;
    case L4Kind::kTcp:
      store_be16(p, s.tcp.src_port);
      store_be16(p + 2, s.tcp.dst_port);
      store_be32(p + 4, s.tcp.seq);
      store_be32(p + 8, s.tcp.ack);
      p[12] = (sizeof(TcpHeader) / 4) << 4;
      p[13] = s.tcp.flags;
      store_be16(p + 14, s.tcp.window);
      store_be16(p + 16, 0);
      store_be16(p + 18, 0);
      break;
    case L4Kind::kIcmp:
      p[0] = s.icmp.type;
      p[1] = s.icmp.code;
      store_be16(p + 2, 0);
      store_be32(p + 4, s.icmp.rest);
      break;
    case L4Kind::kRaw:
      break;
  }
  if (s.payload_len) {
    if (s.payload)
      std::memcpy(p + hl, s.payload, s.payload_len);
    else
      std::memset(p + hl, 0, s.payload_len);
  }
  return len;
}

// Offset of the checksum field inside the L4 header, or -1 when the kind has none.
int l4_csum_field(L4Kind k) noexcept {
  switch (k) {
    case L4Kind::kUdp: return 6;
    case L4Kind::kTcp: return 16;
    case L4Kind::kIcmp: return 2;
    case L4Kind::kRaw: return -1;
  }
  return -1;
}

}  // namespace

std::size_t write_eth(const EthSpec& eth, std::uint16_t ether_type, std::uint8_t* out,
                      std::size_t cap) noexcept {
  if (eth.vlan_count > 2) return 0;
  const std::size_t len = sizeof(EthernetHeader) + eth.vlan_count * sizeof(VlanTag);
  if (cap < len) return 0;
  std::memcpy(out, eth.dst.data(), 6);
  std::memcpy(out + 6, eth.src.data(), 6);
  std::uint8_t* p = out + 12;
  for (unsigned i = 0; i < eth.vlan_count; ++i) {
    std::uint16_t tpid = eth.vlans[i].tpid;
    if (tpid == 0) tpid = (eth.vlan_count == 2 && i == 0) ? kEtherTypeQinQ : kEtherTypeVlan;
    store_be16(p, tpid);
    store_be16(p + 2, eth.vlans[i].tci);
    p += 4;
  }
  store_be16(p, ether_type);
  return len;
}

std::size_t write_frame(const FrameSpec& s, std::uint8_t* out, std::size_t cap,
                        FrameLayout* layout) noexcept {
  if (cap > 65535) cap = 65535;
  std::uint16_t ether_type;
  switch (s.ip_version) {
    case 4: ether_type = kEtherTypeIpv4; break;
    case 6: ether_type = kEtherTypeIpv6; break;
    case 0: ether_type = s.ether_type; break;
    default: return 0;
  }
  const std::size_t l3 = write_eth(s.eth, ether_type, out, cap);
  if (l3 == 0) return 0;
  FrameLayout lay;
  lay.l3_off = static_cast<std::uint16_t>(l3);

  std::size_t end;
  if (s.ip_version == 0) {
    if (l3 + s.payload_len > cap) return 0;
    if (s.payload_len) {
      if (s.payload)
        std::memcpy(out + l3, s.payload, s.payload_len);
      else
        std::memset(out + l3, 0, s.payload_len);
    }
    lay.payload_off = lay.l3_off;
    end = l3 + s.payload_len;
  } else if (s.ip_version == 4) {
    const Ipv4Spec& v = s.ipv4;
    if (v.options_len % 4 != 0 || v.options_len > 40 || v.frag_offset % 8 != 0) return 0;
    const std::size_t ihl = kIpv4MinHeader + v.options_len;
    const std::size_t l4_len = l4_header_size(s.l4) + s.payload_len;
    const std::size_t total = ihl + l4_len;
    if (l3 + total > cap || total > 65535) return 0;
    std::uint8_t* ip = out + l3;
    ip[0] = static_cast<std::uint8_t>(0x40 | (ihl / 4));
    ip[1] = v.tos;
    store_be16(ip + 2, static_cast<std::uint16_t>(total));
    store_be16(ip + 4, v.id);
    store_be16(ip + 6, static_cast<std::uint16_t>((v.df ? kIpv4FlagDf : 0) | (v.mf ? kIpv4FlagMf : 0) |
                                                  ((v.frag_offset / 8) & kIpv4OffsetMask)));
    ip[8] = v.ttl;
    ip[9] = l4_proto(s);
    store_be16(ip + 10, 0);
    std::memcpy(ip + 12, v.src.data(), 4);
    std::memcpy(ip + 16, v.dst.data(), 4);
    if (v.options_len) std::memcpy(ip + 20, v.options, v.options_len);
    store_be16(ip + 10, ipv4_header_checksum(ip, ihl));
    std::uint8_t* l4 = ip + ihl;
    write_l4(s, l4);
    const int cf = l4_csum_field(s.l4);
    if (cf >= 0 && !(s.l4 == L4Kind::kUdp && !s.udp.checksum)) {
      std::uint16_t c = s.l4 == L4Kind::kIcmp ? icmpv4_checksum(l4, l4_len)
                                              : l4_checksum_ipv4(ip + 12, ip + 16, ip[9], l4, l4_len);
      if (s.l4 == L4Kind::kUdp) c = udp_checksum_on_wire(c);
      store_be16(l4 + cf, c);
    }
    lay.l4_off = static_cast<std::uint16_t>(l3 + ihl);
    lay.payload_off = static_cast<std::uint16_t>(lay.l4_off + l4_header_size(s.l4));
    end = l3 + total;
  } else {
    const Ipv6Spec& v = s.ipv6;
    if (v.ext.size() > kMaxExtHeaders) return 0;
    std::size_t ext_len = 0;
    for (const Ipv6ExtSpec& e : v.ext) {
      if (e.kind == Ipv6ExtKind::kFragment && e.frag_offset % 8 != 0) return 0;
      ext_len += ext_size(e);
    }
    const std::size_t l4_len = l4_header_size(s.l4) + s.payload_len;
    const std::size_t plen = ext_len + l4_len;
    if (l3 + sizeof(Ipv6Header) + plen > cap || plen > 65535) return 0;
    std::uint8_t* ip = out + l3;
    store_be32(ip, (6u << 28) | (std::uint32_t(v.traffic_class) << 20) | (v.flow_label & 0xfffff));
    store_be16(ip + 4, static_cast<std::uint16_t>(plen));
    const std::uint8_t proto = l4_proto(s);
    ip[6] = v.ext.empty() ? proto : static_cast<std::uint8_t>(v.ext[0].kind);
    ip[7] = v.hop_limit;
    std::memcpy(ip + 8, v.src.data(), 16);
    std::memcpy(ip + 24, v.dst.data(), 16);
    std::uint8_t* p = ip + sizeof(Ipv6Header);
    for (std::size_t i = 0; i < v.ext.size(); ++i) {
      const Ipv6ExtSpec& e = v.ext[i];
      const std::uint8_t next = i + 1 < v.ext.size() ? static_cast<std::uint8_t>(v.ext[i + 1].kind) : proto;
      const std::size_t sz = ext_size(e);
      p[0] = next;
      if (e.kind == Ipv6ExtKind::kFragment) {
        p[1] = 0;
        store_be16(p + 2, static_cast<std::uint16_t>((e.frag_offset & kIpv6FragOffsetMask) | (e.more ? kIpv6FragMore : 0)));
        store_be32(p + 4, e.frag_id);
      } else {
        p[1] = e.hdr_ext_len;
        std::memset(p + 2, 0, sz - 2);
        if (e.body) std::memcpy(p + 2, e.body, e.body_len < sz - 2 ? e.body_len : sz - 2);
      }
      p += sz;
    }
    write_l4(s, p);
    const int cf = l4_csum_field(s.l4);
    if (cf >= 0) {
      std::uint16_t c = l4_checksum_ipv6(ip + 8, ip + 24, proto, p, l4_len);
      if (s.l4 == L4Kind::kUdp) c = udp_checksum_on_wire(c);
      store_be16(p + cf, c);
    }
    lay.l4_off = static_cast<std::uint16_t>(p - out);
    lay.payload_off = static_cast<std::uint16_t>(lay.l4_off + l4_header_size(s.l4));
    end = l3 + sizeof(Ipv6Header) + plen;
  }
  if (s.l4 == L4Kind::kRaw && s.ip_version != 0) lay.l4_off = 0;

  lay.ip_end = static_cast<std::uint16_t>(end);
  if (end < s.min_frame_len) {
    if (s.min_frame_len > cap) return 0;
    std::memset(out + end, 0, s.min_frame_len - end);
    end = s.min_frame_len;
  }
  lay.len = static_cast<std::uint16_t>(end);
  if (layout) *layout = lay;
  return end;
}

std::size_t write_arp(const ArpSpec& s, std::uint8_t* out, std::size_t cap) noexcept {
  const std::size_t l3 = write_eth(s.eth, kEtherTypeArp, out, cap);
  if (l3 == 0 || l3 + sizeof(ArpHeader) > cap) return 0;
  std::uint8_t* a = out + l3;
  store_be16(a, kArpHtypeEthernet);
  store_be16(a + 2, kEtherTypeIpv4);
  a[4] = 6;
  a[5] = 4;
  store_be16(a + 6, s.oper);
  std::memcpy(a + 8, s.sha.data(), 6);
  std::memcpy(a + 14, s.spa.data(), 4);
  std::memcpy(a + 18, s.tha.data(), 6);
  std::memcpy(a + 24, s.tpa.data(), 4);
  std::size_t end = l3 + sizeof(ArpHeader);
  if (end < s.min_frame_len) {
    if (s.min_frame_len > cap) return 0;
    std::memset(out + end, 0, s.min_frame_len - end);
    end = s.min_frame_len;
  }
  return end;
}

}  // namespace rawpipe::wire
