// The interface's own drop counters (what `ip -s link` shows), for ports that receive through
// the kernel's driver (af_xdp, af_packet): frames the NIC or driver dropped before any socket or
// XDP program saw them. Read over rtnetlink (RTM_GETLINK, IFLA_STATS64) on a socket opened when
// the port opens, so the counters come from the port's network namespace whichever thread asks.
// The counters are since the interface came up; a LinkDrops reports them relative to when it was
// created, so a port shows only what happened while it ran (the whole interface, not only the
// port's queues: the kernel does not split them by queue).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>

#include "rawpipe/status.hh"
#include "pipeline/port/port.hh"

namespace rawpipe::host {

struct LinkCounters {
  std::uint64_t rx_dropped = 0;        // dropped by the stack or driver (no buffer, unknown protocol)
  std::uint64_t rx_missed_errors = 0;  // missed by the NIC (its FIFO or descriptor ring was full)
  std::uint64_t rx_fifo_errors = 0;
  std::uint64_t rx_over_errors = 0;
};

// Parses one RTM_NEWLINK message (netlink header included) for its IFLA_STATS64 attribute.
Result<LinkCounters> parse_newlink_stats(std::span<const std::uint8_t> message);

class LinkDrops {
 public:
  LinkDrops() = default;
  // Opens the netlink socket in the calling thread's network namespace and takes the baseline.
  static Result<LinkDrops> open(int ifindex);
  // Now minus the baseline. Control path; MT-safe (a mutex serialises the netlink exchange).
  Result<LinkCounters> read() const;
  // Adds if_rx_dropped, if_rx_missed_errors, if_rx_fifo_errors and if_rx_over_errors to a port's
  // extended stats; adds nothing when never opened or the read fails.
  void add_to(std::map<std::string, std::uint64_t>& extended) const;
  // Adds "interface_missed" (rx_missed_errors: frames the NIC had no descriptor for, a loss before
  // any socket) to a port's losses, or marks it unknown when the read fails. The FIFO/overrun
  // counters are left out: drivers count events there, or the same frames again. The
  // interface's rx_dropped is left out too: it counts what the kernel stack dropped after
  // AF_PACKET taps and XDP had the frame (unknown protocols, extra VLAN tags), not rawpipe losses.
  void add_losses_to(PortLosses& losses) const;

  struct State;  // the socket, the baseline and the mutex (link_stats.cc)

 private:
  std::shared_ptr<State> state_;
};

}  // namespace rawpipe::host
