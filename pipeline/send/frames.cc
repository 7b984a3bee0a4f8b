#include "pipeline/send/frames.hh"

#include <cstring>

#include "pipeline/wire/builder.hh"
#include "pipeline/wire/checksum.hh"

namespace rawpipe::send {

std::size_t write_udp(const UdpDatagram& d, std::uint8_t* out, std::size_t cap) noexcept {
  if (d.payload_len > 65507) return 0;
  wire::FrameSpec s;
  s.eth.src = d.src_mac;
  s.eth.dst = d.dst_mac;
  if (d.family == L3Type::kIpv4) {
    s.ip_version = 4;
    std::memcpy(s.ipv4.src.data(), d.src_ip, 4);
    std::memcpy(s.ipv4.dst.data(), d.dst_ip, 4);
    s.ipv4.df = true;  // no fragmentation here: a datagram that does not fit is refused
  } else {
    s.ip_version = 6;
    std::memcpy(s.ipv6.src.data(), d.src_ip, 16);
    std::memcpy(s.ipv6.dst.data(), d.dst_ip, 16);
  }
  s.l4 = wire::L4Kind::kUdp;
  s.udp.src_port = d.src_port;
  s.udp.dst_port = d.dst_port;
  s.udp.checksum = true;
  s.payload = d.payload;
  s.payload_len = static_cast<std::uint16_t>(d.payload_len);
  s.min_frame_len = wire::kEthMinFrame;
  if (!d.payload && d.payload_len) return 0;
  return wire::write_frame(s, out, cap);
}

std::size_t write_solicit(L3Type family, const wire::MacAddr& src_mac, const std::uint8_t* src_ip,
                          const std::uint8_t* target, std::uint8_t* out, std::size_t cap) noexcept {
  if (family == L3Type::kIpv4) {
    wire::ArpSpec a;
    a.eth.dst = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
    a.eth.src = src_mac;
    a.oper = wire::kArpOpRequest;
    a.sha = src_mac;
    std::memcpy(a.spa.data(), src_ip, 4);
    std::memcpy(a.tpa.data(), target, 4);
    return wire::write_arp(a, out, cap);
  }
  // RFC 4861 7.2.2: to the target's solicited-node group (ff02::1:ff00:0/104 followed by the
  // target's low 24 bits, RFC 4291 2.7.1), hop limit 255, with our link-layer address so the
  // target can answer without asking back.
  wire::Ipv6Addr group = {0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0xff, target[13], target[14], target[15]};
  std::uint8_t body[24];
  std::memcpy(body, target, 16);
  body[16] = 1;  // source link-layer address option, 8 bytes
  body[17] = 1;
  std::memcpy(body + 18, src_mac.data(), 6);
  wire::FrameSpec s;
  s.eth.src = src_mac;
  s.eth.dst = {0x33, 0x33, group[12], group[13], group[14], group[15]};
  s.ip_version = 6;
  std::memcpy(s.ipv6.src.data(), src_ip, 16);
  s.ipv6.dst = group;
  s.ipv6.hop_limit = 255;
  s.l4 = wire::L4Kind::kIcmp;
  s.icmp.type = wire::kIcmpv6NeighborSolicit;
  s.icmp.code = 0;
  s.icmp.rest = 0;
  s.payload = body;
  s.payload_len = sizeof body;
  return wire::write_frame(s, out, cap);
}

bool group_mac(L3Type family, const std::uint8_t* ip, wire::MacAddr* out) noexcept {
  if (family == L3Type::kIpv4) {
    if (ip[0] == 255 && ip[1] == 255 && ip[2] == 255 && ip[3] == 255) {
      *out = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
      return true;
    }
    if ((ip[0] & 0xf0) != 0xe0) return false;
    *out = {0x01, 0x00, 0x5e, static_cast<std::uint8_t>(ip[1] & 0x7f), ip[2], ip[3]};
    return true;
  }
  if (ip[0] != 0xff) return false;
  *out = {0x33, 0x33, ip[12], ip[13], ip[14], ip[15]};
  return true;
}

bool fill_checksums(std::uint8_t* f, std::uint32_t len) noexcept {
  std::uint32_t off = 12;
  if (len < off + 2) return false;
  std::uint16_t type = wire::load_be16(f + off);
  for (int tags = 0; type == wire::kEtherTypeVlan || type == wire::kEtherTypeQinQ || type == wire::kEtherTypeQinQLegacy;
       ++tags) {
    if (tags == 2 || len < off + 6) return false;
    off += 4;
    type = wire::load_be16(f + off);
  }
  std::uint8_t* ip = f + off + 2;
  const std::uint32_t avail = len - (off + 2);
  std::uint8_t proto;
  std::uint8_t* l4;
  std::uint32_t l4_len;
  if (type == wire::kEtherTypeIpv4) {
    if (avail < 20 || (ip[0] >> 4) != 4) return false;
    const std::uint32_t ihl = (ip[0] & 0x0f) * 4u;
    const std::uint32_t total = wire::load_be16(ip + 2);
    if (ihl < 20 || total < ihl || total > avail) return false;
    wire::store_be16(ip + 10, 0);
    wire::store_be16(ip + 10, wire::ipv4_header_checksum(ip, ihl));
    if (wire::load_be16(ip + 6) & 0x3fff) return true;  // a fragment: its L4 checksum covers the whole datagram
    proto = ip[9];
    l4 = ip + ihl;
    l4_len = total - ihl;
  } else if (type == wire::kEtherTypeIpv6) {
    if (avail < 40 || (ip[0] >> 4) != 6) return false;
    const std::uint32_t plen = wire::load_be16(ip + 4);
    if (plen > avail - 40) return false;
    proto = ip[6];
    l4 = ip + 40;
    l4_len = plen;
  } else {
    return false;
  }
  const bool v4 = type == wire::kEtherTypeIpv4;
  auto l4_sum = [&](unsigned field) {
    wire::store_be16(l4 + field, 0);
    return v4 ? wire::l4_checksum_ipv4(ip + 12, ip + 16, proto, l4, l4_len)
              : wire::l4_checksum_ipv6(ip + 8, ip + 24, proto, l4, l4_len);
  };
  if (proto == wire::kIpProtoUdp && l4_len >= 8) wire::store_be16(l4 + 6, wire::udp_checksum_on_wire(l4_sum(6)));
  else if (proto == wire::kIpProtoTcp && l4_len >= 20) wire::store_be16(l4 + 16, l4_sum(16));
  return true;
}

}  // namespace rawpipe::send
