// Socket receive: recvmmsg into pool buffers, then a synthesized Ethernet/IP/UDP header in front.
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "pipeline/wire/checksum.hh"
#include "pipeline/wire/wire.hh"
#include "pmd/socket/socket.hh"

namespace rawpipe::socket_pmd {
namespace {

constexpr std::size_t kCmsgSpace =
    CMSG_SPACE(sizeof(in6_pktinfo)) + CMSG_SPACE(sizeof(timespec)) + CMSG_SPACE(sizeof(in_pktinfo));

// Writes the header in front of the payload at m->data() + s.hdr_len and makes it the frame.
inline void synthesize(const BoundSocket& s, Mbuf* m, const sockaddr_storage& from, const msghdr& mh,
                       std::uint32_t payload_len) noexcept {
  std::uint8_t* f = m->data();
  std::memcpy(f, s.header, s.hdr_len);
  std::uint64_t ts = 0;
  const std::uint32_t udp_len = 8 + payload_len;
  std::uint8_t* udp;
  if (s.family == L3Type::kIpv4) {
    std::uint8_t* ip = f + 14;
    udp = ip + 20;
    const auto& sin = reinterpret_cast<const sockaddr_in&>(from);
    std::memcpy(ip + 12, &sin.sin_addr, 4);
    std::memcpy(udp, &sin.sin_port, 2);
    for (cmsghdr* c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(const_cast<msghdr*>(&mh), c)) {
      if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_PKTINFO) {
        in_pktinfo pi;
        std::memcpy(&pi, CMSG_DATA(c), sizeof pi);
        std::memcpy(ip + 16, &pi.ipi_addr, 4);  // the header's destination (a group for multicast)
      } else if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SO_TIMESTAMPNS) {
        timespec t;
        std::memcpy(&t, CMSG_DATA(c), sizeof t);
        ts = std::uint64_t(t.tv_sec) * 1000000000ull + std::uint64_t(t.tv_nsec);
      }
    }
    wire::store_be16(ip + 2, static_cast<std::uint16_t>(20 + udp_len));
    wire::store_be16(ip + 10, 0);
    wire::store_be16(ip + 10, wire::ipv4_header_checksum(ip, 20));
    wire::store_be16(udp + 4, static_cast<std::uint16_t>(udp_len));
    wire::store_be16(udp + 6, 0);
    wire::store_be16(udp + 6, wire::udp_checksum_on_wire(
                                  wire::l4_checksum_ipv4(ip + 12, ip + 16, wire::kIpProtoUdp, udp, udp_len)));
  } else {
    std::uint8_t* ip = f + 14;
    udp = ip + 40;
    const auto& sin6 = reinterpret_cast<const sockaddr_in6&>(from);
    std::memcpy(ip + 8, &sin6.sin6_addr, 16);
    std::memcpy(udp, &sin6.sin6_port, 2);
    for (cmsghdr* c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(const_cast<msghdr*>(&mh), c)) {
      if (c->cmsg_level == IPPROTO_IPV6 && c->cmsg_type == IPV6_PKTINFO) {
        in6_pktinfo pi;
        std::memcpy(&pi, CMSG_DATA(c), sizeof pi);
        std::memcpy(ip + 24, &pi.ipi6_addr, 16);
      } else if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SO_TIMESTAMPNS) {
        timespec t;
        std::memcpy(&t, CMSG_DATA(c), sizeof t);
        ts = std::uint64_t(t.tv_sec) * 1000000000ull + std::uint64_t(t.tv_nsec);
      }
    }
    wire::store_be16(ip + 4, static_cast<std::uint16_t>(udp_len));
    wire::store_be16(udp + 4, static_cast<std::uint16_t>(udp_len));
    wire::store_be16(udp + 6, 0);
    wire::store_be16(udp + 6, wire::udp_checksum_on_wire(
                                  wire::l4_checksum_ipv6(ip + 8, ip + 24, wire::kIpProtoUdp, udp, udp_len)));
  }
  m->data_len = s.hdr_len + payload_len;
  m->timestamp_ns = ts;
  // The kernel verified the checksum before queuing the datagram; ours is computed, so both hold.
  m->flags = static_cast<std::uint16_t>(pkt_flag::kL3CsumGood | pkt_flag::kL4CsumGood |
                                        (ts ? pkt_flag::kTimestamp : 0) | (s.flow_tag ? pkt_flag::kFlowTag : 0));
  m->flow_tag = s.flow_tag;
}

}  // namespace

std::uint16_t rx_burst(void* queue, Mbuf** pkts, std::uint16_t n) noexcept {
  RxQueue& q = *static_cast<RxQueue*>(queue);
  // A1: acquire pairs with R1 in device.cc (add_socket's release of count): the socket's fields
  // are complete.
  const unsigned count = q.set->count.load(std::memory_order_acquire);
  if (count == 0 || n == 0) return 0;
  n = std::min<std::uint16_t>(n, 64);  // recvmmsg state below lives on the stack
  if (q.next >= count) q.next = 0;
  const BoundSocket& s = q.set->sockets[q.next];
  Mbuf* bufs[64];
  if (!q.pool->alloc_bulk(bufs, n)) {
    count_add(q.counters.rx_nombuf, 1);
    return 0;
  }
  mmsghdr msgs[64];
  iovec iov[64];
  sockaddr_storage from[64];
  alignas(cmsghdr) std::uint8_t control[64][kCmsgSpace];
  const std::uint32_t room = bufs[0]->buf_len - bufs[0]->data_off - s.hdr_len;
  for (unsigned i = 0; i < n; ++i) {
    iov[i].iov_base = bufs[i]->data() + s.hdr_len;
    iov[i].iov_len = room;
    msghdr& h = msgs[i].msg_hdr;
    h.msg_name = &from[i];
    h.msg_namelen = sizeof from[i];
    h.msg_iov = &iov[i];
    h.msg_iovlen = 1;
    h.msg_control = control[i];
    h.msg_controllen = sizeof control[i];
    h.msg_flags = 0;
  }
  int got = recvmmsg(s.fd, msgs, n, MSG_DONTWAIT, nullptr);
  if (got < 0) {
    if (errno != EAGAIN && errno != EINTR) count_add(q.read_errors, 1);
    got = 0;
  }
  // Stay on a socket while it fills whole bursts; move on when it runs dry (fair across sockets).
  if (static_cast<unsigned>(got) < n) q.next = q.next + 1 >= count ? 0 : q.next + 1;
  unsigned out = 0;
  std::uint64_t bytes = 0;
  Mbuf* unused[64];
  unsigned unused_n = 0;
  for (int i = 0; i < got; ++i) {
    Mbuf* m = bufs[i];
    if (msgs[i].msg_hdr.msg_flags & MSG_TRUNC) [[unlikely]] {
      count_add(q.truncated, 1);
      unused[unused_n++] = m;
      continue;
    }
    synthesize(s, m, from[i], msgs[i].msg_hdr, msgs[i].msg_len);
    m->port = q.port;
    m->queue = 0;
    bytes += m->data_len;
    pkts[out++] = m;
  }
  for (unsigned i = static_cast<unsigned>(got); i < n; ++i) unused[unused_n++] = bufs[i];
  if (unused_n) mbuf_free_bulk(unused, unused_n);
  if (out) {
    count_add(q.counters.rx_packets, out);
    count_add(q.counters.rx_bytes, bytes);
  }
  return static_cast<std::uint16_t>(out);
}

}  // namespace rawpipe::socket_pmd
