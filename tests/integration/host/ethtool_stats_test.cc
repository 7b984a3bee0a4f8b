// host::ethtool_stats (what the mana port reads its NIC drop counters with) against `ethtool -S`
// on a veth the test creates: the same names and, for counters that do not move while idle, the
// same values. Needs root for the namespace; skips with the reason otherwise.
#include <gtest/gtest.h>

#include <map>
#include <sstream>

#include "pmd/host/netdev.hh"
#include "tests/support/netns.hh"

namespace rawpipe {
namespace {

TEST(EthtoolStats, MatchesEthtoolDashS) {
  if (auto why = test::netns_unavailable_reason()) GTEST_SKIP() << *why;
  auto ns = test::NetNs::create("rpes");
  ASSERT_TRUE(ns) << ns.message();
  auto veth = test::VethPair::create({&*ns, test::unique_name("rpes"), {"10.213.0.1/24"}},
                                     {&*ns, test::unique_name("rpes"), {"10.213.0.2/24"}});
  ASSERT_TRUE(veth) << veth.message();
  const std::string ifname = veth->a().name;

  auto text = test::output_in(&*ns, {"ethtool", "-S", ifname});
  ASSERT_TRUE(text) << text.message();
  std::map<std::string, std::uint64_t> reference;
  std::istringstream in(text.value());
  for (std::string line; std::getline(in, line);) {
    const auto colon = line.rfind(':');
    if (colon == std::string::npos || line.find("NIC statistics") != std::string::npos) continue;
    std::string name = line.substr(0, colon);
    name.erase(0, name.find_first_not_of(' '));
    reference[name] = std::stoull(line.substr(colon + 1));
  }
  ASSERT_FALSE(reference.empty()) << text.value();

  Result<std::map<std::string, std::uint64_t>> ours = Status::error("not run");
  ASSERT_TRUE(ns->run([&] { ours = host::ethtool_stats(ifname); }));
  ASSERT_TRUE(ours) << ours.message();
  EXPECT_EQ(ours->size(), reference.size());
  for (const auto& [name, value] : reference) {
    ASSERT_TRUE(ours->count(name)) << name << " missing";
    if (name == "peer_ifindex") {
      EXPECT_EQ(ours->at(name), value);
    }
  }

  Result<std::map<std::string, std::uint64_t>> missing = Status::error("not run");
  ASSERT_TRUE(ns->run([&] { missing = host::ethtool_stats("rpnosuch0"); }));
  EXPECT_FALSE(missing);
}

}  // namespace
}  // namespace rawpipe
