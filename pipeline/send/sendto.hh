// The copying sendto of the Extra API: one UDP datagram, addressed through the port's neighbour
// cache (or its next_hop_mac), built in a buffer of the port's pool and handed to the port's send
// path (send_port.hh). Runs on the application's sending thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "rawpipe/mbuf.hh"

namespace rawpipe {

struct SendPort;

namespace send {

struct Address {
  L3Type family = L3Type::kNone;    // kNone for a source: the port's own address of dst's family
  std::uint8_t ip[16] = {};         // network order; IPv4 in the first 4 bytes
  std::uint16_t port = 0;           // host order
};

// Resends an unanswered ARP request / neighbour solicitation at most this often per destination.
inline constexpr std::uint64_t kSolicitIntervalNs = 100'000'000;

// Sends `len` bytes to dst from src. Returns len, or -errno (EAGAIN: dst not resolved yet, a
// solicitation went out; EADDRNOTAVAIL, EHOSTUNREACH, EMSGSIZE, ENOBUFS) with *why saying what
// to do. The caller checked the handle, the pipeline's state and holds the port's busy flag.
long sendto(SendPort& sp, const Address& dst, const Address& src, const void* buf, std::size_t len, bool dummy,
            std::uint64_t now_ns, std::string* why);

}  // namespace send
}  // namespace rawpipe
