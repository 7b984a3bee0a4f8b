// Kernel group memberships for ports whose frames bypass the kernel's sockets (af_packet, af_xdp):
// an endpoint rule on a multicast group must still make the host send IGMP/MLD reports on the
// port's interface and program the NIC's multicast filter, or a snooping switch (every market-data
// network) never forwards the group and the NIC may filter it. A kernel UDP socket joined on the
// interface does both; it is never bound to a port, so it receives nothing. Closing it leaves
// the group (the kernel sends the leave report). Control path only.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "rawpipe/status.hh"
#include "pipeline/port/steering.hh"

namespace rawpipe::host {

class GroupMemberships {
 public:
  GroupMemberships() = default;
  GroupMemberships(const GroupMemberships&) = delete;
  GroupMemberships& operator=(const GroupMemberships&) = delete;
  ~GroupMemberships() { leave_all(); }

  // Joins, on ifindex in the calling thread's network namespace, each group a rule's destination
  // names (one multicast host address), with the rule's source when it is one host
  // (source-specific); leaves the groups the rules no longer name. Groups both name stay joined.
  Status update(int ifindex, const std::string& ifname, const SteeringRules& rules);
  // Leaves every group (stop, destructor).
  void leave_all() noexcept;
  // "239.1.1.1", "232.1.1.1 from 10.0.0.5", ... for the path report.
  std::vector<std::string> joined() const;

 private:
  struct Key {
    std::uint8_t family = 4;
    std::array<std::uint8_t, 16> group{}, source{};
    bool has_source = false;
    auto operator<=>(const Key&) const = default;
  };
  static std::string text(const Key& k);
  std::map<Key, int> sockets_;  // one socket per membership: no per-socket membership limit to hit
};

// True for an IPv4 224.0.0.0/4 or IPv6 ff00::/8 host address.
bool is_multicast_host(const IpPrefix& p) noexcept;

}  // namespace rawpipe::host
