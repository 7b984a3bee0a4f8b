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
#include <algorithm>
#include <fstream>
#include <vector>

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

Result<std::map<std::string, std::uint64_t>> ethtool_stats(std::string_view ifname) {
  ifreq ifr{};
  RAWPIPE_TRY(fill_name(ifr, ifname));
  IoctlSocket s;
  if (s.fd < 0) return Status::errorf("socket: {}", std::strerror(errno));
  // The count first: sset_info carries one u32 after its header per requested set.
  alignas(ethtool_sset_info) std::uint8_t info_buf[sizeof(ethtool_sset_info) + sizeof(std::uint32_t)] = {};
  auto* info = reinterpret_cast<ethtool_sset_info*>(info_buf);
  info->cmd = ETHTOOL_GSSET_INFO;
  info->sset_mask = 1ull << ETH_SS_STATS;
  ifr.ifr_data = reinterpret_cast<char*>(info);
  if (ioctl(s.fd, SIOCETHTOOL, &ifr) != 0)
    return Status::errorf("ETHTOOL_GSSET_INFO on {}: {}", ifname, std::strerror(errno));
  std::uint32_t count = 0;
  std::memcpy(&count, info_buf + sizeof(ethtool_sset_info), sizeof count);
  const std::uint32_t n = (info->sset_mask & (1ull << ETH_SS_STATS)) ? count : 0;
  if (n == 0) return Status::errorf("{}: the driver reports no ethtool statistics", ifname);
  std::vector<std::uint8_t> names(sizeof(ethtool_gstrings) + std::size_t(n) * ETH_GSTRING_LEN);
  auto* gs = reinterpret_cast<ethtool_gstrings*>(names.data());
  gs->cmd = ETHTOOL_GSTRINGS;
  gs->string_set = ETH_SS_STATS;
  gs->len = n;
  ifr.ifr_data = reinterpret_cast<char*>(gs);
  if (ioctl(s.fd, SIOCETHTOOL, &ifr) != 0)
    return Status::errorf("ETHTOOL_GSTRINGS on {}: {}", ifname, std::strerror(errno));
  std::vector<std::uint8_t> values(sizeof(struct ethtool_stats) + std::size_t(n) * sizeof(std::uint64_t));
  auto* st = reinterpret_cast<struct ethtool_stats*>(values.data());
  st->cmd = ETHTOOL_GSTATS;
  st->n_stats = n;
  ifr.ifr_data = reinterpret_cast<char*>(st);
  if (ioctl(s.fd, SIOCETHTOOL, &ifr) != 0)
    return Status::errorf("ETHTOOL_GSTATS on {}: {}", ifname, std::strerror(errno));
  std::map<std::string, std::uint64_t> out;
  const std::uint32_t got = std::min(n, st->n_stats);
  for (std::uint32_t i = 0; i < got; ++i) {
    const char* name = reinterpret_cast<const char*>(gs->data) + std::size_t(i) * ETH_GSTRING_LEN;
    std::uint64_t v = 0;
    std::memcpy(&v, values.data() + sizeof(struct ethtool_stats) + std::size_t(i) * sizeof v, sizeof v);
    out[std::string(name, strnlen(name, ETH_GSTRING_LEN))] = v;
  }
  return out;
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
