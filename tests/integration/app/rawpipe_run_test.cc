// The rawpipe binary end to end: run a config for about a second with --json and check the
// summary (balanced accounting, no buffer outstanding, exact counts with a packet limit), stop on
// SIGINT, reject a bad config with file and line, answer --version. Needs no privileges.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "tests/support/process.hh"
#include "tests/support/scratch_dir.hh"

namespace {

namespace fs = std::filesystem;
using namespace rawpipe::test;

class RawpipeBinary : public ::testing::Test {
 protected:
  void SetUp() override {
    d_ = build_dirs();
    ASSERT_FALSE(d_.build.empty()) << "cannot find meson-info above this test";
    bin_ = rawpipe_binary();
    ASSERT_TRUE(fs::exists(bin_)) << bin_ << " is not built";
    tmp_ = make_scratch_dir("rawpipe-app-test");
  }
  void TearDown() override { fs::remove_all(tmp_); }

  // Runs rawpipe with args; when interrupt_after_ms >= 0 sends SIGINT after that long.
  ProcessOutput run(std::vector<std::string> args, int interrupt_after_ms = -1) {
    args.insert(args.begin(), bin_.string());
    return run_process(args, tmp_, {.interrupt_after = std::chrono::milliseconds(interrupt_after_ms)});
  }

  nlohmann::json read_json(const fs::path& p) {
    std::ifstream in(p);
    auto j = nlohmann::json::parse(in, nullptr, false);
    EXPECT_FALSE(j.is_discarded()) << p << " is not JSON:\n" << slurp(p);
    return j;
  }

  static void expect_balanced(const nlohmann::json& j) {
    std::uint64_t drops = 0;
    for (auto& [reason, n] : j["drops"].items()) drops += n.get<std::uint64_t>();
    EXPECT_EQ(drops, j["dropped"].get<std::uint64_t>());
    EXPECT_EQ(j["rx_packets"].get<std::uint64_t>(),
              j["delivered"].get<std::uint64_t>() + j["transmitted"].get<std::uint64_t>() + drops);
    std::uint64_t per_ep = 0;
    for (auto& [name, n] : j["delivered_per_endpoint"].items()) per_ep += n.get<std::uint64_t>();
    EXPECT_EQ(per_ep, j["delivered"].get<std::uint64_t>());
    EXPECT_TRUE(j["balanced"].get<bool>());
    EXPECT_EQ(j["buffers_outstanding"].get<std::uint64_t>(), 0u);
    EXPECT_TRUE(j["ok"].get<bool>());
  }

  BuildDirs d_;
  fs::path bin_, tmp_;
};

TEST_F(RawpipeBinary, DefaultConfigRunsForASecondAndBalances) {
  const fs::path json = tmp_ / "summary.json";
  ProcessOutput o = run({"run", (d_.source / "configs" / "default.toml").string(), "--duration", "1", "--json", json.string()});
  ASSERT_EQ(o.status, 0) << o.out << o.err;
  EXPECT_NE(o.out.find("pool rx: "), std::string::npos) << o.out;  // the memory notice
  EXPECT_NE(o.out.find("port synth0 rx queue 0: synth generator"), std::string::npos) << o.out;  // path report
  EXPECT_NE(o.out.find("OK: every packet accounted for"), std::string::npos) << o.out;
  auto j = read_json(json);
  expect_balanced(j);
  EXPECT_GT(j["rx_packets"].get<std::uint64_t>(), 0u);
  EXPECT_GT(j["rx_bytes"].get<std::uint64_t>(), 0u);
  EXPECT_GT(j["mpps"].get<double>(), 0.0);
  // The rate is what was received in the measured window over that window: synth keeps delivering
  // during setup and after the stop request, so the run's total over the window would overstate it.
  const auto& w = j["window"];
  const double secs = w["seconds"].get<double>();
  const auto in_window = w["rx_packets"].get<std::uint64_t>();
  EXPECT_GT(secs, 0.5);
  EXPECT_DOUBLE_EQ(j["seconds"].get<double>(), secs);
  EXPECT_GT(in_window, 0u);
  EXPECT_LT(in_window, j["rx_packets"].get<std::uint64_t>());
  EXPECT_NEAR(j["mpps"].get<double>(), double(in_window) / secs / 1e6, 1e-9);
  EXPECT_NEAR(w["rx_mpps"].get<double>(), j["mpps"].get<double>(), 1e-9);
  // Delivered and dropped rates beside it: their sum is the receive rate (each lcore counter is read
  // on its own, so allow a few bursts' worth of skew).
  const double parts = w["delivered_mpps"].get<double>() + w["transmitted_mpps"].get<double>() +
                       w["dropped_mpps"].get<double>();
  EXPECT_NEAR(parts, j["mpps"].get<double>(), j["mpps"].get<double>() * 0.01);
  EXPECT_GT(w["dropped_mpps"].get<double>(), 0.0);  // no_match and malformed frames are not delivered
  EXPECT_LT(w["delivered_mpps"].get<double>(), j["mpps"].get<double>());
  EXPECT_NE(o.out.find("measured window"), std::string::npos) << o.out;
  EXPECT_TRUE(j["delivered_per_endpoint"].contains("video"));
  EXPECT_TRUE(j["delivered_per_endpoint"].contains("telemetry"));
  // 1% malformed frames and the unmatched fourth group show up by reason.
  EXPECT_GT(j["drops"]["truncated_ipv4"].get<std::uint64_t>(), 0u);
  EXPECT_GT(j["drops"]["no_match"].get<std::uint64_t>(), 0u);
}

TEST_F(RawpipeBinary, PacketLimitGivesExactCountsInTheJson) {
  const fs::path cfg = tmp_ / "exact.toml";
  std::ofstream(cfg) << R"([run]
default_action = "endpoint"
default_endpoint = "rest"
[[pools]]
name = "rx"
count = 8192
[[ports]]
name = "s"
pmd = "synth"
packets = 20000
dst_ports = 5
seed = 0
malformed_fraction = 0.1
malformed_kinds = ["bad_ihl"]
[[endpoints]]
name = "five"
action = "ring"
match = ["udp dst *:5000"]
ring_size = 8192
[[endpoints]]
name = "rest"
action = "sink"
[[lcores]]
rx = ["s:0"]
)";
  const fs::path json = tmp_ / "exact.json";
  ProcessOutput o = run({"run", cfg.string(), "--duration", "1", "--json", json.string()});
  ASSERT_EQ(o.status, 0) << o.out << o.err;
  auto j = read_json(json);
  expect_balanced(j);
  EXPECT_EQ(j["rx_packets"].get<std::uint64_t>(), 20000u);
  EXPECT_EQ(j["rx_bytes"].get<std::uint64_t>(), 20000u * 64);
  EXPECT_EQ(j["drops"]["bad_ipv4_ihl"].get<std::uint64_t>(), 2000u);
  // Seed 0 cycles the 5 flows (ports 5000..5004) in order, 4000 packets each; every 10th packet is
  // malformed, which is always the fifth flow's turn. So port 5000 ("five") keeps all 4000 and the
  // default endpoint gets 3 x 4000 + 2000.
  EXPECT_EQ(j["delivered_per_endpoint"]["five"].get<std::uint64_t>(), 4000u);
  EXPECT_EQ(j["delivered_per_endpoint"]["rest"].get<std::uint64_t>(), 14000u);
  // The consumer thread received what it could before the stop; the rest was drained at stop.
  const std::uint64_t consumed = j["consumed_per_endpoint"].value("five", std::uint64_t{0});
  EXPECT_EQ(consumed + j["drained_at_stop"].get<std::uint64_t>(), 4000u);
}

// CPU time (clock ticks) of the thread of pid named `name`, or -1.
long thread_ticks(pid_t pid, const std::string& name) {
  const fs::path tasks = fs::path("/proc") / std::to_string(pid) / "task";
  std::error_code ec;
  for (const auto& t : fs::directory_iterator(tasks, ec)) {
    std::string comm = slurp(t.path() / "comm");
    if (comm.substr(0, comm.find('\n')) != name) continue;
    const std::string stat = slurp(t.path() / "stat");
    std::istringstream rest(stat.substr(stat.rfind(')') + 2));
    std::string field;
    long utime = 0, stime = 0;
    for (int i = 3; i <= 15 && rest >> field; ++i) {
      if (i == 14) utime = std::stol(field);
      if (i == 15) stime = std::stol(field);
    }
    return utime + stime;
  }
  return -1;
}

// Waits up to 3 s for the thread of pid named `name` to exist; its CPU time then, or -1.
long wait_for_thread(pid_t pid, const std::string& name) {
  long ticks = -1;
  for (int i = 0; i < 300 && ticks < 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    ticks = thread_ticks(pid, name);
  }
  return ticks;
}

// 20 packets a second from synth to a ring endpoint, on an lcore that naps when idle: a run whose
// threads should all be asleep nearly all the time.
constexpr const char* kQuietRingConfig = R"([[pools]]
name = "rx"
count = 1024
[[ports]]
name = "s"
pmd = "synth"
rate_pps = 20
[[endpoints]]
name = "app"
action = "ring"
match = ["udp dst *:5000"]
[[lcores]]
rx = ["s:0"]
idle_sleep_us = 200
)";

// The ring consumer spins only while packets come (docs/consumer-wait.md): at 20 packets per
// second it sleeps on the endpoint's descriptor between them, and still receives every one. (The
// rate is low so that the spin after each packet stays far below the limit even in a sanitizer
// build, where each pass costs several times more.)
TEST_F(RawpipeBinary, IdleRingConsumerSleepsAndStillReceives) {
  const fs::path cfg = tmp_ / "idle.toml";
  std::ofstream(cfg) << kQuietRingConfig;
  const fs::path json = tmp_ / "idle.json";
  const pid_t pid = start_process({bin_.string(), "run", cfg.string(), "--duration", "3", "--json", json.string()},
                                  tmp_ / "stdout", tmp_ / "stderr");
  ASSERT_GT(pid, 0);
  long before = wait_for_thread(pid, "rawpipe-consume");
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // past start-up
  before = thread_ticks(pid, "rawpipe-consume");
  const auto t0 = std::chrono::steady_clock::now();
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  const long after = thread_ticks(pid, "rawpipe-consume");
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_EQ(wait_process(pid), 0) << slurp(tmp_ / "stdout") << slurp(tmp_ / "stderr");
  ASSERT_GE(before, 0) << "no rawpipe-consume thread";
  ASSERT_GE(after, before);
  const double share = double(after - before) / double(sysconf(_SC_CLK_TCK)) / seconds;
  EXPECT_LT(share, 0.05) << "the consumer thread used " << share << " of a CPU at 20 packets/s";
  auto j = read_json(json);
  expect_balanced(j);
  const std::uint64_t delivered = j["delivered_per_endpoint"]["app"].get<std::uint64_t>();
  const std::uint64_t consumed = j["consumed_per_endpoint"].value("app", std::uint64_t{0});
  EXPECT_GE(delivered, 30u);
  // Woken for each packet: at most the last one or two were still queued at the stop.
  EXPECT_EQ(consumed + j["drained_at_stop"].get<std::uint64_t>(), delivered);
  EXPECT_LE(j["drained_at_stop"].get<std::uint64_t>(), 2u);
}

// Voluntary context switches of the process's main thread (rawpipe run's control loop).
long main_thread_sleeps(pid_t pid) {
  const std::string status =
      slurp(fs::path("/proc") / std::to_string(pid) / "task" / std::to_string(pid) / "status");
  const auto at = status.find("voluntary_ctxt_switches:");
  return at == std::string::npos || (at > 0 && status[at - 1] != '\n') ? -1 : std::stol(status.substr(at + 24));
}

// The control loop shares a CPU with the ring consumer: it wakes for its once-a-second line and
// for a stop signal, not on a timer of its own (each wake-up takes that CPU from the consumer).
TEST_F(RawpipeBinary, ControlLoopWakesOnlyForItsLines) {
  const fs::path cfg = tmp_ / "quiet.toml";
  std::ofstream(cfg) << kQuietRingConfig;
  const pid_t pid = start_process({bin_.string(), "run", cfg.string()}, tmp_ / "stdout", tmp_ / "stderr");
  ASSERT_GT(pid, 0);
  ASSERT_GE(wait_for_thread(pid, "rawpipe-consume"), 0) << "no rawpipe-consume thread";
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // past start-up
  const long before = main_thread_sleeps(pid);
  std::this_thread::sleep_for(std::chrono::milliseconds(3000));
  const long after = main_thread_sleeps(pid);
  kill(pid, SIGINT);
  ASSERT_EQ(wait_process(pid), 0) << slurp(tmp_ / "stdout") << slurp(tmp_ / "stderr");
  ASSERT_GE(before, 0);
  // Three lines are due in the window; a 20 ms tick would have woken it about 150 times.
  EXPECT_LE(after - before, 12) << "the control loop went to sleep " << after - before << " times in 3 s";
  EXPECT_NE(slurp(tmp_ / "stdout").find("OK: every packet accounted for"), std::string::npos)
      << slurp(tmp_ / "stdout");
}

// An lcore with thread = false gets no lcore thread; rawpipe run, which has no application thread
// to drive it, gives it one driver thread that sleeps when the port is idle (synth has no queue
// descriptor: it naps a millisecond at a time). Every packet is still accounted for.
TEST_F(RawpipeBinary, ThreadlessLcoreIsDrivenByOneThread) {
  const fs::path cfg = tmp_ / "threadless.toml";
  std::ofstream(cfg) << R"([[pools]]
name = "rx"
count = 1024
[[ports]]
name = "s"
pmd = "synth"
rate_pps = 2000
[[endpoints]]
name = "app"
action = "ring"
match = ["udp dst *:5000"]
[[lcores]]
rx = ["s:0"]
thread = false
)";
  const fs::path json = tmp_ / "threadless.json";
  const pid_t pid = start_process({bin_.string(), "run", cfg.string(), "--duration", "3", "--json", json.string()},
                                  tmp_ / "stdout", tmp_ / "stderr");
  ASSERT_GT(pid, 0);
  const long driver = wait_for_thread(pid, "rawpipe-drive");
  const long lcore = thread_ticks(pid, "rawpipe-lc0");
  ASSERT_EQ(wait_process(pid), 0) << slurp(tmp_ / "stdout") << slurp(tmp_ / "stderr");
  EXPECT_GE(driver, 0) << "no rawpipe-drive thread";
  EXPECT_LT(lcore, 0) << "an lcore thread runs for a thread = false lcore";
  EXPECT_NE(slurp(tmp_ / "stdout").find("one thread drives them"), std::string::npos) << slurp(tmp_ / "stdout");
  auto j = read_json(json);
  expect_balanced(j);
  EXPECT_GT(j["delivered_per_endpoint"]["app"].get<std::uint64_t>(), 1000u);
}

TEST_F(RawpipeBinary, SigintStopsCleanly) {
  const fs::path json = tmp_ / "sigint.json";
  // SIGINT after 3 s: setup takes most of a second under the sanitizers, and the first live line
  // comes a second after it.
  ProcessOutput o = run({"run", (d_.source / "configs" / "imix-malformed.toml").string(), "--json", json.string()}, 3000);
  ASSERT_EQ(o.status, 0) << o.out << o.err;
  EXPECT_NE(o.out.find("[    1.0s] pps rx "), std::string::npos) << o.out;  // one live line
  auto j = read_json(json);
  expect_balanced(j);
  EXPECT_GT(j["rx_packets"].get<std::uint64_t>(), 0u);
  EXPECT_GT(j["drops"]["bad_ipv6_payload_length"].get<std::uint64_t>(), 0u);
}

TEST_F(RawpipeBinary, CheckAcceptsEverySampleAndRejectsABadConfig) {
  for (const char* name : {"default.toml", "bench-synth.toml", "imix-malformed.toml", "multi-lcore.toml"}) {
    // The samples other than default.toml pin threads to CPUs 0 and 1.
    if (std::thread::hardware_concurrency() < 2 && std::string(name) != "default.toml") continue;
    ProcessOutput o = run({"check", (d_.source / "configs" / name).string()});
    EXPECT_EQ(o.status, 0) << name << "\n" << o.out << o.err;
    EXPECT_NE(o.out.find(": valid"), std::string::npos) << o.out;
  }
  const fs::path bad = tmp_ / "bad.toml";
  std::ofstream(bad) << "[[pools]]\nname = \"rx\"\n[[ports]]\nname = \"p\"\npmd = \"synth\"\nrx_ring_size = 1000\n"
                        "[[lcores]]\nrx = [\"p:0\"]\n";
  ProcessOutput o = run({"check", bad.string()});
  EXPECT_EQ(o.status, 1);
  EXPECT_EQ(o.err, "rawpipe: " + bad.string() +
                       ":6: ports[0] 'p': key 'rx_ring_size': expected a power of two from 1 to 1048576, got 1000 "
                       "(try 1024)\n");
}

TEST_F(RawpipeBinary, VersionHelpAndDrivers) {
  ProcessOutput v = run({"--version"});
  EXPECT_EQ(v.status, 0);
  EXPECT_EQ(v.out.rfind("rawpipe 0.1.0 (commit ", 0), 0u) << v.out;  // rawpipe_cli_test has the rest
  ProcessOutput h = run({"--help"});
  EXPECT_EQ(h.status, 0);
  EXPECT_NE(h.out.find("run"), std::string::npos);
  EXPECT_NE(h.out.find("check"), std::string::npos);
  ProcessOutput l = run({"list-pmds"});
  EXPECT_EQ(l.status, 0);
  EXPECT_EQ(l.out.rfind("synth ", 0), 0u) << l.out;
  ProcessOutput none = run({});
  EXPECT_NE(none.status, 0);  // a subcommand is required
}

}  // namespace
