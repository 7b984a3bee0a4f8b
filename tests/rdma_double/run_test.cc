// `rawpipe run` with pmd = "mlx5" and pmd = "mana" (the production drivers, not the -model ones)
// against the rdma-core double of this directory: the loader dlopens the double's libibverbs,
// libmlx5 and libmana through LD_LIBRARY_PATH, the drivers find their interface in a fabricated
// sysfs tree (RAWPIPE_SYSFS_ROOT), the double's device models carry the frames. Each run must
// deliver every frame, balance its accounting, tear down cleanly, break no precondition the
// double checks, and make the calls of the golden trace (golden/*.trace: DPDK's bring-up order,
// annotated step by step) in that order with those attributes.
//
// The raw-packet queues need CAP_NET_RAW in the drivers' preflight: without it the tests skip.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "pmd/rdma/preflight.hh"
#include "tests/support/process.hh"
#include "tests/support/scratch_dir.hh"

namespace {

namespace fs = std::filesystem;
using namespace rawpipe::test;

// Few enough that a loaded machine (the model wire and the lcore share two CPUs in CI) carries them
// well within the run.
constexpr std::uint64_t kFrames = 5000;

std::vector<std::string> significant_lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line))
    if (!line.empty() && line[0] != '#') out.push_back(line);
  return out;
}

class RdmaDouble : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!rawpipe::rdma::has_cap_net_raw()) GTEST_SKIP() << "needs CAP_NET_RAW (the drivers' preflight asks for it)";
    d_ = build_dirs();
    ASSERT_FALSE(d_.build.empty());
    double_dir_ = d_.build / "tests" / "rdma_double";
    ASSERT_TRUE(fs::exists(double_dir_ / "libibverbs.so.1")) << "the double is not built in " << double_dir_;
    tmp_ = make_scratch_dir("rawpipe-rdma-double");
  }
  void TearDown() override {
    for (const char* v : {"LD_LIBRARY_PATH", "RAWPIPE_SYSFS_ROOT", "RAWPIPE_RDMA_DOUBLE_TRACE", "RAWPIPE_RDMA_DOUBLE_DEVICES",
                          "RAWPIPE_RDMA_DOUBLE_FRAMES", "RAWPIPE_RDMA_DOUBLE_FLOWS", "RAWPIPE_RDMA_DOUBLE_MLX5_INLINE"})
      unsetenv(v);
    if (!tmp_.empty()) fs::remove_all(tmp_);
  }

  // <tmp>/sys/class/net/IF as the kernel lays it out for a port of `driver` whose PCI function
  // carries `ib_devices`.
  void fake_sysfs(const std::string& ifname, const std::string& driver, const std::vector<std::string>& ib_devices) {
    const fs::path pci = tmp_ / "sys/devices/pci0000:00/0000:00:08.0";
    const fs::path drv = tmp_ / "sys/bus/pci/drivers" / driver;
    fs::create_directories(pci / "infiniband");
    fs::create_directories(drv);
    fs::create_symlink(drv, pci / "driver");
    for (const auto& ib : ib_devices) fs::create_directories(pci / "infiniband" / ib);
    const fs::path net = tmp_ / "sys/class/net" / ifname;
    fs::create_directories(net);
    fs::create_symlink(pci, net / "device");
    std::ofstream(net / "mtu") << "1500\n";
    std::ofstream(net / "operstate") << "up\n";
    std::ofstream(net / "address") << "02:00:00:00:00:02\n";
    std::ofstream(net / "dev_port") << "0\n";
  }

  fs::path write_config(const std::string& port_lines) {
    const fs::path cfg = tmp_ / "run.toml";
    std::ofstream(cfg) << R"([run]
default_action = "drop"
[[pools]]
name = "rx"
count = 8192
[[ports]]
name = "p"
)" << port_lines << R"(
rx_queues = 2
tx_queues = 1
rx_ring_size = 256
tx_ring_size = 256
[[endpoints]]
name = "udp5000"
action = "ring"
match = ["udp dst 10.0.0.2:5000"]
ring_size = 8192
[[lcores]]
rx = ["p:0", "p:1"]
)";
    return cfg;
  }

  // Runs the config against the double; returns the trace (rawpipe's output in out_).
  std::string run_against_double(const fs::path& cfg, const std::string& devices, nlohmann::json& summary,
                                 bool expect_success = true) {
    const fs::path trace = tmp_ / "calls.trace";
    const fs::path json = tmp_ / "summary.json";
    fs::remove(trace);
    fs::remove(json);
    setenv("LD_LIBRARY_PATH", double_dir_.c_str(), 1);
    setenv("RAWPIPE_SYSFS_ROOT", (tmp_ / "sys").c_str(), 1);
    setenv("RAWPIPE_RDMA_DOUBLE_TRACE", trace.c_str(), 1);
    setenv("RAWPIPE_RDMA_DOUBLE_DEVICES", devices.c_str(), 1);
    setenv("RAWPIPE_RDMA_DOUBLE_FRAMES", std::to_string(kFrames).c_str(), 1);
    setenv("RAWPIPE_RDMA_DOUBLE_FLOWS", "64", 1);
    ProcessOutput o = run_process({rawpipe_binary().string(), "run", cfg.string(), "--duration", "3", "--json", json.string()},
                                  tmp_, {.timeout = std::chrono::seconds(60)});
    out_ = o.out + o.err;
    if (!expect_success) {
      EXPECT_NE(o.status, 0) << o.out << o.err;
      return slurp(trace);
    }
    EXPECT_EQ(o.status, 0) << o.out << o.err << "\ntrace:\n" << slurp(trace);
    std::ifstream in(json);
    summary = nlohmann::json::parse(in, nullptr, false);
    EXPECT_FALSE(summary.is_discarded()) << o.out << o.err;
    return slurp(trace);
  }

  static void expect_delivered_and_balanced(const nlohmann::json& j) {
    ASSERT_TRUE(j.is_object());
    EXPECT_EQ(j["rx_packets"].get<std::uint64_t>(), kFrames);
    EXPECT_EQ(j["delivered"].get<std::uint64_t>(), kFrames);
    EXPECT_EQ(j["delivered_per_endpoint"]["udp5000"].get<std::uint64_t>(), kFrames);
    std::uint64_t drops = 0;
    for (auto& [reason, n] : j["drops"].items()) drops += n.get<std::uint64_t>();
    EXPECT_EQ(j["rx_packets"].get<std::uint64_t>(), j["delivered"].get<std::uint64_t>() + j["transmitted"].get<std::uint64_t>() + drops);
    EXPECT_TRUE(j["balanced"].get<bool>());
    EXPECT_EQ(j["buffers_outstanding"].get<std::uint64_t>(), 0u);
  }

  // No precondition broken, nothing the double could not play, and the calls of the golden trace.
  void expect_trace_matches(const std::string& trace, const std::string& golden_name) {
    EXPECT_EQ(trace.find("VIOLATION"), std::string::npos) << trace;
    EXPECT_EQ(trace.find("UNSUPPORTED"), std::string::npos) << trace;
    // After an intended change of the bring-up: RAWPIPE_RDMA_DOUBLE_SAVE_TRACE=DIR keeps the new
    // trace there, to be annotated and checked in.
    if (const char* dir = std::getenv("RAWPIPE_RDMA_DOUBLE_SAVE_TRACE")) std::ofstream(fs::path(dir) / golden_name) << trace;
    const fs::path golden = d_.source / "tests/rdma_double/golden" / golden_name;
    const auto want = significant_lines(slurp(golden));
    const auto got = significant_lines(trace);
    ASSERT_FALSE(want.empty()) << golden << " is missing or empty";
    for (std::size_t i = 0; i < std::max(want.size(), got.size()); ++i) {
      const std::string w = i < want.size() ? want[i] : "(end of golden trace)";
      const std::string g = i < got.size() ? got[i] : "(end of trace)";
      ASSERT_EQ(g, w) << "call " << i + 1 << " differs from " << golden << "; the whole trace:\n" << trace;
    }
  }

  BuildDirs d_;
  fs::path double_dir_, tmp_;
  std::string out_;
};

TEST_F(RdmaDouble, Mlx5PortRunsEndToEndInDpdkOrder) {
  fake_sysfs("rpdbl0", "mlx5_core", {"mlx5_0"});
  nlohmann::json j;
  const std::string trace = run_against_double(write_config("pmd = \"mlx5\"\ninterface = \"rpdbl0\""), "mlx5_0", j);
  expect_delivered_and_balanced(j);
  expect_trace_matches(trace, "mlx5_bringup.trace");
}

TEST_F(RdmaDouble, ManaPortRunsEndToEndInDpdkOrder) {
  // A kernel after the 2025 mana_ib split: the RC function first, then the Ethernet one.
  fake_sysfs("rpdbl0", "mana", {"mana_0", "manae_0"});
  nlohmann::json j;
  const std::string trace = run_against_double(write_config("pmd = \"mana\"\ninterface = \"rpdbl0\""), "mana_0:3,manae_0:2", j);
  expect_delivered_and_balanced(j);
  expect_trace_matches(trace, "mana_bringup.trace");
}

// The minimum inline header comes from the device, read as DPDK's mlx5_set_min_inline reads it
// (drivers/net/mlx5/mlx5.c): DevX QUERY_HCA_CAP's wqe_inline_mode, and for VPORT_CONTEXT the NIC
// vport context's min_wqe_inline_mode. The double answers those commands from
// RAWPIPE_RDMA_DOUBLE_MLX5_INLINE; the device is a ConnectX-6 Dx (part 4125), whose PCI id alone
// would mean no inline header, so only the device's answer can give 18, 58 or 78 bytes.
TEST_F(RdmaDouble, Mlx5TakesTheMinimumInlineModeTheDeviceReports) {
  fake_sysfs("rpdbl0", "mlx5_core", {"mlx5_0"});
  const fs::path cfg = write_config("pmd = \"mlx5\"\ninterface = \"rpdbl0\"");
  struct Case {
    const char* mode;
    int bytes;
    const char* from;
  };
  for (const Case& c : {Case{"none", 0, "vport min_wqe_inline_mode none"}, Case{"l2", 18, "vport min_wqe_inline_mode L2"},
                        Case{"l3", 58, "vport min_wqe_inline_mode IP"}, Case{"l4", 78, "vport min_wqe_inline_mode TCP/UDP"},
                        Case{"cap-l2", 18, "HCA wqe_inline_mode L2"}, Case{"not-required", 0, "HCA wqe_inline_mode not required"}}) {
    SCOPED_TRACE(c.mode);
    setenv("RAWPIPE_RDMA_DOUBLE_MLX5_INLINE", c.mode, 1);
    nlohmann::json j;
    const std::string trace = run_against_double(cfg, "mlx5_0", j);
    expect_delivered_and_balanced(j);
    EXPECT_EQ(trace.find("VIOLATION"), std::string::npos) << trace;
    EXPECT_NE(trace.find("  -> ctx0 (DevX)"), std::string::npos) << trace;
    EXPECT_NE(out_.find(fmt::format("tx queue 0: SQ of 256 WQEBBs, {} inline header bytes", c.bytes)), std::string::npos) << out_;
    EXPECT_NE(out_.find(fmt::format("minimum inline {} B from device: {}", c.bytes, c.from)), std::string::npos) << out_;
  }
}

// A device that says nothing (no DevX: a kernel or firmware without it) leaves the PCI id table to
// decide, as mlx5_set_min_inline's fallback: ConnectX-4 Lx (4117) needs the L2 header inline,
// ConnectX-6 Dx (4125) none.
TEST_F(RdmaDouble, Mlx5FallsBackToThePciIdWhenTheDeviceDoesNotReport) {
  fake_sysfs("rpdbl0", "mlx5_core", {"mlx5_0"});
  const fs::path cfg = write_config("pmd = \"mlx5\"\ninterface = \"rpdbl0\"");
  for (const auto& [part, bytes] : {std::pair{4117, 18}, std::pair{4125, 0}}) {
    SCOPED_TRACE(part);
    nlohmann::json j;
    const std::string trace = run_against_double(cfg, fmt::format("mlx5_0:{}", part), j);
    expect_delivered_and_balanced(j);
    EXPECT_EQ(trace.find("VIOLATION"), std::string::npos) << trace;
    EXPECT_NE(trace.find("mlx5dv_open_device mlx5_0 flags=0x1"), std::string::npos) << trace;
    EXPECT_NE(trace.find("ibv_open_device mlx5_0 -> ctx0"), std::string::npos) << trace;
    EXPECT_NE(out_.find(fmt::format("tx queue 0: SQ of 256 WQEBBs, {} inline header bytes", bytes)), std::string::npos) << out_;
    EXPECT_NE(out_.find(fmt::format("minimum inline {} B from PCI id {}", bytes, part)), std::string::npos) << out_;
  }
}

// An inner-header (tunnel) inline mode is one rawpipe cannot build: the port refuses to start and
// says what to do, rather than sending WQEs the device would drop.
TEST_F(RdmaDouble, Mlx5RefusesAnInnerHeaderInlineMode) {
  fake_sysfs("rpdbl0", "mlx5_core", {"mlx5_0"});
  setenv("RAWPIPE_RDMA_DOUBLE_MLX5_INLINE", "inner-l4", 1);
  nlohmann::json j;
  const std::string trace =
      run_against_double(write_config("pmd = \"mlx5\"\ninterface = \"rpdbl0\""), "mlx5_0", j, /*expect_success=*/false);
  EXPECT_NE(out_.find("inner (tunnelled) headers inline"), std::string::npos) << out_;
  EXPECT_NE(out_.find("tx_inline"), std::string::npos) << out_;
}

}  // namespace
