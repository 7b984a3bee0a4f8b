// af_packet PMD across a veth pair: kernel UDP sockets in a peer namespace send datagrams over
// several flows; the port delivers exactly those frames with the right bytes and valid checksums,
// keeps flows on one queue with fanout, restores stripped VLAN tags, and transmits echoes the
// kernel client receives.
#include <arpa/inet.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <set>
#include <thread>

#include "pipeline/buf/pool.hh"
#include "pipeline/config/section.hh"
#include "pipeline/wire/builder.hh"
#include "pipeline/wire/checksum.hh"
#include "pipeline/wire/wire.hh"
#include "pipeline/port/registry.hh"
#include "tests/support/netns.hh"
#include "pipeline/port/driver.hh"

namespace rawpipe {
namespace {

using test::NetNs;
using test::VethPair;

constexpr const char* kOurIp = "10.77.0.1";
constexpr const char* kPeerIp = "10.77.0.2";

struct Net {
  std::optional<NetNs> ours, peer;
  std::optional<VethPair> veth;
};

// Our end has no IP address, so the kernel ignores the datagrams (no ICMP port unreachable) and
// the peer reaches us through a permanent neighbour entry.
Status make_net(Net& n) {
  auto a = NetNs::create("rpap");
  if (!a) return a.status();
  n.ours.emplace(std::move(a).value());
  auto b = NetNs::create("rppe");
  if (!b) return b.status();
  n.peer.emplace(std::move(b).value());
  auto v = VethPair::create({&*n.ours, "", {}}, {&*n.peer, "", {std::string(kPeerIp) + "/24"}});
  if (!v) return v.status();
  n.veth.emplace(std::move(v).value());
  auto mac = n.veth->mac_a();
  if (!mac) return mac.status();
  return n.veth->exec_b({"ip", "neigh", "replace", kOurIp, "lladdr", mac.value(), "dev", n.veth->b().name,
                         "nud", "permanent"});
}

std::unique_ptr<Pool> make_pool() {
  PoolConfig c;
  c.count = 4096;
  c.cache_size = 0;
  c.huge_pages = HugePages::kNever;
  auto p = Pool::create(c);
  EXPECT_TRUE(p) << p.message();
  return std::move(p).value();
}

Result<std::unique_ptr<Port>> open_port(const NetNs& ns, const std::string& toml, Pool* pool, std::uint16_t rxq = 1) {
  Result<std::unique_ptr<Port>> out = Status::error("not run");
  Status st = ns.run([&] {
    auto sec = ConfigSection::parse_string(toml, "af_packet.toml");
    if (!sec) {
      out = sec.status();
      return;
    }
    auto spec = find_pmd("af_packet")->parse(sec.value());
    if (!spec) {
      out = spec.status();
      return;
    }
    PortEnv env;
    env.name = "ap0";
    env.port_id = 1;
    env.rx_queues = rxq;
    env.pool = pool;
    out = spec.value()->open(env);
    if (out) {
      Status s = out.value()->start();
      if (!s) out = s;
    }
  });
  if (!st) return st;
  return out;
}

std::string payload_for(unsigned flow, unsigned seq) { return fmt::format("flow {} seq {} rawpipe-payload", flow, seq); }

// Sends `per_flow` datagrams on each of `flows` flows (distinct source and destination ports).
void send_flows(const NetNs& peer, const char* dst, unsigned flows, unsigned per_flow, std::uint16_t base_port) {
  ASSERT_TRUE(peer.run([&] {
    for (unsigned f = 0; f < flows; ++f) {
      int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
      sockaddr_in src{};
      src.sin_family = AF_INET;
      src.sin_port = htons(static_cast<std::uint16_t>(40000 + f));
      bind(fd, reinterpret_cast<sockaddr*>(&src), sizeof src);
      sockaddr_in d{};
      d.sin_family = AF_INET;
      d.sin_port = htons(static_cast<std::uint16_t>(base_port + f));
      inet_pton(AF_INET, dst, &d.sin_addr);
      for (unsigned s = 0; s < per_flow; ++s) {
        std::string p = payload_for(f, s);
        sendto(fd, p.data(), p.size(), 0, reinterpret_cast<sockaddr*>(&d), sizeof d);
        if (s % 16 == 15) std::this_thread::sleep_for(std::chrono::microseconds(200));
      }
      close(fd);
    }
  }));
}

struct Seen {
  std::string payload;
  std::uint16_t src_port, dst_port;
  std::uint16_t queue;
  bool csum_ok;
  std::vector<std::uint8_t> frame;
};

// Our UDP frames (IPv4 to kOurIp) from every queue until `want` arrived and `settle` passed
// without more.
std::vector<Seen> receive(Port& port, std::uint16_t queues, std::size_t want, Pool& pool,
                          std::chrono::milliseconds settle = std::chrono::milliseconds(300)) {
  std::vector<Seen> seen;
  in_addr ours{};
  inet_pton(AF_INET, kOurIp, &ours);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  auto quiet_since = std::chrono::steady_clock::now();
  while (std::chrono::steady_clock::now() < deadline) {
    bool any = false;
    for (std::uint16_t q = 0; q < queues; ++q) {
      Mbuf* pkts[32];
      unsigned n = port.rx_queue(q)(pkts, 32);
      for (unsigned i = 0; i < n; ++i) {
        Mbuf* m = pkts[i];
        EXPECT_EQ(m->queue, q);
        const std::uint8_t* f = m->data();
        std::uint32_t off = 12;
        std::uint16_t type = wire::load_be16(f + off);
        if (type == wire::kEtherTypeVlan) {
          off += 4;
          type = wire::load_be16(f + off);
        }
        off += 2;
        if (type != wire::kEtherTypeIpv4 || f[off + 9] != wire::kIpProtoUdp || std::memcmp(f + off + 16, &ours, 4))
          continue;
        const std::uint32_t ihl = (f[off] & 0xf) * 4u, total = wire::load_be16(f + off + 2);
        const std::uint8_t* udp = f + off + ihl;
        const std::uint32_t udp_len = wire::load_be16(udp + 4);
        Seen s;
        s.payload.assign(reinterpret_cast<const char*>(udp + 8), udp_len - 8);
        s.src_port = wire::load_be16(udp);
        s.dst_port = wire::load_be16(udp + 2);
        s.queue = q;
        s.csum_ok = wire::l4_checksum_ipv4(f + off + 12, f + off + 16, 17, udp, total - ihl) == 0;
        s.frame.assign(f, f + m->data_len);
        seen.push_back(std::move(s));
      }
      if (n) any = true;
      mbuf_free_bulk(pkts, n);
    }
    if (any) quiet_since = std::chrono::steady_clock::now();
    if (seen.size() >= want && std::chrono::steady_clock::now() - quiet_since > settle) break;
    if (!any) std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  (void)pool;
  return seen;
}

// Both ring versions: V3 (blocks, the default) and V2 (frame slots).
class AfPacketRing : public ::testing::TestWithParam<int> {};

TEST_P(AfPacketRing, DeliversExactlyTheDatagramsSentOverSeveralFlows) {
  if (auto why = test::netns_unavailable_reason()) GTEST_SKIP() << *why;
  Net net;
  ASSERT_TRUE(make_net(net).is_ok());
  auto pool = make_pool();
  auto port = open_port(*net.ours, fmt::format("interface = '{}'\ntpacket_version = {}\n", net.veth->a().name, GetParam()),
                        pool.get());
  ASSERT_TRUE(port) << port.message();
  constexpr unsigned kFlows = 8, kPerFlow = 250;
  std::thread sender([&] { send_flows(*net.peer, kOurIp, kFlows, kPerFlow, 6000); });
  auto seen = receive(*port.value(), 1, kFlows * kPerFlow, *pool);
  sender.join();
  ASSERT_EQ(seen.size(), kFlows * kPerFlow);
  std::set<std::string> expected, got;
  for (unsigned f = 0; f < kFlows; ++f)
    for (unsigned s = 0; s < kPerFlow; ++s) expected.insert(payload_for(f, s));
  for (const Seen& s : seen) {
    got.insert(s.payload);
    EXPECT_TRUE(s.csum_ok) << "UDP checksum of " << s.payload;
    unsigned flow = s.src_port - 40000;
    EXPECT_EQ(s.dst_port, 6000 + flow);
    EXPECT_EQ(s.payload.rfind(fmt::format("flow {} ", flow), 0), 0u);
  }
  EXPECT_EQ(got, expected) << "every payload once";
  EXPECT_NE(port.value()->path_report().find(fmt::format("TPACKET_V{}", GetParam())), std::string::npos);
  PortStats st = port.value()->stats();
  EXPECT_GE(st.rx_queues[0].rx_packets, kFlows * kPerFlow);
  EXPECT_EQ(st.extended.at("kernel_drops"), 0u);
  EXPECT_EQ(st.rx_queues[0].rx_nombuf, 0u);
  port.value()->stop();
  port.value().reset();
  EXPECT_EQ(pool->available(), pool->count());
}

TEST(AfPacket, FanoutKeepsEachFlowOnOneQueue) {
  if (auto why = test::netns_unavailable_reason()) GTEST_SKIP() << *why;
  Net net;
  ASSERT_TRUE(make_net(net).is_ok());
  auto pool = make_pool();
  auto port = open_port(*net.ours, fmt::format("interface = '{}'\nfanout = 'hash'\n", net.veth->a().name),
                        pool.get(), 2);
  ASSERT_TRUE(port) << port.message();
  EXPECT_NE(port.value()->path_report().find("fanout hash group"), std::string::npos) << port.value()->path_report();
  constexpr unsigned kFlows = 16, kPerFlow = 40;
  std::thread sender([&] { send_flows(*net.peer, kOurIp, kFlows, kPerFlow, 6100); });
  auto seen = receive(*port.value(), 2, kFlows * kPerFlow, *pool);
  sender.join();
  ASSERT_EQ(seen.size(), kFlows * kPerFlow);
  std::map<std::uint16_t, std::set<std::uint16_t>> queues_of_flow;
  std::set<std::uint16_t> queues_used;
  for (const Seen& s : seen) {
    queues_of_flow[s.src_port].insert(s.queue);
    queues_used.insert(s.queue);
  }
  for (const auto& [flow, qs] : queues_of_flow) EXPECT_EQ(qs.size(), 1u) << "flow from port " << flow;
  EXPECT_EQ(queues_used.size(), 2u) << "16 flows hashed onto 2 queues used only one";
}

TEST_P(AfPacketRing, RestoresVlanTagsTheKernelStripped) {
  if (auto why = test::netns_unavailable_reason()) GTEST_SKIP() << *why;
  Net net;
  ASSERT_TRUE(make_net(net).is_ok());
  auto pool = make_pool();
  auto port = open_port(*net.ours, fmt::format("interface = '{}'\ntpacket_version = {}\n", net.veth->a().name, GetParam()),
                        pool.get());
  ASSERT_TRUE(port) << port.message();
  // The receiving kernel moves a tag into skb metadata (skb_vlan_untag) whatever the sender did;
  // send tagged frames from a raw socket on the peer (no 8021q module needed).
  std::vector<std::uint8_t> frame(256);
  wire::FrameSpec f;
  f.eth.vlan_count = 1;
  f.eth.vlans[0].tci = 100 | (3 << 13);
  f.eth.dst = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
  f.eth.src = {2, 0, 0, 0, 0, 9};
  f.ipv4.src = wire::ipv4(10, 78, 0, 2);
  f.ipv4.dst = wire::ipv4(10, 78, 0, 1);
  f.udp = {1234, 6200};
  f.payload_len = 40;
  frame.resize(wire::write_frame(f, frame.data(), frame.size()));
  ASSERT_GT(frame.size(), 0u);
  ASSERT_TRUE(net.peer->run([&] {
    int fd = socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, 0);
    sockaddr_ll sll{};
    sll.sll_family = AF_PACKET;
    sll.sll_ifindex = static_cast<int>(if_nametoindex(net.veth->b().name.c_str()));
    for (int i = 0; i < 20; ++i)
      sendto(fd, frame.data(), frame.size(), 0, reinterpret_cast<sockaddr*>(&sll), sizeof sll);
    close(fd);
  }));
  unsigned tagged = 0;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (tagged < 20 && std::chrono::steady_clock::now() < deadline) {
    Mbuf* pkts[32];
    unsigned n = port.value()->rx_queue(0)(pkts, 32);
    for (unsigned i = 0; i < n; ++i) {
      if (pkts[i]->data_len == frame.size() && !std::memcmp(pkts[i]->data(), frame.data(), frame.size())) ++tagged;
    }
    mbuf_free_bulk(pkts, n);
    if (!n) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(tagged, 20u) << "frames identical to what was sent, tag included";
  EXPECT_GE(port.value()->stats().extended.at("rx_vlan_reinserted"), 20u);
}

// Swaps Ethernet, IPv4 and UDP source and destination in place (what the engine's echo does).
void swap_in_place(Mbuf* m) {
  std::uint8_t* f = m->data();
  std::uint8_t tmp[16];
  std::memcpy(tmp, f, 6);
  std::memcpy(f, f + 6, 6);
  std::memcpy(f + 6, tmp, 6);
  std::uint8_t* ip = f + 14;
  std::memcpy(tmp, ip + 12, 4);
  std::memcpy(ip + 12, ip + 16, 4);
  std::memcpy(ip + 16, tmp, 4);
  std::uint8_t* udp = ip + (ip[0] & 0xf) * 4;
  std::memcpy(tmp, udp, 2);
  std::memcpy(udp, udp + 2, 2);
  std::memcpy(udp + 2, tmp, 2);
}

TEST_P(AfPacketRing, EchoesThroughTxBurstReachTheKernelClient) {
  if (auto why = test::netns_unavailable_reason()) GTEST_SKIP() << *why;
  Net net;
  ASSERT_TRUE(make_net(net).is_ok());
  auto pool = make_pool();
  auto port = open_port(*net.ours, fmt::format("interface = '{}'\ntpacket_version = {}\n", net.veth->a().name, GetParam()),
                        pool.get());
  ASSERT_TRUE(port) << port.message();
  constexpr unsigned kCount = 300;
  std::atomic<bool> done{false};
  std::atomic<unsigned> echoed{0};
  std::thread echo([&] {
    in_addr ours{};
    inet_pton(AF_INET, kOurIp, &ours);
    while (!done.load()) {
      Mbuf* pkts[32];
      Mbuf* out[32];
      unsigned n = port.value()->rx_queue(0)(pkts, 32), k = 0;
      for (unsigned i = 0; i < n; ++i) {
        const std::uint8_t* f = pkts[i]->data();
        if (wire::load_be16(f + 12) == wire::kEtherTypeIpv4 && f[23] == 17 && !std::memcmp(f + 30, &ours, 4)) {
          swap_in_place(pkts[i]);
          out[k++] = pkts[i];
        } else {
          mbuf_free(pkts[i]);
        }
      }
      unsigned sent = 0;
      while (sent < k) sent += port.value()->tx_queue(0)(out + sent, static_cast<std::uint16_t>(k - sent));
      echoed += k;
      if (!n) std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  });
  unsigned good = 0;
  ASSERT_TRUE(net.peer->run([&] {
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_in d{};
    d.sin_family = AF_INET;
    d.sin_port = htons(7007);
    inet_pton(AF_INET, kOurIp, &d.sin_addr);
    connect(fd, reinterpret_cast<sockaddr*>(&d), sizeof d);
    timeval tv{2, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    for (unsigned i = 0; i < kCount; ++i) {
      std::string p = payload_for(i % 4, i);
      send(fd, p.data(), p.size(), 0);
      char buf[256];
      ssize_t r = recv(fd, buf, sizeof buf, 0);
      if (r == static_cast<ssize_t>(p.size()) && !std::memcmp(buf, p.data(), p.size())) ++good;
    }
    close(fd);
  }));
  done = true;
  echo.join();
  EXPECT_EQ(good, kCount);
  EXPECT_EQ(port.value()->stats().tx_queues[0].tx_packets, echoed.load());
  port.value()->stop();
  port.value().reset();
  EXPECT_EQ(pool->available(), pool->count());
}

INSTANTIATE_TEST_SUITE_P(Versions, AfPacketRing, ::testing::Values(3, 2));

TEST(AfPacket, V3KeysAreRejectedWithV2) {
  auto sec = ConfigSection::parse_string("interface = 'x'\ntpacket_version = 2\nblock_timeout_ms = 5\n", "a.toml");
  ASSERT_TRUE(sec);
  auto spec = find_pmd("af_packet")->parse(sec.value());
  ASSERT_FALSE(spec);
  EXPECT_NE(spec.message().find("a.toml:3"), std::string::npos) << spec.message();
}

TEST(AfPacket, MissingInterfaceSaysSo) {
  auto pool = make_pool();
  auto sec = ConfigSection::parse_string("interface = 'rp-no-such-if'\n");
  ASSERT_TRUE(sec);
  auto spec = find_pmd("af_packet")->parse(sec.value());
  ASSERT_TRUE(spec) << spec.message();
  PortEnv env;
  env.name = "x";
  env.pool = pool.get();
  auto port = spec.value()->open(env);
  ASSERT_FALSE(port);
  EXPECT_NE(port.message().find("rp-no-such-if"), std::string::npos) << port.message();
}

}  // namespace
}  // namespace rawpipe
