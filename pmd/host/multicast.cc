#include "pmd/host/multicast.hh"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

namespace rawpipe::host {

bool is_multicast_host(const IpPrefix& p) noexcept {
  if (!p.is_host()) return false;
  return p.family == L3Type::kIpv4 ? (p.addr[0] & 0xf0) == 0xe0 : p.addr[0] == 0xff;
}

std::string GroupMemberships::text(const Key& k) {
  char g[INET6_ADDRSTRLEN] = "?", s[INET6_ADDRSTRLEN] = "?";
  const int af = k.family == 4 ? AF_INET : AF_INET6;
  inet_ntop(af, k.group.data(), g, sizeof g);
  if (!k.has_source) return g;
  inet_ntop(af, k.source.data(), s, sizeof s);
  return fmt::format("{} from {}", g, s);
}

Status GroupMemberships::update(int ifindex, const std::string& ifname, const SteeringRules& rules) {
  std::map<Key, bool> wanted;
  for (const SteeringRule& r : rules.rules) {
    const MatchRule& m = r.match;
    if (!m.dst_ip || !is_multicast_host(*m.dst_ip)) continue;
    Key k;
    k.family = m.dst_ip->family == L3Type::kIpv4 ? 4 : 6;
    k.group = m.dst_ip->addr;
    if (m.src_ip && m.src_ip->is_host() && m.src_ip->family == m.dst_ip->family) {
      k.has_source = true;
      k.source = m.src_ip->addr;
    }
    wanted[k] = true;
  }
  for (auto it = sockets_.begin(); it != sockets_.end();) {
    if (wanted.count(it->first)) {
      ++it;
      continue;
    }
    close(it->second);  // the kernel leaves the group
    it = sockets_.erase(it);
  }
  for (const auto& [k, unused] : wanted) {
    if (sockets_.count(k)) continue;
    const int af = k.family == 4 ? AF_INET : AF_INET6;
    int fd = socket(af, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return Status::errorf("cannot open a socket to join {} on {}: {}", text(k), ifname, std::strerror(errno));
    sockaddr_storage group{}, source{};
    if (k.family == 4) {
      auto* g = reinterpret_cast<sockaddr_in*>(&group);
      g->sin_family = AF_INET;
      std::memcpy(&g->sin_addr, k.group.data(), 4);
      auto* s = reinterpret_cast<sockaddr_in*>(&source);
      s->sin_family = AF_INET;
      std::memcpy(&s->sin_addr, k.source.data(), 4);
    } else {
      auto* g = reinterpret_cast<sockaddr_in6*>(&group);
      g->sin6_family = AF_INET6;
      std::memcpy(&g->sin6_addr, k.group.data(), 16);
      auto* s = reinterpret_cast<sockaddr_in6*>(&source);
      s->sin6_family = AF_INET6;
      std::memcpy(&s->sin6_addr, k.source.data(), 16);
    }
    const int level = k.family == 4 ? IPPROTO_IP : IPPROTO_IPV6;
    int rc;
    if (k.has_source) {
      group_source_req req{};
      req.gsr_interface = static_cast<std::uint32_t>(ifindex);
      req.gsr_group = group;
      req.gsr_source = source;
      rc = setsockopt(fd, level, MCAST_JOIN_SOURCE_GROUP, &req, sizeof req);
    } else {
      group_req req{};
      req.gr_interface = static_cast<std::uint32_t>(ifindex);
      req.gr_group = group;
      rc = setsockopt(fd, level, MCAST_JOIN_GROUP, &req, sizeof req);
    }
    if (rc != 0) {
      const int err = errno;
      close(fd);
      return Status::errorf("cannot join multicast group {} on {}: {}{}", text(k), ifname, std::strerror(err),
                            err == ENOBUFS ? " (net.ipv4.igmp_max_memberships or the MLD limit is reached)"
                            : err == ENODEV || err == EADDRNOTAVAIL
                                ? " (the interface needs to be up, with IPv6 enabled for an IPv6 group)"
                                : "");
    }
    sockets_[k] = fd;
  }
  return Status::ok();
}

void GroupMemberships::leave_all() noexcept {
  for (const auto& [k, fd] : sockets_) close(fd);
  sockets_.clear();
}

std::vector<std::string> GroupMemberships::joined() const {
  std::vector<std::string> out;
  for (const auto& [k, fd] : sockets_) out.push_back(text(k));
  return out;
}

}  // namespace rawpipe::host
