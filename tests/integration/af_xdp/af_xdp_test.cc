// The AF_XDP port against real kernel traffic: a veth pair between two network namespaces, kernel
// UDP sockets sending on one side, the port receiving on the other.
//
// What the kernel does here (see also /work/shared/reference/kernel-notes.md): veth runs XDP in
// its NAPI poll. Once a native XDP program is attached, veth turns GSO/TSO off on the peer so
// that every skb the peer sends (kernel sockets included) goes through that NAPI path and meets
// the program. Generic (skb) mode runs the program from the receive path of the stack instead.
// Both are exercised below, each with the exact per-flow count.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <map>
#include <thread>

#include "pipeline/buf/pool.hh"
#include "pipeline/classify/rule.hh"
#include "rawpipe/config.hh"
#include "pipeline/config/section.hh"
#include "rawpipe/pipeline.hh"
#include "pipeline/wire/builder.hh"
#include "pipeline/port/registry.hh"
#include "tests/support/netns.hh"
#include "pipeline/port/driver.hh"

namespace rawpipe {
namespace {

using namespace std::chrono_literals;
using test::NetNs;
using test::VethPair;

constexpr const char* kRxIp4 = "10.210.0.1";
constexpr const char* kTxIp4 = "10.210.0.2";
constexpr const char* kRxIp6 = "fd10::1";

struct Parsed {
  int family = 0;
  std::uint16_t dst_port = 0;
  const std::uint8_t* payload = nullptr;
  std::size_t payload_len = 0;
};

// Enough of Ethernet/IPv4/IPv6/UDP to check what arrived, bounds-checked.
Parsed parse_udp(const Mbuf* m) {
  Parsed p;
  const std::uint8_t* d = m->data();
  std::size_t len = m->data_len;
  if (len < 14) return p;
  std::uint16_t type = std::uint16_t(d[12] << 8 | d[13]);
  std::size_t l4 = 0;
  if (type == 0x0800 && len >= 34 && d[23] == 17) {
    l4 = 14 + (d[14] & 0xf) * 4u;
    p.family = 4;
  } else if (type == 0x86dd && len >= 54 && d[20] == 17) {
    l4 = 54;
    p.family = 6;
  }
  if (!p.family || len < l4 + 8) return Parsed{};
  p.dst_port = std::uint16_t(d[l4 + 2] << 8 | d[l4 + 3]);
  std::size_t udp_len = std::size_t(d[l4 + 4] << 8 | d[l4 + 5]);
  if (udp_len < 8 || l4 + udp_len > len) return Parsed{};
  p.payload = d + l4 + 8;
  p.payload_len = udp_len - 8;
  return p;
}

// Payload of datagram `seq` of flow `flow`: its identity, then a pattern derived from both.
std::vector<std::uint8_t> payload_for(unsigned flow, unsigned seq, std::size_t len) {
  std::vector<std::uint8_t> p(len);
  std::memcpy(p.data(), &flow, 4);
  std::memcpy(p.data() + 4, &seq, 4);
  for (std::size_t i = 8; i < len; ++i) p[i] = static_cast<std::uint8_t>(flow * 31 + seq * 7 + i);
  return p;
}

// One ICMP echo round trip from the calling thread's namespace (a raw socket: the host has no
// ping binary). True when the reply came back within the timeout.
bool icmp_echo(int family, const char* dst, std::chrono::milliseconds timeout = 1000ms) {
  int s = family == 4 ? socket(AF_INET, SOCK_RAW | SOCK_CLOEXEC, IPPROTO_ICMP)
                      : socket(AF_INET6, SOCK_RAW | SOCK_CLOEXEC, IPPROTO_ICMPV6);
  if (s < 0) return false;
  std::uint8_t req[16] = {static_cast<std::uint8_t>(family == 4 ? 8 : 128), 0, 0, 0, 0x12, 0x34, 0, 1};
  std::memcpy(req + 8, "rawpipe!", 8);
  if (family == 4) {
    // The kernel fills in the ICMPv6 checksum, not the ICMPv4 one.
    std::uint32_t sum = 0;
    for (int i = 0; i < 16; i += 2) sum += std::uint32_t(req[i] << 8 | req[i + 1]);
    while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
    std::uint16_t c = static_cast<std::uint16_t>(~sum);
    req[2] = static_cast<std::uint8_t>(c >> 8);
    req[3] = static_cast<std::uint8_t>(c);
  }
  sockaddr_storage ss{};
  socklen_t sl;
  if (family == 4) {
    auto* a = reinterpret_cast<sockaddr_in*>(&ss);
    a->sin_family = AF_INET;
    inet_pton(AF_INET, dst, &a->sin_addr);
    sl = sizeof(sockaddr_in);
  } else {
    auto* a = reinterpret_cast<sockaddr_in6*>(&ss);
    a->sin6_family = AF_INET6;
    inet_pton(AF_INET6, dst, &a->sin6_addr);
    sl = sizeof(sockaddr_in6);
  }
  bool ok = false;
  if (sendto(s, req, sizeof(req), 0, reinterpret_cast<sockaddr*>(&ss), sl) == sizeof(req)) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    timeval tv{0, 100000};
    setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    std::uint8_t buf[256];
    while (!ok && std::chrono::steady_clock::now() < deadline) {
      ssize_t n = recv(s, buf, sizeof(buf), 0);
      if (n <= 0) continue;
      // IPv4 raw sockets deliver the IP header too; IPv6 ones start at ICMPv6.
      std::size_t off = family == 4 ? (buf[0] & 0xf) * 4u : 0;
      if (std::size_t(n) >= off + 16 && buf[off] == (family == 4 ? 0 : 129) && buf[off + 4] == 0x12 &&
          buf[off + 5] == 0x34 && std::memcmp(buf + off + 8, "rawpipe!", 8) == 0)
        ok = true;
    }
  }
  close(s);
  return ok;
}

struct Flow {
  int family;
  const char* dst;
  std::uint16_t port;
};

class AfXdp : public ::testing::Test {
 protected:
  void SetUp() override {
    if (auto why = test::netns_unavailable_reason()) GTEST_SKIP() << *why;
    if (!find_pmd("af_xdp")) GTEST_SKIP() << "af_xdp driver not built";
    auto a = NetNs::create("rpxr");
    ASSERT_TRUE(a) << a.message();
    rx_ns_ = std::make_unique<NetNs>(std::move(a).value());
    auto b = NetNs::create("rpxt");
    ASSERT_TRUE(b) << b.message();
    tx_ns_ = std::make_unique<NetNs>(std::move(b).value());
    auto pair = VethPair::create({rx_ns_.get(), "", {std::string(kRxIp4) + "/24", std::string(kRxIp6) + "/64"}},
                                 {tx_ns_.get(), "", {std::string(kTxIp4) + "/24", "fd10::2/64"}});
    ASSERT_TRUE(pair) << pair.message();
    veth_ = std::make_unique<VethPair>(std::move(pair).value());
    PoolConfig pc;
    pc.name = "afxdp";
    pc.count = 4096;
    pc.buf_size = 2048;
    pc.huge_pages = HugePages::kNever;
    pc.exact_stride = true;  // UMEM frames (the config loader sets this for af_xdp ports)
    auto pool = Pool::create(pc);
    ASSERT_TRUE(pool) << pool.message();
    pool_ = std::move(pool).value();
  }

  void TearDown() override {
    if (port_) {
      (void)rx_ns_->run([&] {
        port_->stop();
        port_.reset();
      });
    }
    veth_.reset();
    tx_ns_.reset();
    rx_ns_.reset();
  }

  // Opens and starts the port inside the receiving namespace with `extra` config keys.
  void open_port(const std::string& extra, const std::vector<std::string>& rules) {
    std::string text = fmt::format("interface = '{}'\n{}", veth_->a().name, extra);
    auto section = ConfigSection::parse_string(text, "af_xdp_test.toml");
    ASSERT_TRUE(section) << section.message();
    auto spec = find_pmd("af_xdp")->parse(section.value());
    ASSERT_TRUE(spec) << spec.message();
    ASSERT_TRUE(section.value().finish()) << section.value().finish().message();
    SteeringRules steering;
    for (std::size_t i = 0; i < rules.size(); ++i) {
      auto r = parse_match_rule(rules[i]);
      ASSERT_TRUE(r) << r.message();
      steering.rules.push_back({r.value(), static_cast<std::uint16_t>(i), 0});
    }
    PortEnv env;
    env.name = "xdp0";
    env.pool = pool_.get();
    env.rx_ring_size = 2048;
    env.tx_ring_size = 1024;
    Status st;
    ASSERT_TRUE(rx_ns_->run([&] {
      auto port = spec.value()->open(env);
      if (!port) {
        st = port.status();
        return;
      }
      port_ = std::move(port).value();
      st = port_->update_steering(steering);
      if (st) st = port_->start();
    }));
    ASSERT_TRUE(st) << st.message();
    rxq_ = port_->rx_queue(0);
    ASSERT_NE(rxq_.burst, nullptr);
  }

  // Sends `per_flow` datagrams on every flow from the peer namespace, never more than `window`
  // ahead of what the port has received (so a slow receiver cannot make the count inexact), while
  // this thread receives. Returns the frames received, per flow, checked byte for byte.
  std::map<unsigned, unsigned> send_and_receive(const std::vector<Flow>& flows, unsigned per_flow,
                                                std::size_t payload_len, std::vector<std::string>* problems,
                                                bool ignore_non_udp = false) {
    std::atomic<unsigned> received{0};
    std::atomic<bool> sender_done{false}, receiver_done{false};
    std::string sender_error;
    std::thread sender = tx_ns_->spawn([&] {
      int s4 = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
      int s6 = socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0);
      unsigned sent = 0;
      for (unsigned seq = 0; seq < per_flow && sender_error.empty(); ++seq) {
        for (unsigned f = 0; f < flows.size(); ++f) {
          // Relaxed: flow control only. A receiver that gave up (frames lost) releases the sender.
          while (sent - received.load(std::memory_order_relaxed) > 256 && !receiver_done.load(std::memory_order_relaxed))
            std::this_thread::sleep_for(50us);
          auto payload = payload_for(f, seq, payload_len);
          ssize_t rc;
          if (flows[f].family == 4) {
            sockaddr_in a{};
            a.sin_family = AF_INET;
            a.sin_port = htons(flows[f].port);
            inet_pton(AF_INET, flows[f].dst, &a.sin_addr);
            rc = sendto(s4, payload.data(), payload.size(), 0, reinterpret_cast<sockaddr*>(&a), sizeof(a));
          } else {
            sockaddr_in6 a{};
            a.sin6_family = AF_INET6;
            a.sin6_port = htons(flows[f].port);
            inet_pton(AF_INET6, flows[f].dst, &a.sin6_addr);
            rc = sendto(s6, payload.data(), payload.size(), 0, reinterpret_cast<sockaddr*>(&a), sizeof(a));
          }
          if (rc != static_cast<ssize_t>(payload.size())) {
            sender_error = fmt::format("sendto flow {}: {}", f, std::strerror(errno));
            break;
          }
          ++sent;
        }
      }
      close(s4);
      close(s6);
      sender_done = true;
    });

    std::map<unsigned, unsigned> per;
    std::vector<std::vector<bool>> seen(flows.size(), std::vector<bool>(per_flow));
    const unsigned total = per_flow * static_cast<unsigned>(flows.size());
    auto deadline = std::chrono::steady_clock::now() + 20s;
    unsigned got = 0;
    Mbuf* burst[32];
    while (got < total && std::chrono::steady_clock::now() < deadline) {
      std::uint16_t n = rxq_(burst, 32);
      for (unsigned i = 0; i < n; ++i) {
        Mbuf* m = burst[i];
        EXPECT_TRUE(pool_->contains(m));
        Parsed p = parse_udp(m);
        if (p.family == 0 && ignore_non_udp) continue;  // the peer's own IPv6 ND/MLD in "all" mode
        unsigned flow = 0, seq = 0;
        if (p.payload_len == payload_len) {
          std::memcpy(&flow, p.payload, 4);
          std::memcpy(&seq, p.payload + 4, 4);
        }
        if (p.payload_len != payload_len || flow >= flows.size() || seq >= per_flow ||
            flows[flow].port != p.dst_port || flows[flow].family != p.family) {
          problems->push_back(fmt::format("unexpected frame of {} bytes (family {}, port {})", m->data_len,
                                          p.family, p.dst_port));
        } else if (seen[flow][seq]) {
          problems->push_back(fmt::format("duplicate flow {} seq {}", flow, seq));
        } else if (std::memcmp(p.payload, payload_for(flow, seq, payload_len).data(), payload_len) != 0) {
          problems->push_back(fmt::format("payload of flow {} seq {} differs", flow, seq));
        } else {
          seen[flow][seq] = true;
          ++per[flow];
        }
        ++got;
      }
      // Relaxed: flow control only, no data is published through it.
      received.store(got, std::memory_order_relaxed);
      mbuf_free_bulk(burst, n);
      if (sender_done && !sender_error.empty()) break;
    }
    receiver_done = true;
    sender.join();
    if (!sender_error.empty()) problems->push_back(sender_error);
    return per;
  }

  std::uint64_t ext(const char* key) {
    auto s = port_->stats();
    auto it = s.extended.find(key);
    return it == s.extended.end() ? ~0ull : it->second;
  }

  std::unique_ptr<NetNs> rx_ns_, tx_ns_;
  std::unique_ptr<VethPair> veth_;
  std::unique_ptr<Pool> pool_;
  std::unique_ptr<Port> port_;
  RxQueueHandle rxq_;
};

const std::vector<Flow> kFlows = {
    {4, kRxIp4, 5000}, {4, kRxIp4, 5001}, {4, kRxIp4, 5002}, {6, kRxIp6, 6000}, {6, kRxIp6, 6001}};
const std::vector<std::string> kRules = {"udp dst 10.210.0.1:5000", "udp dst 10.210.0.1:5001",
                                         "udp dst 10.210.0.1:5002", "udp dst [fd10::1]:6000",
                                         "udp dst [fd10::1]:6001"};

void check_exact(const std::map<unsigned, unsigned>& per, unsigned n, const std::vector<std::string>& problems) {
  for (unsigned f = 0; f < kFlows.size(); ++f) {
    auto it = per.find(f);
    EXPECT_EQ(it == per.end() ? 0u : it->second, n) << "flow " << f << " (port " << kFlows[f].port << ")";
  }
  EXPECT_TRUE(problems.empty()) << problems.size() << " problems, first: " << problems.front();
}

class AfXdpAttach : public AfXdp, public ::testing::WithParamInterface<std::string> {};

TEST_P(AfXdpAttach, KernelUdpSendersReachTheirFlowsExactlyAndEverythingElseReachesTheKernel) {
  const unsigned kPerFlow = 2000;
  ASSERT_NO_FATAL_FAILURE(open_port(fmt::format("attach = '{}'\n", GetParam()), kRules));
  std::string report = port_->path_report();
  EXPECT_NE(report.find(GetParam()), std::string::npos) << report;
  EXPECT_NE(report.find("copy mode"), std::string::npos) << "veth has no zero-copy: " << report;
  EXPECT_EQ(ext(GetParam() == "native" ? "xdp_attach_native" : "xdp_attach_generic"), 1u);
  EXPECT_EQ(ext("copy_mode_queues"), 1u);

  std::vector<std::string> problems;
  auto per = send_and_receive(kFlows, kPerFlow, 64, &problems);
  check_exact(per, kPerFlow, problems);
  EXPECT_EQ(ext("xdp_redirected"), kPerFlow * kFlows.size());

  // Not steered: ICMP echo (ARP and ND already had to work for the datagrams above to leave the
  // peer) and a UDP port no rule names, which a kernel socket on the XDP side receives.
  bool ping4 = false, ping6 = false;
  ASSERT_TRUE(tx_ns_->run([&] {
    ping4 = icmp_echo(4, kRxIp4);
    ping6 = icmp_echo(6, kRxIp6);
  }));
  EXPECT_TRUE(ping4) << "ICMP echo to " << kRxIp4 << " got no reply: the kernel must still answer";
  EXPECT_TRUE(ping6) << "ICMPv6 echo to " << kRxIp6 << " got no reply: the kernel must still answer";
  int ks = -1;
  ASSERT_TRUE(rx_ns_->run([&] {
    ks = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(5999);
    inet_pton(AF_INET, kRxIp4, &a.sin_addr);
    ASSERT_EQ(bind(ks, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0) << std::strerror(errno);
  }));
  ASSERT_TRUE(tx_ns_->run([&] {
    int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(5999);
    inet_pton(AF_INET, kRxIp4, &a.sin_addr);
    for (int i = 0; i < 10; ++i) sendto(s, "kernel", 6, 0, reinterpret_cast<sockaddr*>(&a), sizeof(a));
    close(s);
  }));
  timeval tv{2, 0};
  setsockopt(ks, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  int kernel_got = 0;
  char buf[16];
  while (kernel_got < 10 && recv(ks, buf, sizeof(buf), 0) == 6) ++kernel_got;
  close(ks);
  EXPECT_EQ(kernel_got, 10) << "unsteered UDP must reach the kernel socket";
  Mbuf* stray[32];
  EXPECT_EQ(rxq_(stray, 32), 0) << "unsteered traffic reached the AF_XDP socket";
  EXPECT_EQ(ext("xdp_redirected"), kPerFlow * kFlows.size());
  EXPECT_GE(ext("xdp_passed"), 12u);  // 2 echo requests, 10 datagrams, plus neighbour discovery

  auto stats = port_->stats();
  ASSERT_EQ(stats.rx_queues.size(), 1u);
  EXPECT_EQ(stats.rx_queues[0].rx_packets, kPerFlow * kFlows.size());
  EXPECT_EQ(ext("xsk_rx_dropped"), 0u);
  ASSERT_TRUE(rx_ns_->run([&] { port_->stop(); }));
  EXPECT_EQ(pool_->available(), pool_->count()) << "buffers left in the kernel's rings after stop";
}

INSTANTIATE_TEST_SUITE_P(Modes, AfXdpAttach, ::testing::Values("native", "generic"),
                         [](const auto& info) { return info.param; });

TEST_F(AfXdp, StopReturnsBuffersStillQueuedInTheRxRing) {
  ASSERT_NO_FATAL_FAILURE(open_port("", {"udp dst *:7000"}));
  EXPECT_LT(pool_->available(), pool_->count()) << "the fill ring should hold buffers";
  ASSERT_TRUE(tx_ns_->run([&] {
    int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(7000);
    inet_pton(AF_INET, kRxIp4, &a.sin_addr);
    for (int i = 0; i < 100; ++i) sendto(s, "queued", 6, 0, reinterpret_cast<sockaddr*>(&a), sizeof(a));
    close(s);
  }));
  // Frames sit in the rx ring, unread; a few are taken so the rx ring and caller both held some.
  std::this_thread::sleep_for(100ms);
  Mbuf* some[8];
  std::uint16_t n = rxq_(some, 8);
  EXPECT_EQ(n, 8);
  ASSERT_TRUE(rx_ns_->run([&] { port_->stop(); }));
  EXPECT_EQ(pool_->available(), pool_->count() - n);
  mbuf_free_bulk(some, n);
  EXPECT_EQ(pool_->available(), pool_->count());
}

TEST_F(AfXdp, AllModeTakesTheWholeQueue) {
  ASSERT_NO_FATAL_FAILURE(open_port("mode = 'all'\n", {}));
  // ARP never reaches the kernel now, so the peer needs a static neighbour entry.
  auto mac = veth_->mac_a();
  ASSERT_TRUE(mac) << mac.message();
  ASSERT_TRUE(tx_ns_->exec({"ip", "neigh", "replace", kRxIp4, "lladdr", mac.value(), "dev", veth_->b().name}));
  std::vector<Flow> flows = {{4, kRxIp4, 1234}, {4, kRxIp4, 4321}};
  std::vector<std::string> problems;
  // Nothing is steered by rule: ports no rule names still arrive.
  auto per = send_and_receive(flows, 500, 200, &problems, /*ignore_non_udp=*/true);
  EXPECT_EQ(per[0], 500u);
  EXPECT_EQ(per[1], 500u);
  EXPECT_TRUE(problems.empty()) << problems.front();
  bool ping4 = true;
  ASSERT_TRUE(tx_ns_->run([&] { ping4 = icmp_echo(4, kRxIp4, 300ms); }));
  EXPECT_FALSE(ping4) << "all mode must take ICMP away from the kernel";
  // The peer's kernel may send IPv6 neighbour or multicast-listener frames too; all are ours now.
  Mbuf* taken[16];
  std::uint16_t n = rxq_(taken, 16);
  unsigned echo_requests = 0;
  for (unsigned i = 0; i < n; ++i) {
    const std::uint8_t* d = taken[i]->data();
    if (taken[i]->data_len >= 35 && d[12] == 0x08 && d[13] == 0x00 && d[23] == 1 && d[14 + (d[14] & 0xf) * 4] == 8)
      ++echo_requests;
  }
  mbuf_free_bulk(taken, n);
  EXPECT_EQ(echo_requests, 1u) << "the echo request should have reached the AF_XDP socket instead";
}

int socket_int(int fd, int option) {
  int v = -1;
  socklen_t len = sizeof(v);
  return getsockopt(fd, SOL_SOCKET, option, &v, &len) == 0 ? v : -1;
}

// What DPDK's net_af_xdp sets for busy_budget, read back from the kernel through the socket the
// port polls (SO_BUSY_POLL_BUDGET has no getsockopt), the flows still exact, and a busy poll made
// on every empty receive. Whether the kernel has a NAPI instance to run is the driver's business:
// on Linux 6.18 an AF_XDP socket on veth never learns a NAPI id, and the port must say so when
// the socket, after traffic, names none.
TEST_F(AfXdp, PreferredBusyPollingIsSetOnTheSocketAndReceivesExactly) {
  ASSERT_NO_FATAL_FAILURE(open_port("attach = 'native'\nbusy_poll_budget = 48\nbusy_poll_us = 30\n", kRules));
  const int fd = port_->rx_wait_fd(0);
  ASSERT_GE(fd, 0);
  EXPECT_EQ(socket_int(fd, SO_PREFER_BUSY_POLL), 1);
  EXPECT_EQ(socket_int(fd, SO_BUSY_POLL), 30);
  std::string report = port_->path_report();
  EXPECT_NE(report.find("preferred busy polling (budget 48, 30 us"), std::string::npos) << report;
  EXPECT_EQ(ext("busy_poll_budget"), 48u);

  std::vector<std::string> problems;
  auto per = send_and_receive(kFlows, 500, 64, &problems);
  check_exact(per, 500, problems);
  EXPECT_GT(ext("rx_busy_polls"), 0u);
  EXPECT_EQ(ext("rx_wakeup_errors"), 0u);
  EXPECT_EQ(ext("xsk_rx_dropped"), 0u);

  const bool kernel_named_napi = socket_int(fd, SO_INCOMING_NAPI_ID) > 0;
  EXPECT_EQ(ext("busy_poll_queues_without_napi"), kernel_named_napi ? 0u : 1u);
  bool noticed = false;
  for (const std::string& n : port_->notices()) noticed |= n.find("named no NAPI instance") != std::string::npos;
  EXPECT_EQ(noticed, !kernel_named_napi);
  ASSERT_TRUE(rx_ns_->run([&] { port_->stop(); }));
  EXPECT_EQ(pool_->available(), pool_->count());
}

TEST_F(AfXdp, BusyPollingIsOffUnlessConfigured) {
  ASSERT_NO_FATAL_FAILURE(open_port("", {"udp dst *:7000"}));
  EXPECT_EQ(socket_int(port_->rx_wait_fd(0), SO_PREFER_BUSY_POLL), 0);
  EXPECT_EQ(socket_int(port_->rx_wait_fd(0), SO_BUSY_POLL), 0);
  Mbuf* none[8];
  EXPECT_EQ(rxq_(none, 8), 0);
  EXPECT_EQ(rxq_(none, 8), 0);
  EXPECT_EQ(ext("rx_busy_polls"), 0u);
  EXPECT_NE(port_->path_report().find("busy polling off"), std::string::npos) << port_->path_report();
}

TEST_F(AfXdp, TransmitReachesAKernelSocketAndCompletionsReturnBuffers) {
  ASSERT_NO_FATAL_FAILURE(open_port("", {"udp dst *:7100"}));
  auto mac_a = veth_->mac_a();
  auto mac_b = veth_->mac_b();
  ASSERT_TRUE(mac_a && mac_b);
  auto to_mac = [](const std::string& s) {
    wire::MacAddr m{};
    for (int i = 0; i < 6; ++i) m[i] = static_cast<std::uint8_t>(std::stoul(s.substr(i * 3, 2), nullptr, 16));
    return m;
  };
  int ks = -1;
  ASSERT_TRUE(tx_ns_->run([&] {
    ks = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(7200);
    inet_pton(AF_INET, kTxIp4, &a.sin_addr);
    ASSERT_EQ(bind(ks, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
    int big = 8 << 20;
    setsockopt(ks, SOL_SOCKET, SO_RCVBUFFORCE, &big, sizeof(big));
  }));
  const unsigned kCount = 300;
  TxQueueHandle txq = port_->tx_queue(0);
  ASSERT_NE(txq.burst, nullptr);
  unsigned sent = 0;
  auto before = pool_->available();
  while (sent < kCount) {
    Mbuf* m[16];
    unsigned k = std::min(16u, kCount - sent);
    ASSERT_TRUE(pool_->alloc_bulk(m, k));
    for (unsigned i = 0; i < k; ++i) {
      auto payload = payload_for(9, sent + i, 100);
      wire::FrameSpec fs;
      fs.eth.dst = to_mac(mac_b.value());
      fs.eth.src = to_mac(mac_a.value());
      fs.ipv4.src = wire::ipv4(10, 210, 0, 1);
      fs.ipv4.dst = wire::ipv4(10, 210, 0, 2);
      fs.udp.src_port = 7100;
      fs.udp.dst_port = 7200;
      fs.payload = payload.data();
      fs.payload_len = 100;
      m[i]->data_len = static_cast<std::uint32_t>(wire::write_frame(fs, m[i]->data(), m[i]->tailroom()));
      ASSERT_GT(m[i]->data_len, 0u);
    }
    unsigned done = 0;
    for (int tries = 0; done < k && tries < 1000; ++tries) done += txq(m + done, static_cast<std::uint16_t>(k - done));
    ASSERT_EQ(done, k);
    sent += k;
  }
  // Copy mode sends at most a bounded batch per kick, and the socket's send budget waits for the
  // receiver: empty bursts keep kicking what is still queued in the tx ring.
  timeval tv{0, 20000};
  setsockopt(ks, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  unsigned got = 0;
  std::uint8_t buf[256];
  auto deadline = std::chrono::steady_clock::now() + 3s;
  while (std::chrono::steady_clock::now() < deadline) {
    ssize_t n = recv(ks, buf, sizeof(buf), 0);
    if (n < 0) {
      (void)txq(nullptr, 0);
      continue;
    }
    ASSERT_EQ(n, 100);
    unsigned flow, seq;
    std::memcpy(&flow, buf, 4);
    std::memcpy(&seq, buf + 4, 4);
    EXPECT_EQ(std::memcmp(buf, payload_for(flow, seq, 100).data(), 100), 0);
    if (++got == kCount) break;
  }
  close(ks);
  EXPECT_EQ(got, kCount);
  // An empty burst still reaps the completion ring.
  for (int i = 0; i < 100 && pool_->available() < before; ++i) {
    (void)txq(nullptr, 0);
    std::this_thread::sleep_for(1ms);
  }
  EXPECT_EQ(pool_->available(), before) << "completed transmits must return their buffers";
  EXPECT_EQ(port_->stats().tx_queues.at(0).tx_packets, kCount);
}

// The whole pipeline on an af_xdp port: parse, classify and dispatch to ring endpoints by rule,
// an echo endpoint transmitting the received UMEM buffers back in place, exact counts per
// endpoint, and balanced accounting with every buffer back in its pool.
TEST_F(AfXdp, PipelineDeliversEachFlowToItsEndpointAndEchoes) {
  const std::string text = fmt::format(R"(
[run]
default_action = "drop"

[[pools]]
name = "rx"
count = 8192
huge_pages = "never"

[[ports]]
name = "x0"
pmd = "af_xdp"
pool = "rx"
interface = "{}"
rx_ring_size = 2048

[[endpoints]]
name = "v4"
match = ["udp dst {}:5000", "udp dst {}:5001"]

[[endpoints]]
name = "v6"
match = ["udp dst [{}]:6000"]

[[endpoints]]
name = "echo"
action = "echo"
match = ["udp dst {}:7007"]

[[lcores]]
rx = ["x0:0"]
idle_sleep_us = 0
)",
                                       veth_->a().name, kRxIp4, kRxIp4, kRxIp6, kRxIp4);
  std::unique_ptr<Pipeline> pipeline;
  Status st;
  ASSERT_TRUE(rx_ns_->run([&] {
    LoadOptions opt;
    opt.find_pmd = &find_pmd;
    auto cfg = load_config_string(text, "af_xdp_pipeline.toml", opt);
    if (!cfg) {
      st = cfg.status();
      return;
    }
    auto p = Pipeline::create(cfg->plan);
    if (!p) {
      st = p.status();
      return;
    }
    pipeline = std::move(p).value();
    st = pipeline->start();
  }));
  ASSERT_TRUE(st) << st.message();
  const std::uint16_t ep_v4 = pipeline->endpoint_id("v4").value();
  const std::uint16_t ep_v6 = pipeline->endpoint_id("v6").value();

  const std::vector<Flow> flows = {{4, kRxIp4, 5000}, {4, kRxIp4, 5001}, {6, kRxIp6, 6000}};
  constexpr unsigned kPerFlow = 1000;
  constexpr std::size_t kLen = 100;
  std::atomic<unsigned> consumed{0};
  std::atomic<bool> give_up{false};
  std::thread sender = tx_ns_->spawn([&] {
    int s4 = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    int s6 = socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    unsigned sent = 0;
    for (unsigned seq = 0; seq < kPerFlow; ++seq)
      for (unsigned f = 0; f < flows.size(); ++f) {
        // Relaxed: flow control only.
        while (sent - consumed.load(std::memory_order_relaxed) > 256 && !give_up)
          std::this_thread::sleep_for(50us);
        if (give_up) break;
        auto payload = payload_for(f, seq, kLen);
        sockaddr_storage ss{};
        socklen_t sl;
        if (flows[f].family == 4) {
          auto* a = reinterpret_cast<sockaddr_in*>(&ss);
          a->sin_family = AF_INET;
          a->sin_port = htons(flows[f].port);
          inet_pton(AF_INET, flows[f].dst, &a->sin_addr);
          sl = sizeof(sockaddr_in);
        } else {
          auto* a = reinterpret_cast<sockaddr_in6*>(&ss);
          a->sin6_family = AF_INET6;
          a->sin6_port = htons(flows[f].port);
          inet_pton(AF_INET6, flows[f].dst, &a->sin6_addr);
          sl = sizeof(sockaddr_in6);
        }
        sendto(flows[f].family == 4 ? s4 : s6, payload.data(), kLen, 0, reinterpret_cast<sockaddr*>(&ss), sl);
        ++sent;
      }
    close(s4);
    close(s6);
  });
  std::map<unsigned, unsigned> per;
  std::vector<std::string> problems;
  unsigned got = 0;
  auto deadline = std::chrono::steady_clock::now() + 30s;
  Mbuf* burst[32];
  while (got < kPerFlow * flows.size() && std::chrono::steady_clock::now() < deadline) {
    unsigned n_total = 0;
    for (std::uint16_t ep : {ep_v4, ep_v6}) {
      unsigned n = pipeline->endpoint_receive(ep, burst, 32);
      for (unsigned i = 0; i < n; ++i) {
        Parsed p = parse_udp(burst[i]);
        unsigned flow = ~0u, seq = ~0u;
        if (p.payload_len == kLen) {
          std::memcpy(&flow, p.payload, 4);
          std::memcpy(&seq, p.payload + 4, 4);
        }
        bool right_ep = flow < flows.size() && (flows[flow].family == 6) == (ep == ep_v6);
        if (!right_ep || seq >= kPerFlow || std::memcmp(p.payload, payload_for(flow, seq, kLen).data(), kLen) != 0)
          problems.push_back(fmt::format("endpoint {}: unexpected datagram (flow {}, seq {})", ep, flow, seq));
        else
          ++per[flow];
      }
      mbuf_free_bulk(burst, n);
      n_total += n;
    }
    got += n_total;
    consumed.store(got, std::memory_order_relaxed);
    if (n_total == 0) std::this_thread::sleep_for(50us);
  }
  give_up = true;
  sender.join();
  for (unsigned f = 0; f < flows.size(); ++f) EXPECT_EQ(per[f], kPerFlow) << "flow " << f;
  EXPECT_TRUE(problems.empty()) << problems.size() << " problems, first: " << problems.front();

  // Echo: the received buffer goes back out of the same UMEM, addresses swapped. A kernel socket
  // sending over veth leaves the UDP checksum partial (checksum offload: veth never finishes it,
  // the receiving stack trusts the skb flag). XDP sees the raw bytes, so an echoed frame would
  // carry a wrong checksum and the client's stack would drop it; a real NIC puts finished
  // checksums on the wire. Turning the peer's tx checksum offload off gives the same here.
  ASSERT_TRUE(veth_->exec_b({"ethtool", "-K", veth_->b().name, "tx", "off"}));
  unsigned echoed = 0;
  ASSERT_TRUE(tx_ns_->run([&] {
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_in d{};
    d.sin_family = AF_INET;
    d.sin_port = htons(7007);
    inet_pton(AF_INET, kRxIp4, &d.sin_addr);
    connect(fd, reinterpret_cast<sockaddr*>(&d), sizeof d);
    timeval tv{0, 500000};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    for (unsigned i = 0, lost = 0; i < 200 && lost < 5; ++i) {
      auto p = payload_for(77, i, 64 + i);
      send(fd, p.data(), p.size(), 0);
      std::uint8_t buf[512];
      ssize_t r = recv(fd, buf, sizeof buf, 0);
      if (r == ssize_t(p.size()) && std::memcmp(buf, p.data(), p.size()) == 0)
        ++echoed;
      else
        ++lost;
    }
    close(fd);
  }));
  EXPECT_EQ(echoed, 200u);

  // Stopped from this thread, outside the port's namespace: the port finds its way back.
  ASSERT_TRUE(pipeline->stop());
  Accounting acc = pipeline->accounting();
  EXPECT_TRUE(acc.balanced()) << "rx " << acc.rx_packets << " delivered " << acc.delivered << " transmitted "
                              << acc.transmitted << " dropped " << acc.dropped() << " outstanding "
                              << acc.outstanding();
  EXPECT_EQ(acc.delivered_per_endpoint.at(ep_v4), 2 * kPerFlow);
  EXPECT_EQ(acc.delivered_per_endpoint.at(ep_v6), kPerFlow);
  EXPECT_EQ(acc.transmitted, 200u);
  EXPECT_EQ(acc.rx_packets, 3 * kPerFlow + 200) << "steering let something else through";
  pipeline.reset();
}

// Make before break: rules change many times while a kernel sender streams datagrams that every
// rule set steers. Each one must reach the socket; none may fall through to the kernel, where a
// UDP socket bound to the same address and port would receive it.
TEST_F(AfXdp, RuleChangesUnderTrafficSendNothingToTheKernel) {
  const std::vector<std::string> base = {"udp dst 10.210.0.1:5000"};
  ASSERT_NO_FATAL_FAILURE(open_port("attach = 'native'\n", base));
  int kernel_sock = -1;
  ASSERT_TRUE(rx_ns_->run([&] {
    kernel_sock = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(5000);
    inet_pton(AF_INET, kRxIp4, &a.sin_addr);
    int big = 8 << 20;
    setsockopt(kernel_sock, SOL_SOCKET, SO_RCVBUFFORCE, &big, sizeof big);
    ASSERT_EQ(bind(kernel_sock, reinterpret_cast<sockaddr*>(&a), sizeof a), 0) << std::strerror(errno);
  }));
  // Each set steers 10.210.0.1:5000 through a different entry (or two), so every change both adds
  // and removes trie entries the traffic depends on.
  auto rules = [](std::vector<std::string> texts) {
    SteeringRules r;
    for (std::size_t i = 0; i < texts.size(); ++i) {
      auto m = parse_match_rule(texts[i]);
      EXPECT_TRUE(m) << m.message();
      r.rules.push_back({m.value(), static_cast<std::uint16_t>(i), 0});
    }
    return r;
  };
  const std::vector<SteeringRules> sets = {
      rules(base),
      rules({"udp dst 10.210.0.0/24:5000", "udp dst 10.210.0.1:5001"}),
      rules({"udp dst *:5000"}),
      rules({"any dst 10.210.0.1"}),
      rules({"udp dst 10.210.0.1:5000", "udp dst [fd10::1]:6000"}),
  };
  std::atomic<bool> done{false};
  std::atomic<unsigned> changes{0};
  std::string churn_error;
  std::thread churn([&] {
    for (unsigned i = 0; !done.load(std::memory_order_relaxed); ++i) {
      Status st = port_->update_steering(sets[i % sets.size()]);
      if (!st) {
        churn_error = st.message();
        return;
      }
      changes.fetch_add(1, std::memory_order_relaxed);
    }
  });
  std::vector<std::string> problems;
  // A change that removes entries waits for the program's passes in flight (milliseconds), so the
  // traffic goes on in rounds until enough changes have overlapped it.
  const unsigned kRound = 20000;
  unsigned rounds = 0, received = 0;
  do {
    received += send_and_receive({{4, kRxIp4, 5000}}, kRound, 64, &problems)[0];
    ++rounds;
  } while (changes.load() < 100 && rounds < 100 && problems.empty() && churn_error.empty());
  done = true;
  churn.join();
  EXPECT_TRUE(churn_error.empty()) << churn_error;
  EXPECT_GE(changes.load(), 100u) << "too few rule changes overlapped the traffic to test anything";
  unsigned to_kernel = 0;
  char buf[128];
  while (recv(kernel_sock, buf, sizeof buf, 0) > 0) ++to_kernel;
  close(kernel_sock);
  EXPECT_EQ(to_kernel, 0u) << "datagrams that fell through to the kernel during " << changes.load() << " rule changes";
  EXPECT_EQ(received, rounds * kRound);
  EXPECT_TRUE(problems.empty()) << problems.front();
}

TEST_F(AfXdp, BadConfigIsRejectedWithTheKeyNamed) {
  auto section = ConfigSection::parse_string("interface = 'x'\nzero_copy = 'maybe'\n", "bad.toml");
  ASSERT_TRUE(section);
  auto spec = find_pmd("af_xdp")->parse(section.value());
  ASSERT_FALSE(spec);
  EXPECT_NE(spec.message().find("zero_copy"), std::string::npos) << spec.message();
  EXPECT_NE(spec.message().find("bad.toml:2"), std::string::npos) << spec.message();

  for (const char* bad : {"busy_poll_budget = 65536\n", "busy_poll_budget = -1\n", "busy_poll_us = 50\n",
                          "busy_poll_budget = 64\nbusy_poll_us = 0\n"}) {
    auto section_b = ConfigSection::parse_string(fmt::format("interface = 'x'\n{}", bad), "busy.toml");
    ASSERT_TRUE(section_b);
    auto spec_b = find_pmd("af_xdp")->parse(section_b.value());
    ASSERT_FALSE(spec_b) << bad;
    EXPECT_NE(spec_b.message().find(std::string(bad).find("busy_poll_us") != std::string::npos ? "busy_poll_us"
                                                                                                 : "busy_poll_budget"),
              std::string::npos)
        << spec_b.message();
  }

  auto s2 = ConfigSection::parse_string("interface = 'x'\nbusy_pol = 1\n", "typo.toml");
  ASSERT_TRUE(s2);
  auto spec2 = find_pmd("af_xdp")->parse(s2.value());
  ASSERT_TRUE(spec2) << spec2.message();
  Status fin = s2.value().finish();
  EXPECT_FALSE(fin);
  EXPECT_NE(fin.message().find("busy_pol"), std::string::npos) << fin.message();
}

TEST_F(AfXdp, MissingInterfaceSaysWhatToCheck) {
  auto section = ConfigSection::parse_string("interface = 'nosuchif0'\n", "x.toml");
  ASSERT_TRUE(section);
  auto spec = find_pmd("af_xdp")->parse(section.value());
  ASSERT_TRUE(spec);
  PortEnv env;
  env.pool = pool_.get();
  auto port = spec.value()->open(env);
  ASSERT_FALSE(port);
  EXPECT_NE(port.message().find("nosuchif0"), std::string::npos) << port.message();
  EXPECT_NE(port.message().find("ip link"), std::string::npos) << port.message();
}

}  // namespace
}  // namespace rawpipe
