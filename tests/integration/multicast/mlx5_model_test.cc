// Multicast on mlx5: an endpoint rule on a group makes the port join the group on its interface
// (the kernel's IGMP membership, seen in /proc/net/igmp) and steer the group's MAC to its queues
// with a flow rule; the membership goes with the rule and with stop. Runs the mlx5 port on its
// device model standing in front of a veth the test creates (the model names the interface for
// the joins; its queues are its own). Needs root; skips with the reason otherwise.
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <sstream>

#include "pipeline/buf/pool.hh"
#include "pipeline/classify/rule.hh"
#include "pipeline/config/section.hh"
#include "pipeline/parse/parse.hh"
#include "pipeline/port/driver.hh"
#include "pipeline/port/port.hh"
#include "pipeline/port/registry.hh"
#include "tests/support/netns.hh"

namespace rawpipe {
namespace {

// Whether /proc/net/igmp (of the calling thread's namespace) lists group (as the kernel prints it: hex, host order of the be32) on ifname.
bool igmp_joined(const std::string& ifname, const std::string& group_hex) {
  // This thread's namespace: /proc/net follows the process's main thread.
  std::ifstream in("/proc/thread-self/net/igmp");
  std::string line;
  bool on_if = false;
  while (std::getline(in, line)) {
    if (!line.empty() && line[0] != '\t' && line[0] != ' ') {
      std::istringstream w(line);
      std::string idx, dev;
      w >> idx >> dev;
      on_if = dev == ifname || dev == ifname + ":";
      continue;
    }
    if (on_if && line.find(group_hex) != std::string::npos) return true;
  }
  return false;
}

SteeringRules rules(const std::vector<std::pair<std::string, std::uint32_t>>& list) {
  SteeringRules r;
  std::uint16_t ep = 0;
  for (const auto& [text, tag] : list) {
    auto m = parse_match_rule(text);
    EXPECT_TRUE(m) << m.message();
    r.rules.push_back({m.value(), ep++, tag});
  }
  return r;
}

TEST(Mlx5Multicast, GroupRuleJoinsOnTheInterfaceAndSteersTheGroupMac) {
  if (auto why = test::netns_unavailable_reason()) GTEST_SKIP() << *why;
  auto ns = test::NetNs::create("rpmc");
  ASSERT_TRUE(ns) << ns.message();
  const std::string ifname = test::unique_name("rpmc");
  auto veth = test::VethPair::create({&*ns, ifname, {"10.214.0.1/24"}}, {&*ns, "", {"10.214.0.2/24"}});
  ASSERT_TRUE(veth) << veth.message();

  PoolConfig pc;
  pc.name = "mc";
  pc.count = 4096;
  pc.huge_pages = HugePages::kNever;
  auto pool = Pool::create(pc);
  ASSERT_TRUE(pool) << pool.message();

  constexpr std::uint64_t kFrames = 5000;
  const std::string group_hex = "010101EF";  // 239.1.1.1
  ASSERT_TRUE(ns->run([&] {
    auto doc = ConfigSection::parse_string(fmt::format("interface = \"{}\"\ninject_count = {}\n"
                                                       "inject_dst = \"239.1.1.1:5000\"\n",
                                                       ifname, kFrames));
    ASSERT_TRUE(doc) << doc.message();
    auto spec = find_pmd("mlx5-model")->parse(doc.value());
    ASSERT_TRUE(spec) << spec.message();
    ASSERT_TRUE(doc->finish());
    PortEnv env;
    env.name = "mc";
    env.rx_queues = env.tx_queues = 1;
    env.rx_ring_size = env.tx_ring_size = 256;
    env.pool = pool.value().get();
    auto opened = spec.value()->open(env);
    ASSERT_TRUE(opened) << opened.message();
    Port& port = *opened.value();
    EXPECT_FALSE(igmp_joined(ifname, group_hex)) << "joined before any rule named the group";

    // The rule goes in before the wire starts: frames no rule steers go to the kernel, gone.
    ASSERT_TRUE(port.update_steering(rules({{"udp dst 239.1.1.1:5000", 1}})));
    EXPECT_TRUE(igmp_joined(ifname, group_hex)) << "no IGMP membership for 239.1.1.1 on " << ifname;
    EXPECT_EQ(port.stats().extended.at("multicast_groups_joined"), 1u);
    ASSERT_TRUE(port.start());

    // The group's frames (to 01:00:5e:01:01:01) reach the queue through the flow rule.
    std::uint64_t got = 0, tagged = 0;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (got < kFrames && std::chrono::steady_clock::now() < deadline) {
      Mbuf* pkts[32];
      const auto n = port.rx_queue(0)(pkts, 32);
      for (unsigned i = 0; i < n; ++i) tagged += pkts[i]->flow_tag == 1;
      got += n;
      mbuf_free_bulk(pkts, n);
    }
    EXPECT_EQ(got, kFrames);
    EXPECT_EQ(tagged, kFrames) << "every group frame carries the rule's flow tag";

    // A rule on a unicast address instead: the membership goes, and no rule steers the group MAC.
    ASSERT_TRUE(port.update_steering(rules({{"udp dst 10.214.0.1:5000", 2}})));
    EXPECT_FALSE(igmp_joined(ifname, group_hex)) << "the group stayed joined after its rule went";
    ASSERT_TRUE(port.update_steering(rules({{"udp dst 239.1.1.1:5000", 1}})));
    EXPECT_TRUE(igmp_joined(ifname, group_hex));
    port.stop();
    opened.value().reset();
    EXPECT_FALSE(igmp_joined(ifname, group_hex)) << "the group stayed joined after the port closed";
  }));
}

}  // namespace
}  // namespace rawpipe
