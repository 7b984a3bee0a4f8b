// The run-time loader and the preflight message: a missing library, a kernel without RDMA, a
// wrong driver and a missing interface each produce their own message.
#include <gtest/gtest.h>
#include <unistd.h>

#ifdef RAWPIPE_HAVE_RDMA
#include "pmd/rdma/loader.hh"

#include <filesystem>
#include <fstream>

#include "pmd/rdma/discovery.hh"
#include "pmd/rdma/preflight.hh"
#endif

#ifndef RAWPIPE_HAVE_RDMA
TEST(RdmaLoader, NotBuilt) { GTEST_SKIP() << "built without the rdma-core headers (libibverbs-dev)"; }
#else
namespace rawpipe::rdma {
namespace {

namespace fs = std::filesystem;

TEST(RdmaLoader, MissingLibraryNamesItAndSaysWhatToInstall) {
  auto t = load_ibverbs("librawpipe-no-such-verbs.so.1");
  ASSERT_FALSE(t);
  EXPECT_NE(t.message().find("librawpipe-no-such-verbs.so.1"), std::string::npos) << t.message();
  EXPECT_NE(t.message().find("apt-get install libibverbs1 ibverbs-providers"), std::string::npos) << t.message();
  auto m = load_mlx5("librawpipe-no-such-mlx5.so.1");
  ASSERT_FALSE(m);
  EXPECT_NE(m.message().find("ibverbs-providers"), std::string::npos) << m.message();
}

TEST(RdmaLoader, MissingSymbolNamesLibraryAndSymbol) {
  // libc is always present and certainly has no verbs.
  void* h = nullptr;
  int (*fn)() = nullptr;
  const SymbolSlot slots[] = {symbol_slot(fn, "ibv_rawpipe_does_not_exist")};
  Status s = load_library("libc.so.6", slots, "hint", &h);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("libc.so.6 has no symbol ibv_rawpipe_does_not_exist"), std::string::npos) << s.message();
  EXPECT_EQ(fn, nullptr) << "a failed load must store nothing";
}

TEST(RdmaLoader, GenericHelperResolvesIntoATable) {
  void* h = nullptr;
  decltype(&::getpid) my_getpid = nullptr;
  const SymbolSlot slots[] = {symbol_slot(my_getpid, "getpid")};
  ASSERT_TRUE(load_library("libc.so.6", slots, "hint", &h).is_ok());
  ASSERT_NE(my_getpid, nullptr);
  EXPECT_EQ(my_getpid(), getpid());
}

TEST(RdmaLoader, InstalledRdmaCoreLoadsEveryEntry) {
  auto t = load_ibverbs();
  if (!t) GTEST_SKIP() << "rdma-core is not installed here: " << t.message();
  const IbverbsTable* v = t.value();
  EXPECT_NE(v->get_device_list, nullptr);
  EXPECT_NE(v->reg_mr, nullptr);
  EXPECT_NE(v->modify_qp, nullptr);
  EXPECT_NE(v->create_flow, nullptr);
  EXPECT_EQ(load_ibverbs().value(), v) << "the default table is loaded once";
  auto m = load_mlx5();
  ASSERT_TRUE(m) << m.message();
  EXPECT_NE(m.value()->init_obj, nullptr);
  EXPECT_NE(m.value()->create_cq, nullptr);
  // DevX (rdma-core MLX5_1.7): the device's inline mode is read through these.
  EXPECT_NE(m.value()->open_device, nullptr);
  EXPECT_NE(m.value()->devx_general_cmd, nullptr);
}

// A fabricated sysfs tree: class/net/IF -> device with a driver link and infiniband/DEV.
class FakeSysfs : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / fmt::format("rawpipe-sysfs-{}-{}", getpid(), counter_++);
    fs::create_directories(root_);
  }
  void TearDown() override { fs::remove_all(root_); }
  void add(const std::string& ifname, const std::string& driver, const std::string& ibdev, int dev_port = 0) {
    fs::path dev = root_ / "devices/pci0000:00" / ifname;
    fs::create_directories(dev);
    if (!driver.empty()) {
      fs::create_directories(root_ / "bus/pci/drivers" / driver);
      fs::create_symlink(root_ / "bus/pci/drivers" / driver, dev / "driver");
    }
    if (!ibdev.empty()) fs::create_directories(dev / "infiniband" / ibdev);
    fs::path net = root_ / "class/net" / ifname;
    fs::create_directories(net);
    fs::create_symlink(dev, net / "device");
    std::ofstream(net / "address") << "b8:ce:f6:01:02:03\n";
    std::ofstream(net / "ifindex") << "7\n";
    std::ofstream(net / "mtu") << "9000\n";
    std::ofstream(net / "operstate") << "up\n";
    std::ofstream(net / "dev_port") << dev_port << "\n";
  }
  PreflightOptions mlx5_options() const {
    PreflightOptions o;
    o.pmd = "mlx5";
    o.expected_driver = "mlx5_core";
    o.sysfs_root = root_.string();
    return o;
  }
  fs::path root_;
  static inline int counter_ = 0;
};

TEST_F(FakeSysfs, DiscoveryMapsNetdevToRdmaDeviceAndPort) {
  add("ens1f1", "mana", "mana_0", 1);
  auto info = discover_netdev("ens1f1", root_.string());
  ASSERT_TRUE(info) << info.message();
  EXPECT_EQ(info->driver, "mana");
  EXPECT_EQ(info->driver_source, "sysfs");
  ASSERT_EQ(info->rdma_devices.size(), 1u);
  EXPECT_EQ(info->rdma_devices[0], "mana_0");
  EXPECT_EQ(info->rdma_port, 2);
  EXPECT_EQ(info->ifindex, 7);
  EXPECT_EQ(info->mtu, 9000u);
  EXPECT_TRUE(info->oper_up);
  EXPECT_EQ(format_mac(info->mac), "b8:ce:f6:01:02:03");
}

TEST_F(FakeSysfs, MissingInterface) {
  auto r = rdma_preflight("nosuch0", mlx5_options());
  ASSERT_FALSE(r);
  EXPECT_NE(r.message().find("no network interface 'nosuch0'"), std::string::npos) << r.message();
}

TEST_F(FakeSysfs, WrongDriverSaysWhichAndSuggestsAnotherPmd) {
  add("eth0", "virtio_net", "");
  auto r = rdma_preflight("eth0", mlx5_options());
  ASSERT_FALSE(r);
  EXPECT_NE(r.message().find("driver 'virtio_net', not mlx5_core"), std::string::npos) << r.message();
  EXPECT_NE(r.message().find("af_xdp"), std::string::npos) << r.message();
}

TEST_F(FakeSysfs, MissingLibraryComesBeforeDeviceChecks) {
  add("eth1", "mlx5_core", "mlx5_0");
  PreflightOptions o = mlx5_options();
  o.ibverbs_soname = "librawpipe-no-such-verbs.so.1";
  auto r = rdma_preflight("eth1", o);
  ASSERT_FALSE(r);
  EXPECT_NE(r.message().find("rdma-core is missing"), std::string::npos) << r.message();
  EXPECT_NE(r.message().find("librawpipe-no-such-verbs.so.1"), std::string::npos) << r.message();
}

TEST_F(FakeSysfs, MissingProviderLibrary) {
  add("eth1", "mlx5_core", "mlx5_0");
  if (!load_ibverbs()) GTEST_SKIP() << "rdma-core is not installed here";
  PreflightOptions o = mlx5_options();
  o.load_provider = [] { return load_mlx5("librawpipe-no-such-mlx5.so.1").status(); };
  auto r = rdma_preflight("eth1", o);
  ASSERT_FALSE(r);
  EXPECT_NE(r.message().find("librawpipe-no-such-mlx5.so.1"), std::string::npos) << r.message();
}

TEST_F(FakeSysfs, KernelWithoutRdmaOrNoDevice) {
  add("eth1", "mlx5_core", "mlx5_0");
  auto verbs = load_ibverbs();
  if (!verbs) GTEST_SKIP() << "rdma-core is not installed here";
  int n = 0;
  errno = 0;
  ibv_device** list = verbs.value()->get_device_list(&n);
  const int list_errno = errno;
  if (list) verbs.value()->free_device_list(list);
  auto r = rdma_preflight("eth1", mlx5_options());
  ASSERT_FALSE(r) << "this fabricated mlx5_0 cannot be among the host's real devices";
  if (!list && list_errno == ENOSYS) {
    EXPECT_NE(r.message().find("the running kernel has no RDMA support"), std::string::npos) << r.message();
    EXPECT_NE(r.message().find("modprobe ib_uverbs mlx5_ib"), std::string::npos) << r.message();
  } else {
    // A host with RDMA in the kernel: the fabricated device is not among the listed ones.
    EXPECT_NE(r.message().find("libibverbs does not list it"), std::string::npos) << r.message();
  }
}

TEST_F(FakeSysfs, NoRdmaDeviceOnTheInterface) {
  add("eth2", "mlx5_core", "");
  auto verbs = load_ibverbs();
  if (!verbs) GTEST_SKIP() << "rdma-core is not installed here";
  int n = 0;
  ibv_device** list = verbs.value()->get_device_list(&n);
  if (!list) GTEST_SKIP() << "this kernel has no RDMA at all; the ENOSYS message comes first (tested above)";
  verbs.value()->free_device_list(list);
  auto r = rdma_preflight("eth2", mlx5_options());
  ASSERT_FALSE(r);
  EXPECT_NE(r.message().find("has no RDMA device"), std::string::npos) << r.message();
}

TEST(RdmaPreflight, CapNetRawMatchesProcStatus) {
  std::ifstream in("/proc/self/status");
  std::string line;
  unsigned long long eff = 0;
  bool found = false;
  while (std::getline(in, line))
    if (line.rfind("CapEff:", 0) == 0) {
      eff = std::stoull(line.substr(7), nullptr, 16);
      found = true;
    }
  ASSERT_TRUE(found);
  EXPECT_EQ(has_cap_net_raw(), ((eff >> 13) & 1) != 0);  // CAP_NET_RAW is capability 13
}

}  // namespace
}  // namespace rawpipe::rdma
#endif
