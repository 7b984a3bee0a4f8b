// The rawpipe binary in a network namespace with a veth pair to a peer namespace, for the fault
// tests about how a run ends (signals, SIGKILL, a second instance, losses the kernel counted).
// Needs root; SetUp skips with the reason otherwise. Everything created is removed in TearDown.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>

#include "tests/support/netns.hh"
#include "tests/support/process.hh"
#include "tests/support/scratch_dir.hh"

namespace rawpipe::fault {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

class NetnsRun : public ::testing::Test {
 protected:
  static constexpr const char* kRxIp = "10.212.0.1";
  static constexpr const char* kTxIp = "10.212.0.2";

  void SetUp() override {
    if (auto why = test::netns_unavailable_reason()) GTEST_SKIP() << *why;
    bin_ = test::rawpipe_binary();
    ASSERT_TRUE(fs::exists(bin_)) << bin_ << " is not built";
    auto a = test::NetNs::create("rper");
    ASSERT_TRUE(a) << a.message();
    rx_ns_ = std::make_unique<test::NetNs>(std::move(a).value());
    auto b = test::NetNs::create("rpet");
    ASSERT_TRUE(b) << b.message();
    tx_ns_ = std::make_unique<test::NetNs>(std::move(b).value());
    ifname_ = test::unique_name("rpe");
    auto pair = test::VethPair::create({rx_ns_.get(), ifname_, {std::string(kRxIp) + "/24"}},
                                       {tx_ns_.get(), "", {std::string(kTxIp) + "/24"}});
    ASSERT_TRUE(pair) << pair.message();
    veth_ = std::make_unique<test::VethPair>(std::move(pair).value());
    tmp_ = test::make_scratch_dir("rawpipe-fault");
    // Locks of this test's runs only: a pipeline elsewhere on the host cannot interfere.
    setenv("RAWPIPE_LOCK_DIR", (tmp_ / "locks").c_str(), 1);
  }

  void TearDown() override {
    for (pid_t p : children_)
      if (p > 0 && kill(p, 0) == 0) {
        kill(p, SIGKILL);
        waitpid(p, nullptr, 0);
      }
    veth_.reset();
    tx_ns_.reset();
    rx_ns_.reset();
    if (!tmp_.empty()) fs::remove_all(tmp_);
  }

  // Writes a config named `name`.toml into the scratch directory; returns its path.
  fs::path config(const std::string& name, const std::string& text) {
    const fs::path p = tmp_ / (name + ".toml");
    std::ofstream(p) << text;
    return p;
  }

  // Starts `rawpipe run CONFIG ARGS...` inside the receiving namespace (ip netns exec execs, so the
  // pid is rawpipe's), output into tmp_/TAG.out and TAG.err.
  pid_t start(const std::string& tag, const fs::path& cfg, std::vector<std::string> args = {}) {
    std::vector<std::string> argv = {"ip", "netns", "exec", rx_ns_->name(), bin_.string(), "run", cfg.string()};
    argv.insert(argv.end(), args.begin(), args.end());
    pid_t pid = test::start_process(argv, tmp_ / (tag + ".out"), tmp_ / (tag + ".err"));
    children_.push_back(pid);
    return pid;
  }
  std::string out(const std::string& tag) { return test::slurp(tmp_ / (tag + ".out")); }
  std::string err(const std::string& tag) { return test::slurp(tmp_ / (tag + ".err")); }

  // Waits until TAG's stdout contains `text` (the path report says the ports have started).
  bool wait_for(const std::string& tag, const std::string& text, std::chrono::milliseconds limit = 15s) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < deadline) {
      if (out(tag).find(text) != std::string::npos) return true;
      std::this_thread::sleep_for(20ms);
    }
    return false;
  }

  nlohmann::json read_json(const fs::path& p) {
    std::ifstream in(p);
    return nlohmann::json::parse(in, nullptr, false);
  }

  // What `ip link show IF` prints in the receiving namespace (contains "xdp" while a program is attached).
  std::string link_show() {
    auto o = test::output_in(rx_ns_.get(), {"ip", "link", "show", ifname_});
    return o ? o.value() : o.message();
  }

  // Sends n 64-byte datagrams to kRxIp:port from the peer namespace as fast as the socket takes them.
  void send_udp(unsigned n, std::uint16_t port) {
    Status st = tx_ns_->run([&] {
      int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
      sockaddr_in to{};
      to.sin_family = AF_INET;
      to.sin_port = htons(port);
      inet_pton(AF_INET, kRxIp, &to.sin_addr);
      char payload[64] = {};
      for (unsigned i = 0; i < n; ++i)
        (void)sendto(fd, payload, sizeof payload, 0, reinterpret_cast<sockaddr*>(&to), sizeof to);
      close(fd);
    });
    ASSERT_TRUE(st) << st.message();
  }

  fs::path bin_, tmp_;
  std::string ifname_;
  std::unique_ptr<test::NetNs> rx_ns_, tx_ns_;
  std::unique_ptr<test::VethPair> veth_;
  std::vector<pid_t> children_;
};

}  // namespace rawpipe::fault
