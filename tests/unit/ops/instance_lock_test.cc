// Instance locks for the drivers whose queues live outside the kernel's af_packet/af_xdp sockets:
// what each driver claims (mlx5 and mana: the interface's queues; dpdk: the ethdev, host-wide for
// a bus device, per process for a vdev; the device models: nothing, each is its port's own
// in-memory device), a second plan on an mlx5 queue refused naming the first one's pid and
// config, and the locks taken by Pipeline::create and the Extra API's create() for programs that
// build pipelines themselves (two pipelines on one dpdk net_null device in this process).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <optional>

#include <fmt/format.h>

#include "pipeline/extra/extra.hh"
#include "pipeline/port/driver.hh"
#include "pipeline/port/registry.hh"
#include "rawpipe/config.hh"
#include "rawpipe/instance_lock.hh"
#include "rawpipe/pipeline.hh"

namespace rawpipe {
namespace {

namespace fs = std::filesystem;

class InstanceLock : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / fmt::format("rawpipe-lock-test-{}", getpid());
    fs::create_directories(dir_);
    // This test's locks only: a pipeline elsewhere on the host cannot interfere.
    if (const char* d = std::getenv("RAWPIPE_LOCK_DIR")) saved_ = d;
    setenv("RAWPIPE_LOCK_DIR", (dir_ / "locks").c_str(), 1);
  }
  void TearDown() override {
    if (saved_)
      setenv("RAWPIPE_LOCK_DIR", saved_->c_str(), 1);
    else
      unsetenv("RAWPIPE_LOCK_DIR");
    fs::remove_all(dir_);
  }

  static Result<LoadedConfig> load(const std::string& text, const std::string& file) {
    LoadOptions o;
    o.find_pmd = &find_pmd;
    for (const PmdDriver* d : all_pmds()) o.known_pmds.push_back(d->name);
    return load_config_string(text, file, o);
  }

  static std::string config(const std::string& port_keys, unsigned queues = 1) {
    return fmt::format("[[pools]]\nname = \"rx\"\ncount = 2048\nhuge_pages = \"never\"\n"
                       "[[ports]]\nname = \"nic\"\n{}rx_queues = {}\n"
                       "[[endpoints]]\nname = \"e\"\naction = \"sink\"\nmatch = [\"udp\"]\n"
                       "[[lcores]]\nrx = [{}]\n",
                       port_keys, queues, queues == 1 ? "\"nic:0\"" : "\"nic:0\", \"nic:1\"");
  }

  static PortSpec::ClaimedQueues claim(const std::string& port_keys) {
    auto loaded = load(config(port_keys), "claim.toml");
    EXPECT_TRUE(loaded) << loaded.message();
    if (!loaded) return {};
    return loaded->plan.ports.at(0).spec->claimed_queues();
  }

  fs::path dir_;
  std::optional<std::string> saved_;
};

TEST_F(InstanceLock, EachDriverClaimsItsDeviceAndModelsClaimNothing) {
  auto mlx5 = claim("pmd = \"mlx5\"\ninterface = \"rpmlx0\"\n");
  EXPECT_EQ(mlx5.interface, "rpmlx0");
  EXPECT_EQ(mlx5.first, 0u);
  auto mana = claim("pmd = \"mana\"\ninterface = \"rpmana0\"\n");
  EXPECT_EQ(mana.interface, "rpmana0");
  for (const char* model : {"pmd = \"mlx5-model\"\n", "pmd = \"mana-model\"\n"}) {
    auto m = claim(model);
    EXPECT_TRUE(m.interface.empty() && m.device.empty()) << model << " claims " << m.interface << m.device;
  }
#if defined(RAWPIPE_HAVE_PMD_DPDK)
  auto pci = claim("pmd = \"dpdk\"\ndevice = \"0000:03:00.0,rxq_cqe_comp_en=0\"\n");
  EXPECT_EQ(pci.device, "dpdk 0000:03:00.0");
  EXPECT_FALSE(pci.process_private);
  auto vdev = claim("pmd = \"dpdk\"\ndevice = \"net_null0,size=64\"\n");
  EXPECT_EQ(vdev.device, "dpdk net_null0");
  EXPECT_TRUE(vdev.process_private);
  EXPECT_EQ(ops::device_queue_resource(vdev.device, true, 1), fmt::format("device dpdk net_null0 pid {} 1", getpid()));
  EXPECT_EQ(ops::device_queue_resource(pci.device, false, 1), "device dpdk 0000:03:00.0 1");
#endif
}

// Locks only (no hardware is opened): the second plan on the same mlx5 interface queue is refused.
TEST_F(InstanceLock, SecondPlanOnAnMlx5QueueIsRefusedNamingTheFirst) {
  auto first_plan = load(config("pmd = \"mlx5\"\ninterface = \"rpmlx0\"\n", 2), (dir_ / "a.toml").string());
  ASSERT_TRUE(first_plan) << first_plan.message();
  auto first = ops::take_instance_locks(first_plan->plan, (dir_ / "a.toml").string());
  ASSERT_TRUE(first) << first.message();
  auto second_plan = load(config("pmd = \"mlx5\"\ninterface = \"rpmlx0\"\n"), (dir_ / "b.toml").string());
  ASSERT_TRUE(second_plan) << second_plan.message();
  auto second = ops::take_instance_locks(second_plan->plan, (dir_ / "b.toml").string());
  ASSERT_FALSE(second);
  EXPECT_EQ(second.message(),
            fmt::format("queue 0 of interface rpmlx0 (port 'nic') is already used by another pipeline: pid {} "
                        "running {}; stop it, or choose another queue or CPU",
                        getpid(), (dir_ / "a.toml").string()));
  // Another interface is free; the first one's queue is free again once it let go.
  auto other_plan = load(config("pmd = \"mana\"\ninterface = \"rpmana0\"\n"), (dir_ / "c.toml").string());
  ASSERT_TRUE(other_plan);
  EXPECT_TRUE(ops::take_instance_locks(other_plan->plan, (dir_ / "c.toml").string()));
  first->release();
  EXPECT_TRUE(ops::take_instance_locks(second_plan->plan, (dir_ / "b.toml").string()));
}

#if defined(RAWPIPE_HAVE_PMD_DPDK)
const char* kNullPort = "pmd = \"dpdk\"\ndevice = \"net_null0,size=64\"\n"
                        "eal_args = [\"--no-huge\", \"-m\", \"128\", \"--log-level=*:error\"]\n";

TEST_F(InstanceLock, PipelineCreateTakesTheLocksOfItsDpdkDevice) {
  const std::string file = (dir_ / "null.toml").string();
  auto loaded = load(config(kNullPort), file);
  ASSERT_TRUE(loaded) << loaded.message();
  auto first = Pipeline::create(loaded->plan);
  ASSERT_TRUE(first) << first.message();
  auto second = Pipeline::create(loaded->plan);
  ASSERT_FALSE(second) << "two pipelines polled queue 0 of net_null0";
  EXPECT_EQ(second.message(),
            fmt::format("queue 0 of device dpdk net_null0 (port 'nic') is already used by another pipeline: pid {} "
                        "running {}; stop it, or choose another queue or CPU",
                        getpid(), file));
  // A plan built in code has no file: the refusal names the program.
  Plan in_code = loaded->plan;
  in_code.source.clear();
  first.value().reset();
  auto by_code = Pipeline::create(in_code);
  ASSERT_TRUE(by_code) << by_code.message();
  auto again = Pipeline::create(loaded->plan);
  ASSERT_FALSE(again);
  EXPECT_NE(again.message().find(fmt::format("pid {} running a plan built in code by {}", getpid(),
                                             fs::read_symlink("/proc/self/exe").string())),
            std::string::npos)
      << again.message();
}

TEST_F(InstanceLock, ExtraApiCreateTakesThemToo) {
  const std::string file = (dir_ / "extra.toml").string();
  std::ofstream(file) << config(kNullPort);
  extra_set_load_options({});
  const rawpipe_api_t* api = rawpipe_get_api(RAWPIPE_EXTRA_ABI_VERSION);
  ASSERT_NE(api, nullptr) << rawpipe_api_error();
  rawpipe_pipeline* first = api->create(file.c_str());
  ASSERT_NE(first, nullptr) << api->last_error(nullptr);
  rawpipe_pipeline* second = api->create(file.c_str());
  EXPECT_EQ(second, nullptr);
  EXPECT_NE(std::string(api->last_error(nullptr))
                .find(fmt::format("queue 0 of device dpdk net_null0 (port 'nic') is already used by another pipeline: "
                                  "pid {} running {}",
                                  getpid(), file)),
            std::string::npos)
      << api->last_error(nullptr);
  if (second) api->destroy(second);
  api->destroy(first);
  rawpipe_pipeline* third = api->create(file.c_str());
  EXPECT_NE(third, nullptr) << api->last_error(nullptr);
  if (third) api->destroy(third);
}
#else
// Listed as skipped, not absent, in builds without the dpdk PMD.
TEST_F(InstanceLock, PipelineCreateTakesTheLocksOfItsDpdkDevice) {
  GTEST_SKIP() << "built without the dpdk PMD (libdpdk-dev missing or -Dpmd_dpdk=disabled)";
}

TEST_F(InstanceLock, ExtraApiCreateTakesThemToo) {
  GTEST_SKIP() << "built without the dpdk PMD (libdpdk-dev missing or -Dpmd_dpdk=disabled)";
}
#endif

}  // namespace
}  // namespace rawpipe
