// Netdev -> RDMA device mapping through sysfs (and ethtool when sysfs has no driver link).
//
// A ConnectX or MANA port appears twice: as a kernel netdev (eth0) and as a port of an RDMA device
// (mlx5_0 port 1, mana_0 port 2). sysfs links them: /sys/class/net/IF/device is the PCI function,
// and its infiniband/ directory names the RDMA device(s) on it; dev_port numbers the netdev's port
// on a multi-port device (MANA exposes every vPort of the function on one RDMA device).
// `sysfs_root` is a parameter so tests can point at a fabricated tree.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "rawpipe/status.hh"

namespace rawpipe::rdma {

struct NetdevInfo {
  std::string ifname;
  int ifindex = 0;
  std::string driver;                      // kernel driver: "mlx5_core", "mana", "virtio_net", ...
  std::string driver_source;               // "sysfs" or "ethtool" (for messages)
  std::array<std::uint8_t, 6> mac{};
  std::uint32_t mtu = 0;
  bool oper_up = false;
  std::vector<std::string> rdma_devices;   // names under device/infiniband, sorted
  std::uint8_t rdma_port = 1;              // dev_port + 1 (verbs ports count from 1)
};

// The sysfs root the rdma PMDs read: "/sys", unless RAWPIPE_SYSFS_ROOT names another directory.
// The variable is for tests only (tests/rdma_double runs the unmodified drivers against a
// fabricated tree and a stand-in rdma-core); production never sets it.
std::string default_sysfs_root();

// Fails only when the interface does not exist; missing optional facts stay empty/zero.
Result<NetdevInfo> discover_netdev(std::string_view ifname, const std::string& sysfs_root = "/sys");

// The kernel driver of a netdev by SIOCETHTOOL/ETHTOOL_GDRVINFO (no privilege needed); empty when
// the interface has none or the ioctl fails.
std::string ethtool_driver(std::string_view ifname);

std::string format_mac(const std::array<std::uint8_t, 6>& mac);

}  // namespace rawpipe::rdma
