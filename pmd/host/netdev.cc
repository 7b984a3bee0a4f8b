#include "pmd/host/netdev.hh"

#include <linux/ethtool.h>
#include <linux/sockios.h>
#include <net/if.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>

namespace rawpipe::host {
namespace {

// An AF_INET datagram socket for interface ioctls, closed on scope exit.
struct IoctlSocket {
  int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  ~IoctlSocket() {
    if (fd >= 0) close(fd);
  }
};

Status fill_name(ifreq& ifr, std::string_view ifname) {
  if (ifname.empty() || ifname.size() >= IFNAMSIZ)
    return Status::errorf("'{}' is not a valid interface name (1 to {} characters)", ifname, IFNAMSIZ - 1);
  std::memcpy(ifr.ifr_name, ifname.data(), ifname.size());
  return Status::ok();
}

}  // namespace

Result<Channels> ethtool_channels(std::string_view ifname) {
  ifreq ifr{};
  RAWPIPE_TRY(fill_name(ifr, ifname));
  IoctlSocket s;
  if (s.fd < 0) return Status::errorf("socket: {}", std::strerror(errno));
  struct ethtool_channels ch {};
  ch.cmd = ETHTOOL_GCHANNELS;
  ifr.ifr_data = reinterpret_cast<char*>(&ch);
  if (ioctl(s.fd, SIOCETHTOOL, &ifr) != 0)
    return Status::errorf("ETHTOOL_GCHANNELS on {}: {}", ifname, std::strerror(errno));
  Channels c;
  c.max_rx = ch.max_rx;
  c.max_tx = ch.max_tx;
  c.max_combined = ch.max_combined;
  c.rx = ch.rx_count;
  c.tx = ch.tx_count;
  c.combined = ch.combined_count;
  return c;
}

Result<IfFlags> interface_flags(std::string_view ifname) {
  ifreq ifr{};
  RAWPIPE_TRY(fill_name(ifr, ifname));
  IfFlags f;
  f.index = static_cast<int>(if_nametoindex(std::string(ifname).c_str()));
  if (f.index == 0)
    return Status::errorf("no interface '{}' in this network namespace ({}); `ip link` lists them", ifname,
                          std::strerror(errno));
  IoctlSocket s;
  if (s.fd < 0) return Status::errorf("socket: {}", std::strerror(errno));
  if (ioctl(s.fd, SIOCGIFMTU, &ifr) == 0) f.mtu = static_cast<std::uint32_t>(ifr.ifr_mtu);
  if (ioctl(s.fd, SIOCGIFFLAGS, &ifr) == 0) f.up = (ifr.ifr_flags & IFF_UP) != 0;
  return f;
}

int netdev_numa_node(std::string_view ifname, const std::string& sysfs_root) {
  std::ifstream in(sysfs_root + "/class/net/" + std::string(ifname) + "/device/numa_node");
  int node = -1;
  if (!(in >> node)) return -1;
  return node;
}

}  // namespace rawpipe::host
