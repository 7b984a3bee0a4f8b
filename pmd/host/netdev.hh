// Facts about a network interface that need an ioctl or sysfs, shared by drivers and `rawpipe
// doctor`: queue counts (what `ethtool -l` prints), MTU and flags, and the NUMA node of the NIC.
// The ioctls act in the calling thread's network namespace; sysfs reads go through `sysfs_root`
// (a parameter so tests can point at a fabricated tree).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "rawpipe/status.hh"

namespace rawpipe::host {

// ETHTOOL_GCHANNELS: maximum and current channel counts. A driver without channel support
// (veth before 5.x, lo) fails the ioctl: the caller then knows nothing about the limit.
struct Channels {
  std::uint32_t max_rx = 0, max_tx = 0, max_combined = 0;
  std::uint32_t rx = 0, tx = 0, combined = 0;
  // Receive queues the interface has now (what an AF_XDP socket can bind to) and at most. Drivers
  // count either dedicated rx channels or combined ones; the larger is the queue count.
  std::uint32_t rx_queues() const noexcept { return rx > combined ? rx : combined; }
  std::uint32_t max_rx_queues() const noexcept { return max_rx > max_combined ? max_rx : max_combined; }
};
Result<Channels> ethtool_channels(std::string_view ifname);

// `ethtool -S`: the driver's statistics by name (ETHTOOL_GSSET_INFO, ETHTOOL_GSTRINGS and
// ETHTOOL_GSTATS). Fails when the driver has none or the interface is missing.
Result<std::map<std::string, std::uint64_t>> ethtool_stats(std::string_view ifname);

struct IfFlags {
  int index = 0;
  std::uint32_t mtu = 0;
  bool up = false;  // IFF_UP: administratively up
};
// Fails when the interface does not exist in this network namespace.
Result<IfFlags> interface_flags(std::string_view ifname);

// /sys/class/net/IF/device/numa_node; -1 when the device has no node (virtual interfaces, single
// node machines) or the file is missing.
int netdev_numa_node(std::string_view ifname, const std::string& sysfs_root = "/sys");

}  // namespace rawpipe::host
