// The MANA control path's messages: no RDMA on this host, wrong interface, missing libmana, the
// RC function instead of the Ethernet one, and a vPort held by the kernel (EBUSY / ENODEV from raw
// QP creation), injected through the loader tables. Every verbs object created before a failure is
// destroyed.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>
#include <filesystem>
#include <fstream>

#include "pipeline/config/section.hh"
#include "pmd/drivers.hh"
#include "pmd/mana/device.hh"
#include "pmd/mana/port.hh"
#include "pmd/mana/probe.hh"
#include "pmd/rdma/preflight.hh"
#include "tests/model/mana/harness.hh"
#include "pipeline/port/driver.hh"
#include "pipeline/buf/pool.hh"

namespace rawpipe::mana {
namespace {

namespace fs = std::filesystem;

// A fake libibverbs/libmana: hands out dummy objects, fails where told, counts what is released.
struct Fake {
  static inline int qp_errno = EBUSY;
  static inline bool fail_rss_qp_only = false;
  static inline std::uint32_t vendor_part = 2;
  static inline int created = 0, destroyed = 0;
  static inline bool allocators_set = false;
  static inline ibv_context ctx{};
  static inline ibv_pd pds[2]{};
  static inline ibv_mr mr{};
  static inline ibv_cq cqs[8]{};
  static inline ibv_qp qps[8]{};
  static inline ibv_wq wqs[8]{};
  static inline ibv_rwq_ind_table ind{};
  static inline int ncq = 0, npd = 0, nqp = 0, nwq = 0;

  static void reset() {
    created = destroyed = ncq = npd = nqp = nwq = 0;
    allocators_set = false;
    fail_rss_qp_only = false;
    vendor_part = 2;
  }
  static rdma::IbverbsTable verbs() {
    rdma::IbverbsTable t;
    t.get_device_name = [](ibv_device*) -> const char* { return "mana_0"; };
    t.open_device = [](ibv_device*) -> ibv_context* { return ++created, &ctx; };
    t.close_device = [](ibv_context*) -> int { return ++destroyed, 0; };
    t.query_device = [](ibv_context*, ibv_device_attr* a) -> int {
      *a = {};
      a->vendor_part_id = vendor_part;
      a->max_qp_wr = 8192;
      return 0;
    };
    t.alloc_pd = [](ibv_context*) -> ibv_pd* { return ++created, &pds[npd++]; };
    t.alloc_parent_domain = [](ibv_context*, ibv_parent_domain_init_attr* a) -> ibv_pd* {
      EXPECT_EQ(a->comp_mask, unsigned(IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT));
      EXPECT_EQ(reinterpret_cast<std::uintptr_t>(a->pd_context), 2u);  // the netdev's port
      return ++created, &pds[npd++];
    };
    t.dealloc_pd = [](ibv_pd*) -> int { return ++destroyed, 0; };
    t.reg_mr = [](ibv_pd*, void*, std::size_t, int) -> ibv_mr* { return ++created, &mr; };
    t.dereg_mr = [](ibv_mr*) -> int { return ++destroyed, 0; };
    t.create_cq = [](ibv_context*, int, void*, ibv_comp_channel*, int) -> ibv_cq* { return ++created, &cqs[ncq++]; };
    t.destroy_cq = [](ibv_cq*) -> int { return ++destroyed, 0; };
    t.create_qp = [](ibv_pd* pd, ibv_qp_init_attr* a) -> ibv_qp* {
      EXPECT_EQ(a->qp_type, IBV_QPT_RAW_PACKET);
      EXPECT_EQ(pd, &pds[1]) << "raw QPs must be created on the parent domain";
      if (!fail_rss_qp_only) {
        EXPECT_TRUE(allocators_set) << "allocators must be set before queues are created";
        errno = qp_errno;
        return nullptr;
      }
      return ++created, &qps[nqp++];
    };
    t.create_qp_ex = [](ibv_context*, ibv_qp_init_attr_ex* a) -> ibv_qp* {
      EXPECT_EQ(a->rx_hash_conf.rx_hash_key_len, 40);
      EXPECT_EQ(a->rx_hash_conf.rx_hash_function, IBV_RX_HASH_FUNC_TOEPLITZ);
      errno = qp_errno;
      return nullptr;
    };
    t.destroy_qp = [](ibv_qp*) -> int { return ++destroyed, 0; };
    t.create_wq = [](ibv_context*, ibv_wq_init_attr*) -> ibv_wq* { return ++created, &wqs[nwq++]; };
    t.destroy_wq = [](ibv_wq*) -> int { return ++destroyed, 0; };
    t.create_rwq_ind_table = [](ibv_context*, ibv_rwq_ind_table_init_attr* a) -> ibv_rwq_ind_table* {
      EXPECT_EQ(a->log_ind_tbl_size, 1u);
      return ++created, &ind;
    };
    t.destroy_rwq_ind_table = [](ibv_rwq_ind_table*) -> int { return ++destroyed, 0; };
    return t;
  }
  static ManaTable mana() {
    ManaTable t;
    t.set_context_attr = [](ibv_context*, manadv_set_ctx_attr_type type, void* attr) -> int {
      EXPECT_EQ(type, MANADV_CTX_ATTR_BUF_ALLOCATORS);
      allocators_set = attr != nullptr;
      return 0;
    };
    t.init_obj = [](manadv_obj*, std::uint64_t) -> int { return EINVAL; };
    return t;
  }
};

PortEnv env_for(Pool* pool) {
  PortEnv env;
  env.name = "azure0";
  env.rx_queues = 2;
  env.tx_queues = 2;
  env.rx_ring_size = 256;
  env.tx_ring_size = 256;
  env.pool = pool;
  return env;
}

Status open_with_fakes(Pool* pool) {
  const rdma::IbverbsTable verbs = Fake::verbs();
  const ManaTable mana = Fake::mana();
  ManaSpec spec;
  spec.interface = "eth9";
  auto port = open_mana_on_device(env_for(pool), spec, ManaApi{&verbs, &mana}, nullptr, 2, "eth9");
  EXPECT_FALSE(port);
  return port ? Status::ok() : port.status();
}

TEST(ManaControl, PortInUseEbusyFromTheRawSendQp) {
  auto pool = test::make_pool(1024);
  Fake::reset();
  Fake::qp_errno = EBUSY;
  Status s = open_with_fakes(pool.get());
  EXPECT_NE(s.message().find("vPort is in use"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("EBUSY") == std::string::npos ? s.message().find("busy") : 0, std::string::npos)
      << s.message();
  EXPECT_NE(s.message().find("ip link set eth9 down"), std::string::npos) << s.message();
  EXPECT_GT(Fake::created, 0);
  EXPECT_EQ(Fake::created, Fake::destroyed) << "everything created before the failure is released";
}

TEST(ManaControl, PortInUseEnodevFromOlderKernels) {
  auto pool = test::make_pool(1024);
  Fake::reset();
  Fake::qp_errno = ENODEV;
  Status s = open_with_fakes(pool.get());
  EXPECT_NE(s.message().find("vPort is in use"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("No such device"), std::string::npos) << s.message();
  EXPECT_EQ(Fake::created, Fake::destroyed);
}

TEST(ManaControl, PortInUseFromTheRssQpAfterTxQueuesAndWqs) {
  auto pool = test::make_pool(1024);
  Fake::reset();
  Fake::fail_rss_qp_only = true;
  Fake::qp_errno = EBUSY;
  Status s = open_with_fakes(pool.get());
  EXPECT_NE(s.message().find("vPort is in use"), std::string::npos) << s.message();
  // 2 TX CQs + 2 raw QPs + 2 RX CQs + 2 WQs + indirection table + device, PD, parent, MR.
  EXPECT_EQ(Fake::created, 13);
  EXPECT_EQ(Fake::destroyed, 13);
}

TEST(ManaControl, RcFunctionIsNotTheEthernetOne) {
  auto pool = test::make_pool(1024);
  Fake::reset();
  Fake::vendor_part = 3;
  Status s = open_with_fakes(pool.get());
  EXPECT_NE(s.message().find("RC (InfiniBand) function"), std::string::npos) << s.message();
  EXPECT_EQ(Fake::created, Fake::destroyed);
}

// The IB devices one PCI function shows in each kernel era, as ibv_get_device_list returns them.
struct FakeDevice {
  const char* name;
  std::uint32_t vendor_part;
  std::uint64_t raw_packet_caps;
};
struct FakeDeviceList {
  static inline std::vector<FakeDevice> era;
  static inline int opened = 0, closed = 0;
  std::vector<ibv_device> devices;
  std::vector<ibv_device*> list;
  explicit FakeDeviceList(std::vector<FakeDevice> e) {
    era = std::move(e);
    opened = closed = 0;
    devices.resize(era.size());
    for (std::size_t i = 0; i < era.size(); ++i) {
      std::snprintf(devices[i].name, sizeof(devices[i].name), "%s", era[i].name);
      list.push_back(&devices[i]);
    }
  }
  static const FakeDevice& of(ibv_device* d) {
    for (const FakeDevice& f : era)
      if (std::strcmp(f.name, d->name) == 0) return f;
    ADD_FAILURE() << "unknown device " << d->name;
    return era.front();
  }
  static rdma::IbverbsTable verbs() {
    rdma::IbverbsTable t;
    t.get_device_name = [](ibv_device* d) -> const char* { return d->name; };
    // The context carries its device, as libibverbs' does.
    t.open_device = [](ibv_device* d) -> ibv_context* {
      ++opened;
      auto* ctx = new ibv_context{};
      ctx->device = d;
      return ctx;
    };
    t.close_device = [](ibv_context* ctx) -> int {
      ++closed;
      delete ctx;
      return 0;
    };
    t.query_device_ex = [](ibv_context* ctx, ibv_device_attr_ex* a) -> int {
      const FakeDevice& f = of(ctx->device);
      *a = {};
      a->orig_attr.vendor_part_id = f.vendor_part;
      a->raw_packet_caps = f.raw_packet_caps;
      return 0;
    };
    return t;
  }
};

constexpr std::uint64_t kRawCaps = IBV_RAW_PACKET_CAP_IP_CSUM;

const char* selected(const FakeDeviceList& l) {
  const rdma::IbverbsTable v = FakeDeviceList::verbs();
  auto d = select_mana_device(v, l.list, "eth1");
  EXPECT_EQ(FakeDeviceList::opened, FakeDeviceList::closed) << "every device opened to query is closed";
  if (!d) return nullptr;
  return d.value()->name;
}

TEST(ManaDeviceSelection, KernelBeforeTheSplitReportsPartZeroForItsOnlyDevice) {
  FakeDeviceList l({{"mana_0", 0, 0}});
  EXPECT_STREQ(selected(l), "mana_0");
}

TEST(ManaDeviceSelection, SplitKernelRcFunctionListedFirstIsSkipped) {
  FakeDeviceList l({{"mana_0", 3, 0}, {"manae_0", 2, kRawCaps}});
  EXPECT_STREQ(selected(l), "manae_0");
  EXPECT_EQ(FakeDeviceList::opened, 2);
}

TEST(ManaDeviceSelection, SplitKernelEthernetFunctionListedFirstIsTaken) {
  FakeDeviceList l({{"manae_0", 2, kRawCaps}, {"mana_0", 3, 0}});
  EXPECT_STREQ(selected(l), "manae_0");
  EXPECT_EQ(FakeDeviceList::opened, 1) << "the walk stops at the first Ethernet function";
}

TEST(ManaDeviceSelection, EthernetPartWithoutRawPacketCapabilityIsSkipped) {
  FakeDeviceList l({{"manae_0", 2, 0}, {"mana_0", 3, 0}});
  const rdma::IbverbsTable v = FakeDeviceList::verbs();
  auto d = select_mana_device(v, l.list, "eth1");
  ASSERT_FALSE(d);
  EXPECT_NE(d.message().find("manae_0: no raw-packet capability"), std::string::npos) << d.message();
  EXPECT_NE(d.message().find("mana_0: vendor_part_id 3 (the RC function"), std::string::npos) << d.message();
  EXPECT_NE(d.message().find("ibv_devinfo -v"), std::string::npos) << d.message();
  EXPECT_EQ(FakeDeviceList::opened, FakeDeviceList::closed);
}

TEST(ManaDeviceSelection, UnknownPartIsSkipped) {
  FakeDeviceList l({{"odd_0", 7, kRawCaps}, {"mana_1", 0, 0}});
  EXPECT_STREQ(selected(l), "mana_1");
}

TEST(ManaControl, PartZeroPassesTheBringUpCheck) {
  auto pool = test::make_pool(1024);
  Fake::reset();
  Fake::vendor_part = 0;
  Fake::qp_errno = EBUSY;
  Status s = open_with_fakes(pool.get());
  EXPECT_NE(s.message().find("vPort is in use"), std::string::npos) << s.message();
  EXPECT_EQ(Fake::created, Fake::destroyed);
}

TEST(ManaControl, MissingLibmanaSaysWhatToInstall) {
  auto t = load_mana("libmana-not-here.so.1");
  ASSERT_FALSE(t);
  EXPECT_NE(t.message().find("libmana-not-here.so.1"), std::string::npos) << t.message();
  EXPECT_NE(t.message().find("ibverbs-providers"), std::string::npos) << t.message();
  auto real = load_mana();
  EXPECT_TRUE(real) << real.message();  // libibverbs-dev's rdma-core 44 ships libmana.so.1
}

TEST(ManaControl, NotAManaInterface) {
  Status s = probe_mana("lo");
  ASSERT_FALSE(s);
  EXPECT_NE(s.message().find("not mana"), std::string::npos) << s.message();
  s = probe_mana("nosuchif0");
  ASSERT_FALSE(s);
  EXPECT_NE(s.message().find("no network interface 'nosuchif0'"), std::string::npos) << s.message();
}

// A MANA netdev as sysfs shows one, on a host whose kernel has no RDMA (this CI host).
TEST(ManaControl, NoRdmaInTheKernel) {
  const fs::path root = fs::temp_directory_path() / fmt::format("rawpipe-mana-sysfs-{}", getpid());
  const fs::path net = root / "class/net/eth9";
  fs::create_directories(root / "bus/vmbus/drivers/mana");
  fs::create_directories(root / "devices/vmbus/dev0/infiniband/mana_0");
  fs::create_directories(net);
  fs::create_symlink(root / "bus/vmbus/drivers/mana", root / "devices/vmbus/dev0/driver");
  fs::create_directory_symlink(root / "devices/vmbus/dev0", net / "device");
  std::ofstream(net / "dev_port") << "1\n";
  rdma::PreflightOptions o;
  o.pmd = "mana";
  o.expected_driver = "mana";
  o.sysfs_root = root.string();
  o.load_provider = [] {
    auto t = load_mana();
    return t ? Status::ok() : t.status();
  };
  auto r = rdma::rdma_preflight("eth9", o);
  fs::remove_all(root);
  if (r || r.message().find("ibv_get_device_list") == std::string::npos)
    GTEST_SKIP() << "this host's kernel lists RDMA devices; the no-RDMA message cannot be provoked here";
  EXPECT_NE(r.message().find("no RDMA support"), std::string::npos) << r.message();
  EXPECT_NE(r.message().find("mana_ib"), std::string::npos) << r.message();
}

TEST(ManaControl, RingSizesBelowDpdksMinimumAreRefused) {
  for (const char* driver : {"mana", "mana-model"}) {
    for (const char* key : {"rx_ring_size", "tx_ring_size"}) {
      auto doc = ConfigSection::parse_string(
          fmt::format("[p]\n{}\n{} = 32\n", std::string(driver) == "mana" ? "interface = \"eth1\"" : "frames = 1",
                      key),
          "r.toml");
      ASSERT_TRUE(doc) << doc.message();
      auto p = doc->table("p");
      ASSERT_TRUE(p);
      auto spec = (std::string(driver) == "mana" ? kManaDriver : kManaModelDriver).parse(*p);
      ASSERT_FALSE(spec) << driver << " " << key;
      EXPECT_NE(spec.message().find("r.toml:3"), std::string::npos) << spec.message();
      EXPECT_NE(spec.message().find(key), std::string::npos) << spec.message();
      EXPECT_NE(spec.message().find("at least 64 descriptors"), std::string::npos) << spec.message();
    }
    auto ok = ConfigSection::parse_string(
        fmt::format("[p]\n{}\nrx_ring_size = 64\ntx_ring_size = 128\n",
                    std::string(driver) == "mana" ? "interface = \"eth1\"" : "frames = 1"),
        "r.toml");
    auto p = ok->table("p");
    auto spec = (std::string(driver) == "mana" ? kManaDriver : kManaModelDriver).parse(*p);
    EXPECT_TRUE(spec) << spec.message();
  }
}

TEST(ManaControl, BringUpRefusesRingsBelowTheMinimum) {
  auto pool = test::make_pool(1024);
  Fake::reset();
  const rdma::IbverbsTable verbs = Fake::verbs();
  const ManaTable mana = Fake::mana();
  ManaSpec spec;
  PortEnv env = env_for(pool.get());
  env.rx_ring_size = 32;
  auto port = open_mana_on_device(env, spec, ManaApi{&verbs, &mana}, nullptr, 2, "eth9");
  ASSERT_FALSE(port);
  EXPECT_NE(port.message().find("at least 64 descriptors"), std::string::npos) << port.message();
  EXPECT_EQ(Fake::created, Fake::destroyed);
}

TEST(ManaControl, RssL3IsRefusedOnHardwareWhereManaIbIgnoresTheFieldMask) {
  auto doc = ConfigSection::parse_string("[p]\ninterface = \"eth1\"\nrss = \"l3\"\n", "h.toml");
  ASSERT_TRUE(doc) << doc.message();
  auto hw = doc->table("p");
  ASSERT_TRUE(hw);
  auto spec = kManaDriver.parse(*hw);
  ASSERT_FALSE(spec);
  EXPECT_NE(spec.message().find("h.toml:3"), std::string::npos) << spec.message();
  EXPECT_NE(spec.message().find("no effect on MANA hardware"), std::string::npos) << spec.message();
  auto model = ConfigSection::parse_string("[p]\nframes = 1\nrss = \"l3\"\n", "m.toml");
  auto mt = model->table("p");
  ASSERT_TRUE(mt);
  EXPECT_TRUE(kManaModelDriver.parse(*mt)) << "the model keeps l3 for experiments";
}

TEST(ManaControl, ConfigKeys) {
  auto doc = ConfigSection::parse_string("[p]\ninterface = \"eth1\"\nrss = \"l4\"\nrss_key = \"zz\"\n", "t.toml");
  ASSERT_TRUE(doc) << doc.message();
  auto p = doc->table("p");
  ASSERT_TRUE(p);
  auto spec = kManaDriver.parse(*p);
  ASSERT_FALSE(spec);
  EXPECT_NE(spec.message().find("t.toml:4"), std::string::npos) << spec.message();
  EXPECT_NE(spec.message().find("80 hex digits"), std::string::npos) << spec.message();

  // A key of either case is read byte for byte; 39 bytes are refused like a non-digit.
  std::string key;
  for (int i = 0; i < 40; ++i) key += i % 2 ? fmt::format("{:02x}", 0xa0 + i) : fmt::format("{:02X}", 0xa0 + i);
  auto doc3 = ConfigSection::parse_string("[p]\nrss_key = \"" + key + "\"\n", "k.toml");
  ASSERT_TRUE(doc3) << doc3.message();
  auto p3 = doc3->table("p");
  ManaCommonSpec common;
  parse_common_keys(*p3, common);
  ASSERT_TRUE(p3->status()) << p3->status().message();
  for (int i = 0; i < 40; ++i) EXPECT_EQ(common.rss_key[i], 0xa0 + i) << i;
  auto doc4 = ConfigSection::parse_string("[p]\nrss_key = \"" + key.substr(2) + "\"\n", "s.toml");
  auto p4 = doc4->table("p");
  ManaCommonSpec short_key;
  parse_common_keys(*p4, short_key);
  EXPECT_FALSE(p4->status());

  auto doc2 = ConfigSection::parse_string("[p]\nsource = \"synth\"\nframes = 10\ncoalesce = 5\n", "m.toml");
  auto p2 = doc2->table("p");
  auto spec2 = kManaModelDriver.parse(*p2);
  ASSERT_FALSE(spec2);
  EXPECT_NE(spec2.message().find("'coalesce'"), std::string::npos) << spec2.message();
}

}  // namespace
}  // namespace rawpipe::mana
