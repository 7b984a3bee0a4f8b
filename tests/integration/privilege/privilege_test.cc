// `rawpipe run` with [run] user = "nobody": after setup the running process, every thread of it,
// has no capability left (effective, permitted, bounding, ambient), runs as nobody with
// no_new_privs, traffic keeps flowing after the drop, the stats segment stays readable and is
// removed at exit, and the final accounting balances. On synth and on af_packet in a namespace.
// Needs root (it switches user and builds a namespace); skips otherwise.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <arpa/inet.h>
#include <linux/capability.h>
#include <netinet/in.h>
#include <pwd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "rawpipe/shm_stats.hh"
#include "rawpipe/privilege.hh"
#include "tests/support/netns.hh"
#include "tests/support/process.hh"
#include "tests/support/scratch_dir.hh"

namespace rawpipe {
namespace {

namespace fs = std::filesystem;
using privilege::read_task_creds;
using namespace rawpipe::test;

class PrivilegeRun : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "switching to user nobody needs root";
    const passwd* pw = getpwnam("nobody");
    if (!pw) GTEST_SKIP() << "this host has no user 'nobody'";
    nobody_uid_ = pw->pw_uid;
    nobody_gid_ = pw->pw_gid;
    bin_ = rawpipe_binary();
    ASSERT_TRUE(fs::exists(bin_)) << bin_ << " is not built";
    tmp_ = make_scratch_dir("rawpipe-priv");
    // The JSON summary is written after the drop, by nobody.
    ASSERT_EQ(chown(tmp_.c_str(), nobody_uid_, nobody_gid_), 0);
  }
  void TearDown() override {
    if (!tmp_.empty()) fs::remove_all(tmp_);
    // The name link stays root-owned when the run switched user, so the run cannot remove it
    // (docs/hardening.md); remove the dangling ones this test's configs left.
    for (const char* name : {"synth", "afp", "xdp"}) {
      const fs::path link = ops::shm_stats_name_link(name);
      std::error_code ec;
      if (fs::is_symlink(link, ec) && !fs::exists(link, ec)) fs::remove(link, ec);
    }
  }

  pid_t spawn(const std::vector<std::string>& args) { return start_process(args, tmp_ / "stdout", tmp_ / "stderr"); }

  std::string out() { return slurp(tmp_ / "stdout") + slurp(tmp_ / "stderr"); }

  // Waits for the line rawpipe prints after the drop.
  bool wait_for_drop(pid_t pid) {
    for (int i = 0; i < 1000; ++i) {
      if (slurp(tmp_ / "stdout").find("privileges: running as") != std::string::npos) return true;
      int st;
      if (waitpid(pid, &st, WNOHANG) == pid) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  }

  // Every task of the running process: no capability anywhere, nobody, no_new_privs.
  void expect_unprivileged(pid_t pid) {
    unsigned tasks = 0;
    for (const auto& e : fs::directory_iterator(fmt::format("/proc/{}/task", pid))) {
      auto c = read_task_creds((e.path() / "status").string());
      ASSERT_TRUE(c) << c.message();
      const auto& t = c.value();
      SCOPED_TRACE(e.path().string());
      EXPECT_EQ(t.eff, 0u);
      EXPECT_EQ(t.prm, 0u);
      EXPECT_EQ(t.inh, 0u);
      EXPECT_EQ(t.bnd, 0u);
      EXPECT_EQ(t.amb, 0u);
      EXPECT_EQ(t.no_new_privs, 1);
      for (int i = 0; i < 4; ++i) {
        EXPECT_EQ(t.uid[i], nobody_uid_);
        EXPECT_EQ(t.gid[i], nobody_gid_);
      }
      ++tasks;
    }
    // main, lcore, ring consumer, stats publisher at least
    EXPECT_GE(tasks, 4u);
  }

  std::uint64_t rx_now(pid_t pid) {
    auto r = ops::ShmStatsReader::open(std::to_string(pid));
    EXPECT_TRUE(r) << r.message();
    if (!r) return 0;
    auto doc = r->read();
    EXPECT_TRUE(doc) << doc.message();
    if (!doc) return 0;
    auto j = nlohmann::json::parse(doc.value(), nullptr, false);
    if (j.is_discarded() || !j.contains("total")) return 0;
    return j["total"]["rx_packets"].get<std::uint64_t>();
  }

  int wait_exit(pid_t pid) { return wait_process(pid, {.timeout = std::chrono::seconds(30)}); }

  void expect_balanced(const fs::path& json) {
    std::ifstream in(json);
    auto j = nlohmann::json::parse(in, nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << slurp(json) << out();
    std::uint64_t drops = 0;
    for (auto& [reason, n] : j["drops"].items()) drops += n.get<std::uint64_t>();
    EXPECT_EQ(j["rx_packets"].get<std::uint64_t>(),
              j["delivered"].get<std::uint64_t>() + j["transmitted"].get<std::uint64_t>() + drops);
    EXPECT_TRUE(j["balanced"].get<bool>());
    EXPECT_EQ(j["buffers_outstanding"].get<std::uint64_t>(), 0u);
    EXPECT_GT(j["rx_packets"].get<std::uint64_t>(), 0u);
  }

  uid_t nobody_uid_ = 0;
  gid_t nobody_gid_ = 0;
  fs::path bin_, tmp_;
};

constexpr const char* kTail = R"(
[[endpoints]]
name = "app"
action = "ring"
match = ["udp dst *:5000"]
[[endpoints]]
name = "rest"
action = "sink"
[[lcores]]
rx = ["p:0"]
)";

TEST_F(PrivilegeRun, SynthAsNobodyHasNoCapabilityAndBalances) {
  const fs::path cfg = tmp_ / "synth.toml";
  std::ofstream(cfg) << "[run]\nuser = \"nobody\"\nduration = 3\nstats_interval = 0.1\ndefault_action = \"endpoint\"\n"
                        "default_endpoint = \"rest\"\n[[pools]]\nname = \"rx\"\ncount = 4096\n"
                        "[[ports]]\nname = \"p\"\npmd = \"synth\"\nrate_pps = 200000\n"
                     << kTail;
  const fs::path json = tmp_ / "synth.json";
  pid_t pid = spawn({bin_.string(), "run", cfg.string(), "--json", json.string()});
  ASSERT_GT(pid, 0);
  ASSERT_TRUE(wait_for_drop(pid)) << out();
  expect_unprivileged(pid);
  EXPECT_NE(slurp(tmp_ / "stdout").find("capabilities kept: none"), std::string::npos) << out();
  // The segment was created by root and handed to nobody: 0600, readable here, growing.
  struct stat st {};
  ASSERT_EQ(stat(ops::shm_stats_path(pid).c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(st.st_uid, nobody_uid_);
  const std::uint64_t a = rx_now(pid);
  std::this_thread::sleep_for(std::chrono::milliseconds(700));
  const std::uint64_t b = rx_now(pid);
  EXPECT_GT(b, a) << "traffic stopped after the drop";
  ASSERT_EQ(wait_exit(pid), 0) << out();
  expect_balanced(json);
  EXPECT_FALSE(fs::exists(ops::shm_stats_path(pid))) << "nobody could not remove the stats segment";
}

TEST_F(PrivilegeRun, AfPacketInNamespaceAsNobodyKeepsReceiving) {
  if (auto why = test::netns_unavailable_reason()) GTEST_SKIP() << *why;
  auto ns = test::NetNs::create("rppriv");
  ASSERT_TRUE(ns) << ns.message();
  test::VethEnd in{&ns.value(), "", {"10.78.0.1/24"}, "", 0};
  test::VethEnd peer{nullptr, "", {"10.78.0.2/24"}, "", 0};
  auto veth = test::VethPair::create(in, peer);
  ASSERT_TRUE(veth) << veth.message();

  const fs::path cfg = tmp_ / "afp.toml";
  std::ofstream(cfg) << "[run]\nuser = \"nobody\"\nduration = 3\nstats_interval = 0.1\ndefault_action = \"endpoint\"\n"
                        "default_endpoint = \"rest\"\n[[pools]]\nname = \"rx\"\ncount = 4096\n"
                        "[[ports]]\nname = \"p\"\npmd = \"af_packet\"\ninterface = \""
                     << veth->a().name << "\"\n"
                     << kTail;
  // Datagrams from this namespace to the rawpipe side for the whole run.
  std::atomic<bool> stop{false};
  std::thread sender([&] {
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_port = htons(5000);
    inet_pton(AF_INET, "10.78.0.1", &to.sin_addr);
    char payload[64] = "rawpipe privilege test";
    while (!stop.load()) {
      (void)sendto(fd, payload, sizeof payload, 0, reinterpret_cast<sockaddr*>(&to), sizeof to);
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    close(fd);
  });
  const fs::path json = tmp_ / "afp.json";
  pid_t pid = spawn({"ip", "netns", "exec", ns->name(), bin_.string(), "run", cfg.string(), "--json", json.string()});
  ASSERT_GT(pid, 0);
  const bool dropped = wait_for_drop(pid);
  if (dropped) {
    expect_unprivileged(pid);
    const std::uint64_t a = rx_now(pid);
    std::this_thread::sleep_for(std::chrono::milliseconds(700));
    EXPECT_GT(rx_now(pid), a) << "af_packet stopped receiving after the drop";
  }
  const int rc = wait_exit(pid);
  stop = true;
  sender.join();
  ASSERT_TRUE(dropped) << out();
  ASSERT_EQ(rc, 0) << out();
  expect_balanced(json);
}

// AF_XDP keeps exactly what detaching its XDP program needs, and does detach it at exit.
TEST_F(PrivilegeRun, AfXdpAsNobodyKeepsOnlyWhatDetachNeeds) {
  if (auto why = test::netns_unavailable_reason()) GTEST_SKIP() << *why;
  if (!fs::exists(build_dir() / "pmd" / "af_xdp" / "xdp_steer.bpf.o")) GTEST_SKIP() << "af_xdp driver not built";
  auto ns = test::NetNs::create("rppxdp");
  ASSERT_TRUE(ns) << ns.message();
  test::VethEnd in{&ns.value(), "", {"10.79.0.1/24"}, "", 0};
  test::VethEnd peer{nullptr, "", {"10.79.0.2/24"}, "", 0};
  auto veth = test::VethPair::create(in, peer);
  ASSERT_TRUE(veth) << veth.message();
  const fs::path cfg = tmp_ / "xdp.toml";
  std::ofstream(cfg) << "[run]\nuser = \"nobody\"\nduration = 2\nstats_interval = 0.1\ndefault_action = \"endpoint\"\n"
                        "default_endpoint = \"rest\"\n[[pools]]\nname = \"rx\"\ncount = 4096\n"
                        "[[ports]]\nname = \"p\"\npmd = \"af_xdp\"\nmode = \"all\"\ninterface = \""
                     << veth->a().name << "\"\n"
                     << kTail;
  const fs::path json = tmp_ / "xdp.json";
  pid_t pid = spawn({"ip", "netns", "exec", ns->name(), bin_.string(), "run", cfg.string(), "--json", json.string()});
  ASSERT_GT(pid, 0);
  const bool dropped = wait_for_drop(pid);
  std::string attached;
  if (dropped) {
    auto link = test::output_in(&ns.value(), {"ip", "link", "show", veth->a().name});
    attached = link ? link.value() : link.message();
    const privilege::CapMask want = (privilege::CapMask{1} << CAP_NET_ADMIN) | (privilege::CapMask{1} << CAP_SYS_ADMIN);
    for (const auto& e : fs::directory_iterator(fmt::format("/proc/{}/task", pid))) {
      auto c = read_task_creds((e.path() / "status").string());
      ASSERT_TRUE(c) << c.message();
      EXPECT_EQ(c->eff, want) << e.path();
      EXPECT_EQ(c->prm, want) << e.path();
      EXPECT_EQ(c->bnd, want) << e.path();
      EXPECT_EQ(c->uid[1], nobody_uid_) << e.path();
      EXPECT_EQ(c->no_new_privs, 1) << e.path();
    }
  }
  const int rc = wait_exit(pid);
  ASSERT_TRUE(dropped) << out();
  ASSERT_EQ(rc, 0) << out();
  EXPECT_NE(attached.find("xdp"), std::string::npos) << "no XDP program while running: " << attached;
  EXPECT_NE(out().find("capabilities kept: CAP_NET_ADMIN, CAP_SYS_ADMIN; port p (af_xdp)"), std::string::npos) << out();
  auto after = test::output_in(&ns.value(), {"ip", "link", "show", veth->a().name});
  ASSERT_TRUE(after) << after.message();
  EXPECT_EQ(after->find("xdp"), std::string::npos) << "the XDP program outlived the run: " << after.value();
}

// A user that does not exist stops the run before anything is set up: no port, no segment.
TEST_F(PrivilegeRun, MissingUserFailsBeforeSetup) {
  const fs::path cfg = tmp_ / "nouser.toml";
  std::ofstream(cfg) << "[run]\nuser = \"no-such-user-rawpipe\"\nduration = 1\ndefault_action = \"endpoint\"\n"
                        "default_endpoint = \"rest\"\n[[pools]]\nname = \"rx\"\n"
                        "[[ports]]\nname = \"p\"\npmd = \"synth\"\n"
                     << kTail;
  pid_t pid = spawn({bin_.string(), "run", cfg.string()});
  ASSERT_GT(pid, 0);
  EXPECT_EQ(wait_exit(pid), 1);
  EXPECT_NE(out().find("user \"no-such-user-rawpipe\" does not exist"), std::string::npos) << out();
  EXPECT_EQ(out().find("port p"), std::string::npos) << "a port was set up: " << out();
  EXPECT_FALSE(fs::exists(ops::shm_stats_path(pid)));
}

// Nothing starts half-configured: a config the loader rejects, and one whose port cannot open,
// both end the run with a non-zero status before the stats segment exists. Needs no privileges.
TEST(PrivilegeBadConfig, StartsNothing) {
  const fs::path bin = rawpipe_binary();
  ASSERT_TRUE(fs::exists(bin)) << bin;
  const fs::path tmp = fs::temp_directory_path() / ("rawpipe-priv-bad-" + std::to_string(getpid()));
  fs::create_directories(tmp);
  const std::string base = "[run]\nduration = 1\n[[pools]]\nname = \"rx\"\n[[endpoints]]\nname = \"e\"\n"
                           "action = \"sink\"\nmatch = [\"udp\"]\n[[lcores]]\nrx = [\"p:0\"]\n";
  struct Case {
    const char* name;
    std::string port;
    const char* says;
  } cases[] = {
      {"loader", "[[ports]]\nname = \"p\"\npmd = \"synth\"\nrate_pps = \"fast\"\n", "key 'rate_pps'"},
      {"open", "[[ports]]\nname = \"p\"\npmd = \"af_packet\"\ninterface = \"rawpipe-no-such-if\"\n",
       "rawpipe-no-such-if"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const fs::path cfg = tmp / (std::string(c.name) + ".toml");
    std::ofstream(cfg) << base << c.port;
    const pid_t pid = start_process({bin.string(), "run", cfg.string()}, tmp / "out", tmp / "err");
    ASSERT_GT(pid, 0);
    const int status = wait_process(pid);
    const std::string out = slurp(tmp / "out") + slurp(tmp / "err");
    EXPECT_TRUE(status > 0 && status < 128) << status << "\n" << out;
    EXPECT_NE(out.find(c.says), std::string::npos) << out;
    EXPECT_EQ(out.find("running for"), std::string::npos) << out;
    EXPECT_FALSE(fs::exists(ops::shm_stats_path(pid))) << "a stats segment outlived a failed start";
  }
  fs::remove_all(tmp);
}

}  // namespace
}  // namespace rawpipe
