// ARP and IPv6 neighbour-discovery responder for the pipeline's own addresses.
//
// On a port without kernel pass-through (af_packet with no IP on the interface, mlx5/MANA queues,
// af_xdp in whole-queue mode) nobody answers "who has 10.0.0.1?" for the addresses the endpoints
// listen on, so a kernel peer cannot reach them without static neighbour entries. The engine
// hands each received ARP frame and ICMPv6 neighbour solicitation to neigh_respond(); for one of
// the configured addresses it writes the reply (ARP reply, or neighbour advertisement with the
// target link-layer address option) into a buffer, built with pipeline/wire/builder.hh, ready for
// tx_burst on the port it came from. VLAN tags of the request are kept in the reply.
//
// Thread-safety: a NeighTable is immutable after create(); any number of lcores may call
// neigh_respond on it concurrently. No allocation, no system call.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>
#include <vector>

#include "rawpipe/mbuf.hh"
#include "rawpipe/status.hh"
#include "pipeline/wire/wire.hh"

namespace rawpipe {

struct NeighAddress {
  L3Type family = L3Type::kIpv4;
  std::array<std::uint8_t, 16> ip{};  // network order; IPv4 in the first 4 bytes
  wire::MacAddr mac{};                // what we answer with (normally the port's MAC)
};

// Parses "10.0.0.1" or "fd00::1" into a NeighAddress answering with `mac`.
Result<NeighAddress> parse_neigh_address(std::string_view ip, const wire::MacAddr& mac);

class NeighTable {
 public:
  static constexpr std::size_t kMaxAddresses = 64;
  static Result<NeighTable> create(const std::vector<NeighAddress>& addresses);

  const NeighAddress* find_ipv4(const std::uint8_t* ip4) const noexcept;
  const NeighAddress* find_ipv6(const std::uint8_t* ip6) const noexcept;
  std::size_t size() const noexcept { return count_; }
  const NeighAddress& at(std::size_t i) const noexcept { return addrs_[i]; }

 private:
  std::array<NeighAddress, kMaxAddresses> addrs_{};
  std::size_t count_ = 0;
};

enum class NeighOutcome : std::uint8_t {
  kReplied,      // a reply is in `out`
  kNotNeighbour, // neither an ARP request nor a neighbour solicitation: not ours to answer
  kNotOurs,      // asks for an address we do not own (someone else answers, or nobody)
  kMalformed,    // an ARP/NS frame that breaks its format (length, hop limit, checksum, ...)
};

struct NeighResult {
  NeighOutcome outcome = NeighOutcome::kNotNeighbour;
  std::uint32_t len = 0;  // reply length when kReplied
};

// Looks at one received frame. MT-safe; touches only `out`. `cap` of 128 bytes is always enough.
NeighResult neigh_respond(const NeighTable& table, const std::uint8_t* frame, std::uint32_t len, std::uint8_t* out,
                          std::uint32_t cap) noexcept;

// Mbuf form: writes the reply into `reply` (a fresh buffer from the port's pool: data_len set,
// port/queue copied from `request`). The request is not modified and stays owned by the caller.
NeighOutcome neigh_respond(const NeighTable& table, const Mbuf* request, Mbuf* reply) noexcept;

}  // namespace rawpipe
