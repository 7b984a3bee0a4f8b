// The doctor's checks judging fabricated machines: each bad setup yields a FAIL (or warn) with the
// exact fix, and a good setup can run.
#include <gtest/gtest.h>
#include <linux/capability.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "rawpipe/privilege.hh"
#include "services/doctor/checks.hh"
#include "services/doctor/xdp_limits.hh"
#include "rawpipe/mbuf.hh"
#include "pipeline/port/registry.hh"
#include "pipeline/port/driver.hh"

namespace rawpipe::doctor {
namespace {

LoadOptions options() {
  LoadOptions o;
  o.find_pmd = &find_pmd;
  for (const PmdDriver* d : all_pmds()) o.known_pmds.push_back(d->name);
  o.cpu_count = 16;
  return o;
}

Needs needs(const std::string& ports, const std::string& pool_keys = "",
            const std::string& lcores = "[[lcores]]\nrx = [\"p0:0\"]\n") {
  std::string text = "[[pools]]\nname = \"rx\"\ncount = 4096\nbuf_size = 2048\n" + pool_keys + "\n" + ports + "\n" +
                     "[[endpoints]]\nname = \"e\"\naction = \"sink\"\nmatch = [\"udp dst *:5000\"]\n" + lcores;
  auto n = needs_from_text(text, "test.toml", options());
  EXPECT_TRUE(n) << n.message();
  return n ? std::move(n).value() : Needs();
}

std::uint64_t bit(int cap) { return std::uint64_t(1) << cap; }

// A machine where everything an AF_XDP port on veth0 needs is in place.
HostFacts good_host() {
  HostFacts h;
  h.caps_known = true;
  h.caps.effective = bit(CAP_NET_RAW) | bit(CAP_NET_ADMIN) | bit(39) | bit(CAP_PERFMON) | bit(CAP_IPC_LOCK);
  h.is_root = true;
  h.memlock_soft = h.memlock_hard = 8u << 20;
  h.hugepages_known = true;
  h.hugepages_total = h.hugepages_free = 64;
  h.meminfo_known = true;
  h.mem_total = 16ull << 30;
  h.mem_available = 12ull << 30;
  h.commit_limit = 8ull << 30;
  h.mounts = parse_mounts("bpf /sys/fs/bpf bpf rw 0 0\n");
  h.interfaces = {"lo", "veth0"};
  NetdevFacts n;
  n.name = "veth0";
  n.exists = true;
  n.driver = "veth";
  n.mtu = 1500;
  n.up = true;
  n.channels_known = true;
  n.channels.max_rx = n.channels.max_tx = 4;
  n.channels.rx = n.channels.tx = 1;
  n.probes = {{"mlx5", "pmd mlx5: interface veth0 has driver 'veth', not mlx5_core"},
              {"mana", "pmd mana: interface veth0 has driver 'veth', not mana"}};
  h.netdevs["veth0"] = n;
  h.rdma_built = true;
  h.af_xdp_built = true;
  h.xdp_object = "/usr/lib/rawpipe/xdp_steer.bpf.o";
  h.binary = "/usr/bin/rawpipe";
  return h;
}

const std::string kAfXdp = "[[ports]]\nname = \"p0\"\npmd = \"af_xdp\"\ninterface = \"veth0\"\n";

const Finding* only(const Report& r, std::string_view check) {
  auto f = r.find(check);
  EXPECT_EQ(f.size(), 1u) << "findings named " << check << ":\n" << format_report(r);
  return f.empty() ? nullptr : f.front();
}

TEST(DoctorChecks, GoodAfXdpSetupCanRun) {
  Needs n = needs(kAfXdp);
  Report r = run_checks(&n, good_host());
  EXPECT_TRUE(r.can_run()) << format_report(r);
  const Finding* path = only(r, "path p0");
  ASSERT_NE(path, nullptr);
  EXPECT_EQ(path->detail, "AF_XDP on veth0 queue 0: XDP native, copy mode (driver veth has no zero-copy)");
  for (const Finding& f : r.findings()) EXPECT_EQ(f.level, Level::kOk) << f.check << ": " << f.detail;
}

TEST(DoctorChecks, MissingInterfaceNamesTheOnesThatExist) {
  Needs n = needs("[[ports]]\nname = \"p0\"\npmd = \"af_packet\"\ninterface = \"nosuch0\"\n");
  HostFacts h = good_host();
  NetdevFacts missing;
  missing.name = "nosuch0";
  missing.error = "no interface 'nosuch0'";
  h.netdevs["nosuch0"] = missing;
  Report r = run_checks(&n, h);
  EXPECT_FALSE(r.can_run());
  const Finding* f = only(r, "interface nosuch0");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->level, Level::kFail);
  EXPECT_NE(f->detail.find("does not exist in this network namespace"), std::string::npos);
  EXPECT_EQ(f->fix, "set interface = \"<name>\" in port 'p0' (test.toml:6) to one of: lo, veth0; or create the "
                    "interface, or run rawpipe in its namespace (ip netns exec <ns> rawpipe ...)");
}

TEST(DoctorChecks, NoCapabilitiesFailWithSetcap) {
  Needs n = needs(kAfXdp);
  HostFacts h = good_host();
  h.caps.effective = 0;
  Report r = run_checks(&n, h);
  EXPECT_FALSE(r.can_run());
  const Finding* raw = only(r, "capability CAP_NET_RAW");
  ASSERT_NE(raw, nullptr);
  EXPECT_EQ(raw->level, Level::kFail);
  // setcap replaces the file's whole set: every finding offers the same, complete line.
  const std::string line = "run as root, or grant the binary the capabilities: sudo setcap "
                           "cap_net_raw,cap_net_admin,cap_bpf,cap_perfmon,cap_ipc_lock+ep /usr/bin/rawpipe";
  EXPECT_EQ(raw->fix, line);
  for (const char* check : {"capability CAP_BPF", "capability CAP_NET_ADMIN", "capability CAP_PERFMON"}) {
    const Finding* f = only(r, check);
    ASSERT_NE(f, nullptr) << check;
    EXPECT_EQ(f->level, Level::kFail) << check;
    EXPECT_EQ(f->fix, line) << check;
  }
  // Without CAP_IPC_LOCK the 8 MiB pool is checked against the 8 MiB limit: it fits exactly.
  EXPECT_EQ(only(r, "memlock")->level, Level::kOk);
}

TEST(DoctorChecks, CapSysAdminStandsInForCapBpf) {
  Needs n = needs(kAfXdp);
  HostFacts h = good_host();
  h.caps.effective = bit(CAP_NET_RAW) | bit(CAP_NET_ADMIN) | bit(CAP_SYS_ADMIN);
  Report r = run_checks(&n, h);
  EXPECT_EQ(only(r, "capability CAP_BPF")->level, Level::kOk);
}

TEST(DoctorChecks, AutoWithoutCapabilitiesWarnsAndFallsBackToSocket) {
  Needs n = needs("[[ports]]\nname = \"p0\"\npmd = \"auto\"\ninterface = \"veth0\"\n");
  HostFacts h = good_host();
  h.caps.effective = 0;
  Report r = run_checks(&n, h);
  EXPECT_TRUE(r.can_run()) << format_report(r);
  EXPECT_EQ(only(r, "capability CAP_NET_RAW")->level, Level::kWarn);
  const Finding* path = only(r, "path p0");
  ASSERT_NE(path, nullptr);
  EXPECT_EQ(path->detail.rfind("auto on veth0 would choose socket; skips mlx5: driver veth is not mlx5_core; skips "
                               "mana: driver veth is not mana; ",
                               0),
            0u)
      << path->detail;
  EXPECT_NE(path->detail.find("skips af_xdp: needs CAP_NET_RAW, CAP_NET_ADMIN and CAP_BPF; skips af_packet: needs "
                              "CAP_NET_RAW"),
            std::string::npos);
}

TEST(DoctorChecks, JumboMtuFailsAfXdpWithTheLargestMtuThatFits) {
  Needs n = needs(kAfXdp);
  HostFacts h = good_host();
  h.netdevs["veth0"].mtu = 9000;
  Report r = run_checks(&n, h);
  EXPECT_FALSE(r.can_run());
  auto mtu = r.find("mtu veth0");
  ASSERT_EQ(mtu.size(), 2u) << format_report(r);  // the AF_XDP frame and the native XDP limit
  const std::uint32_t fits = 2048 - kMbufHeaderSize - 256 - 22;
  EXPECT_EQ(mtu[0]->level, Level::kFail);
  EXPECT_EQ(mtu[0]->fix.rfind(fmt::format("lower the MTU: sudo ip link set dev veth0 mtu {}", fits), 0), 0u)
      << mtu[0]->fix;
  EXPECT_NE(mtu[0]->fix.find("a 4096-byte buffer, the largest AF_XDP frame, would still only fit MTU"), std::string::npos);
  EXPECT_EQ(mtu[1]->level, Level::kWarn);  // attach = "auto": generic XDP instead of native
  EXPECT_EQ(mtu[1]->fix, "sudo ip link set dev veth0 mtu 3506");
}

TEST(DoctorChecks, MtuThatFitsA4096BufferSuggestsIt) {
  Needs n = needs(kAfXdp + "attach = \"native\"\n");
  HostFacts h = good_host();
  h.netdevs["veth0"].mtu = 3000;
  Report r = run_checks(&n, h);
  auto mtu = r.find("mtu veth0");
  ASSERT_EQ(mtu.size(), 1u) << format_report(r);
  EXPECT_EQ(mtu[0]->level, Level::kFail);
  EXPECT_NE(mtu[0]->fix.find("or set buf_size = 4096 in pool 'rx' (test.toml:1)"), std::string::npos) << mtu[0]->fix;
  h.netdevs["veth0"].mtu = 3600;  // above veth's native limit too; attach = "native" makes that fatal
  r = run_checks(&n, h);
  mtu = r.find("mtu veth0");
  ASSERT_EQ(mtu.size(), 2u);
  EXPECT_EQ(mtu[1]->level, Level::kFail);
  EXPECT_EQ(mtu[1]->fix, "sudo ip link set dev veth0 mtu 3506, or set attach = \"auto\" to accept generic XDP");
}

TEST(DoctorChecks, QueuesBeyondChannelsGiveTheEthtoolCommand) {
  // 1024 descriptors, so that the two queues' fill rings fit the helper's pool of 4096.
  Needs n = needs("[[ports]]\nname = \"p0\"\npmd = \"af_xdp\"\ninterface = \"veth0\"\nrx_queues = 2\n"
                  "tx_queues = 2\nrx_ring_size = 1024\n",
                  "", "[[lcores]]\nrx = [\"p0:0\", \"p0:1\"]\n");
  HostFacts h = good_host();
  Report r = run_checks(&n, h);
  const Finding* q = only(r, "queues veth0");
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(q->level, Level::kFail);
  EXPECT_EQ(q->fix, "sudo ethtool -L veth0 rx 2");
  h.netdevs["veth0"].channels = {0, 0, 8, 0, 0, 4};  // a NIC with combined channels, 4 of 8 in use
  Needs wide = needs("[[ports]]\nname = \"p0\"\npmd = \"af_xdp\"\ninterface = \"veth0\"\nrx_queues = 2\n"
                     "tx_queues = 2\nrx_ring_size = 1024\nqueue_offset = 5\n",
                     "", "[[lcores]]\nrx = [\"p0:0\", \"p0:1\"]\n");
  r = run_checks(&wide, h);
  EXPECT_EQ(only(r, "queues veth0")->fix, "sudo ethtool -L veth0 combined 7");
}

TEST(DoctorChecks, HugepagesRequireFailsAutoWarns) {
  HostFacts h = good_host();
  h.hugepages_total = 4;
  h.hugepages_free = 3;
  h.hugepages_reserved = 1;
  Needs req = needs("[[ports]]\nname = \"p0\"\npmd = \"synth\"\n", "huge_pages = \"require\"\n");
  Report r = run_checks(&req, h);
  const Finding* f = only(r, "hugepages");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->level, Level::kFail);
  // 4096 slots of 2048 bytes plus a cache line of padding = 8.25 MiB, 5 pages; 2 are available,
  // so the reservation grows by 3 to 7.
  EXPECT_EQ(f->fix.rfind("reserve them: echo 7 | sudo tee /sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages", 0), 0u)
      << f->fix;
  Needs aut = needs("[[ports]]\nname = \"p0\"\npmd = \"synth\"\n");
  r = run_checks(&aut, h);
  EXPECT_EQ(only(r, "hugepages")->level, Level::kWarn);
  EXPECT_TRUE(r.can_run());
}

TEST(DoctorChecks, MemlockBelowThePoolFailsUnlessIpcLock) {
  Needs n = needs(kAfXdp);
  HostFacts h = good_host();
  h.caps.effective &= ~bit(CAP_IPC_LOCK);
  h.memlock_soft = 64 * 1024;
  Report r = run_checks(&n, h);
  const Finding* f = only(r, "memlock");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->level, Level::kFail);
  EXPECT_EQ(f->fix.rfind("raise the limit before starting rawpipe: `ulimit -l 9216`", 0), 0u) << f->fix;
  h.caps.effective |= bit(CAP_IPC_LOCK);
  r = run_checks(&n, h);
  EXPECT_EQ(only(r, "memlock")->level, Level::kOk);
}

TEST(DoctorChecks, NumaMismatchNamesTheRightCpus) {
  Needs n = needs(kAfXdp, "", "[[lcores]]\ncpu = 1\nrx = [\"p0:0\"]\n");
  HostFacts h = good_host();
  for (int c = 0; c < 8; ++c) h.cpu_node[c] = c / 4;
  h.netdevs["veth0"].numa_node = 1;
  Report r = run_checks(&n, h);
  const Finding* f = only(r, "numa veth0");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->level, Level::kWarn);
  EXPECT_EQ(f->fix, "set cpu = <one of 4-7> in [[lcores]] id 0");
  h.netdevs["veth0"].numa_node = 0;
  r = run_checks(&n, h);
  EXPECT_EQ(only(r, "numa veth0")->level, Level::kOk);
}

TEST(DoctorChecks, BpffsMissingWarns) {
  Needs n = needs(kAfXdp);
  HostFacts h = good_host();
  h.mounts.clear();
  Report r = run_checks(&n, h);
  const Finding* f = only(r, "bpffs");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->level, Level::kWarn);
  EXPECT_EQ(f->fix.rfind("sudo mount -t bpf bpf /sys/fs/bpf", 0), 0u);
}

TEST(DoctorChecks, Mlx5OnAVethFailsWithTheDriverMismatch) {
  Needs n = needs("[[ports]]\nname = \"p0\"\npmd = \"mlx5\"\ninterface = \"veth0\"\n");
  Report r = run_checks(&n, good_host());
  EXPECT_FALSE(r.can_run());
  const Finding* f = only(r, "interface veth0");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->detail, "port 'p0' uses pmd mlx5 but veth0 has driver veth, not mlx5_core");
  EXPECT_TRUE(r.find("rdma veth0").empty()) << "the mismatch is reported once, by the interface check";
}

TEST(DoctorChecks, ManaVportHeldByAnUpNetdevFails) {
  Needs n = needs("[[ports]]\nname = \"p0\"\npmd = \"mana\"\ninterface = \"eth1\"\n");
  HostFacts h = good_host();
  NetdevFacts e;
  e.name = "eth1";
  e.exists = true;
  e.driver = "mana";
  e.mtu = 1500;
  e.up = true;
  e.rdma_devices = {"mana_0"};
  e.rdma_port = 2;
  e.probes = {{"mana", ""}};
  h.netdevs["eth1"] = e;
  Report r = run_checks(&n, h);
  const Finding* v = only(r, "mana vport eth1");
  ASSERT_NE(v, nullptr);
  EXPECT_EQ(v->level, Level::kFail);
  EXPECT_EQ(v->detail.rfind("vPort of eth1 = mana_0 port 2 (dev_port 1) is held by the kernel netdev", 0), 0u);
  EXPECT_EQ(v->fix.rfind("sudo ip link set eth1 down", 0), 0u);
  EXPECT_EQ(only(r, "rdma eth1")->level, Level::kOk);
  h.netdevs["eth1"].up = false;
  r = run_checks(&n, h);
  EXPECT_TRUE(r.can_run()) << format_report(r);
}

TEST(DoctorChecks, RdmaPreflightFailureIsTheFix) {
  Needs n = needs("[[ports]]\nname = \"p0\"\npmd = \"mlx5\"\ninterface = \"eth2\"\n");
  HostFacts h = good_host();
  NetdevFacts e;
  e.name = "eth2";
  e.exists = true;
  e.driver = "mlx5_core";
  e.up = true;
  e.probes = {{"mlx5", "pmd mlx5 on eth2: the interface has no RDMA device; load the RDMA module (modprobe mlx5_ib)"}};
  h.netdevs["eth2"] = e;
  h.ibverbs_error = "cannot load libibverbs.so.1";
  Report r = run_checks(&n, h);
  EXPECT_EQ(only(r, "rdma-core")->level, Level::kFail);
  EXPECT_EQ(only(r, "rdma eth2")->fix, e.probes["mlx5"]);
}

TEST(DoctorChecks, NoConfigChecksTheMachineAndCanRun) {
  HostFacts h = good_host();
  h.caps.effective = 0;
  h.hugepages_free = 0;
  Report r = run_checks(nullptr, h);
  EXPECT_TRUE(r.can_run()) << format_report(r);
  EXPECT_EQ(only(r, "capabilities")->level, Level::kWarn);
  EXPECT_EQ(only(r, "hugepages")->level, Level::kWarn);
  ASSERT_EQ(r.find("path veth0").size(), 1u);
  const nlohmann::json j = report_json(r);
  EXPECT_TRUE(j["can_run"].get<bool>());
  EXPECT_EQ(j["checks"].size(), r.findings().size());
}

TEST(DoctorChecks, MissingXdpProgramFailsAfXdpWarnsAuto) {
  HostFacts h = good_host();
  h.xdp_object.clear();
  h.xdp_object_error = "the XDP program xdp_steer.bpf.o was not found (looked in /x)";
  Needs n = needs(kAfXdp);
  Report r = run_checks(&n, h);
  EXPECT_EQ(only(r, "xdp program")->level, Level::kFail);
  EXPECT_EQ(only(r, "xdp program")->detail, h.xdp_object_error);
  Needs a = needs("[[ports]]\nname = \"p0\"\npmd = \"auto\"\ninterface = \"veth0\"\n");
  r = run_checks(&a, h);
  EXPECT_EQ(only(r, "xdp program")->level, Level::kWarn);
  EXPECT_NE(only(r, "path p0")->detail.find("would choose af_packet"), std::string::npos);
  EXPECT_NE(only(r, "path p0")->detail.find("skips af_xdp: its XDP program object is missing"), std::string::npos);
}

TEST(DoctorChecks, XdpLimits) {
  EXPECT_EQ(native_xdp_max_mtu("veth"), 3506u);
  EXPECT_EQ(native_xdp_max_mtu("ena"), 3498u);
  EXPECT_EQ(native_xdp_max_mtu("e1000"), 0u);
  EXPECT_TRUE(driver_has_xsk_zero_copy("ice"));
  EXPECT_FALSE(driver_has_xsk_zero_copy("veth"));
}

}  // namespace
}  // namespace rawpipe::doctor

namespace rawpipe::doctor {
namespace {

Needs needs_with(const std::string& ports, const std::string& extra) {
  std::string text = "[[pools]]\nname = \"rx\"\ncount = 4096\nbuf_size = 2048\n\n" + ports + "\n" +
                     "[[endpoints]]\nname = \"e\"\naction = \"sink\"\nmatch = [\"udp dst *:5000\"]\n" +
                     "[[lcores]]\nrx = [\"p0:0\"]\n" + extra;
  auto n = needs_from_text(text, "test.toml", options());
  EXPECT_TRUE(n) << n.message();
  return n ? std::move(n).value() : Needs();
}

const std::string kSynth = "[[ports]]\nname = \"p0\"\npmd = \"synth\"\n";

TEST(DoctorChecks, PoolBeyondRamAndSwapFailsBeyondAvailableFailsNearItWarns) {
  HostFacts h = good_host();
  h.hugepages_free = 0;
  h.mem_total = 4ull << 30;
  h.mem_available = 3ull << 30;
  // 2M buffers of 2048 + 64 bytes: 4.1 GiB, more than RAM + swap.
  Needs big = needs(kSynth, "huge_pages = \"never\"\n");
  big.pools[0].bytes = 5ull << 30;
  Report r = run_checks(&big, h);
  const Finding* f = only(r, "memory");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->level, Level::kFail);
  EXPECT_EQ(f->detail, "pool 'rx' maps 5.0 GiB, more than this machine's 4.0 GiB RAM and 0.0 MiB swap: the kernel "
                       "refuses the mapping (heuristic overcommit)");
  EXPECT_EQ(f->fix, "lower count or buf_size of pool 'rx' (test.toml:1)");
  // Always-overcommit maps it, but filling it needs more than is available.
  h.overcommit_mode = 1;
  r = run_checks(&big, h);
  f = only(r, "memory");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->level, Level::kFail);
  EXPECT_NE(f->detail.find("the OOM killer"), std::string::npos) << f->detail;
  // Strict overcommit: the commit limit decides.
  h.overcommit_mode = 2;
  h.commit_limit = 6ull << 30;
  h.committed_as = 2ull << 30;
  r = run_checks(&big, h);
  f = only(r, "memory");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->level, Level::kFail);
  EXPECT_NE(f->detail.find("strict overcommit"), std::string::npos) << f->detail;
  h.overcommit_mode = 0;
  big.pools[0].bytes = 5ull << 29;  // 2.5 GiB of 3 available
  r = run_checks(&big, h);
  f = only(r, "memory");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->level, Level::kWarn) << f->detail;
  big.pools[0].bytes = 1ull << 30;
  r = run_checks(&big, h);
  f = only(r, "memory");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->level, Level::kOk) << f->detail;
  // On reserved hugepages the pool takes no anonymous memory.
  Needs huge = needs(kSynth);
  huge.pools[0].bytes = 5ull << 30;
  h.hugepages_free = h.hugepages_total = 1024;  // 2 GiB: too few, the pool is mapped anonymously
  r = run_checks(&huge, h);
  f = only(r, "memory");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->level, Level::kFail) << f->detail;
  h.hugepages_free = h.hugepages_total = 2560;
  r = run_checks(&huge, h);
  f = only(r, "memory");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->level, Level::kOk) << f->detail;
  EXPECT_EQ(f->detail, "3.0 GiB available of 4.0 GiB RAM, 0.0 MiB swap free; every pool fits on reserved hugepages");
}

TEST(DoctorChecks, PeerTxChecksumWarnsOnlyWhereFramesStayUnfinished) {
  HostFacts h = good_host();
  NetdevFacts& n = h.netdevs["veth0"];
  n.peer_known = true;
  n.peer_ifname = "veth1";
  n.peer_name = "veth1 (namespace peer)";
  n.peer_exec = "ip netns exec peer ";
  n.peer_tx_csum = true;
  Needs off = needs(kAfXdp + "rx_checksum = \"off\"\n");
  Report r = run_checks(&off, h);
  const Finding* f = only(r, "checksums veth0");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->level, Level::kWarn);
  EXPECT_EQ(f->fix, "set rx_checksum = \"verify\" in port 'p0' (test.toml:6), or turn the offload off: ip netns exec "
                    "peer ethtool -K veth1 tx off");
  EXPECT_TRUE(r.can_run());
  Needs verify = needs(kAfXdp);
  r = run_checks(&verify, h);
  f = only(r, "checksums veth0");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->level, Level::kOk);
  EXPECT_EQ(f->detail, "its peer veth1 (namespace peer) has tx-checksumming on: UDP/TCP frames its kernel sends "
                       "arrive with partial checksums; af_xdp completes them in software (rx_checksum = \"verify\")");
  Needs packet = needs("[[ports]]\nname = \"p0\"\npmd = \"af_packet\"\ninterface = \"veth0\"\n");
  r = run_checks(&packet, h);
  f = only(r, "checksums veth0");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->level, Level::kOk);
  EXPECT_NE(f->detail.find("TP_STATUS_CSUMNOTREADY"), std::string::npos);
  n.peer_tx_csum = false;
  r = run_checks(&off, h);
  f = only(r, "checksums veth0");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->level, Level::kOk);
  // A NIC (no peer to read) says nothing.
  n.peer_known = false;
  r = run_checks(&off, h);
  EXPECT_TRUE(r.find("checksums").empty()) << format_report(r);
}

TEST(DoctorChecks, TapDirectoryMissingReadOnlyOrFullFails) {
  const std::string tap = "[[taps]]\nname = \"t\"\npath = \"/cap/rx.pcap\"\n";
  Needs n = needs_with(kSynth, tap);
  ASSERT_EQ(n.taps.size(), 1u);
  EXPECT_EQ(n.taps[0].dir, "/cap");
  HostFacts h = good_host();
  h.tap_dirs["/cap"] = DirFacts{};
  Report r = run_checks(&n, h);
  const Finding* f = only(r, "tap t");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->level, Level::kFail);
  EXPECT_EQ(f->fix, "mkdir -p /cap, or change the tap's path");
  h.tap_dirs["/cap"] = DirFacts{true, true, false, "Permission denied", true, 1ull << 30};
  r = run_checks(&n, h);
  f = only(r, "tap t");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->level, Level::kFail);
  EXPECT_NE(f->detail.find("is not writable"), std::string::npos) << f->detail;
  h.tap_dirs["/cap"] = DirFacts{true, true, true, "", true, 4096};
  r = run_checks(&n, h);
  f = only(r, "tap t");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->level, Level::kFail);
  EXPECT_EQ(f->detail, "the filesystem of /cap has 0.0 MiB free: tap 't' fails on its first write");
  h.tap_dirs["/cap"] = DirFacts{true, true, true, "", true, 100ull << 20};
  Needs rotating = needs_with(kSynth, tap + "rotate_bytes = 67108864\nmax_files = 4\n");
  r = run_checks(&rotating, h);
  f = only(r, "tap t");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->level, Level::kWarn) << f->detail;
  h.tap_dirs["/cap"].free_bytes = 1ull << 30;
  r = run_checks(&rotating, h);
  f = only(r, "tap t");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->level, Level::kOk) << f->detail;
}

TEST(DoctorChecks, MetricsAddressInUseNamesTheListener) {
  Needs n = needs_with(kSynth, "[metrics]\nlisten = \"127.0.0.1:9464\"\n");
  EXPECT_EQ(n.metrics_listen, "127.0.0.1:9464");
  HostFacts h = good_host();
  h.metrics_checked = true;
  h.metrics = {"127.0.0.1:9464", "Address already in use", true, "pid 42 (node_exporter)"};
  Report r = run_checks(&n, h);
  const Finding* f = only(r, "metrics");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->level, Level::kFail);
  EXPECT_EQ(f->detail, "[metrics] listen = \"127.0.0.1:9464\": the address is in use, listening: pid 42 (node_exporter)");
  h.metrics = {"127.0.0.1:9464", "", false, ""};
  r = run_checks(&n, h);
  f = only(r, "metrics");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->level, Level::kOk);
}

}  // namespace
}  // namespace rawpipe::doctor

namespace rawpipe::doctor {
namespace {

// Two lcores pinned to CPUs 2 and 3 of an 8-CPU machine polling one synth port.
Needs pinned_needs() {
  return needs("[[ports]]\nname = \"p0\"\npmd = \"synth\"\n[[ports]]\nname = \"p1\"\npmd = \"synth\"\n", "",
               "[[lcores]]\ncpu = 2\nrx = [\"p0:0\"]\n[[lcores]]\ncpu = 3\nrx = [\"p1:0\"]\n");
}

HostFacts cpu_host() {
  HostFacts h = good_host();
  h.cpus_known = true;
  h.online_cpus = {0, 1, 2, 3, 4, 5, 6, 7};
  h.irq_cpus = {{0, {0}}, {24, {1}}, {25, {5}}};
  return h;
}

TEST(DoctorCpuIsolation, IsolatedLcoreCpusAreOk) {
  HostFacts h = cpu_host();
  h.cmdline = "BOOT_IMAGE=/vmlinuz root=/dev/sda1 isolcpus=managed_irq,domain,2-3 nohz_full=2-3 rcu_nocbs=2-3 quiet\n";
  h.isolated_cpus = {2, 3};
  h.nohz_full_cpus = {2, 3};
  Needs n = pinned_needs();
  Report r = run_checks(&n, h);
  const Finding* f = only(r, "cpu isolation");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->level, Level::kOk) << format_report(r);
  EXPECT_NE(f->detail.find("CPUs 0-1,4-7"), std::string::npos) << f->detail;
}

TEST(DoctorCpuIsolation, NothingIsolatedSaysTheWholeCommandLine) {
  HostFacts h = cpu_host();
  h.cmdline = "BOOT_IMAGE=/vmlinuz root=/dev/sda1 quiet\n";
  h.irq_cpus[30] = {0, 1, 2, 3, 4, 5, 6, 7};  // may land anywhere, lcore CPUs included
  h.irq_cpus[31] = {3};
  Needs n = pinned_needs();
  Report r = run_checks(&n, h);
  const Finding* f = only(r, "cpu isolation");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->level, Level::kWarn);
  EXPECT_TRUE(r.can_run());
  EXPECT_NE(f->detail.find("CPU 2-3 not in isolcpus"), std::string::npos) << f->detail;
  EXPECT_NE(f->detail.find("2 IRQs delivered to lcore CPUs (30 31)"), std::string::npos) << f->detail;
  EXPECT_NE(f->fix.find(": isolcpus=managed_irq,domain,2-3 nohz_full=2-3 rcu_nocbs=2-3 irqaffinity=0-1,4-7;"),
            std::string::npos) << f->fix;
  EXPECT_NE(f->fix.find("for i in 30 31; do echo 0-1,4-7 > /proc/irq/$i/smp_affinity_list; done"), std::string::npos)
      << f->fix;
}

TEST(DoctorCpuIsolation, PartlyIsolatedAsksOnlyForWhatIsMissingKeepingWhatIsThere) {
  HostFacts h = cpu_host();
  // CPU 3 isolated and 6 too (another application's); no nohz_full; rcu_nocbs covers both lcores.
  h.cmdline = "root=/dev/sda1 isolcpus=3,6 rcu_nocbs=all";
  h.isolated_cpus = {3, 6};
  Needs n = pinned_needs();
  Report r = run_checks(&n, h);
  const Finding* f = only(r, "cpu isolation");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->level, Level::kWarn);
  EXPECT_NE(f->detail.find("CPU 2 not in isolcpus"), std::string::npos) << f->detail;
  EXPECT_EQ(f->detail.find("rcu_nocbs"), std::string::npos) << f->detail;
  EXPECT_EQ(f->detail.find("IRQ"), std::string::npos) << f->detail;
  EXPECT_NE(f->fix.find("isolcpus=managed_irq,domain,2-3,6 nohz_full=2-3"), std::string::npos) << f->fix;
  EXPECT_EQ(f->fix.find("rcu_nocbs"), std::string::npos) << f->fix;
}

TEST(DoctorCpuIsolation, UnpinnedLcoresAndEveryCpuTaken) {
  HostFacts h = cpu_host();
  Needs unpinned = needs("[[ports]]\nname = \"p0\"\npmd = \"synth\"\n");
  Report r = run_checks(&unpinned, h);
  const Finding* f = only(r, "cpu isolation");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->level, Level::kOk);  // nothing to isolate; the detail says how to get there
  EXPECT_NE(f->detail.find("unpinned"), std::string::npos) << f->detail;

  h.online_cpus = {2, 3};
  Needs n = pinned_needs();
  r = run_checks(&n, h);
  f = only(r, "cpu isolation");
  ASSERT_NE(f, nullptr);
  EXPECT_NE(f->detail.find("every online CPU"), std::string::npos) << f->detail;
}

// The facts as gather_host reads them from a sysfs and proc root (fixture trees).
TEST(DoctorCpuIsolation, GatheredFromSysfsAndProcTrees) {
  namespace fs = std::filesystem;
  const fs::path root = fs::temp_directory_path() / ("rawpipe-doctor-cpu-" + std::to_string(getpid()));
  fs::remove_all(root);
  auto put = [&](const fs::path& rel, const std::string& text) {
    fs::create_directories((root / rel).parent_path());
    std::ofstream(root / rel) << text;
  };
  put("sys/devices/system/cpu/online", "0-7\n");
  put("sys/devices/system/cpu/isolated", "2-3\n");
  put("sys/devices/system/cpu/nohz_full", "(null)\n");  // what a kernel without nohz_full prints
  put("proc/cmdline", "root=/dev/vda1 isolcpus=domain,2-3 rcu_nocbs=2-3\n");
  put("proc/irq/24/smp_affinity_list", "0-7\n");
  put("proc/irq/24/effective_affinity_list", "3\n");
  put("proc/irq/25/smp_affinity_list", "0-1\n");
  put("proc/irq/default_smp_affinity", "ff\n");
  GatherOptions o;
  o.sysfs_root = (root / "sys").string();
  o.proc_root = (root / "proc").string();
  HostFacts h = gather_host(o);
  fs::remove_all(root);
  EXPECT_TRUE(h.cpus_known);
  EXPECT_EQ(h.online_cpus.size(), 8u);
  EXPECT_EQ(h.isolated_cpus, (std::vector<int>{2, 3}));
  EXPECT_TRUE(h.nohz_full_cpus.empty());
  EXPECT_EQ(h.irq_cpus.at(24), (std::vector<int>{3}));  // the effective affinity wins
  EXPECT_EQ(h.irq_cpus.at(25), (std::vector<int>{0, 1}));
  Needs n = pinned_needs();
  Report r;
  check_cpu_isolation(&n, h, r);
  ASSERT_EQ(r.findings().size(), 1u);
  EXPECT_EQ(r.findings()[0].detail,
            "lcore CPUs 2-3: CPU 2-3 not in nohz_full (the scheduler tick interrupts the lcore); 1 IRQ delivered to "
            "lcore CPUs (24)");
  EXPECT_NE(r.findings()[0].fix.find(": nohz_full=2-3 irqaffinity=0-1,4-7;"), std::string::npos) << r.findings()[0].fix;
}

// [run] user and group: doctor reaches the verdict `rawpipe run` will, with the fix for each way it
// refuses, and says nothing when the run keeps its uid.
Needs run_user_needs(const std::string& run_keys) {
  return needs("[[ports]]\nname = \"p0\"\npmd = \"synth\"\n", "",
               "[[lcores]]\nrx = [\"p0:0\"]\n[run]\n" + run_keys);
}

TEST(DoctorChecks, RunUserEachRefusalGetsItsFix) {
  Needs n = run_user_needs("user = \"svc\"\ngroup = \"svcgrp\"\n");
  EXPECT_EQ(n.run_user, "svc");
  EXPECT_EQ(n.run_group, "svcgrp");
  EXPECT_EQ(gather_options_for(&n).run_user, "svc");
  EXPECT_EQ(gather_options_for(&n).run_group, "svcgrp");
  HostFacts h = good_host();
  h.run_user_checked = true;
  h.run_user = "svc";
  h.run_group = "svcgrp";

  h.run_user_error = "[run] user \"svc\" does not exist on this host";
  Report missing = run_checks(&n, h);
  EXPECT_FALSE(missing.can_run());
  const Finding* f = only(missing, "run user");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->level, Level::kFail);
  EXPECT_EQ(f->detail, h.run_user_error);
  EXPECT_EQ(f->fix.rfind("create it (sudo useradd --system --no-create-home --shell /usr/sbin/nologin svc)", 0), 0u)
      << f->fix;

  h.run_user_exists = true;  // uid 0
  h.run_user_error = "[run] user \"svc\" is root (uid 0)";
  Report root = run_checks(&n, h);
  f = only(root, "run user");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->level, Level::kFail);
  EXPECT_EQ(f->fix.rfind("name an unprivileged user in [run] user of test.toml", 0), 0u) << f->fix;

  h.run_uid = 998;
  h.run_user_error = "[run] group \"svcgrp\" does not exist on this host";
  Report no_group = run_checks(&n, h);
  f = only(no_group, "run user");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->level, Level::kFail);
  EXPECT_EQ(f->fix, "create the group (sudo groupadd --system svcgrp) or change [run] group in test.toml");

  h.run_user_error.clear();
  h.run_gid = 997;
  Report fine = run_checks(&n, h);
  EXPECT_TRUE(fine.can_run());
  f = only(fine, "run user");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->level, Level::kOk);
  EXPECT_NE(f->detail.find("user svc (uid 998), group svcgrp (gid 997)"), std::string::npos) << f->detail;

  Needs keeps_uid = run_user_needs("duration = 1\n");
  EXPECT_TRUE(run_checks(&keeps_uid, good_host()).find("run user").empty());
}

// The facts come from the resolution `rawpipe run` itself calls: root exists on every host and is
// refused.
TEST(DoctorChecks, RunUserFactsAreTheRunsOwnResolution) {
  GatherOptions o;
  o.run_user = "root";
  HostFacts h = gather_host(o);
  EXPECT_TRUE(h.run_user_checked);
  EXPECT_TRUE(h.run_user_exists);
  EXPECT_EQ(h.run_uid, 0u);
  auto resolved = privilege::resolve_run_user("root", "");
  ASSERT_FALSE(resolved);
  EXPECT_EQ(h.run_user_error, resolved.message());
  EXPECT_FALSE(gather_host(GatherOptions{}).run_user_checked);
}

}  // namespace
}  // namespace rawpipe::doctor
