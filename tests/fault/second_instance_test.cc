// Fault: a second pipeline on a queue or CPU the first one uses. The second run is refused before
// it touches anything, with a message naming the first one's pid and config; the first keeps
// running, keeps its XDP program and its `rawpipe stat` name, and `rawpipe stat --list` shows
// the live one only. Root only.
#include "tests/fault/netns_run.hh"

namespace rawpipe::fault {
namespace {

using SecondInstance = NetnsRun;

TEST_F(SecondInstance, SameQueueOrCpuIsRefusedNamingTheFirst) {
  const std::string text = fmt::format("[run]\nduration = 60\n"
                                       "[[pools]]\nname = \"rx\"\ncount = 4096\n"
                                       "[[ports]]\nname = \"p\"\npmd = \"af_xdp\"\ninterface = \"{}\"\nmode = \"all\"\n"
                                       "[[endpoints]]\nname = \"udp\"\naction = \"sink\"\nmatch = [\"udp\"]\n"
                                       "[[lcores]]\nrx = [\"p:0\"]\ncpu = 0\n",
                                       ifname_);
  const fs::path cfg = config("twice", text);
  const pid_t first = start("first", cfg);
  ASSERT_GT(first, 0);
  ASSERT_TRUE(wait_for("first", "bpf_link")) << out("first") << err("first");

  // The same config again: the interface queue is taken.
  const pid_t second = start("second", cfg);
  EXPECT_EQ(test::wait_process(second, {.timeout = 10s}), 1) << out("second") << err("second");
  EXPECT_NE(err("second").find(fmt::format("queue 0 of interface {} (port 'p') is already used by another pipeline: "
                                           "pid {} running {}",
                                           ifname_, first, cfg.string())),
            std::string::npos)
      << err("second");

  // doctor agrees with the refused run: the interface's program belongs to a live pipeline.
  fs::create_directories(tmp_ / "doctor");
  fs::create_directories(tmp_ / "list");
  auto doctor = test::run_process({"ip", "netns", "exec", rx_ns_->name(), bin_.string(), "doctor", cfg.string()},
                                  tmp_ / "doctor");
  EXPECT_NE(doctor.status, 0) << doctor.out << doctor.err;
  const std::string said = doctor.out + doctor.err;
  EXPECT_NE(said.find("a running pipeline owns rawpipe's XDP program here"), std::string::npos) << said;
  EXPECT_NE(said.find(fmt::format("pid {}", first)), std::string::npos) << said;

  // Another interface would do, but the lcore's CPU is taken.
  std::string other = text;
  other.replace(other.find("pmd = \"af_xdp\""), std::string("pmd = \"af_xdp\"").size(), "pmd = \"synth\"\npackets = 10");
  other.replace(other.find(fmt::format("interface = \"{}\"\nmode = \"all\"\n", ifname_)),
                fmt::format("interface = \"{}\"\nmode = \"all\"\n", ifname_).size(), "");
  const fs::path cfg2 = config("cpu", other);
  const pid_t third = start("third", cfg2);
  EXPECT_EQ(test::wait_process(third, {.timeout = 10s}), 1) << out("third") << err("third");
  EXPECT_NE(err("third").find(fmt::format("CPU 0 (lcore 0) is already used by another pipeline: pid {} running {}",
                                          first, cfg.string())),
            std::string::npos)
      << err("third");

  // The first is untouched: still running, its program attached, its name link its own.
  EXPECT_EQ(kill(first, 0), 0) << "the first run died";
  EXPECT_NE(link_show().find(" xdp"), std::string::npos) << link_show();
  char target[64] = {};
  ASSERT_GT(readlink("/dev/shm/rawpipe-name.twice", target, sizeof target - 1), 0) << "the name link is gone";
  EXPECT_EQ(std::string(target), fmt::format("rawpipe.{}", first));
  auto list = test::run_process({bin_.string(), "stat", "--list"}, tmp_ / "list");
  EXPECT_EQ(list.status, 0) << list.err;
  EXPECT_NE(list.out.find(fmt::format("{}  twice", first)), std::string::npos) << list.out;
  EXPECT_NE(list.out.find(cfg.string()), std::string::npos) << list.out;

  kill(first, SIGTERM);
  EXPECT_EQ(test::wait_process(first, {.timeout = 20s}), 0) << out("first") << err("first");
}

}  // namespace
}  // namespace rawpipe::fault
