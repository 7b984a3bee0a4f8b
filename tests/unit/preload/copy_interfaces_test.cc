// Which config ports make the preload library filter copies out of offloaded sockets' kernel
// sides (preload/copy_interfaces.cc), on interfaces every machine has (lo) or none has.
#include <net/if.h>

#include <gtest/gtest.h>

#include <string>

#include "preload/copy_interfaces.hh"

namespace rawpipe::preload {
namespace {

std::string port(const std::string& pmd, const std::string& interface) {
  return "[[ports]]\nname = \"p" + pmd + interface + "\"\npmd = \"" + pmd + "\"\n" +
         (interface.empty() ? "" : "interface = \"" + interface + "\"\n");
}

TEST(CopyInterfaces, AfPacketAndAutoPortsGiveTheirInterfaces) {
  CopyInterfaces c;
  ASSERT_TRUE(copy_interfaces(port("af_packet", "lo") + port("auto", "lo"), &c));
  ASSERT_EQ(c.n, 2);
  EXPECT_EQ(c.ifindex[0], static_cast<int>(if_nametoindex("lo")));
  EXPECT_EQ(c.ifindex[1], static_cast<int>(if_nametoindex("lo")));
}

TEST(CopyInterfaces, AfXdpPortsGiveNone) {
  CopyInterfaces c;
  ASSERT_TRUE(copy_interfaces(port("af_xdp", "lo"), &c));
  EXPECT_EQ(c.n, 0);
  ASSERT_TRUE(copy_interfaces(port("af_xdp", "lo") + port("af_packet", "lo"), &c));
  EXPECT_EQ(c.n, 1);
}

TEST(CopyInterfaces, AnyOtherDriverOrAnUnknownInterfaceLeavesTheKernelSidesUnread) {
  CopyInterfaces c;
  for (const char* pmd : {"pcap", "dpdk", "socket", "mlx5", "mana", "synth", ""})
    EXPECT_FALSE(copy_interfaces(port("af_packet", "lo") + port(pmd, "lo"), &c)) << pmd;
  EXPECT_FALSE(copy_interfaces(port("af_packet", "rawpipe-none0"), &c));
  EXPECT_FALSE(copy_interfaces(port("af_packet", ""), &c));
  std::string nine;
  for (int i = 0; i < CopyInterfaces::kMax + 1; ++i) nine += port("af_packet", "lo");
  EXPECT_FALSE(copy_interfaces(nine, &c));
}

TEST(CopyInterfaces, TextThatIsNoConfigLeavesThemUnread) {
  CopyInterfaces c;
  EXPECT_FALSE(copy_interfaces("[[ports]\npmd = ", &c));
  EXPECT_FALSE(copy_interfaces("[run]\nduration = 1\n", &c));
  EXPECT_FALSE(copy_interfaces("ports = 3\n", &c));
  EXPECT_EQ(c.n, 0);
}

}  // namespace
}  // namespace rawpipe::preload
