#include "pmd/host/link_stats.hh"

#include <linux/if_link.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace rawpipe::host {

struct LinkDrops::State {
  int fd = -1;
  int ifindex = 0;
  LinkCounters base;
  std::uint32_t seq = 0;
  std::mutex mu;  // control threads only: one request/response at a time on fd
  ~State() {
    if (fd >= 0) close(fd);
  }
};

Result<LinkCounters> parse_newlink_stats(std::span<const std::uint8_t> msg) {
  if (msg.size() < NLMSG_LENGTH(sizeof(ifinfomsg))) return Status::error("netlink reply too short");
  nlmsghdr h;
  std::memcpy(&h, msg.data(), sizeof(h));
  if (h.nlmsg_type == NLMSG_ERROR) {
    nlmsgerr e{};
    if (msg.size() >= NLMSG_LENGTH(sizeof(e))) std::memcpy(&e, msg.data() + NLMSG_HDRLEN, sizeof(e));
    return Status::errorf("RTM_GETLINK: {}", std::strerror(-e.error));
  }
  if (h.nlmsg_type != RTM_NEWLINK || h.nlmsg_len > msg.size() || h.nlmsg_len < NLMSG_LENGTH(sizeof(ifinfomsg)))
    return Status::error("unexpected netlink reply to RTM_GETLINK");
  std::size_t off = NLMSG_LENGTH(sizeof(ifinfomsg));
  off = NLMSG_ALIGN(off);
  while (off + sizeof(rtattr) <= h.nlmsg_len) {
    rtattr a;
    std::memcpy(&a, msg.data() + off, sizeof(a));
    if (a.rta_len < sizeof(rtattr) || off + a.rta_len > h.nlmsg_len) break;
    if (a.rta_type == IFLA_STATS64 && a.rta_len >= RTA_LENGTH(offsetof(rtnl_link_stats64, rx_missed_errors) + 8)) {
      rtnl_link_stats64 st{};
      std::memcpy(&st, msg.data() + off + RTA_LENGTH(0), std::min<std::size_t>(sizeof(st), a.rta_len - RTA_LENGTH(0)));
      LinkCounters c;
      c.rx_dropped = st.rx_dropped;
      c.rx_missed_errors = st.rx_missed_errors;
      c.rx_fifo_errors = st.rx_fifo_errors;
      c.rx_over_errors = st.rx_over_errors;
      return c;
    }
    off += RTA_ALIGN(a.rta_len);
  }
  return Status::error("the RTM_NEWLINK reply has no IFLA_STATS64 attribute");
}

namespace {

Result<LinkCounters> query(LinkDrops::State& s) {
  struct {
    nlmsghdr h;
    ifinfomsg i;
  } req{};
  req.h.nlmsg_len = sizeof(req);
  req.h.nlmsg_type = RTM_GETLINK;
  req.h.nlmsg_flags = NLM_F_REQUEST;
  req.h.nlmsg_seq = ++s.seq;
  req.i.ifi_family = AF_UNSPEC;
  req.i.ifi_index = s.ifindex;
  if (send(s.fd, &req, sizeof(req), 0) < 0) return Status::errorf("netlink send: {}", std::strerror(errno));
  alignas(nlmsghdr) std::uint8_t buf[16384];
  for (;;) {
    ssize_t n = recv(s.fd, buf, sizeof(buf), 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status::errorf("netlink recv: {}", std::strerror(errno));
    }
    if (static_cast<std::size_t>(n) < sizeof(nlmsghdr)) return Status::error("netlink reply too short");
    nlmsghdr h;
    std::memcpy(&h, buf, sizeof(h));
    if (h.nlmsg_seq != s.seq) continue;  // a stale reply to an earlier, abandoned request
    return parse_newlink_stats({buf, static_cast<std::size_t>(n)});
  }
}

LinkCounters minus(const LinkCounters& a, const LinkCounters& b) {
  // An interface reset can move counters backwards; show 0 rather than a wrapped huge number.
  auto d = [](std::uint64_t x, std::uint64_t y) { return x >= y ? x - y : 0; };
  return {d(a.rx_dropped, b.rx_dropped), d(a.rx_missed_errors, b.rx_missed_errors),
          d(a.rx_fifo_errors, b.rx_fifo_errors), d(a.rx_over_errors, b.rx_over_errors)};
}

}  // namespace

Result<LinkDrops> LinkDrops::open(int ifindex) {
  auto state = std::make_shared<State>();
  state->ifindex = ifindex;
  state->fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
  if (state->fd < 0) return Status::errorf("netlink socket: {}", std::strerror(errno));
  timeval tv{1, 0};  // a stats read must never hang the stats thread
  (void)setsockopt(state->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  auto base = query(*state);
  if (!base) return base.status();
  state->base = base.value();
  LinkDrops d;
  d.state_ = std::move(state);
  return d;
}

Result<LinkCounters> LinkDrops::read() const {
  if (!state_) return Status::error("interface counters not opened");
  std::lock_guard lock(state_->mu);
  auto now = query(*state_);
  if (!now) return now.status();
  return minus(now.value(), state_->base);
}

void LinkDrops::add_to(std::map<std::string, std::uint64_t>& e) const {
  auto c = read();
  if (!c) return;
  e["if_rx_dropped"] = c->rx_dropped;
  e["if_rx_missed_errors"] = c->rx_missed_errors;
  e["if_rx_fifo_errors"] = c->rx_fifo_errors;
  e["if_rx_over_errors"] = c->rx_over_errors;
}

void LinkDrops::add_losses_to(PortLosses& losses) const {
  if (!state_) return;
  auto c = read();
  losses["interface_missed"] = c ? std::optional<std::uint64_t>(c->rx_missed_errors) : std::nullopt;
}

}  // namespace rawpipe::host
