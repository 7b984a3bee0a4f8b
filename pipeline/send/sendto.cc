#include "pipeline/send/sendto.hh"

#include <arpa/inet.h>

#include <cerrno>
#include <cstring>

#include "pipeline/buf/pool.hh"
#include "pipeline/neigh/neigh.hh"
#include "pipeline/send/frames.hh"
#include "pipeline/send/send_port.hh"

namespace rawpipe::send {
namespace {

std::string ip_text(L3Type family, const std::uint8_t* ip) {
  char text[INET6_ADDRSTRLEN] = {};
  inet_ntop(family == L3Type::kIpv4 ? AF_INET : AF_INET6, ip, text, sizeof text);
  return text;
}

unsigned pending_slot(L3Type family, const std::uint8_t* ip) noexcept {
  const std::size_t n = family == L3Type::kIpv4 ? 4 : 16;
  unsigned h = 2166136261u;
  for (std::size_t i = 0; i < n; ++i) h = (h ^ ip[i]) * 16777619u;
  return h % 64;
}

// An ARP request / neighbour solicitation for dst, unless one went out within the interval.
void solicit(SendPort& sp, L3Type family, const std::uint8_t* src_ip, const std::uint8_t* dst_ip, std::uint64_t now_ns) {
  const std::size_t n = family == L3Type::kIpv4 ? 4 : 16;
  SendPort::Pending& p = sp.pending[pending_slot(family, dst_ip)];
  if (p.at_ns && !std::memcmp(p.ip, dst_ip, n) && now_ns - p.at_ns < kSolicitIntervalNs) return;
  Mbuf* m = sp.pool->alloc();
  if (!m) return;  // the next call asks again
  const std::size_t len = write_solicit(family, sp.mac, src_ip, dst_ip, m->data(), m->buf_len - m->data_off);
  if (!len) {
    mbuf_free(m);
    return;
  }
  m->data_len = static_cast<std::uint32_t>(len);
  m->tx_flags = 0;
  if (sp.submit(&m, 1) == 0) {
    mbuf_free(m);
    return;
  }
  std::memcpy(p.ip, dst_ip, n);
  p.at_ns = now_ns;
  sp.solicitations.add(1);
}

}  // namespace

long sendto(SendPort& sp, const Address& dst, const Address& src, const void* buf, std::size_t len, bool dummy,
            std::uint64_t now_ns, std::string* why) {
  const bool v4 = dst.family == L3Type::kIpv4;
  const char* fam = v4 ? "IPv4" : "IPv6";
  if (sp.mac == wire::MacAddr{}) {
    *why = fmt::format("sendto: port {} has no MAC address to send from; set mac = \"02:...\" in its [[ports]] table",
                       sp.port);
    return -EADDRNOTAVAIL;
  }
  UdpDatagram d;
  d.family = dst.family;
  std::memcpy(d.dst_ip, dst.ip, 16);
  d.dst_port = dst.port;
  d.src_port = src.port;
  d.payload = static_cast<const std::uint8_t*>(buf);
  d.payload_len = len;
  d.src_mac = sp.mac;
  if (src.family != L3Type::kNone) {
    std::memcpy(d.src_ip, src.ip, 16);
  } else {
    bool found = false;
    for (std::size_t i = 0; sp.addresses && i < sp.addresses->size() && !found; ++i)
      if (sp.addresses->at(i).family == dst.family) {
        std::memcpy(d.src_ip, sp.addresses->at(i).ip.data(), 16);
        found = true;
      }
    if (!found) {
      *why = fmt::format("sendto: port {} has no {} address in `addresses` to send from; add one to its [[ports]] "
                         "table or pass src",
                         sp.port, fam);
      return -EADDRNOTAVAIL;
    }
  }
  if (sp.next_hop) {
    d.dst_mac = *sp.next_hop;
  } else if (!group_mac(dst.family, dst.ip, &d.dst_mac)) {
    if (!sp.cache) {
      *why = fmt::format("sendto: port {} resolves no neighbours (it has no `addresses`, so the pipeline answers and "
                         "learns no ARP/ND there); set `addresses` or `next_hop_mac` in its [[ports]] table",
                         sp.port);
      return -EHOSTUNREACH;
    }
    auto mac = sp.cache->lookup(dst.family, dst.ip);
    if (!mac) {
      solicit(sp, dst.family, d.src_ip, dst.ip, now_ns);
      sp.unresolved.add(1);
      *why = fmt::format("sendto: {} is not resolved yet on port {}; an {} went out, call again shortly",
                         ip_text(dst.family, dst.ip), sp.port, v4 ? "ARP request" : "neighbour solicitation");
      return -EAGAIN;
    }
    d.dst_mac = *mac;
  }
  Mbuf* m = sp.pool->alloc();
  if (!m) {
    *why = fmt::format("sendto: the pool of port {} has no free buffer", sp.port);
    return -ENOBUFS;
  }
  const std::size_t n = write_udp(d, m->data(), m->buf_len - m->data_off);
  if (!n) {
    mbuf_free(m);
    *why = fmt::format("sendto: a {}-byte datagram does not fit in a buffer of {} data bytes (with its headers)", len,
                       m->buf_len - m->data_off);
    return -EMSGSIZE;
  }
  m->data_len = static_cast<std::uint32_t>(n);
  m->tx_flags = dummy ? tx_flag::kDummy : 0;
  if (dummy) {
    sp.dummies.add(1);
    if (!sp.native_dummy) {
      sp.submitted.add(1);
      mbuf_free(m);
      return static_cast<long>(len);
    }
  }
  if (sp.submit(&m, 1) == 0) {
    mbuf_free(m);
    *why = fmt::format("sendto: the send ring of port {} is full (its lcore does not keep up); try again", sp.port);
    return -ENOBUFS;
  }
  if (dummy) sp.dummies_posted.add(1);
  return static_cast<long>(len);
}

}  // namespace rawpipe::send
