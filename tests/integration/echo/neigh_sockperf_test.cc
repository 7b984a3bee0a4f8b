// The pipeline's own addresses on a veth pair with NO static neighbour entries: the kernel peer
// resolves them through the pipeline's ARP/ND responder (port keys `addresses`), then gets UDP
// echoes over IPv4 and IPv6; and sockperf ping-pong against an echo endpoint with
// echo_format = "sockperf" runs for a few seconds with zero loss. On af_packet and on af_xdp in
// whole-queue mode (mode = "all": ARP and NS reach the pipeline, not the kernel).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstring>
#include <regex>

#include "rawpipe/config.hh"
#include "rawpipe/pipeline.hh"
#include "pipeline/neigh/stage.hh"
#include "pipeline/port/registry.hh"
#include "tests/support/netns.hh"

namespace rawpipe {
namespace {

constexpr const char* kOurIp = "10.84.0.1";
constexpr const char* kPeerIp = "10.84.0.2";
constexpr const char* kOurIp6 = "fd00:84::1";
constexpr const char* kPeerIp6 = "fd00:84::2";

struct Net {
  std::optional<test::NetNs> ours, peer;
  std::optional<test::VethPair> veth;
};

// Our end has no IP address: only the pipeline answers for kOurIp / kOurIp6.
Status make_net(Net& n) {
  auto a = test::NetNs::create("rpnq");
  if (!a) return a.status();
  n.ours.emplace(std::move(a).value());
  auto b = test::NetNs::create("rpnp");
  if (!b) return b.status();
  n.peer.emplace(std::move(b).value());
  auto v = test::VethPair::create({&*n.ours, "", {}},
                                  {&*n.peer, "", {std::string(kPeerIp) + "/24", std::string(kPeerIp6) + "/64"}});
  if (!v) return v.status();
  n.veth.emplace(std::move(v).value());
  // The peer keeps veth's default offloads: its kernel sockets leave UDP checksums partial, and
  // the port must complete them on receive (af_packet from the ring's status, af_xdp by checking
  // them in software) or the echo goes back unfinished and the peer drops it (UdpInCsumErrors).
  return Status::ok();
}

std::string config(const std::string& pmd, const std::string& ifname, const std::string& echo_format) {
  return fmt::format(R"(
[[pools]]
name = "rx"
count = 4096
huge_pages = "never"

[[ports]]
name = "p0"
pmd = "{}"
interface = "{}"
{}
addresses = ["{}", "{}"]

[[endpoints]]
name = "echo"
action = "echo"
echo_format = "{}"
match = ["udp dst {}:7007", "udp dst [{}]:7007"]

[[lcores]]
rx = ["p0:0"]
)",
                     pmd, ifname, pmd == "af_xdp" ? "mode = \"all\"" : "", kOurIp, kOurIp6, echo_format, kOurIp,
                     kOurIp6);
}

Result<std::unique_ptr<Pipeline>> start_pipeline(const test::NetNs& ns, const std::string& text) {
  Result<std::unique_ptr<Pipeline>> out = Status::error("not run");
  Status st = ns.run([&] {
    LoadOptions opt;
    opt.find_pmd = &find_pmd;
    auto cfg = load_config_string(text, "neigh.toml", opt);
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

// One-at-a-time byte-exact UDP echoes from `ip`:7007 (IPv4 or IPv6), with a generous first wait
// (the kernel resolves the neighbour before sending the first datagram).
unsigned round_trips(const test::NetNs& peer, const char* ip, unsigned count) {
  unsigned good = 0;
  EXPECT_TRUE(peer.run([&] {
    const bool v6 = std::strchr(ip, ':') != nullptr;
    int fd = socket(v6 ? AF_INET6 : AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_storage d{};
    socklen_t len;
    if (v6) {
      auto* s6 = reinterpret_cast<sockaddr_in6*>(&d);
      s6->sin6_family = AF_INET6;
      s6->sin6_port = htons(7007);
      inet_pton(AF_INET6, ip, &s6->sin6_addr);
      len = sizeof *s6;
    } else {
      auto* s4 = reinterpret_cast<sockaddr_in*>(&d);
      s4->sin_family = AF_INET;
      s4->sin_port = htons(7007);
      inet_pton(AF_INET, ip, &s4->sin_addr);
      len = sizeof *s4;
    }
    connect(fd, reinterpret_cast<sockaddr*>(&d), len);
    timeval tv{3, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    for (unsigned i = 0; i < count; ++i) {
      std::string p = fmt::format("neigh echo {} {}", i, std::string(i % 100, 'n'));
      send(fd, p.data(), p.size(), 0);
      char buf[512];
      ssize_t r = recv(fd, buf, sizeof buf, 0);
      if (r == ssize_t(p.size()) && !std::memcmp(buf, p.data(), p.size())) ++good;
    }
    close(fd);
  }));
  return good;
}

class NeighSockperf : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (auto why = test::netns_unavailable_reason()) GTEST_SKIP() << *why;
    if (!find_pmd(GetParam())) GTEST_SKIP() << GetParam() << " is not built";
    ASSERT_TRUE(make_net(net_));
  }
  Net net_;
};

TEST_P(NeighSockperf, PeerResolvesOurAddressesThroughThePipeline) {
  auto p = start_pipeline(*net_.ours, config(GetParam(), net_.veth->a().name, "bytes"));
  ASSERT_TRUE(p) << p.message();
  EXPECT_EQ(round_trips(*net_.peer, kOurIp, 50), 50u);
  EXPECT_EQ(round_trips(*net_.peer, kOurIp6, 50), 50u);
  // The peer learned our MAC dynamically (no "PERMANENT" entry was ever added).
  auto mac = net_.veth->mac_a();
  ASSERT_TRUE(mac);
  for (const char* ip : {kOurIp, kOurIp6}) {
    auto neigh = test::output_in(&*net_.peer, {"ip", "neigh", "show", ip});
    ASSERT_TRUE(neigh) << neigh.message();
    EXPECT_NE(neigh->find(mac.value()), std::string::npos) << ip << ": " << *neigh;
    EXPECT_EQ(neigh->find("PERMANENT"), std::string::npos) << *neigh;
  }
  ASSERT_TRUE(p.value()->stop());
  NeighStats ns = p.value()->neigh_stats();
  EXPECT_GE(ns.replies, 2u);  // one ARP reply and one neighbour advertisement at least
  EXPECT_EQ(ns.tx_failed, 0u);
  Accounting a = p.value()->accounting();
  EXPECT_TRUE(a.balanced());
  EXPECT_GE(a.transmitted, 100u + ns.replies);
}

TEST_P(NeighSockperf, SockperfPingPongAgainstTheEchoEndpointLosesNothing) {
  if (system("sockperf --version >/dev/null 2>&1") != 0) GTEST_SKIP() << "sockperf is not installed (Debian package sockperf)";
  auto p = start_pipeline(*net_.ours, config(GetParam(), net_.veth->a().name, "sockperf"));
  ASSERT_TRUE(p) << p.message();
  auto out = test::output_in(&*net_.peer, {"timeout", "30", "sockperf", "ping-pong", "-i", kOurIp, "-p", "7007",
                                            "-t", "3", "--msg-size", "64"});
  ASSERT_TRUE(out) << out.message();
  std::smatch m;
  const std::string& text = out.value();
  ASSERT_TRUE(std::regex_search(text, m, std::regex(R"(\[Valid Duration\] RunTime=[0-9.]+ sec; SentMessages=(\d+); ReceivedMessages=(\d+))")))
      << text;
  const std::uint64_t sent = std::stoull(m[1]), received = std::stoull(m[2]);
  EXPECT_GT(sent, 100u) << text;
  EXPECT_EQ(sent, received) << text;
  ASSERT_TRUE(std::regex_search(text, m, std::regex(R"(# dropped messages = (\d+); # duplicated messages = (\d+); # out-of-order messages = (\d+))")))
      << text;
  EXPECT_EQ(m[1], "0");
  EXPECT_EQ(m[2], "0");
  EXPECT_EQ(m[3], "0");
  ASSERT_TRUE(p.value()->stop());
  Accounting a = p.value()->accounting();
  EXPECT_TRUE(a.balanced());
  EXPECT_GE(a.transmitted, received);
}

INSTANTIATE_TEST_SUITE_P(Ports, NeighSockperf, ::testing::Values("af_packet", "af_xdp"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace rawpipe
