#include "pmd/rdma/discovery.hh"

#include <linux/ethtool.h>
#include <linux/sockios.h>
#include <net/if.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

namespace rawpipe::rdma {
namespace {

namespace fs = std::filesystem;

std::string read_line(const fs::path& p) {
  std::ifstream in(p);
  std::string line;
  if (in) std::getline(in, line);
  return line;
}

bool parse_mac(const std::string& text, std::array<std::uint8_t, 6>& mac) {
  unsigned v[6];
  if (std::sscanf(text.c_str(), "%x:%x:%x:%x:%x:%x", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5]) != 6) return false;
  for (int i = 0; i < 6; ++i) mac[i] = static_cast<std::uint8_t>(v[i]);
  return true;
}

}  // namespace

std::string default_sysfs_root() {
  const char* root = std::getenv("RAWPIPE_SYSFS_ROOT");
  return root && *root ? std::string(root) : std::string("/sys");
}

std::string format_mac(const std::array<std::uint8_t, 6>& mac) {
  return fmt::format("{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}", mac[0], mac[1], mac[2], mac[3], mac[4], mac[5]);
}

std::string ethtool_driver(std::string_view ifname) {
  if (ifname.empty() || ifname.size() >= IFNAMSIZ) return {};
  int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return {};
  ethtool_drvinfo info{};
  info.cmd = ETHTOOL_GDRVINFO;
  ifreq ifr{};
  std::memcpy(ifr.ifr_name, ifname.data(), ifname.size());
  ifr.ifr_data = reinterpret_cast<char*>(&info);
  int rc = ioctl(fd, SIOCETHTOOL, &ifr);
  close(fd);
  if (rc != 0) return {};
  return std::string(info.driver, strnlen(info.driver, sizeof(info.driver)));
}

Result<NetdevInfo> discover_netdev(std::string_view ifname, const std::string& sysfs_root) {
  if (ifname.empty() || ifname.size() >= IFNAMSIZ || ifname.find('/') != std::string_view::npos)
    return Status::errorf("'{}' is not a valid network interface name", ifname);
  const fs::path net = fs::path(sysfs_root) / "class/net" / std::string(ifname);
  std::error_code ec;
  if (!fs::exists(net, ec))
    return Status::errorf("no network interface '{}' on this host ({} does not exist; 'ip link' lists them)", ifname,
                          net.string());
  NetdevInfo info;
  info.ifname = std::string(ifname);
  info.ifindex = std::atoi(read_line(net / "ifindex").c_str());
  info.mtu = static_cast<std::uint32_t>(std::strtoul(read_line(net / "mtu").c_str(), nullptr, 10));
  info.oper_up = read_line(net / "operstate") == "up";
  parse_mac(read_line(net / "address"), info.mac);
  std::string dev_port = read_line(net / "dev_port");
  if (!dev_port.empty()) info.rdma_port = static_cast<std::uint8_t>(std::strtoul(dev_port.c_str(), nullptr, 0) + 1);

  const fs::path driver_link = net / "device/driver";
  fs::path target = fs::read_symlink(driver_link, ec);
  if (!ec && !target.empty()) {
    info.driver = target.filename().string();
    info.driver_source = "sysfs";
  } else if (sysfs_root == "/sys") {
    info.driver = ethtool_driver(ifname);
    if (!info.driver.empty()) info.driver_source = "ethtool";
  }

  const fs::path ib = net / "device/infiniband";
  if (fs::is_directory(ib, ec)) {
    for (const auto& entry : fs::directory_iterator(ib, ec)) info.rdma_devices.push_back(entry.path().filename().string());
    std::sort(info.rdma_devices.begin(), info.rdma_devices.end());
  }
  return info;
}

}  // namespace rawpipe::rdma
