// Echo endpoint through the whole pipeline (engine dispatch) on af_packet and on the socket port:
// a kernel UDP client in a peer namespace gets every datagram back, one at a time and in bursts
// over several flows, and the pipeline's accounting balances.
//
// These are byte-exact echoes. sockperf's client discards replies that still carry its own
// "client" flag (payload byte 9, bit 0), so sockperf ping-pong needs echo_format = "sockperf"
// (which clears it like `sockperf server`); neigh_sockperf_test.cc runs it.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <set>
#include <thread>

#include "rawpipe/config.hh"
#include "rawpipe/pipeline.hh"
#include "pipeline/port/registry.hh"
#include "tests/support/netns.hh"

namespace rawpipe {
namespace {

constexpr const char* kOurIp = "10.83.0.1";
constexpr const char* kPeerIp = "10.83.0.2";

struct Net {
  std::optional<test::NetNs> ours, peer;
  std::optional<test::VethPair> veth;
};

// `our_ip`: whether our end gets the address (the socket port binds through the kernel; the
// af_packet port must not have it, or the kernel would answer with ICMP port unreachable).
Status make_net(Net& n, bool our_ip) {
  auto a = test::NetNs::create("rpec");
  if (!a) return a.status();
  n.ours.emplace(std::move(a).value());
  auto b = test::NetNs::create("rpep");
  if (!b) return b.status();
  n.peer.emplace(std::move(b).value());
  std::vector<std::string> ours;
  if (our_ip) ours.push_back(std::string(kOurIp) + "/24");
  auto v = test::VethPair::create({&*n.ours, "", ours}, {&*n.peer, "", {std::string(kPeerIp) + "/24"}});
  if (!v) return v.status();
  n.veth.emplace(std::move(v).value());
  if (our_ip) return Status::ok();
  auto mac = n.veth->mac_a();
  if (!mac) return mac.status();
  return n.veth->exec_b({"ip", "neigh", "replace", kOurIp, "lladdr", mac.value(), "dev", n.veth->b().name, "nud",
                         "permanent"});
}

std::string config(std::string_view pmd, const std::string& ifname) {
  return fmt::format(R"(
[run]
default_action = "drop"

[[pools]]
name = "rx"
count = 4096
huge_pages = "never"

[[ports]]
name = "p0"
pmd = "{}"
pool = "rx"
interface = "{}"

[[endpoints]]
name = "echo"
action = "echo"
match = ["udp dst {}:7007"]

[[lcores]]
rx = ["p0:0"]
idle_sleep_us = 0
)",
                     pmd, ifname, kOurIp);
}

Result<std::unique_ptr<Pipeline>> start_pipeline(const test::NetNs& ns, const std::string& text) {
  Result<std::unique_ptr<Pipeline>> out = Status::error("not run");
  Status st = ns.run([&] {
    LoadOptions opt;
    opt.find_pmd = &find_pmd;
    auto cfg = load_config_string(text, "echo.toml", opt);
    if (!cfg) {
      out = cfg.status();
      return;
    }
    out = Pipeline::create(cfg->plan);
    if (!out) return;
    Status s = out.value()->start();
    if (!s) out = s;
  });
  if (!st) return st;
  return out;
}

// Sends `count` datagrams one at a time and counts the byte-exact echoes from kOurIp:7007.
unsigned echo_round_trips(const test::NetNs& peer, unsigned count) {
  unsigned good = 0;
  EXPECT_TRUE(peer.run([&] {
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_in d{};
    d.sin_family = AF_INET;
    d.sin_port = htons(7007);
    inet_pton(AF_INET, kOurIp, &d.sin_addr);
    connect(fd, reinterpret_cast<sockaddr*>(&d), sizeof d);
    timeval tv{2, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    for (unsigned i = 0; i < count; ++i) {
      std::string p = fmt::format("echo request {} {}", i, std::string(i % 200, 'x'));
      send(fd, p.data(), p.size(), 0);
      char buf[512];
      ssize_t r = recv(fd, buf, sizeof buf, 0);
      if (r == ssize_t(p.size()) && !std::memcmp(buf, p.data(), p.size())) ++good;
    }
    close(fd);
  }));
  return good;
}

// Sends `count` datagrams over `flows` source ports without waiting, then collects the echoes.
unsigned echo_burst(const test::NetNs& peer, unsigned flows, unsigned per_flow) {
  unsigned good = 0;
  EXPECT_TRUE(peer.run([&] {
    std::vector<int> fds;
    sockaddr_in d{};
    d.sin_family = AF_INET;
    d.sin_port = htons(7007);
    inet_pton(AF_INET, kOurIp, &d.sin_addr);
    for (unsigned f = 0; f < flows; ++f) {
      int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
      int big = 1 << 20;
      setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &big, sizeof big);
      connect(fd, reinterpret_cast<sockaddr*>(&d), sizeof d);
      timeval tv{0, 300000};
      setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
      fds.push_back(fd);
    }
    for (unsigned s = 0; s < per_flow; ++s)
      for (unsigned f = 0; f < flows; ++f) {
        std::string p = fmt::format("flow {} seq {}", f, s);
        send(fds[f], p.data(), p.size(), 0);
      }
    for (unsigned f = 0; f < flows; ++f) {
      std::set<std::string> want;
      for (unsigned s = 0; s < per_flow; ++s) want.insert(fmt::format("flow {} seq {}", f, s));
      char buf[128];
      ssize_t r;
      while ((r = recv(fds[f], buf, sizeof buf, 0)) > 0) good += want.erase(std::string(buf, std::size_t(r)));
      close(fds[f]);
    }
  }));
  return good;
}

void run_echo(std::string_view pmd, bool our_ip) {
  if (auto why = test::netns_unavailable_reason()) GTEST_SKIP() << *why;
  if (!find_pmd(pmd)) GTEST_SKIP() << pmd << " is not built";
  Net net;
  Status st = make_net(net, our_ip);
  ASSERT_TRUE(st) << st.message();
  auto pipeline = start_pipeline(*net.ours, config(pmd, net.veth->a().name));
  ASSERT_TRUE(pipeline) << pipeline.message();
  constexpr unsigned kCount = 500;
  EXPECT_EQ(echo_round_trips(*net.peer, kCount), kCount);
  constexpr unsigned kFlows = 8, kPerFlow = 20;
  EXPECT_EQ(echo_burst(*net.peer, kFlows, kPerFlow), kFlows * kPerFlow);
  ASSERT_TRUE(pipeline.value()->stop());
  Accounting acc = pipeline.value()->accounting();
  EXPECT_TRUE(acc.balanced()) << "rx " << acc.rx_packets << " delivered " << acc.delivered << " transmitted "
                              << acc.transmitted << " dropped " << acc.dropped() << " outstanding "
                              << acc.outstanding();
  EXPECT_EQ(acc.transmitted, kCount + kFlows * kPerFlow);
  EXPECT_EQ(acc.delivered_per_endpoint.at(0), 0u) << "echo transmits, it does not deliver";
  EXPECT_EQ(acc.drops[static_cast<std::size_t>(DropReason::kTxFailed)], 0u);
}

TEST(Echo, AfPacketEchoEndpoint) { run_echo("af_packet", false); }
TEST(Echo, SocketEchoEndpoint) { run_echo("socket", true); }

}  // namespace
}  // namespace rawpipe
