// Parsers of the /proc, /sys and netlink data `rawpipe doctor` and the ports read, on fixture text.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <linux/if_link.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "services/doctor/facts.hh"
#include "services/doctor/host_text.hh"
#include "pmd/host/caps.hh"
#include "pmd/host/link_stats.hh"
#include "pmd/host/netdev.hh"

namespace rawpipe::doctor {
namespace {

namespace fs = std::filesystem;

TEST(HostText, MountsDecodeEscapesAndFindByType) {
  const char* text =
      "sysfs /sys sysfs rw,nosuid,nodev,noexec,relatime 0 0\n"
      "bpf /sys/fs/bpf bpf rw,nosuid,nodev,noexec,relatime,mode=700 0 0\n"
      "hugetlbfs /mnt/huge\\040pages hugetlbfs rw,relatime,pagesize=2M 0 0\n"
      "broken-line\n";
  auto m = parse_mounts(text);
  ASSERT_EQ(m.size(), 3u);
  const MountEntry* huge = find_mount(m, "hugetlbfs");
  ASSERT_NE(huge, nullptr);
  EXPECT_EQ(huge->point, "/mnt/huge pages");
  EXPECT_EQ(huge->options, "rw,relatime,pagesize=2M");
  ASSERT_NE(find_mount(m, "bpf", "/sys/fs/bpf"), nullptr);
  EXPECT_EQ(find_mount(m, "bpf", "/elsewhere"), nullptr);
  EXPECT_EQ(find_mount(m, "tmpfs"), nullptr);
}

TEST(HostText, CpuListsParseAndFormat) {
  auto cpus = parse_cpu_list("0-3,8,10-11\n");
  ASSERT_TRUE(cpus) << cpus.message();
  EXPECT_EQ(cpus.value(), (std::vector<int>{0, 1, 2, 3, 8, 10, 11}));
  EXPECT_EQ(format_cpu_list(cpus.value()), "0-3,8,10-11");
  EXPECT_EQ(format_cpu_list({5}), "5");
  auto empty = parse_cpu_list("\n");
  ASSERT_TRUE(empty);
  EXPECT_TRUE(empty->empty());
  EXPECT_FALSE(parse_cpu_list("3-1"));
  EXPECT_FALSE(parse_cpu_list("1,x"));
  EXPECT_FALSE(parse_cpu_list("1-"));
}

TEST(HostText, MeminfoAndSysfsNumbers) {
  auto m = parse_meminfo("MemTotal:       16318412 kB\nHugePages_Total:      64\nHugePages_Free:       60\n"
                         "Hugepagesize:       2048 kB\nnonsense\n");
  EXPECT_EQ(m["MemTotal"], 16318412u);
  EXPECT_EQ(m["HugePages_Total"], 64u);
  EXPECT_EQ(m["HugePages_Free"], 60u);
  EXPECT_EQ(m["Hugepagesize"], 2048u);
  EXPECT_EQ(m.count("nonsense"), 0u);
  auto v = parse_sysfs_int("-1\n");
  ASSERT_TRUE(v);
  EXPECT_EQ(*v, -1);
  EXPECT_FALSE(parse_sysfs_int("12abc"));
  EXPECT_FALSE(parse_sysfs_int(""));
}

TEST(HostText, CapabilitiesFromProcStatus) {
  const char* status = "Name:\tcat\nCapInh:\t0000000000000000\nCapPrm:\t0000000000003000\n"
                       "CapEff:\t0000000000002000\nCapBnd:\t000001ffffffffff\n";
  auto caps = host::parse_proc_status_caps(status);
  ASSERT_TRUE(caps) << caps.message();
  EXPECT_TRUE(caps->has(13));   // CAP_NET_RAW
  EXPECT_FALSE(caps->has(12));  // CAP_NET_ADMIN: permitted only, not effective
  EXPECT_EQ(caps->permitted, 0x3000u);
  EXPECT_EQ(caps->bounding, 0x1ffffffffffu);
  EXPECT_FALSE(host::parse_proc_status_caps("Name:\tx\n"));
}

TEST(HostText, OwnCapabilitiesMatchProcSelfStatus) {
  std::ifstream in("/proc/self/status");
  std::string text((std::istreambuf_iterator<char>(in)), {});
  auto proc = host::parse_proc_status_caps(text);
  auto live = host::read_caps();
  ASSERT_TRUE(proc);
  ASSERT_TRUE(live);
  EXPECT_EQ(proc->effective, live->effective);
}

class SysfsTree : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("rawpipe-doctor-sysfs-" + std::to_string(getpid()));
    fs::remove_all(root_);
  }
  void TearDown() override { fs::remove_all(root_); }
  void write(const std::string& rel, const std::string& text) {
    fs::create_directories((root_ / rel).parent_path());
    std::ofstream(root_ / rel) << text;
  }
  fs::path root_;
};

TEST_F(SysfsTree, CpuNodesAndNicNode) {
  write("devices/system/node/node0/cpulist", "0-3\n");
  write("devices/system/node/node1/cpulist", "4-7\n");
  write("devices/system/node/has_cpu", "0-1\n");  // not a node directory
  write("class/net/eth9/device/numa_node", "1\n");
  write("class/net/veth9/device/numa_node", "-1\n");
  auto nodes = read_cpu_nodes(root_.string());
  ASSERT_EQ(nodes.size(), 8u);
  EXPECT_EQ(nodes[0], 0);
  EXPECT_EQ(nodes[5], 1);
  EXPECT_EQ(host::netdev_numa_node("eth9", root_.string()), 1);
  EXPECT_EQ(host::netdev_numa_node("veth9", root_.string()), -1);
  EXPECT_EQ(host::netdev_numa_node("missing0", root_.string()), -1);
}

// An RTM_NEWLINK message as the kernel sends it: header, ifinfomsg, an IFNAME and an IFLA_STATS64.
std::vector<std::uint8_t> newlink(const rtnl_link_stats64& st, bool with_stats) {
  std::vector<std::uint8_t> m(NLMSG_LENGTH(sizeof(ifinfomsg)));
  auto attr = [&](unsigned short type, const void* data, std::size_t len) {
    rtattr a{};
    a.rta_type = type;
    a.rta_len = static_cast<unsigned short>(RTA_LENGTH(len));
    const std::size_t at = m.size();
    m.resize(at + RTA_ALIGN(a.rta_len));
    std::memcpy(m.data() + at, &a, sizeof(a));
    std::memcpy(m.data() + at + RTA_LENGTH(0), data, len);
  };
  attr(IFLA_IFNAME, "veth0", 6);
  if (with_stats) attr(IFLA_STATS64, &st, sizeof(st));
  nlmsghdr h{};
  h.nlmsg_type = RTM_NEWLINK;
  h.nlmsg_len = static_cast<std::uint32_t>(m.size());
  std::memcpy(m.data(), &h, sizeof(h));
  return m;
}

TEST(LinkStats, ParsesIflaStats64) {
  rtnl_link_stats64 st{};
  st.rx_dropped = 7;
  st.rx_missed_errors = 11;
  st.rx_fifo_errors = 3;
  st.rx_over_errors = 2;
  auto m = newlink(st, true);
  auto c = host::parse_newlink_stats(m);
  ASSERT_TRUE(c) << c.message();
  EXPECT_EQ(c->rx_dropped, 7u);
  EXPECT_EQ(c->rx_missed_errors, 11u);
  EXPECT_EQ(c->rx_fifo_errors, 3u);
  EXPECT_EQ(c->rx_over_errors, 2u);
  EXPECT_FALSE(host::parse_newlink_stats(newlink(st, false)));
  m.resize(m.size() / 2);  // a length field beyond the bytes received
  EXPECT_FALSE(host::parse_newlink_stats(m));
}

TEST(LinkStats, LoopbackCountersStartAtZero) {
  auto d = host::LinkDrops::open(1);  // lo is ifindex 1 in every namespace
  ASSERT_TRUE(d) << d.message();
  auto c = d->read();
  ASSERT_TRUE(c) << c.message();
  std::map<std::string, std::uint64_t> e;
  d->add_to(e);
  EXPECT_EQ(e.count("if_rx_dropped"), 1u);
  EXPECT_EQ(e.count("if_rx_missed_errors"), 1u);
}

}  // namespace
}  // namespace rawpipe::doctor

namespace rawpipe::doctor {
namespace {

TEST(HostText, ProcNetTcpListenersBlockTheirPort) {
  const char* tcp =
      "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
      "   0: 0100007F:24F8 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 4242 1 0 100 0 0 10 0\n"
      "   1: 00000000:0016 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 17 1 0 100 0 0 10 0\n"
      "   2: 0100007F:24F8 0100007F:D431 01 00000000:00000000 00:00000000 00000000     0        0 0 1 0 20 4 30 10 -1\n";
  auto e = parse_proc_net_tcp(tcp);
  ASSERT_EQ(e.size(), 3u);
  EXPECT_EQ(e[0].local_hex, "0100007F");
  EXPECT_EQ(e[0].port, 9464);
  EXPECT_EQ(e[0].state, 0x0A);
  EXPECT_EQ(e[0].inode, 4242u);
  const std::uint32_t loopback = htonl(0x7F000001), other = htonl(0x7F000002);
  EXPECT_TRUE(tcp_listener_blocks(e[0], loopback, 9464));
  EXPECT_TRUE(tcp_listener_blocks(e[0], 0, 9464));  // 0.0.0.0 needs every address free
  EXPECT_FALSE(tcp_listener_blocks(e[0], other, 9464));
  EXPECT_FALSE(tcp_listener_blocks(e[0], loopback, 9465));
  EXPECT_TRUE(tcp_listener_blocks(e[1], other, 22));  // a wildcard listener holds every address
  TcpSocketEntry any6{std::string(32, '0'), 9464, 0x0A, 1};
  EXPECT_TRUE(tcp_listener_blocks(any6, loopback, 9464));
  TcpSocketEntry mapped{"0000000000000000FFFF00000100007F", 9464, 0x0A, 1};
  EXPECT_TRUE(tcp_listener_blocks(mapped, loopback, 9464));
  EXPECT_FALSE(tcp_listener_blocks(mapped, other, 9464));
  TcpSocketEntry v6_loopback{"00000000000000000000000001000000", 9464, 0x0A, 1};
  EXPECT_FALSE(tcp_listener_blocks(v6_loopback, 0, 9464));
}

}  // namespace
}  // namespace rawpipe::doctor

namespace rawpipe::doctor {
namespace {

TEST(HostText, CmdlineCpusOfIsolationParameters) {
  const std::vector<int> online = {0, 1, 2, 3};
  EXPECT_EQ(cmdline_cpus("root=/dev/sda isolcpus=managed_irq,domain,1-2,3 quiet", "isolcpus", online),
            (std::vector<int>{1, 2, 3}));
  EXPECT_EQ(cmdline_cpus("nohz_full=2 nohz_full=3\n", "nohz_full", online), (std::vector<int>{3}));  // the last wins
  EXPECT_EQ(cmdline_cpus("rcu_nocbs=all", "rcu_nocbs", online), online);
  EXPECT_TRUE(cmdline_cpus("rcu_nocbs", "rcu_nocbs", online).empty());
  EXPECT_TRUE(cmdline_cpus("xisolcpus=1 isolcpus_x=2", "isolcpus", online).empty());
  EXPECT_TRUE(cmdline_cpus("isolcpus=nohz,domain", "isolcpus", online).empty());
}

}  // namespace
}  // namespace rawpipe::doctor
