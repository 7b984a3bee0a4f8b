// `rawpipe doctor` against crafted bad setups, each asserting the exact fix, and a good setup that
// exits 0 and then really runs with the path doctor predicted:
//   - a config naming an interface that does not exist;
//   - no capabilities (doctor run inside `unshare -U`, where it is uid nobody with an empty set);
//   - a veth with MTU 9000 under an af_xdp port (namespace and veth made by the test);
//   - a veth with MTU 1500 under the same port.
// Needs root for the namespaces; skips with the reason otherwise.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "rawpipe/mbuf.hh"
#include "tests/support/netns.hh"
#include "tests/support/process.hh"

namespace {

namespace fs = std::filesystem;
using namespace rawpipe::test;
using rawpipe::test::NetNs;
using rawpipe::test::VethEnd;
using rawpipe::test::VethPair;

class Doctor : public ::testing::Test {
 protected:
  void SetUp() override {
    if (auto why = rawpipe::test::netns_unavailable_reason()) GTEST_SKIP() << *why;
    const fs::path build = build_dir();
    ASSERT_FALSE(build.empty()) << "cannot find meson-info above this test";
    bin_ = rawpipe_binary();
    ASSERT_TRUE(fs::exists(bin_)) << bin_ << " is not built";
    tmp_ = fs::temp_directory_path() / ("rawpipe-doctor-test-" + std::to_string(getpid()));
    fs::create_directories(tmp_);
    fs::permissions(tmp_, fs::perms::all);  // readable by the unprivileged doctor in a user namespace
  }
  void TearDown() override {
    if (!tmp_.empty()) fs::remove_all(tmp_);
  }

  // Runs argv (argv[0] a path or looked up in PATH) with its output in the test's directory.
  ProcessOutput spawn(const std::vector<std::string>& argv) { return run_process(argv, tmp_); }

  fs::path config(const std::string& pmd, const std::string& interface, unsigned buf_size = 2048,
                  const std::string& port_keys = "") {
    const fs::path p = tmp_ / "doctor.toml";
    std::ofstream(p) << "[[pools]]\nname = \"rx\"\ncount = 4096\nbuf_size = " << buf_size << "\n\n"
                     << "[[ports]]\nname = \"p0\"\npmd = \"" << pmd << "\"\ninterface = \"" << interface << "\"\n"
                     << port_keys << "\n"
                     << "[[endpoints]]\nname = \"udp\"\naction = \"sink\"\nmatch = [\"udp dst *:5000\"]\n\n"
                     << "[[lcores]]\nrx = [\"p0:0\"]\n";
    fs::permissions(p, fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read | fs::perms::others_read);
    return p;
  }

  // Runs doctor --json (prefix: a wrapper such as `ip netns exec NS`) and returns its findings.
  nlohmann::json doctor(const fs::path& cfg, std::vector<std::string> prefix, int expect_status) {
    prefix.push_back(bin_.string());
    prefix.insert(prefix.end(), {"doctor", cfg.string(), "--json"});
    ProcessOutput o = spawn(prefix);
    EXPECT_EQ(o.status, expect_status) << o.out << o.err;
    auto j = nlohmann::json::parse(o.out, nullptr, false);
    EXPECT_FALSE(j.is_discarded()) << "not JSON:\n" << o.out << o.err;
    return j;
  }

  static const nlohmann::json* finding(const nlohmann::json& j, const std::string& check) {
    if (!j.contains("checks")) return nullptr;
    for (const auto& c : j["checks"])
      if (c["check"] == check) return &c;
    return nullptr;
  }

  fs::path bin_, tmp_;
};

TEST_F(Doctor, MissingInterfaceFailsAndListsTheInterfacesThatExist) {
  auto ns = NetNs::create("rpdoc");
  ASSERT_TRUE(ns) << ns.message();
  const fs::path cfg = config("af_packet", "rpnosuch0");
  auto j = doctor(cfg, {"ip", "netns", "exec", ns->name()}, 1);
  EXPECT_FALSE(j["can_run"].get<bool>());
  const nlohmann::json* f = finding(j, "interface rpnosuch0");
  ASSERT_NE(f, nullptr) << j.dump(2);
  EXPECT_EQ((*f)["level"], "FAIL");
  // The namespace holds only lo, so that is the one interface the fix can offer.
  EXPECT_EQ((*f)["fix"], "set interface = \"<name>\" in port 'p0' (" + cfg.string() +
                             ":6) to one of: lo; or create the interface, or run rawpipe in its namespace (ip netns "
                             "exec <ns> rawpipe ...)");
}

TEST_F(Doctor, NoCapabilitiesInAUserNamespaceFailWithSetcap) {
  const fs::path cfg = config("af_packet", "lo");
  auto j = doctor(cfg, {"unshare", "-U"}, 1);
  EXPECT_FALSE(j["can_run"].get<bool>());
  const nlohmann::json* f = finding(j, "capability CAP_NET_RAW");
  ASSERT_NE(f, nullptr) << j.dump(2);
  EXPECT_EQ((*f)["level"], "FAIL");
  EXPECT_EQ((*f)["detail"], "missing: port p0 needs it for raw sockets and raw-packet queues");
  EXPECT_EQ((*f)["fix"], "run as root, or grant the binary the capabilities: sudo setcap cap_net_raw+ep " +
                             fs::canonical(bin_).string());
  // The same config passes as root: the capability was the only problem.
  auto root = doctor(cfg, {}, 0);
  EXPECT_TRUE(root["can_run"].get<bool>()) << root.dump(2);
}

TEST_F(Doctor, ConfigThatDoesNotLoadFailsWithFileAndLine) {
  const fs::path cfg = tmp_ / "bad.toml";
  std::ofstream(cfg) << "[[pools]]\nname = \"rx\"\ncount = 4096\nbuf_sise = 2048\n\n"
                     << "[[ports]]\nname = \"p0\"\npmd = \"synth\"\n\n"
                     << "[[endpoints]]\nname = \"udp\"\naction = \"sink\"\nmatch = [\"udp dst *:5000\"]\n\n"
                     << "[[lcores]]\nrx = [\"p0:0\"]\n";
  auto j = doctor(cfg, {}, 1);
  const nlohmann::json* f = finding(j, "config");
  ASSERT_NE(f, nullptr) << j.dump(2);
  EXPECT_EQ((*f)["level"], "FAIL");
  EXPECT_NE((*f)["detail"].get<std::string>().find(cfg.string() + ":4"), std::string::npos) << (*f)["detail"];
  EXPECT_NE((*f)["detail"].get<std::string>().find("buf_sise"), std::string::npos) << (*f)["detail"];
  // The machine checks still follow.
  EXPECT_NE(finding(j, "capabilities"), nullptr) << j.dump(2);
}

class DoctorVeth : public Doctor {
 protected:
  void make(unsigned mtu) {
    auto ns = NetNs::create("rpdoc");
    ASSERT_TRUE(ns) << ns.message();
    ns_.emplace(std::move(ns).value());
    VethEnd a{&*ns_, rawpipe::test::unique_name("rpda"), {"10.77.0.1/24"}, "", mtu};
    VethEnd b{&*ns_, rawpipe::test::unique_name("rpdb"), {"10.77.0.2/24"}, "", mtu};
    auto v = VethPair::create(a, b);
    ASSERT_TRUE(v) << v.message();
    veth_.emplace(std::move(v).value());
  }
  void TearDown() override {
    veth_.reset();
    ns_.reset();
    Doctor::TearDown();
  }
  std::optional<NetNs> ns_;
  std::optional<VethPair> veth_;
};

TEST_F(DoctorVeth, JumboMtuUnderAfXdpFailsWithTheMtuThatFits) {
  make(9000);
  if (HasFatalFailure()) return;
  const std::string ifname = veth_->a().name;
  auto j = doctor(config("af_xdp", ifname), {"ip", "netns", "exec", ns_->name()}, 1);
  EXPECT_FALSE(j["can_run"].get<bool>());
  std::vector<const nlohmann::json*> mtu;
  for (const auto& c : j["checks"])
    if (c["check"] == "mtu " + ifname) mtu.push_back(&c);
  ASSERT_EQ(mtu.size(), 2u) << j.dump(2);
  const unsigned fits = 2048 - rawpipe::kMbufHeaderSize - 256 - 22;
  EXPECT_EQ((*mtu[0])["level"], "FAIL");
  EXPECT_EQ((*mtu[0])["fix"].get<std::string>().rfind(
                "lower the MTU: sudo ip link set dev " + ifname + " mtu " + std::to_string(fits), 0),
            0u)
      << (*mtu[0])["fix"];
  EXPECT_EQ((*mtu[1])["level"], "warn");  // veth's native XDP limit: generic XDP instead
  EXPECT_EQ((*mtu[1])["fix"], "sudo ip link set dev " + ifname + " mtu 3506");
  // Applying the fix makes the setup pass.
  ASSERT_TRUE(veth_->exec_a({"ip", "link", "set", "dev", ifname, "mtu", std::to_string(fits)}));
  ASSERT_TRUE(veth_->exec_b({"ip", "link", "set", "dev", veth_->b().name, "mtu", std::to_string(fits)}));
  auto fixed = doctor(config("af_xdp", ifname), {"ip", "netns", "exec", ns_->name()}, 0);
  EXPECT_TRUE(fixed["can_run"].get<bool>()) << fixed.dump(2);
}

TEST_F(DoctorVeth, GoodSetupExitsZeroAndRunsOnThePredictedPath) {
  make(1500);
  if (HasFatalFailure()) return;
  const std::string ifname = veth_->a().name;
  const fs::path cfg = config("af_xdp", ifname);
  auto j = doctor(cfg, {"ip", "netns", "exec", ns_->name()}, 0);
  ASSERT_TRUE(j["can_run"].get<bool>()) << j.dump(2);
  for (const auto& c : j["checks"]) EXPECT_NE(c["level"], "FAIL") << c.dump();
  const nlohmann::json* path = finding(j, "path p0");
  ASSERT_NE(path, nullptr) << j.dump(2);
  EXPECT_EQ((*path)["detail"], "AF_XDP on " + ifname + " queue 0: XDP native, copy mode (driver veth has no zero-copy)");
  // rawpipe run prints the path the port really took at startup: the same driver and modes.
  const fs::path summary = tmp_ / "summary.json";
  ProcessOutput run = spawn({"ip", "netns", "exec", ns_->name(), bin_.string(), "run", cfg.string(), "--duration",
                             "0.5", "--json", summary.string()});
  ASSERT_EQ(run.status, 0) << run.out << run.err;
  EXPECT_NE(run.out.find("af_xdp " + ifname + " queue 0: XDP native"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("copy mode"), std::string::npos) << run.out;
  // The summary JSON carries the same path report.
  auto s = nlohmann::json::parse(slurp(summary), nullptr, false);
  ASSERT_FALSE(s.is_discarded()) << slurp(summary);
  const std::string real = s["ports"]["p0"].value("path", std::string());
  EXPECT_NE(real.find("af_xdp " + ifname + " queue 0: XDP native"), std::string::npos) << s["ports"].dump(2);
  EXPECT_NE(real.find("copy mode"), std::string::npos) << real;
}

// The native XDP limit doctor states for veth is the kernel's: at 3507 the attach fails (and so does
// rawpipe run with attach = "native"), at 3506 both pass.
TEST_F(DoctorVeth, NativeXdpMtuLimitMatchesTheKernel) {
  make(3507);
  if (HasFatalFailure()) return;
  const std::string ifname = veth_->a().name;
  const fs::path cfg = config("af_xdp", ifname, 4096, "attach = \"native\"\n");
  auto j = doctor(cfg, {"ip", "netns", "exec", ns_->name()}, 1);
  const nlohmann::json* f = finding(j, "mtu " + ifname);
  ASSERT_NE(f, nullptr) << j.dump(2);
  EXPECT_EQ((*f)["level"], "FAIL");
  EXPECT_EQ((*f)["fix"], "sudo ip link set dev " + ifname + " mtu 3506, or set attach = \"auto\" to accept generic XDP");
  ProcessOutput refused = spawn({"ip", "netns", "exec", ns_->name(), bin_.string(), "run", cfg.string(), "--duration", "0.2"});
  EXPECT_NE(refused.status, 0) << refused.out << refused.err;

  ASSERT_TRUE(veth_->exec_a({"ip", "link", "set", "dev", ifname, "mtu", "3506"}));
  ASSERT_TRUE(veth_->exec_b({"ip", "link", "set", "dev", veth_->b().name, "mtu", "3506"}));
  auto ok = doctor(cfg, {"ip", "netns", "exec", ns_->name()}, 0);
  EXPECT_TRUE(ok["can_run"].get<bool>()) << ok.dump(2);
  ProcessOutput ran = spawn({"ip", "netns", "exec", ns_->name(), bin_.string(), "run", cfg.string(), "--duration", "0.2"});
  EXPECT_EQ(ran.status, 0) << ran.out << ran.err;
  EXPECT_NE(ran.out.find("XDP native"), std::string::npos) << ran.out;
}

}  // namespace
