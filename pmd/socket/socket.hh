// Socket poll-mode driver (the unprivileged last rung, like VMA's fallback to standard sockets):
// internal types shared by device.cc, rx.cc and tx.cc.
//
// Each endpoint rule (from update_steering, or from the `listen` config key) becomes an ordinary
// UDP socket bound to the rule's destination port (and address, when it is one host or one
// multicast group; multicast groups are joined on `interface`). rx_burst reads one socket per
// call with recvmmsg straight into pool buffers, leaving room in front of each datagram, then
// writes an Ethernet/IP/UDP header there from a per-socket template made once with
// pipeline/wire/builder.hh: real source address and port (from recvmmsg), real destination
// address (IP_PKTINFO / IPV6_RECVPKTINFO), the socket's port, lengths and checksums. Parse,
// classify and filters then see the datagram exactly as a bypass port would deliver it.
// tx_burst sends each frame's UDP payload with sendmmsg to the frame's destination, from the
// socket bound to the frame's source port (so an echo leaves from the port it arrived on).
#pragma once

#include <netinet/in.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <string>

#include "pipeline/buf/pool.hh"
#include "pipeline/classify/rule.hh"
#include "pipeline/stats/counter.hh"
#include "pipeline/port/driver.hh"

namespace rawpipe::socket_pmd {

inline constexpr std::uint32_t kHdrIpv4 = 14 + 20 + 8;
inline constexpr std::uint32_t kHdrIpv6 = 14 + 40 + 8;
inline constexpr unsigned kMaxSockets = 64;

struct BoundSocket {
  int fd = -1;
  L3Type family = L3Type::kIpv4;
  std::uint16_t port = 0;                   // bound port, host order
  std::array<std::uint8_t, 16> addr{};      // bound address (zero: wildcard), network order
  bool multicast = false;
  std::uint32_t flow_tag = 0;               // the single rule's tag, 0 when several rules share it
  std::uint32_t hdr_len = kHdrIpv4;
  std::uint8_t header[kHdrIpv6] = {};       // Ethernet/IP/UDP template (builder.hh), patched per datagram
  std::string rule_text;
};

// The sockets of a port. Appended on the control thread, read by the lcore: `count` is published
// last (release) and read with acquire, so a socket is complete before the lcore can see it.
// Sockets are never removed while the port runs.
struct SocketSet {
  BoundSocket sockets[kMaxSockets];
  std::atomic<unsigned> count{0};
};

struct RxQueue {
  SocketSet* set = nullptr;
  Pool* pool = nullptr;
  std::uint16_t port = 0;
  unsigned next = 0;                        // socket to read next (lcore only)
  QueueCounters counters;
  std::uint64_t truncated = 0;              // datagrams longer than a buffer (dropped)
  std::uint64_t read_errors = 0;            // recvmmsg failures other than "nothing to read"
};

struct TxQueue {
  SocketSet* set = nullptr;
  int fallback_fd[2] = {-1, -1};            // unbound IPv4 / IPv6 sockets for unknown source ports
  QueueCounters counters;
  std::uint64_t not_udp = 0;                // frames that are not Ethernet/IP/UDP (dropped)
  std::uint64_t unbound_source = 0;         // sent from an ephemeral port: no socket had the source port
  std::uint64_t would_block = 0;
};

std::uint16_t rx_burst(void* queue, Mbuf** pkts, std::uint16_t n) noexcept;
std::uint16_t tx_burst(void* queue, Mbuf** pkts, std::uint16_t n) noexcept;

}  // namespace rawpipe::socket_pmd
