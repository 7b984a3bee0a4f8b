// Socket transmit: the UDP payload of each frame goes to the frame's destination with sendmmsg,
// from the socket bound to the frame's source port.
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "pipeline/wire/wire.hh"
#include "pmd/socket/socket.hh"

namespace rawpipe::socket_pmd {
namespace {

struct Datagram {
  L3Type family;
  const std::uint8_t* src_ip;
  const std::uint8_t* dst_ip;
  std::uint16_t src_port;  // host order
  std::uint16_t dst_port;
  const std::uint8_t* payload;
  std::uint32_t len;
};

// Reads Ethernet/[VLAN x2]/IPv4|IPv6/UDP without trusting any length beyond the frame.
bool parse_udp(const Mbuf* m, Datagram& d) noexcept {
  const std::uint8_t* f = m->data();
  const std::uint32_t len = m->data_len;
  std::uint32_t off = 12;
  if (len < 14) return false;
  std::uint16_t type = wire::load_be16(f + off);
  for (int t = 0; t < 2 && (type == wire::kEtherTypeVlan || type == wire::kEtherTypeQinQ); ++t) {
    off += 4;
    if (len < off + 2) return false;
    type = wire::load_be16(f + off);
  }
  off += 2;
  std::uint32_t l4, ip_end;
  if (type == wire::kEtherTypeIpv4) {
    if (len < off + 20 || (f[off] >> 4) != 4) return false;
    const std::uint32_t ihl = (f[off] & 0xf) * 4u, total = wire::load_be16(f + off + 2);
    if (ihl < 20 || total < ihl || off + total > len || f[off + 9] != wire::kIpProtoUdp) return false;
    if (wire::load_be16(f + off + 6) & 0x3fff) return false;  // fragments are not datagrams
    d.family = L3Type::kIpv4;
    d.src_ip = f + off + 12;
    d.dst_ip = f + off + 16;
    l4 = off + ihl;
    ip_end = off + total;
  } else if (type == wire::kEtherTypeIpv6) {
    if (len < off + 40 || (f[off] >> 4) != 6 || f[off + 6] != wire::kIpProtoUdp) return false;
    d.family = L3Type::kIpv6;
    d.src_ip = f + off + 8;
    d.dst_ip = f + off + 24;
    l4 = off + 40;
    ip_end = l4 + wire::load_be16(f + off + 4);
    if (ip_end > len) return false;
  } else {
    return false;
  }
  if (l4 + 8 > ip_end) return false;
  const std::uint32_t udp_len = wire::load_be16(f + l4 + 4);
  if (udp_len < 8 || l4 + udp_len > ip_end) return false;
  d.src_port = wire::load_be16(f + l4);
  d.dst_port = wire::load_be16(f + l4 + 2);
  d.payload = f + l4 + 8;
  d.len = udp_len - 8;
  return true;
}

struct Slot {
  sockaddr_storage to;
  alignas(cmsghdr) std::uint8_t control[CMSG_SPACE(sizeof(in6_pktinfo))];
};

}  // namespace

std::uint16_t tx_burst(void* queue, Mbuf** pkts, std::uint16_t n) noexcept {
  TxQueue& q = *static_cast<TxQueue*>(queue);
  n = std::min<std::uint16_t>(n, 64);
  const unsigned count = q.set->count.load(std::memory_order_acquire);  // A2: pairs with R1 in device.cc
  mmsghdr msgs[64];
  iovec iov[64];
  Slot slots[64];
  int fds[64];
  unsigned taken = 0, sent_total = 0, bad = 0, failed = 0;
  std::uint64_t bytes = 0;
  // Build one message per frame; frames that are not UDP are taken and counted.
  for (unsigned i = 0; i < n; ++i) {
    Datagram d;
    msghdr& h = msgs[i].msg_hdr;
    h = msghdr{};
    if (!parse_udp(pkts[i], d)) [[unlikely]] {
      fds[i] = -1;
      continue;
    }
    int fd = -1;
    const BoundSocket* from = nullptr;
    for (unsigned s = 0; s < count; ++s) {
      const BoundSocket& b = q.set->sockets[s];
      if (b.family == d.family && b.port == d.src_port && !b.multicast) {
        from = &b;
        fd = b.fd;
        break;
      }
    }
    if (fd < 0) {
      fd = q.fallback_fd[d.family == L3Type::kIpv4 ? 0 : 1];
      count_add(q.unbound_source, 1);
    }
    fds[i] = fd;
    iov[i].iov_base = const_cast<std::uint8_t*>(d.payload);
    iov[i].iov_len = d.len;
    h.msg_iov = &iov[i];
    h.msg_iovlen = 1;
    h.msg_name = &slots[i].to;
    if (d.family == L3Type::kIpv4) {
      auto& sin = reinterpret_cast<sockaddr_in&>(slots[i].to);
      sin = sockaddr_in{};
      sin.sin_family = AF_INET;
      sin.sin_port = htons(d.dst_port);
      std::memcpy(&sin.sin_addr, d.dst_ip, 4);
      h.msg_namelen = sizeof sin;
      if (from) {
        // The frame's source address, on a wildcard-bound socket (the kernel checks it is ours).
        h.msg_control = slots[i].control;
        h.msg_controllen = CMSG_SPACE(sizeof(in_pktinfo));
        cmsghdr* c = CMSG_FIRSTHDR(&h);
        c->cmsg_level = IPPROTO_IP;
        c->cmsg_type = IP_PKTINFO;
        c->cmsg_len = CMSG_LEN(sizeof(in_pktinfo));
        in_pktinfo pi{};
        std::memcpy(&pi.ipi_spec_dst, d.src_ip, 4);
        std::memcpy(CMSG_DATA(c), &pi, sizeof pi);
      }
    } else {
      auto& sin6 = reinterpret_cast<sockaddr_in6&>(slots[i].to);
      sin6 = sockaddr_in6{};
      sin6.sin6_family = AF_INET6;
      sin6.sin6_port = htons(d.dst_port);
      std::memcpy(&sin6.sin6_addr, d.dst_ip, 16);
      h.msg_namelen = sizeof sin6;
      if (from) {
        h.msg_control = slots[i].control;
        h.msg_controllen = CMSG_SPACE(sizeof(in6_pktinfo));
        cmsghdr* c = CMSG_FIRSTHDR(&h);
        c->cmsg_level = IPPROTO_IPV6;
        c->cmsg_type = IPV6_PKTINFO;
        c->cmsg_len = CMSG_LEN(sizeof(in6_pktinfo));
        in6_pktinfo pi{};
        std::memcpy(&pi.ipi6_addr, d.src_ip, 16);
        std::memcpy(CMSG_DATA(c), &pi, sizeof pi);
      }
    }
  }
  // Runs of frames for the same socket go out in one sendmmsg (normally the whole burst).
  unsigned i = 0;
  while (i < n) {
    if (fds[i] < 0) {
      ++bad;
      ++i;
      continue;
    }
    unsigned j = i + 1;
    while (j < n && fds[j] == fds[i]) ++j;
    unsigned done = i;
    bool full = false;
    while (done < j) {
      int r = sendmmsg(fds[i], msgs + done, j - done, MSG_DONTWAIT);
      if (r > 0) {
        for (int k = 0; k < r; ++k) bytes += iov[done + k].iov_len;
        sent_total += static_cast<unsigned>(r);
        done += static_cast<unsigned>(r);
        continue;
      }
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == ENOBUFS) {
        full = true;
        break;
      }
      ++failed;  // unreachable destination, source address not ours: drop this one, go on
      ++done;
    }
    if (full) {
      // The rest stays with the caller: frames [done, n) are not taken.
      count_add(q.would_block, 1);
      taken = done;
      break;
    }
    i = j;
    taken = j;
  }
  if (i >= n) taken = n;
  if (taken) mbuf_free_bulk(pkts, taken);
  count_add(q.counters.tx_packets, sent_total);
  count_add(q.counters.tx_bytes, bytes);
  if (failed + bad) count_add(q.counters.tx_errors, failed + bad);
  if (bad) count_add(q.not_udp, bad);
  return static_cast<std::uint16_t>(taken);
}

}  // namespace rawpipe::socket_pmd
