// The neighbour resolution cache: which MAC address an IP address on a port's link has, learnt
// from the ARP requests and replies and the IPv6 neighbour solicitations and advertisements the
// lcores see on that port. The Extra API's sendto reads it to address frames (pipeline/send/).
//
// Learning runs on the lcores inside the ARP/ND stage (neigh/stage.hh), only for ARP and ICMPv6
// frames, so it costs nothing per data packet. The table is a fixed array of slots indexed by a
// hash of the address (a newer address evicts an older one in its slot); nothing is allocated
// after create.
//
// Thread-safety: any number of writers (the lcores polling the port) and readers (the sending
// thread). Each slot is a seqlock whose fields are relaxed atomics: a writer takes the slot by
// moving its sequence from even to odd with a compare-and-swap and gives up when another writer
// holds it (the next ARP frame teaches the same thing); a reader retries while the sequence is odd
// or moved during its read. No locks, no system calls.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <optional>

#include "pipeline/stats/lcore_counters.hh"
#include "pipeline/wire/wire.hh"
#include "rawpipe/mbuf.hh"

namespace rawpipe {

class NeighCache {
 public:
  static constexpr unsigned kSlots = 256;  // power of two

  // Records that `ip` (4 or 16 bytes, network order, by family) is at `mac`. Any thread.
  void learn(L3Type family, const std::uint8_t* ip, const wire::MacAddr& mac) noexcept;
  // The MAC learnt for `ip`, if any. Any thread.
  std::optional<wire::MacAddr> lookup(L3Type family, const std::uint8_t* ip) const noexcept;
  // Mappings written (new or changed) since create.
  std::uint64_t learned() const noexcept { return learned_.load(std::memory_order_relaxed); }

 private:
  struct alignas(64) Slot {
    std::atomic<std::uint32_t> seq{0};  // odd while a writer fills the slot
    std::atomic<std::uint64_t> ip_hi{0}, ip_lo{0};
    std::atomic<std::uint64_t> mac{0};  // bits 0..47 the MAC, bits 56..63 the family (0: empty)
  };
  std::array<Slot, kSlots> slots_{};
  std::atomic<std::uint64_t> learned_{0};  // relaxed: a statistic
};

// Learns what one received frame says about its sender: an ARP request or reply (sender IP and
// MAC), an IPv6 neighbour advertisement (target address and its target link-layer option, else
// the frame's source MAC) or a solicitation with a source link-layer option. Anything else, or a
// frame that breaks its format, teaches nothing. Returns whether it learnt.
bool neigh_learn(NeighCache& cache, const std::uint8_t* frame, std::uint32_t len) noexcept;

}  // namespace rawpipe
