// socket PMD: kernel UDP senders (loopback, and a peer namespace over a veth pair for unicast and
// multicast); every datagram arrives once as an Ethernet/IPv4/UDP frame with its real addresses,
// ports, payload and valid checksums; echoes sent with tx_burst reach the kernel client.
#include <arpa/inet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <set>
#include <thread>

#include "pipeline/buf/pool.hh"
#include "pipeline/classify/rule.hh"
#include "pipeline/config/section.hh"
#include "pipeline/wire/checksum.hh"
#include "pipeline/wire/wire.hh"
#include "pipeline/port/registry.hh"
#include "tests/support/netns.hh"
#include "pipeline/port/driver.hh"

namespace rawpipe {
namespace {

std::unique_ptr<Pool> make_pool() {
  PoolConfig c;
  c.count = 4096;
  c.cache_size = 0;
  c.huge_pages = HugePages::kNever;
  auto p = Pool::create(c);
  EXPECT_TRUE(p) << p.message();
  return std::move(p).value();
}

Result<std::unique_ptr<Port>> open_port(const std::string& toml, Pool* pool) {
  auto sec = ConfigSection::parse_string(toml, "socket.toml");
  if (!sec) return sec.status();
  auto spec = find_pmd("socket")->parse(sec.value());
  if (!spec) return spec.status();
  RAWPIPE_TRY(sec->finish());
  PortEnv env;
  env.name = "s0";
  env.port_id = 2;
  env.pool = pool;
  auto port = spec.value()->open(env);
  if (port) RAWPIPE_TRY(port.value()->start());
  return port;
}

struct Dgram {
  std::string src, dst, payload;
  std::uint16_t sport, dport;
  bool ip_csum_ok, udp_csum_ok;
};

std::vector<Dgram> receive(Port& port, std::size_t want, std::chrono::milliseconds settle = std::chrono::milliseconds(300)) {
  std::vector<Dgram> out;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  auto quiet = std::chrono::steady_clock::now();
  while (std::chrono::steady_clock::now() < deadline) {
    Mbuf* pkts[32];
    unsigned n = port.rx_queue(0)(pkts, 32);
    for (unsigned i = 0; i < n; ++i) {
      const std::uint8_t* f = pkts[i]->data();
      EXPECT_EQ(wire::load_be16(f + 12), wire::kEtherTypeIpv4);
      const std::uint8_t* ip = f + 14;
      const std::uint8_t* udp = ip + 20;
      const std::uint32_t total = wire::load_be16(ip + 2);
      EXPECT_EQ(total + 14, pkts[i]->data_len);
      Dgram d;
      char a[INET_ADDRSTRLEN];
      d.src = inet_ntop(AF_INET, ip + 12, a, sizeof a);
      d.dst = inet_ntop(AF_INET, ip + 16, a, sizeof a);
      d.sport = wire::load_be16(udp);
      d.dport = wire::load_be16(udp + 2);
      d.payload.assign(reinterpret_cast<const char*>(udp + 8), wire::load_be16(udp + 4) - 8);
      d.ip_csum_ok = wire::ipv4_header_checksum_ok(ip, 20);
      d.udp_csum_ok = wire::l4_checksum_ipv4(ip + 12, ip + 16, 17, udp, total - 20) == 0;
      EXPECT_EQ(pkts[i]->port, 2);
      out.push_back(d);
    }
    mbuf_free_bulk(pkts, n);
    if (n) quiet = std::chrono::steady_clock::now();
    if (out.size() >= want && std::chrono::steady_clock::now() - quiet > settle) break;
    if (!n) std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  return out;
}

TEST(SocketPmd, LoopbackDatagramsBecomeFramesWithRealAddresses) {
  auto pool = make_pool();
  auto port = open_port("listen = ['udp dst 127.0.0.1:47311']\n", pool.get());
  ASSERT_TRUE(port) << port.message();
  int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  sockaddr_in src{};
  src.sin_family = AF_INET;
  inet_pton(AF_INET, "127.0.0.2", &src.sin_addr);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&src), sizeof src), 0);
  socklen_t sl = sizeof src;
  getsockname(fd, reinterpret_cast<sockaddr*>(&src), &sl);
  sockaddr_in d{};
  d.sin_family = AF_INET;
  d.sin_port = htons(47311);
  inet_pton(AF_INET, "127.0.0.1", &d.sin_addr);
  constexpr unsigned kCount = 500;
  // Paced so the socket's receive buffer (rmem_default) never overflows while the test polls.
  std::thread sender([&] {
    for (unsigned i = 0; i < kCount; ++i) {
      std::string p = fmt::format("datagram {}", i);
      sendto(fd, p.data(), p.size(), 0, reinterpret_cast<sockaddr*>(&d), sizeof d);
      if (i % 16 == 15) std::this_thread::sleep_for(std::chrono::microseconds(500));
    }
  });
  auto got = receive(*port.value(), kCount);
  sender.join();
  ASSERT_EQ(got.size(), kCount) << "kernel drops: " << port.value()->stats().extended.at("kernel_drops");
  for (unsigned i = 0; i < kCount; ++i) {
    EXPECT_EQ(got[i].payload, fmt::format("datagram {}", i));
    EXPECT_EQ(got[i].src, "127.0.0.2");
    EXPECT_EQ(got[i].dst, "127.0.0.1");
    EXPECT_EQ(got[i].sport, ntohs(src.sin_port));
    EXPECT_EQ(got[i].dport, 47311);
    EXPECT_TRUE(got[i].ip_csum_ok);
    EXPECT_TRUE(got[i].udp_csum_ok);
  }
  EXPECT_EQ(port.value()->stats().rx_queues[0].rx_packets, kCount);
  close(fd);
  port.value().reset();
  EXPECT_EQ(pool->available(), pool->count());
}

TEST(SocketPmd, LoopbackIpv6DatagramsBecomeIpv6Frames) {
  auto pool = make_pool();
  auto port = open_port("listen = ['udp dst [::1]:47312']\n", pool.get());
  if (!port && port.message().find("Address family") != std::string::npos) GTEST_SKIP() << "no IPv6 on this host";
  ASSERT_TRUE(port) << port.message();
  int fd = socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  sockaddr_in6 d{};
  d.sin6_family = AF_INET6;
  d.sin6_port = htons(47312);
  d.sin6_addr = in6addr_loopback;
  for (unsigned i = 0; i < 50; ++i) {
    std::string p = fmt::format("v6 datagram {}", i);
    ASSERT_EQ(sendto(fd, p.data(), p.size(), 0, reinterpret_cast<sockaddr*>(&d), sizeof d), ssize_t(p.size()));
  }
  unsigned got = 0;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (got < 50 && std::chrono::steady_clock::now() < deadline) {
    Mbuf* pkts[32];
    unsigned n = port.value()->rx_queue(0)(pkts, 32);
    for (unsigned i = 0; i < n; ++i) {
      const std::uint8_t* f = pkts[i]->data();
      ASSERT_EQ(wire::load_be16(f + 12), wire::kEtherTypeIpv6);
      const std::uint8_t* ip = f + 14;
      const std::uint8_t* udp = ip + 40;
      const std::uint32_t plen = wire::load_be16(ip + 4);
      EXPECT_EQ(ip[6], 17);
      EXPECT_EQ(std::memcmp(ip + 24, &in6addr_loopback, 16), 0) << "destination from IPV6_PKTINFO";
      EXPECT_EQ(std::memcmp(ip + 8, &in6addr_loopback, 16), 0);
      EXPECT_EQ(wire::load_be16(udp + 2), 47312);
      EXPECT_EQ(wire::l4_checksum_ipv6(ip + 8, ip + 24, 17, udp, plen), 0);
      EXPECT_EQ(std::string(reinterpret_cast<const char*>(udp + 8), plen - 8), fmt::format("v6 datagram {}", got));
      ++got;
    }
    mbuf_free_bulk(pkts, n);
  }
  EXPECT_EQ(got, 50u);
  close(fd);
}

TEST(SocketPmd, RulesWithoutAPortOrNotUdpAreRejected) {
  auto pool = make_pool();
  auto noport = open_port("listen = ['udp dst 10.0.0.1']\n", pool.get());
  ASSERT_FALSE(noport);
  EXPECT_NE(noport.message().find("socket.toml:1"), std::string::npos) << noport.message();
  auto tcp = open_port("listen = ['tcp dst *:80']\n", pool.get());
  ASSERT_FALSE(tcp);
  EXPECT_NE(tcp.message().find("not UDP"), std::string::npos) << tcp.message();
}

void swap_in_place(Mbuf* m) {
  std::uint8_t* f = m->data();
  std::uint8_t tmp[6];
  std::memcpy(tmp, f, 6);
  std::memcpy(f, f + 6, 6);
  std::memcpy(f + 6, tmp, 6);
  std::uint8_t* ip = f + 14;
  std::memcpy(tmp, ip + 12, 4);
  std::memcpy(ip + 12, ip + 16, 4);
  std::memcpy(ip + 16, tmp, 4);
  std::uint8_t* udp = ip + 20;
  std::memcpy(tmp, udp, 2);
  std::memcpy(udp, udp + 2, 2);
  std::memcpy(udp + 2, tmp, 2);
}

TEST(SocketPmd, UnicastAndMulticastFromAPeerNamespaceAndEcho) {
  if (auto why = test::netns_unavailable_reason()) GTEST_SKIP() << *why;
  auto ours = test::NetNs::create("rpso");
  ASSERT_TRUE(ours) << ours.message();
  auto peer = test::NetNs::create("rpsp");
  ASSERT_TRUE(peer) << peer.message();
  auto veth = test::VethPair::create({&ours.value(), "", {"10.79.0.1/24"}}, {&peer.value(), "", {"10.79.0.2/24"}});
  ASSERT_TRUE(veth) << veth.message();
  auto pool = make_pool();
  Result<std::unique_ptr<Port>> port = Status::error("not run");
  ASSERT_TRUE(ours.value().run([&] {
    port = open_port(fmt::format("interface = '{}'\nlisten = ['udp dst *:7000']\n", veth.value().a().name), pool.get());
    if (!port) return;
    // Endpoint rules arrive through update_steering, as the engine passes them.
    SteeringRules rules;
    auto r = parse_match_rule("udp dst 239.5.5.5:7001");
    ASSERT_TRUE(r) << r.message();
    rules.rules.push_back({r.value(), 1, 0});
    Status st = port.value()->update_steering(rules);
    ASSERT_TRUE(st) << st.message();
  }));
  ASSERT_TRUE(port) << port.message();
  EXPECT_NE(port.value()->path_report().find("239.5.5.5:7001 joined on"), std::string::npos)
      << port.value()->path_report();

  constexpr unsigned kFlows = 4, kPerFlow = 100, kMcast = 50;
  std::thread sender([&] {
    ASSERT_TRUE(peer.value().run([&] {
      for (unsigned f = 0; f < kFlows; ++f) {
        int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        sockaddr_in d{};
        d.sin_family = AF_INET;
        d.sin_port = htons(7000);
        inet_pton(AF_INET, "10.79.0.1", &d.sin_addr);
        for (unsigned s = 0; s < kPerFlow; ++s) {
          std::string p = fmt::format("u {} {}", f, s);
          sendto(fd, p.data(), p.size(), 0, reinterpret_cast<sockaddr*>(&d), sizeof d);
          if (s % 16 == 15) std::this_thread::sleep_for(std::chrono::microseconds(500));
        }
        close(fd);
      }
      int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
      ip_mreqn via{};
      via.imr_ifindex = static_cast<int>(if_nametoindex(veth.value().b().name.c_str()));
      setsockopt(fd, IPPROTO_IP, IP_MULTICAST_IF, &via, sizeof via);
      sockaddr_in g{};
      g.sin_family = AF_INET;
      g.sin_port = htons(7001);
      inet_pton(AF_INET, "239.5.5.5", &g.sin_addr);
      for (unsigned s = 0; s < kMcast; ++s) {
        std::string p = fmt::format("m {}", s);
        sendto(fd, p.data(), p.size(), 0, reinterpret_cast<sockaddr*>(&g), sizeof g);
        if (s % 16 == 15) std::this_thread::sleep_for(std::chrono::microseconds(500));
      }
      close(fd);
    }));
  });
  auto got = receive(*port.value(), kFlows * kPerFlow + kMcast);
  sender.join();
  ASSERT_EQ(got.size(), kFlows * kPerFlow + kMcast)
      << "kernel drops: " << port.value()->stats().extended.at("kernel_drops");
  std::set<std::string> payloads;
  for (const Dgram& d : got) {
    payloads.insert(d.payload);
    EXPECT_EQ(d.src, "10.79.0.2");
    EXPECT_TRUE(d.ip_csum_ok && d.udp_csum_ok) << d.payload;
    if (d.payload[0] == 'm') {
      EXPECT_EQ(d.dst, "239.5.5.5");
      EXPECT_EQ(d.dport, 7001);
    } else {
      EXPECT_EQ(d.dst, "10.79.0.1");
      EXPECT_EQ(d.dport, 7000);
    }
  }
  EXPECT_EQ(payloads.size(), kFlows * kPerFlow + kMcast) << "each datagram exactly once";

  // Echo: frames come back swapped through tx_burst and leave from port 7000.
  constexpr unsigned kEcho = 200;
  std::atomic<bool> done{false};
  std::thread echo([&] {
    while (!done) {
      Mbuf* pkts[32];
      unsigned n = port.value()->rx_queue(0)(pkts, 32);
      for (unsigned i = 0; i < n; ++i) swap_in_place(pkts[i]);
      unsigned sent = 0;
      while (sent < n) sent += port.value()->tx_queue(0)(pkts + sent, static_cast<std::uint16_t>(n - sent));
      if (!n) std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  });
  unsigned good = 0;
  ASSERT_TRUE(peer.value().run([&] {
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_in d{};
    d.sin_family = AF_INET;
    d.sin_port = htons(7000);
    inet_pton(AF_INET, "10.79.0.1", &d.sin_addr);
    connect(fd, reinterpret_cast<sockaddr*>(&d), sizeof d);  // only replies from 10.79.0.1:7000 arrive
    timeval tv{2, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    for (unsigned i = 0; i < kEcho; ++i) {
      std::string p = fmt::format("echo {}", i);
      send(fd, p.data(), p.size(), 0);
      char buf[64];
      ssize_t r = recv(fd, buf, sizeof buf, 0);
      if (r == ssize_t(p.size()) && !std::memcmp(buf, p.data(), p.size())) ++good;
    }
    close(fd);
  }));
  done = true;
  echo.join();
  EXPECT_EQ(good, kEcho);
  PortStats st = port.value()->stats();
  EXPECT_EQ(st.tx_queues[0].tx_packets, kEcho);
  EXPECT_EQ(st.extended.at("tx_unbound_source"), 0u);
  port.value().reset();
  EXPECT_EQ(pool->available(), pool->count());
}

}  // namespace
}  // namespace rawpipe
