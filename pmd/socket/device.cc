// Socket poll-mode driver: config keys, sockets from steering rules, multicast joins, statistics.
#include <arpa/inet.h>
#include <linux/sock_diag.h>
#include <net/if.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <algorithm>
#include <cstring>
#include <mutex>
#include <optional>
#include <vector>

#include "pipeline/config/section.hh"
#include "pipeline/wire/builder.hh"
#include "pmd/drivers.hh"
#include "pmd/socket/socket.hh"

namespace rawpipe {
namespace socket_pmd {
namespace {

struct Spec final : PortSpec {
  std::string interface;
  std::vector<MatchRule> listen;
  int rcvbuf = 0;

  Result<std::unique_ptr<Port>> open(const PortEnv& env) const override;
  std::uint16_t max_rx_queues() const override { return 1; }
  // One socket behind every tx queue handle: a second queue would be a
  // second writer on it.
  std::uint16_t max_tx_queues() const override { return 1; }
};

std::string addr_text(L3Type family, const std::array<std::uint8_t, 16>& a, std::uint16_t port) {
  char buf[INET6_ADDRSTRLEN] = "?";
  inet_ntop(family == L3Type::kIpv4 ? AF_INET : AF_INET6, a.data(), buf, sizeof buf);
  return family == L3Type::kIpv4 ? fmt::format("{}:{}", buf, port) : fmt::format("[{}]:{}", buf, port);
}

class SocketPort final : public Port {
 public:
  SocketPort(const Spec& spec, const PortEnv& env, int ifindex, wire::MacAddr mac)
      : spec_(spec), env_(env), ifindex_(ifindex), mac_(mac) {
    rxq_.set = &set_;
    rxq_.pool = env.pool;
    rxq_.port = env.port_id;
    txq_.set = &set_;
  }
  ~SocketPort() override {
    for (unsigned i = 0; i < set_.count.load(std::memory_order_relaxed); ++i) ::close(set_.sockets[i].fd);
    for (int fd : txq_.fallback_fd)
      if (fd >= 0) ::close(fd);
  }

  Status open_fallbacks() {
    txq_.fallback_fd[0] = ::socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (txq_.fallback_fd[0] < 0)
      return Status::errorf("socket port '{}': cannot create a UDP socket: {}", env_.name, std::strerror(errno));
    // IPv6 may be disabled on the host; IPv6 frames then count as transmit errors.
    txq_.fallback_fd[1] = ::socket(AF_INET6, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    return Status::ok();
  }

  Status add_rule(const MatchRule& rule, std::uint32_t flow_tag);

  std::string_view pmd_name() const noexcept override { return "socket"; }
  std::string path_report() const override;
  PortCaps caps() const override {
    PortCaps c;
    c.rx_checksum = true;
    c.flow_rules = true;   // only the endpoints' ports are bound: nothing else arrives
    c.kernel_pass = true;  // everything else stays with the kernel
    c.timestamps = true;
    c.tx = true;
    return c;
  }
  Status start() override { return Status::ok(); }
  // rx_burst and tx_burst hold no buffers between calls. Group memberships end with the run: the
  // kernel sends the leave reports now rather than whenever the port is destroyed.
  void stop() override {
    for (unsigned i = 0; i < set_.count.load(std::memory_order_acquire); ++i) {
      const BoundSocket& b = set_.sockets[i];
      if (!b.multicast) continue;
      group_req req{};
      req.gr_interface = static_cast<std::uint32_t>(ifindex_);
      if (b.family == L3Type::kIpv4) {
        auto* g = reinterpret_cast<sockaddr_in*>(&req.gr_group);
        g->sin_family = AF_INET;
        std::memcpy(&g->sin_addr, b.addr.data(), 4);
      } else {
        auto* g = reinterpret_cast<sockaddr_in6*>(&req.gr_group);
        g->sin6_family = AF_INET6;
        std::memcpy(&g->sin6_addr, b.addr.data(), 16);
      }
      // Drops the whole membership, source-specific ones included.
      (void)setsockopt(b.fd, b.family == L3Type::kIpv4 ? IPPROTO_IP : IPPROTO_IPV6, MCAST_LEAVE_GROUP, &req, sizeof req);
    }
  }
  RxQueueHandle rx_queue(std::uint16_t) override { return {&rx_burst, &rxq_}; }
  TxQueueHandle tx_queue(std::uint16_t) override { return {&tx_burst, &txq_}; }
  PortStats stats() const override;
  Status update_steering(const SteeringRules& rules) override {
    std::lock_guard lock(control_mu_);
    for (const SteeringRule& r : rules.rules) RAWPIPE_TRY(add_rule(r.match, r.flow_tag));
    return Status::ok();
  }

 private:
  Status add_socket(L3Type family, const std::array<std::uint8_t, 16>& addr, bool multicast, std::uint16_t port,
                    std::uint32_t flow_tag, const std::string& rule_text,
                    const std::optional<std::array<std::uint8_t, 16>>& source = std::nullopt);
  Status join_source(int fd, L3Type family, const std::array<std::uint8_t, 16>& group,
                     const std::array<std::uint8_t, 16>& source, const std::string& rule_text);

  Spec spec_;
  PortEnv env_;
  int ifindex_;
  wire::MacAddr mac_;
  SocketSet set_;
  RxQueue rxq_;
  TxQueue txq_;
  std::mutex control_mu_;  // control path: update_steering from more than one thread
};

Status SocketPort::add_rule(const MatchRule& rule, std::uint32_t flow_tag) {
  if (rule.ip_proto != kIpProtoAny && rule.ip_proto != IPPROTO_UDP)
    return Status::errorf("socket port '{}': rule '{}' is not UDP; the socket port receives UDP datagrams only",
                          env_.name, rule.text);
  if (!rule.dst_port)
    return Status::errorf("socket port '{}': rule '{}' has no destination port; a socket must bind one "
                          "(write e.g. 'udp dst *:9000')", env_.name, rule.text);
  if (rule.dst_ip) {
    const IpPrefix& p = *rule.dst_ip;
    std::array<std::uint8_t, 16> addr{};
    bool multicast = false;
    if (p.is_host()) {
      addr = p.addr;
      multicast = p.family == L3Type::kIpv4 ? (addr[0] & 0xf0) == 0xe0 : addr[0] == 0xff;
    }
    // A wider prefix binds the wildcard address; classify keeps only what the prefix matches.
    // A group with one source host is joined source-specific (IGMPv3/MLDv2).
    std::optional<std::array<std::uint8_t, 16>> source;
    if (multicast && rule.src_ip && rule.src_ip->is_host() && rule.src_ip->family == p.family)
      source = rule.src_ip->addr;
    return add_socket(p.family, addr, multicast, *rule.dst_port, flow_tag, rule.text, source);
  }
  RAWPIPE_TRY(add_socket(L3Type::kIpv4, {}, false, *rule.dst_port, flow_tag, rule.text));
  if (txq_.fallback_fd[1] < 0) return Status::ok();  // no IPv6 on this host
  return add_socket(L3Type::kIpv6, {}, false, *rule.dst_port, flow_tag, rule.text);
}

// Source-specific membership (MCAST_JOIN_SOURCE_GROUP) of a bound socket: IGMPv3/MLDv2 ALLOW.
Status SocketPort::join_source(int fd, L3Type family, const std::array<std::uint8_t, 16>& group,
                               const std::array<std::uint8_t, 16>& source, const std::string& rule_text) {
  group_source_req req{};
  req.gsr_interface = static_cast<std::uint32_t>(ifindex_);
  const int af = family == L3Type::kIpv4 ? AF_INET : AF_INET6;
  for (auto [ss, a] : {std::pair{&req.gsr_group, &group}, std::pair{&req.gsr_source, &source}}) {
    if (af == AF_INET) {
      auto* sin = reinterpret_cast<sockaddr_in*>(ss);
      sin->sin_family = AF_INET;
      std::memcpy(&sin->sin_addr, a->data(), 4);
    } else {
      auto* sin6 = reinterpret_cast<sockaddr_in6*>(ss);
      sin6->sin6_family = AF_INET6;
      std::memcpy(&sin6->sin6_addr, a->data(), 16);
    }
  }
  if (setsockopt(fd, af == AF_INET ? IPPROTO_IP : IPPROTO_IPV6, MCAST_JOIN_SOURCE_GROUP, &req, sizeof req) < 0 &&
      errno != EADDRINUSE)
    return Status::errorf("socket port '{}': MCAST_JOIN_SOURCE_GROUP for rule '{}': {}", env_.name, rule_text,
                          std::strerror(errno));
  return Status::ok();
}

Status SocketPort::add_socket(L3Type family, const std::array<std::uint8_t, 16>& addr, bool multicast,
                              std::uint16_t port, std::uint32_t flow_tag, const std::string& rule_text,
                              const std::optional<std::array<std::uint8_t, 16>>& source) {
  const unsigned count = set_.count.load(std::memory_order_relaxed);  // only this thread appends
  for (unsigned i = 0; i < count; ++i) {
    BoundSocket& s = set_.sockets[i];
    if (s.family == family && s.port == port && s.addr == addr) {
      if (multicast && source) RAWPIPE_TRY(join_source(s.fd, family, addr, *source, rule_text));
      if (s.flow_tag != flow_tag) s.flow_tag = 0;  // shared by rules with different tags: no tag
      s.rule_text += ", " + rule_text;
      return Status::ok();
    }
  }
  const std::string where = addr_text(family, addr, port);
  if (count == kMaxSockets)
    return Status::errorf("socket port '{}': more than {} distinct bound addresses (adding {} for rule '{}')",
                          env_.name, kMaxSockets, where, rule_text);
  const int af = family == L3Type::kIpv4 ? AF_INET : AF_INET6;
  int fd = ::socket(af, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return Status::errorf("socket port '{}': socket() for {}: {}", env_.name, where, std::strerror(errno));
  auto fail = [&](std::string_view what) {
    int err = errno;
    ::close(fd);
    std::string hint;
    if (err == EADDRINUSE) hint = "; another socket holds this port: stop it or choose another port";
    if (err == EADDRNOTAVAIL) hint = "; the address is not configured on this host";
    if (err == EACCES) hint = "; ports below 1024 need CAP_NET_BIND_SERVICE";
    return Status::errorf("socket port '{}': {} for {} (rule '{}'): {}{}", env_.name, what, where, rule_text,
                          std::strerror(err), hint);
  };
  int one = 1, zero = 0;
  if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0) return fail("SO_REUSEADDR");
  if (setsockopt(fd, SOL_SOCKET, SO_TIMESTAMPNS, &one, sizeof one) < 0) return fail("SO_TIMESTAMPNS");
  if (spec_.rcvbuf) {
    if (setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &spec_.rcvbuf, sizeof spec_.rcvbuf) < 0) return fail("SO_RCVBUF");
  } else {
    // The kernel's default (net.core.rmem_default, 208 KiB) holds a few hundred datagrams: a
    // burst longer than one lcore pause overflows it. Room for a full receive ring of full
    // buffers instead; SO_RCVBUFFORCE passes net.core.rmem_max with CAP_NET_ADMIN, and without
    // it SO_RCVBUF gets as close as rmem_max allows (the effective size is in the path report).
    const int want = static_cast<int>(std::min<std::uint64_t>(
        std::uint64_t(std::max<std::uint32_t>(env_.rx_ring_size, 256)) * env_.pool->buf_size(), 1u << 30));
    if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &want, sizeof want) < 0)
      (void)setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &want, sizeof want);
  }
  if (family == L3Type::kIpv4) {
    if (setsockopt(fd, IPPROTO_IP, IP_PKTINFO, &one, sizeof one) < 0) return fail("IP_PKTINFO");
    sockaddr_in sin{};
    sin.sin_family = AF_INET;
    sin.sin_port = htons(port);
    std::memcpy(&sin.sin_addr, addr.data(), 4);
    if (bind(fd, reinterpret_cast<sockaddr*>(&sin), sizeof sin) < 0) return fail("bind");
    if (multicast) {
      // Without this a socket also gets groups other sockets on the host joined for the same port.
      if (setsockopt(fd, IPPROTO_IP, IP_MULTICAST_ALL, &zero, sizeof zero) < 0) return fail("IP_MULTICAST_ALL");
      ip_mreqn mr{};
      std::memcpy(&mr.imr_multiaddr, addr.data(), 4);
      mr.imr_ifindex = ifindex_;
      if (source) {
        if (Status st = join_source(fd, family, addr, *source, rule_text); !st) {
          ::close(fd);
          return st;
        }
      } else if (setsockopt(fd, IPPROTO_IP, IP_ADD_MEMBERSHIP, &mr, sizeof mr) < 0) {
        return fail("IP_ADD_MEMBERSHIP");
      }
    }
  } else {
    if (setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one) < 0) return fail("IPV6_V6ONLY");
    if (setsockopt(fd, IPPROTO_IPV6, IPV6_RECVPKTINFO, &one, sizeof one) < 0) return fail("IPV6_RECVPKTINFO");
    sockaddr_in6 sin6{};
    sin6.sin6_family = AF_INET6;
    sin6.sin6_port = htons(port);
    std::memcpy(&sin6.sin6_addr, addr.data(), 16);
    if (multicast && (addr[1] & 0x0f) <= 2) sin6.sin6_scope_id = static_cast<std::uint32_t>(ifindex_);
    if (bind(fd, reinterpret_cast<sockaddr*>(&sin6), sizeof sin6) < 0) return fail("bind");
    if (multicast) {
      if (setsockopt(fd, IPPROTO_IPV6, IPV6_MULTICAST_ALL, &zero, sizeof zero) < 0) return fail("IPV6_MULTICAST_ALL");
      ipv6_mreq mr{};
      std::memcpy(&mr.ipv6mr_multiaddr, addr.data(), 16);
      mr.ipv6mr_interface = static_cast<unsigned>(ifindex_);
      if (source) {
        if (Status st = join_source(fd, family, addr, *source, rule_text); !st) {
          ::close(fd);
          return st;
        }
      } else if (setsockopt(fd, IPPROTO_IPV6, IPV6_JOIN_GROUP, &mr, sizeof mr) < 0) {
        return fail("IPV6_JOIN_GROUP");
      }
    }
  }
  BoundSocket& s = set_.sockets[count];
  s.fd = fd;
  s.family = family;
  s.port = port;
  s.addr = addr;
  s.multicast = multicast;
  s.flow_tag = flow_tag;
  s.rule_text = rule_text;
  // The header template: made once by the frame builder, patched per datagram by rx_burst.
  wire::FrameSpec f;
  f.eth.dst = mac_;
  f.ip_version = family == L3Type::kIpv4 ? 4 : 6;
  f.l4 = wire::L4Kind::kUdp;
  f.udp = {0, port};
  std::size_t len = wire::write_frame(f, s.header, sizeof s.header);
  if (len != (family == L3Type::kIpv4 ? kHdrIpv4 : kHdrIpv6)) {
    ::close(fd);
    return Status::errorf("socket port '{}': internal error: header template of {} bytes", env_.name, len);
  }
  s.hdr_len = static_cast<std::uint32_t>(len);
  if (env_.pool && env_.pool->data_room() <= s.hdr_len) {
    ::close(fd);
    return Status::errorf("socket port '{}': pool '{}' buffers leave no room for a datagram", env_.name,
                          env_.pool->name());
  }
  // R1: release pairs with A1/A2 (rx_burst/tx_burst acquire of count): the socket is complete.
  set_.count.store(count + 1, std::memory_order_release);
  return Status::ok();
}

int effective_rcvbuf(int fd) {
  int v = 0;
  socklen_t len = sizeof v;
  return getsockopt(fd, SOL_SOCKET, SO_RCVBUF, &v, &len) == 0 ? v : 0;
}

std::string SocketPort::path_report() const {
  const unsigned count = set_.count.load(std::memory_order_acquire);
  std::string out = fmt::format(
      "socket rxq0: {} UDP socket(s) read with recvmmsg (one socket per burst, one system call); each datagram is "
      "copied once by the kernel into a pool buffer behind a synthesized Ethernet/IP/UDP header with its real "
      "addresses{}\n",
      count, count ? fmt::format("; receive buffer {} KiB per socket", effective_rcvbuf(set_.sockets[0].fd) / 1024)
                   : std::string());
  for (unsigned i = 0; i < count; ++i) {
    const BoundSocket& s = set_.sockets[i];
    out += fmt::format("  {}{} for '{}'\n", addr_text(s.family, s.addr, s.port),
                       s.multicast ? fmt::format(" joined on {}", spec_.interface.empty() ? std::string("the routed interface")
                                                                                          : spec_.interface)
                                   : std::string(),
                       s.rule_text);
  }
  out += "socket txq0: sendmmsg of each frame's UDP payload to its destination, from the socket bound to its source port\n";
  return out;
}

PortStats SocketPort::stats() const {
  PortStats s;
  QueueCounters rx = load_counters(rxq_.counters);
  std::uint64_t trunc = count_load(rxq_.truncated), rerr = count_load(rxq_.read_errors);
  rx.rx_errors = trunc + rerr;
  s.rx_queues.push_back(rx);
  QueueCounters tx = load_counters(txq_.counters);
  s.tx_queues.push_back(tx);
  s.extended["rx_truncated"] = trunc;
  s.extended["rx_read_errors"] = rerr;
  s.extended["tx_not_udp"] = count_load(txq_.not_udp);
  s.extended["tx_unbound_source"] = count_load(txq_.unbound_source);
  s.extended["tx_would_block"] = count_load(txq_.would_block);
  s.extended["sockets"] = set_.count.load(std::memory_order_acquire);
  // What the kernel dropped because a socket's receive buffer was full.
  std::uint64_t kernel_drops = 0;
  bool unreadable = false;
  for (unsigned i = 0; i < set_.count.load(std::memory_order_acquire); ++i) {
    // SO_MEMINFO's last field (sk_drops) counts datagrams the socket dropped: a full receive
    // buffer, or a bad UDP checksum found when the datagram was queued.
    std::uint32_t mem[SK_MEMINFO_VARS] = {};
    socklen_t len = sizeof mem;
    if (getsockopt(set_.sockets[i].fd, SOL_SOCKET, SO_MEMINFO, mem, &len) == 0)
      kernel_drops += mem[SK_MEMINFO_DROPS];
    else
      unreadable = true;
  }
  s.extended["kernel_drops"] = kernel_drops;
  s.losses["socket_drops"] = unreadable ? std::nullopt : std::optional<std::uint64_t>(kernel_drops);
  return s;
}

Result<std::unique_ptr<Port>> Spec::open(const PortEnv& env) const {
  if (env.rx_queues != 1 || env.tx_queues != 1)
    return Status::errorf("socket port '{}': one receive and one transmit queue only (got {} and {})", env.name,
                          env.rx_queues, env.tx_queues);
  if (env.pool == nullptr) return Status::errorf("socket port '{}': no receive pool", env.name);
  int ifindex = 0;
  wire::MacAddr mac{};
  if (!interface.empty()) {
    ifindex = static_cast<int>(if_nametoindex(interface.c_str()));
    if (ifindex == 0)
      return Status::errorf("socket port '{}': no interface named '{}' in this network namespace; check `ip link`",
                            env.name, interface);
    int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd >= 0) {
      ifreq ifr{};
      std::snprintf(ifr.ifr_name, sizeof ifr.ifr_name, "%s", interface.c_str());
      if (ioctl(fd, SIOCGIFHWADDR, &ifr) == 0) std::memcpy(mac.data(), ifr.ifr_hwaddr.sa_data, 6);
      ::close(fd);
    }
  }
  auto port = std::make_unique<SocketPort>(*this, env, ifindex, mac);
  RAWPIPE_TRY(port->open_fallbacks());
  for (const MatchRule& r : listen) RAWPIPE_TRY(port->add_rule(r, 0));
  return std::unique_ptr<Port>(std::move(port));
}

Result<std::unique_ptr<PortSpec>> parse(ConfigSection& section) {
  auto spec = std::make_unique<Spec>();
  spec->interface = section.string("interface", "");
  for (const std::string& text : section.string_list("listen")) {
    auto rule = parse_match_rule(text);
    if (!rule) {
      section.fail("listen", rule.message());
      continue;
    }
    if (!rule->dst_port) section.fail("listen", fmt::format("rule '{}' needs a destination port to bind", text));
    if (rule->ip_proto != kIpProtoAny && rule->ip_proto != IPPROTO_UDP)
      section.fail("listen", fmt::format("rule '{}' is not UDP", text));
    spec->listen.push_back(std::move(rule).value());
  }
  spec->rcvbuf = static_cast<int>(section.integer("rcvbuf", 0, 1 << 30, 0));
  RAWPIPE_TRY(section.status());
  return std::unique_ptr<PortSpec>(std::move(spec));
}

}  // namespace
}  // namespace socket_pmd

namespace {
const KeyDoc kSocketDocs[] = {
    {"interface", "string", "an interface name", "\"\" (every interface)", "interface the sockets bind to (SO_BINDTODEVICE)"},
    {"listen", "string list", "UDP rules with a destination port", "[]", "extra sockets to open besides the endpoints' rules"},
    {"rcvbuf", "integer", "0 to 1073741824", "0 (the kernel default)", "SO_RCVBUF of each socket, in bytes"},
};
}  // namespace
const KeyTable kSocketKeys{"socket", "[[ports]] pmd = \"socket\"", "ordinary UDP sockets (unprivileged)", kSocketDocs};

const PmdDriver kSocketDriver{
    .name = "socket",
    .summary = "ordinary UDP sockets per endpoint (unprivileged): recvmmsg batches become frames with real addresses",
    .parse = &socket_pmd::parse,
    .keys = &kSocketKeys,
};

}  // namespace rawpipe
