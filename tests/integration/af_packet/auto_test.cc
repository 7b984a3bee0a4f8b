// pmd = "auto": the ladder picks the best rung that opens on a veth interface, reports why the
// rungs above were skipped, falls back to the socket rung without CAP_NET_RAW, and explains
// every rung when nothing works.
#include <linux/capability.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "pipeline/buf/pool.hh"
#include "pipeline/config/section.hh"
#include "pipeline/port/registry.hh"
#include "tests/support/netns.hh"
#include "pipeline/port/driver.hh"

namespace rawpipe {
namespace {

std::unique_ptr<Pool> make_pool() {
  PoolConfig c;
  c.count = 1024;
  c.cache_size = 0;
  c.huge_pages = HugePages::kNever;
  return std::move(Pool::create(c)).value();
}

Result<std::unique_ptr<Port>> open_auto(const std::string& toml, Pool* pool) {
  const PmdDriver* d = find_pmd("auto");
  if (!d) return Status::error("auto not built");
  auto sec = ConfigSection::parse_string(toml, "auto.toml");
  if (!sec) return sec.status();
  auto spec = d->parse(sec.value());
  if (!spec) return spec.status();
  RAWPIPE_TRY(sec->finish());
  PortEnv env;
  env.name = "auto0";
  env.pool = pool;
  return spec.value()->open(env);
}

// Capabilities are per thread: drops CAP_NET_RAW (and CAP_NET_ADMIN, CAP_SYS_ADMIN, CAP_BPF) from
// the calling thread's effective set only.
bool drop_raw_capabilities() {
  __user_cap_header_struct hdr{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2]{};
  if (syscall(SYS_capget, &hdr, data) != 0) return false;
  for (int cap : {CAP_NET_RAW, CAP_NET_ADMIN, CAP_SYS_ADMIN, CAP_BPF, CAP_PERFMON})
    data[cap / 32].effective &= ~(1u << (cap % 32));
  return syscall(SYS_capset, &hdr, data) == 0;
}

TEST(AutoPmd, PicksTheBestRungThatOpensAndSaysWhyOthersWereSkipped) {
  if (auto why = test::netns_unavailable_reason()) GTEST_SKIP() << *why;
  auto ns = test::NetNs::create("rpau");
  ASSERT_TRUE(ns) << ns.message();
  auto peer = test::NetNs::create("rpaq");
  ASSERT_TRUE(peer) << peer.message();
  auto veth = test::VethPair::create({&ns.value(), "", {"10.80.0.1/24"}}, {&peer.value(), "", {"10.80.0.2/24"}});
  ASSERT_TRUE(veth) << veth.message();
  auto pool = make_pool();
  Result<std::unique_ptr<Port>> port = Status::error("not run");
  ASSERT_TRUE(ns.value().run([&] { port = open_auto(fmt::format("interface = '{}'\n", veth.value().a().name), pool.get()); }));
  ASSERT_TRUE(port) << port.message();
  const std::string report = port.value()->path_report();
  EXPECT_NE(report.find("skipped mlx5: "), std::string::npos) << report;
  EXPECT_NE(report.find("skipped mana: "), std::string::npos) << report;
  const std::string_view chosen = port.value()->pmd_name();
  if (find_pmd("af_xdp")) {
    // af_xdp is chosen, or its reason is printed and af_packet is.
    EXPECT_TRUE(chosen == "af_xdp" || (chosen == "af_packet" && report.find("skipped af_xdp: ") != std::string::npos))
        << report;
  } else {
    EXPECT_EQ(chosen, "af_packet") << report;
    EXPECT_NE(report.find("skipped af_xdp: not built"), std::string::npos) << report;
  }
  EXPECT_EQ(port.value()->stats().extended.at(fmt::format("auto_chosen_{}", chosen)), 1u);
  port.value().reset();
  EXPECT_EQ(pool->available(), pool->count());
}

TEST(AutoPmd, WithoutCapNetRawFallsBackToSockets) {
  if (auto why = test::netns_unavailable_reason()) GTEST_SKIP() << *why;
  auto ns = test::NetNs::create("rpau");
  ASSERT_TRUE(ns) << ns.message();
  auto peer = test::NetNs::create("rpaq");
  ASSERT_TRUE(peer) << peer.message();
  auto veth = test::VethPair::create({&ns.value(), "", {"10.81.0.1/24"}}, {&peer.value(), "", {"10.81.0.2/24"}});
  ASSERT_TRUE(veth) << veth.message();
  auto pool = make_pool();
  Result<std::unique_ptr<Port>> port = Status::error("not run");
  bool dropped = false;
  ASSERT_TRUE(ns.value().run([&] {
    dropped = drop_raw_capabilities();
    port = open_auto(fmt::format("interface = '{}'\nladder = ['af_xdp', 'af_packet', 'socket']\n", veth.value().a().name),
                     pool.get());
  }));
  ASSERT_TRUE(dropped) << "capset failed";
  ASSERT_TRUE(port) << port.message();
  EXPECT_EQ(port.value()->pmd_name(), "socket");
  const std::string report = port.value()->path_report();
  EXPECT_NE(report.find("skipped af_packet: "), std::string::npos) << report;
  EXPECT_NE(report.find("CAP_NET_RAW"), std::string::npos) << report;
  EXPECT_EQ(report.find("skipped mlx5"), std::string::npos) << "not in the configured ladder: " << report;
}

TEST(AutoPmd, NoUsableRungExplainsEachOne) {
  auto pool = make_pool();
  auto port = open_auto("interface = 'rp-missing0'\n", pool.get());
  ASSERT_FALSE(port);
  for (const char* rung : {"mlx5", "mana", "af_xdp", "af_packet", "socket"})
    EXPECT_NE(port.message().find(fmt::format("\n  {}: ", rung)), std::string::npos) << rung << ": " << port.message();
  EXPECT_NE(port.message().find("rp-missing0"), std::string::npos);
}

TEST(AutoPmd, LadderKeyIsChecked) {
  auto pool = make_pool();
  auto port = open_auto("interface = 'x'\nladder = ['af_packet', 'netmap']\n", pool.get());
  ASSERT_FALSE(port);
  EXPECT_NE(port.message().find("auto.toml:2"), std::string::npos) << port.message();
  EXPECT_NE(port.message().find("netmap"), std::string::npos) << port.message();
}

}  // namespace
}  // namespace rawpipe
