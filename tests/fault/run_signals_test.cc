// Fault: every way a run ends. An af_xdp run in a namespace (its XDP program attached through a
// bpf_link) is stopped by SIGINT, SIGTERM, SIGHUP and SIGQUIT, each repeated until the process is
// gone, and by SIGPIPE when its output goes to `head -3`; each time the same orderly stop: exit 0,
// the summary, the JSON file, the stats segment removed and no XDP program left. Killed with SIGKILL, it leaves the program
// nowhere (the link closes with the process) and only a stale segment, which the next run removes
// with a message before it runs cleanly. A leftover rawpipe program that no process holds (as a
// netlink attach by an older rawpipe leaves it) is removed with a message. Root only.
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/if_link.h>
#include <net/if.h>

#include <cstring>

#include "tests/fault/netns_run.hh"

namespace rawpipe::fault {
namespace {

class RunSignals : public NetnsRun {
 protected:
  fs::path xdp_config(const std::string& name, double duration) {
    return config(name, fmt::format("[run]\nduration = {}\nstats_interval = 0.1\n"
                                    "[[pools]]\nname = \"rx\"\ncount = 4096\n"
                                    "[[ports]]\nname = \"p\"\npmd = \"af_xdp\"\ninterface = \"{}\"\nmode = \"all\"\n"
                                    "[[endpoints]]\nname = \"udp\"\naction = \"sink\"\nmatch = [\"udp\"]\n"
                                    "[[lcores]]\nrx = [\"p:0\"]\n",
                                    duration, ifname_));
  }
  bool segment_exists(pid_t pid) { return fs::exists(fmt::format("/dev/shm/rawpipe.{}", pid)); }
  // The kernel detaches a link's program when the last fd closes; allow it a moment.
  bool xdp_gone(std::chrono::milliseconds limit = 3s) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (link_show().find(" xdp") != std::string::npos) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      std::this_thread::sleep_for(20ms);
    }
    return true;
  }
  // Starts a run, waits for the path report, checks the program and the segment are there.
  pid_t start_running(const std::string& tag, const fs::path& cfg, const fs::path& json) {
    pid_t pid = start(tag, cfg, {"--json", json.string()});
    EXPECT_GT(pid, 0);
    EXPECT_TRUE(wait_for(tag, "bpf_link")) << out(tag) << err(tag);
    EXPECT_NE(link_show().find(" xdp"), std::string::npos) << link_show();
    EXPECT_TRUE(segment_exists(pid));
    return pid;
  }
  void expect_orderly(const std::string& tag, pid_t pid, int status, const fs::path& json) {
    EXPECT_EQ(status, 0) << out(tag) << err(tag);
    EXPECT_NE(out(tag).find("accounting: rx"), std::string::npos) << "no summary:\n" << out(tag);
    auto j = read_json(json);
    ASSERT_FALSE(j.is_discarded()) << "no JSON file\n" << out(tag) << err(tag);
    EXPECT_TRUE(j["ok"].get<bool>());
    EXPECT_FALSE(segment_exists(pid)) << "the stats segment outlived the run";
    EXPECT_TRUE(xdp_gone()) << "the XDP program outlived the run: " << link_show();
  }
};

class RunSignalsEach : public RunSignals, public ::testing::WithParamInterface<int> {};

TEST_P(RunSignalsEach, StopIsOrderly) {
  const int sig = GetParam();
  const fs::path cfg = xdp_config("sig", 60), json = tmp_ / "sig.json";
  const pid_t pid = start_running("run", cfg, json);
  kill(pid, sig);
  // A service manager may repeat itself, and a person presses Ctrl-C again: no repeat may cut the
  // orderly stop short, whichever stage of the stop and exit it lands in.
  const int status = test::wait_process(pid, {.timeout = 20s, .repeat_signal = sig});
  expect_orderly("run", pid, status, json);
}

INSTANTIATE_TEST_SUITE_P(Signals, RunSignalsEach, ::testing::Values(SIGINT, SIGTERM, SIGHUP, SIGQUIT),
                         [](const auto& info) { return std::string(sigabbrev_np(info.param)); });

TEST_F(RunSignals, SigpipeOnStdoutStopsInOrder) {
  const fs::path cfg = xdp_config("pipe", 60), json = tmp_ / "pipe.json";
  // `head -3` exits after three lines; the next live stats line meets a pipe with no reader.
  const std::string cmd = fmt::format("ip netns exec {} {} run {} --json {} | head -3", rx_ns_->name(), bin_.string(),
                                      cfg.string(), json.string());
  const pid_t sh = test::start_process({"sh", "-c", cmd}, tmp_ / "pipe.out", tmp_ / "pipe.err");
  children_.push_back(sh);
  const int status = test::wait_process(sh, {.timeout = 20s});
  EXPECT_EQ(status, 0) << test::slurp(tmp_ / "pipe.err");
  auto j = read_json(json);
  ASSERT_FALSE(j.is_discarded()) << "no JSON: rawpipe died of SIGPIPE\n" << test::slurp(tmp_ / "pipe.err");
  EXPECT_TRUE(j["ok"].get<bool>());
  EXPECT_LT(j["seconds"].get<double>(), 30.0) << "it ran on instead of stopping";
  EXPECT_FALSE(fs::exists("/dev/shm/rawpipe-name.pipe")) << "the stats name link outlived the run";
  EXPECT_TRUE(xdp_gone()) << link_show();
}

TEST_F(RunSignals, SigkillLeavesNoProgramAndTheNextRunCleansItsSegment) {
  const fs::path cfg = xdp_config("kill", 60), json = tmp_ / "kill.json";
  const pid_t pid = start_running("killed", cfg, json);
  kill(pid, SIGKILL);
  EXPECT_EQ(test::wait_process(pid, {.timeout = 10s}), 128 + SIGKILL);
  EXPECT_TRUE(xdp_gone()) << "a SIGKILLed run left its XDP program: " << link_show();
  EXPECT_TRUE(segment_exists(pid)) << "nothing stale to clean: the test proves nothing";

  const fs::path cfg2 = xdp_config("again", 0.5), json2 = tmp_ / "again.json";
  const pid_t again = start("again", cfg2, {"--json", json2.string()});
  ASSERT_GT(again, 0);
  const int status = test::wait_process(again, {.timeout = 20s});
  EXPECT_EQ(status, 0) << out("again") << err("again");
  EXPECT_NE(err("again").find(fmt::format("removed the stats segment /dev/shm/rawpipe.{} of process {}", pid, pid)),
            std::string::npos)
      << err("again");
  EXPECT_FALSE(segment_exists(pid));
  auto j = read_json(json2);
  ASSERT_FALSE(j.is_discarded()) << out("again") << err("again");
  EXPECT_TRUE(j["ok"].get<bool>());
  EXPECT_TRUE(xdp_gone()) << link_show();
}

// rawpipe's program attached through netlink with no process holding it: what a run of an older
// rawpipe, killed, left behind. The next run removes it, says so, and runs.
TEST_F(RunSignals, LeftoverProgramNoProcessHoldsIsRemovedWithAMessage) {
  const fs::path obj = test::build_dir() / "pmd" / "af_xdp" / "xdp_steer.bpf.o";
  ASSERT_TRUE(fs::exists(obj)) << obj;
  std::string failure;
  ASSERT_TRUE(rx_ns_->run([&] {
    bpf_object* o = bpf_object__open_file(obj.c_str(), nullptr);
    if (libbpf_get_error(o) || bpf_object__load(o) != 0) {
      failure = "cannot load " + obj.string();
      return;
    }
    bpf_program* prog = bpf_object__find_program_by_name(o, "rawpipe_steer");
    const int ifindex = static_cast<int>(if_nametoindex(ifname_.c_str()));
    if (!prog || bpf_xdp_attach(ifindex, bpf_program__fd(prog), XDP_FLAGS_SKB_MODE, nullptr) != 0)
      failure = "cannot attach through netlink";
    bpf_object__close(o);  // the attachment stays: netlink holds the program, no process does
  }));
  ASSERT_TRUE(failure.empty()) << failure;
  ASSERT_NE(link_show().find(" xdp"), std::string::npos) << link_show();

  const fs::path cfg = xdp_config("leftover", 0.5), json = tmp_ / "leftover.json";
  const pid_t pid = start("run", cfg, {"--json", json.string()});
  const int status = test::wait_process(pid, {.timeout = 20s});
  EXPECT_EQ(status, 0) << out("run") << err("run");
  EXPECT_NE(err("run").find("removed a leftover rawpipe XDP program"), std::string::npos) << err("run");
  EXPECT_TRUE(xdp_gone()) << link_show();
}

}  // namespace
}  // namespace rawpipe::fault
