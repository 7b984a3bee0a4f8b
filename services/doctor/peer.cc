// Which interface transmits into a port's interface, and whether it leaves checksums to offload.
// A veth's frames come from its peer: with the peer's tx-checksumming on, its kernel sockets hand
// the frame over with CHECKSUM_PARTIAL and the UDP/TCP checksum field holding only the
// pseudo-header sum, which a raw-packet reader sees as a wrong checksum. The peer often lives in
// another network namespace: rtnetlink names it by (IFLA_LINK, IFLA_LINK_NETNSID), the named
// namespaces under /run/netns are matched to that id with RTM_GETNSID, and the ethtool ioctl runs
// on a socket made inside the peer's namespace (an ioctl acts in its socket's namespace).
#include <fcntl.h>
#include <linux/ethtool.h>
#include <linux/if_link.h>
#include <linux/net_namespace.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/sockios.h>
#include <net/if.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <thread>

#include "services/doctor/peer.hh"

namespace rawpipe::doctor {
namespace {

namespace fs = std::filesystem;

struct Fd {
  int fd = -1;
  explicit Fd(int f) : fd(f) {}
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
};

// One request, one reply on a fresh NETLINK_ROUTE socket; the reply's payload or an error text.
Result<std::vector<std::uint8_t>> rtnl_request(const void* req, std::size_t len) {
  Fd s(::socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE));
  if (s.fd < 0) return Status::errorf("netlink socket: {}", std::strerror(errno));
  if (::send(s.fd, req, len, 0) < 0) return Status::errorf("netlink send: {}", std::strerror(errno));
  std::vector<std::uint8_t> buf(16384);
  const ssize_t n = ::recv(s.fd, buf.data(), buf.size(), 0);
  if (n < 0) return Status::errorf("netlink recv: {}", std::strerror(errno));
  const auto* h = reinterpret_cast<const nlmsghdr*>(buf.data());
  if (!NLMSG_OK(h, static_cast<unsigned>(n))) return Status::error("netlink: short reply");
  if (h->nlmsg_type == NLMSG_ERROR) {
    const auto* e = static_cast<const nlmsgerr*>(NLMSG_DATA(h));
    return Status::errorf("netlink: {}", std::strerror(-e->error));
  }
  buf.resize(static_cast<std::size_t>(n));
  return buf;
}

struct LinkInfo {
  std::string kind;       // IFLA_INFO_KIND: "veth", ...
  int link = 0;           // IFLA_LINK: the peer's ifindex
  int link_netnsid = -1;  // IFLA_LINK_NETNSID: where the peer lives, -1 = this namespace
};

Result<LinkInfo> link_info(int ifindex) {
  struct {
    nlmsghdr h;
    ifinfomsg i;
  } req{};
  req.h.nlmsg_len = sizeof req;
  req.h.nlmsg_type = RTM_GETLINK;
  req.h.nlmsg_flags = NLM_F_REQUEST;
  req.i.ifi_family = AF_UNSPEC;
  req.i.ifi_index = ifindex;
  auto reply = rtnl_request(&req, sizeof req);
  if (!reply) return reply.status();
  const auto* h = reinterpret_cast<const nlmsghdr*>(reply->data());
  LinkInfo out;
  const auto* ifi = static_cast<const ifinfomsg*>(NLMSG_DATA(h));
  int len = static_cast<int>(h->nlmsg_len) - static_cast<int>(NLMSG_LENGTH(sizeof *ifi));
  for (auto* a = IFLA_RTA(ifi); RTA_OK(a, len); a = RTA_NEXT(a, len)) {
    if (a->rta_type == IFLA_LINK && RTA_PAYLOAD(a) >= 4) std::memcpy(&out.link, RTA_DATA(a), 4);
    if (a->rta_type == IFLA_LINK_NETNSID && RTA_PAYLOAD(a) >= 4) std::memcpy(&out.link_netnsid, RTA_DATA(a), 4);
    if (a->rta_type == IFLA_LINKINFO) {
      int inner = static_cast<int>(RTA_PAYLOAD(a));
      for (auto* b = static_cast<rtattr*>(RTA_DATA(a)); RTA_OK(b, inner); b = RTA_NEXT(b, inner))
        if (b->rta_type == IFLA_INFO_KIND)
          out.kind.assign(static_cast<const char*>(RTA_DATA(b)), strnlen(static_cast<const char*>(RTA_DATA(b)), RTA_PAYLOAD(b)));
    }
  }
  return out;
}

// The id this namespace gives to the namespace behind `ns_fd`, or -1.
int nsid_of(int ns_fd) {
  struct {
    nlmsghdr h;
    rtgenmsg g;
    char pad[3];
    rtattr a;
    std::uint32_t fd;
  } req{};
  req.h.nlmsg_len = sizeof req;
  req.h.nlmsg_type = RTM_GETNSID;
  req.h.nlmsg_flags = NLM_F_REQUEST;
  req.g.rtgen_family = AF_UNSPEC;
  req.a.rta_type = NETNSA_FD;
  req.a.rta_len = RTA_LENGTH(sizeof(std::uint32_t));
  req.fd = static_cast<std::uint32_t>(ns_fd);
  auto reply = rtnl_request(&req, sizeof req);
  if (!reply) return -1;
  const auto* h = reinterpret_cast<const nlmsghdr*>(reply->data());
  if (h->nlmsg_type != RTM_NEWNSID) return -1;
  int len = static_cast<int>(h->nlmsg_len) - static_cast<int>(NLMSG_LENGTH(sizeof(rtgenmsg)));
  const auto* a = reinterpret_cast<const rtattr*>(static_cast<const std::uint8_t*>(NLMSG_DATA(h)) + NLMSG_ALIGN(sizeof(rtgenmsg)));
  for (; RTA_OK(a, len); a = RTA_NEXT(a, len))
    if (a->rta_type == NETNSA_NSID && RTA_PAYLOAD(a) >= 4) {
      int id = -1;
      std::memcpy(&id, RTA_DATA(a), 4);
      return id;
    }
  return -1;
}

struct PeerOffload {
  std::string ifname;
  bool tx_csum = false;
};

// `ethtool -k`'s tx-checksumming (ETHTOOL_GTXCSUM: any of the NETIF_F_CSUM_MASK features on) of
// ifindex, asked through socket `s` (which decides the namespace).
Result<PeerOffload> tx_checksum(int s, int ifindex) {
  ifreq ifr{};
  ifr.ifr_ifindex = ifindex;
  if (::ioctl(s, SIOCGIFNAME, &ifr) != 0) return Status::errorf("no interface with index {}: {}", ifindex, std::strerror(errno));
  PeerOffload out;
  out.ifname = ifr.ifr_name;
  ethtool_value v{};
  v.cmd = ETHTOOL_GTXCSUM;
  ifr.ifr_data = reinterpret_cast<char*>(&v);
  if (::ioctl(s, SIOCETHTOOL, &ifr) != 0)
    return Status::errorf("ETHTOOL_GTXCSUM on {}: {}", out.ifname, std::strerror(errno));
  out.tx_csum = v.data != 0;
  return out;
}

Result<PeerOffload> tx_checksum_here(int ifindex) {
  Fd s(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (s.fd < 0) return Status::errorf("socket: {}", std::strerror(errno));
  return tx_checksum(s.fd, ifindex);
}

// The same, inside the namespace behind ns_fd: only a helper thread enters it, so the calling
// thread's namespace never changes.
Result<PeerOffload> tx_checksum_in(int ns_fd, int ifindex) {
  Result<PeerOffload> out = Status::error("not run");
  std::thread t([&] {
    if (::setns(ns_fd, CLONE_NEWNET) != 0) {
      out = Status::errorf("cannot enter its network namespace: {} (needs CAP_SYS_ADMIN)", std::strerror(errno));
      return;
    }
    out = tx_checksum_here(ifindex);
  });
  t.join();
  return out;
}

}  // namespace

void read_peer_offload(NetdevFacts& f, const std::string& run_netns) {
  const int ifindex = static_cast<int>(if_nametoindex(f.name.c_str()));
  if (ifindex == 0) return;
  if (f.name == "lo") {
    // Locally sent frames loop back to the same interface.
    auto own = tx_checksum_here(ifindex);
    if (!own) {
      f.peer_error = own.message();
      return;
    }
    f.peer_known = true;
    f.peer_name = f.peer_ifname = own->ifname;
    f.peer_tx_csum = own->tx_csum;
    return;
  }
  auto info = link_info(ifindex);
  if (!info) {
    f.peer_error = info.message();
    return;
  }
  if (info->kind != "veth") return;  // a NIC: the sender's hardware finished the checksums
  if (info->link <= 0) {
    f.peer_error = "the veth does not report its peer";
    return;
  }
  if (info->link_netnsid < 0) {
    auto p = tx_checksum_here(info->link);
    if (!p) {
      f.peer_error = p.message();
      return;
    }
    f.peer_known = true;
    f.peer_name = f.peer_ifname = p->ifname;
    f.peer_exec = run_netns.empty() ? std::string() : fmt::format("ip netns exec {} ", run_netns);
    f.peer_tx_csum = p->tx_csum;
    return;
  }
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/run/netns", ec)) {
    Fd ns(::open(e.path().c_str(), O_RDONLY | O_CLOEXEC));
    if (ns.fd < 0 || nsid_of(ns.fd) != info->link_netnsid) continue;
    auto p = tx_checksum_in(ns.fd, info->link);
    const std::string ns_name = e.path().filename().string();
    if (!p) {
      f.peer_error = fmt::format("its peer (ifindex {}) is in namespace {}: {}", info->link, ns_name, p.message());
      return;
    }
    f.peer_known = true;
    f.peer_ifname = p->ifname;
    f.peer_name = fmt::format("{} (namespace {})", p->ifname, ns_name);
    f.peer_exec = fmt::format("ip netns exec {} ", ns_name);
    f.peer_tx_csum = p->tx_csum;
    return;
  }
  f.peer_error = fmt::format("its peer (ifindex {}) is in another network namespace (id {}) without a name under "
                             "/run/netns, so its offloads cannot be read from here",
                             info->link, info->link_netnsid);
}

std::string current_netns_name() {
  // `ip netns exec NAME` bind-mounts nothing for us to read back, but the namespace's inode
  // matches one of /run/netns.
  struct stat self {};
  if (::stat("/proc/self/ns/net", &self) != 0) return {};
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/run/netns", ec)) {
    struct stat st {};
    if (::stat(e.path().c_str(), &st) == 0 && st.st_ino == self.st_ino && st.st_dev == self.st_dev)
      return e.path().filename().string();
  }
  return {};
}

}  // namespace rawpipe::doctor
