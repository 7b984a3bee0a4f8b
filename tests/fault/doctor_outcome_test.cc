// `rawpipe doctor` against the run it predicts: each test makes one condition on this machine,
// asks doctor, then runs the same config, and asserts that doctor's FAIL is the run's failure (for
// the reason doctor named) and that its ok or warn is a run that succeeds with the warned effect.
//   - the [metrics] port held by a listening socket of this test;
//   - a tap directory that is missing, one this user cannot write, one on a full filesystem;
//   - a pool larger than RAM and swap;
//   - an AF_XDP UMEM above RLIMIT_MEMLOCK without CAP_IPC_LOCK;
//   - a pool that requires more 2 MiB hugepages than are free;
//   - a veth whose peer leaves UDP checksums to offload, with af_xdp's rx_checksum off and on.
// Root only (network namespaces); skips with the reason otherwise.
#include <sys/stat.h>

#include <fmt/format.h>

#include "tests/fault/netns_run.hh"

namespace rawpipe::fault {
namespace {

class DoctorOutcome : public NetnsRun {
 protected:
  // doctor --json in the receiving namespace, behind `wrap` (prlimit, setpriv, ...).
  nlohmann::json doctor(const fs::path& cfg, int expect_status, std::vector<std::string> wrap = {}) {
    std::vector<std::string> argv = {"ip", "netns", "exec", rx_ns_->name()};
    argv.insert(argv.end(), wrap.begin(), wrap.end());
    argv.insert(argv.end(), {bin_.string(), "doctor", cfg.string(), "--json"});
    fs::create_directories(tmp_ / "doctor");
    test::ProcessOutput o = test::run_process(argv, tmp_ / "doctor");
    EXPECT_EQ(o.status, expect_status) << o.out << o.err;
    auto j = nlohmann::json::parse(o.out, nullptr, false);
    EXPECT_FALSE(j.is_discarded()) << "not JSON:\n" << o.out << o.err;
    return j;
  }

  // The one finding named `check` (nullptr, with a test failure, when there is not exactly one).
  static nlohmann::json finding(const nlohmann::json& j, const std::string& check) {
    nlohmann::json found;
    int n = 0;
    if (j.contains("checks"))
      for (const auto& c : j["checks"])
        if (c["check"] == check) {
          found = c;
          ++n;
        }
    EXPECT_EQ(n, 1) << "findings named " << check << " in\n" << j.dump(2);
    return found;
  }

  // rawpipe run in the receiving namespace, to its end.
  test::ProcessOutput run(const fs::path& cfg, std::vector<std::string> args = {}, std::vector<std::string> wrap = {}) {
    std::vector<std::string> argv = {"ip", "netns", "exec", rx_ns_->name()};
    argv.insert(argv.end(), wrap.begin(), wrap.end());
    argv.insert(argv.end(), {bin_.string(), "run", cfg.string()});
    argv.insert(argv.end(), args.begin(), args.end());
    fs::create_directories(tmp_ / "run");
    return test::run_process(argv, tmp_ / "run");
  }

  // A synth port that sends `packets` frames to an endpoint, plus `extra` tables.
  std::string synth(const std::string& extra, const std::string& pool_keys = "", std::uint64_t count = 4096,
                    unsigned packets = 100) {
    return fmt::format("[[pools]]\nname = \"rx\"\ncount = {}\n{}\n"
                       "[[ports]]\nname = \"p\"\npmd = \"synth\"\npackets = {}\n"
                       "[[endpoints]]\nname = \"udp\"\naction = \"sink\"\nmatch = [\"udp\"]\n"
                       "[[lcores]]\nrx = [\"p:0\"]\n{}",
                       count, pool_keys, packets, extra);
  }

  static std::uint64_t meminfo_kib(const std::string& key) {
    std::ifstream in("/proc/meminfo");
    std::string k;
    std::uint64_t v = 0;
    std::string unit;
    while (in >> k >> v) {
      if (k == key + ":") return v;
      std::getline(in, unit);
    }
    return 0;
  }
};

TEST_F(DoctorOutcome, MetricsPortHeldByAListenerFailsBothAndNamesIt) {
  // A listener of this process in the receiving namespace, on a port the kernel picks.
  int holder = -1;
  std::uint16_t port = 0;
  ASSERT_TRUE(rx_ns_->run([&] {
    holder = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (bind(holder, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 && listen(holder, 4) == 0 &&
        getsockname(holder, reinterpret_cast<sockaddr*>(&a), &len) == 0)
      port = ntohs(a.sin_port);
  }));
  ASSERT_NE(port, 0);
  const fs::path cfg = config("metrics", synth(fmt::format("[metrics]\nlisten = \"127.0.0.1:{}\"\n", port)));

  auto j = doctor(cfg, 1);
  auto f = finding(j, "metrics");
  EXPECT_EQ(f["level"], "FAIL");
  EXPECT_NE(f["detail"].get<std::string>().find(fmt::format("listening: pid {} (", getpid())), std::string::npos)
      << f.dump();
  test::ProcessOutput refused = run(cfg, {"--duration", "0.5"});
  EXPECT_NE(refused.status, 0) << refused.out;
  EXPECT_NE(refused.err.find(fmt::format("cannot listen on 127.0.0.1:{}: Address already in use", port)),
            std::string::npos)
      << refused.err;

  close(holder);
  j = doctor(cfg, 0);
  EXPECT_EQ(finding(j, "metrics")["level"], "ok") << j.dump(2);
  test::ProcessOutput ran = run(cfg, {"--duration", "0.5"});
  EXPECT_EQ(ran.status, 0) << ran.out << ran.err;
}

TEST_F(DoctorOutcome, TapInAMissingDirectoryFailsBoth) {
  const fs::path cfg = config("tap", synth(fmt::format("[[taps]]\nname = \"all\"\npath = \"{}\"\n",
                                                       (tmp_ / "nosuch" / "rx.pcap").string())));
  auto j = doctor(cfg, 1);
  auto f = finding(j, "tap all");
  EXPECT_EQ(f["level"], "FAIL");
  EXPECT_EQ(f["fix"], fmt::format("mkdir -p {}, or change the tap's path", (tmp_ / "nosuch").string()));
  test::ProcessOutput refused = run(cfg, {"--duration", "0.5"});
  EXPECT_NE(refused.status, 0) << refused.out;
  EXPECT_NE(refused.err.find("No such file or directory"), std::string::npos) << refused.err;

  fs::create_directories(tmp_ / "nosuch");
  j = doctor(cfg, 0);
  EXPECT_EQ(finding(j, "tap all")["level"], "ok") << j.dump(2);
  test::ProcessOutput ran = run(cfg, {"--duration", "0.5"});
  EXPECT_EQ(ran.status, 0) << ran.out << ran.err;
  EXPECT_GT(fs::file_size(tmp_ / "nosuch" / "rx.pcap"), 24u);
}

// As uid nobody, a directory owned by root with mode 0755.
TEST_F(DoctorOutcome, TapInADirectoryThisUserCannotWriteFailsBoth) {
  const fs::path dir = tmp_ / "rootonly";
  fs::create_directories(dir);
  chmod(tmp_.c_str(), 0755);
  chmod(dir.c_str(), 0755);
  fs::create_directories(tmp_ / "locks");
  chmod((tmp_ / "locks").c_str(), 01777);
  const fs::path cfg = config("tap", synth(fmt::format("[[taps]]\nname = \"all\"\npath = \"{}\"\n",
                                                       (dir / "rx.pcap").string())));
  chmod(cfg.c_str(), 0644);
  const std::vector<std::string> nobody = {"setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"};
  auto j = doctor(cfg, 1, nobody);
  auto f = finding(j, "tap all");
  EXPECT_EQ(f["level"], "FAIL");
  EXPECT_EQ(f["detail"], fmt::format("tap 'all' cannot create {}: directory {} is not writable for uid 65534 "
                                     "(Permission denied)",
                                     (dir / "rx.pcap").string(), dir.string()));
  test::ProcessOutput refused = run(cfg, {"--duration", "0.5"}, nobody);
  EXPECT_NE(refused.status, 0) << refused.out;
  EXPECT_NE(refused.err.find("Permission denied"), std::string::npos) << refused.err;

  chmod(dir.c_str(), 0777);
  j = doctor(cfg, 0, nobody);
  EXPECT_EQ(finding(j, "tap all")["level"], "ok") << j.dump(2);
  test::ProcessOutput ran = run(cfg, {"--duration", "0.5"}, nobody);
  EXPECT_EQ(ran.status, 0) << ran.out << ran.err;
}

// A 64 KiB tmpfs, filled, in a private mount namespace (gone with the commands).
TEST_F(DoctorOutcome, TapOnAFullFilesystemFailsBoth) {
  const fs::path dir = tmp_ / "full";
  fs::create_directories(dir);
  const fs::path cfg = config("tap", synth(fmt::format("[[taps]]\nname = \"all\"\npath = \"{}\"\n",
                                                       (dir / "rx.pcap").string())));
  const std::string script = fmt::format(
      "mount -t tmpfs -o size=64k rawpipe-test {0} && (dd if=/dev/zero of={0}/fill bs=4k 2>/dev/null; true) && "
      "ip netns exec {1} {2} doctor {3} --json > {4}/doctor.json; echo $? > {4}/doctor.status; "
      "ip netns exec {1} {2} run {3} --duration 0.5 > {4}/run.out 2> {4}/run.err; echo $? > {4}/run.status",
      dir.string(), rx_ns_->name(), bin_.string(), cfg.string(), tmp_.string());
  fs::create_directories(tmp_ / "sh");
  test::ProcessOutput sh = test::run_process({"unshare", "-m", "--propagation", "private", "sh", "-c", script}, tmp_ / "sh");
  ASSERT_EQ(sh.status, 0) << sh.out << sh.err;
  auto j = nlohmann::json::parse(test::slurp(tmp_ / "doctor.json"), nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << test::slurp(tmp_ / "doctor.json");
  EXPECT_EQ(test::slurp(tmp_ / "doctor.status"), "1\n");
  auto f = finding(j, "tap all");
  EXPECT_EQ(f["level"], "FAIL");
  EXPECT_NE(f["detail"].get<std::string>().find("fails on its first write"), std::string::npos) << f.dump();
  EXPECT_NE(test::slurp(tmp_ / "run.status"), "0\n") << test::slurp(tmp_ / "run.out");
  EXPECT_NE(test::slurp(tmp_ / "run.err").find("No space left on device"), std::string::npos)
      << test::slurp(tmp_ / "run.err");
}

TEST_F(DoctorOutcome, PoolLargerThanRamAndSwapFailsBoth) {
  const std::uint64_t ram = (meminfo_kib("MemTotal") + meminfo_kib("SwapTotal")) * 1024;
  ASSERT_GT(ram, 0u);
  std::ifstream policy("/proc/sys/vm/overcommit_memory");
  int mode = -1;
  policy >> mode;
  if (mode == 1) GTEST_SKIP() << "vm.overcommit_memory = 1 maps any pool; the run would be OOM-killed instead";
  const std::uint64_t count = ram / (65536 + 64) + ram / (65536 + 64) / 4;
  ASSERT_LT(count, 1u << 30);
  const fs::path cfg =
      config("ram", synth("", "buf_size = 65536\nhuge_pages = \"never\"\n", count));
  auto j = doctor(cfg, 1);
  auto f = finding(j, "memory");
  EXPECT_EQ(f["level"], "FAIL") << f.dump();
  test::ProcessOutput refused = run(cfg, {"--duration", "0.5"});
  EXPECT_NE(refused.status, 0) << refused.out;
  EXPECT_NE(refused.err.find("cannot map"), std::string::npos) << refused.err;
}

TEST_F(DoctorOutcome, UmemAboveMemlockWithoutIpcLockFailsBoth) {
  const std::string text = fmt::format("[[pools]]\nname = \"rx\"\ncount = 2048\n"
                                       "[[ports]]\nname = \"p\"\npmd = \"af_xdp\"\ninterface = \"{}\"\n"
                                       // 1024 of the 2048 buffers in the fill ring, as the UMEM sizes below assume.
                                       "rx_ring_size = 1024\n"
                                       "[[endpoints]]\nname = \"udp\"\naction = \"sink\"\nmatch = [\"udp\"]\n"
                                       "[[lcores]]\nrx = [\"p:0\"]\n",
                                       ifname_);
  const fs::path cfg = config("memlock", text);
  // 1 MiB of locked memory and no CAP_IPC_LOCK: the 6 MiB UMEM does not fit; 8 MiB (the usual
  // default, and the most a process without CAP_SYS_RESOURCE may set) does.
  const std::vector<std::string> tight = {"prlimit", "--memlock=1048576:1048576", "setpriv", "--inh-caps=-ipc_lock",
                                          "--bounding-set=-ipc_lock"};
  auto j = doctor(cfg, 1, tight);
  auto f = finding(j, "memlock");
  EXPECT_EQ(f["level"], "FAIL") << f.dump();
  test::ProcessOutput refused = run(cfg, {"--duration", "0.5"}, tight);
  EXPECT_NE(refused.status, 0) << refused.out;
  EXPECT_NE(refused.err.find("as an AF_XDP UMEM: No buffer space available"), std::string::npos) << refused.err;
  EXPECT_EQ(link_show().find(" xdp"), std::string::npos) << "the failed run left its program: " << link_show();

  const std::vector<std::string> roomy = {"prlimit", "--memlock=8388608:8388608", "setpriv", "--inh-caps=-ipc_lock",
                                          "--bounding-set=-ipc_lock"};
  j = doctor(cfg, 0, roomy);
  EXPECT_EQ(finding(j, "memlock")["level"], "ok") << j.dump(2);
  test::ProcessOutput ran = run(cfg, {"--duration", "0.5"}, roomy);
  EXPECT_EQ(ran.status, 0) << ran.out << ran.err;
}

TEST_F(DoctorOutcome, PoolRequiringMoreHugepagesThanFreeFailsBoth) {
  const std::uint64_t free_pages = meminfo_kib("HugePages_Free");
  const std::uint64_t page = meminfo_kib("Hugepagesize") * 1024;
  if (page != 2u << 20) GTEST_SKIP() << "the default hugepage size is not 2 MiB";
  // One page more than is free.
  const std::uint64_t count = (free_pages + 1) * page / (2048 + 64) + 1;
  const fs::path cfg = config("huge", synth("", "huge_pages = \"require\"\n", count));
  auto j = doctor(cfg, 1);
  EXPECT_EQ(finding(j, "hugepages")["level"], "FAIL") << j.dump(2);
  test::ProcessOutput refused = run(cfg, {"--duration", "0.5"});
  EXPECT_NE(refused.status, 0) << refused.out;
  EXPECT_NE(refused.err.find("hugepages are not available"), std::string::npos) << refused.err;
}

// What tshark makes of each UDP checksum in a capture, per frame: "Bad", "Good" or "Unverified"
// (-T fields prints the status field's value: 0, 1, 2).
std::vector<std::string> checksum_verdicts(const fs::path& pcap, const fs::path& scratch) {
  test::ProcessOutput o = test::run_process({"tshark", "-r", pcap.string(), "-o", "udp.check_checksum:TRUE", "-Y",
                                             "udp", "-T", "fields", "-e", "udp.checksum.status"},
                                            scratch);
  std::vector<std::string> out;
  std::istringstream in(o.out);
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) out.push_back(line == "0" ? "Bad" : line == "1" ? "Good" : line == "2" ? "Unverified" : line);
  return out;
}

TEST_F(DoctorOutcome, PeerChecksumOffloadWarnsWhereAfXdpDeliversPartialChecksums) {
  if (!test::command_output({"tshark", "--version"})) GTEST_SKIP() << "tshark is not installed";
  fs::create_directories(tmp_ / "tshark");
  auto text = [&](const std::string& rx_checksum, const std::string& pcap) {
    return fmt::format("[run]\nduration = 30\n[[pools]]\nname = \"rx\"\ncount = 4096\n"
                       "[[ports]]\nname = \"p\"\npmd = \"af_xdp\"\ninterface = \"{}\"\nrx_checksum = \"{}\"\n"
                       "[[endpoints]]\nname = \"udp\"\naction = \"sink\"\nmatch = [\"udp dst *:5000\"]\n"
                       "[[lcores]]\nrx = [\"p:0\"]\n"
                       "[[taps]]\nname = \"rx\"\npath = \"{}\"\n",
                       ifname_, rx_checksum, (tmp_ / pcap).string());
  };
  // Runs a config until 20 datagrams from the peer's kernel socket went through; the tshark verdicts.
  auto run_and_tap = [&](const std::string& tag, const fs::path& cfg, const std::string& pcap) {
    const pid_t pid = start(tag, cfg);
    EXPECT_TRUE(wait_for(tag, "bpf_link")) << out(tag) << err(tag);
    send_udp(20, 5000);
    std::this_thread::sleep_for(300ms);
    kill(pid, SIGTERM);
    EXPECT_EQ(test::wait_process(pid, {.timeout = 20s}), 0) << out(tag) << err(tag);
    return checksum_verdicts(tmp_ / pcap, tmp_ / "tshark");
  };

  // veth's default: the peer's tx-checksumming is on.
  const fs::path off = config("off", text("off", "off.pcap"));
  auto j = doctor(off, 0);
  auto f = finding(j, "checksums " + ifname_);
  EXPECT_EQ(f["level"], "warn");
  EXPECT_NE(f["detail"].get<std::string>().find(fmt::format("its peer {} (namespace {}) has tx-checksumming on",
                                                            veth_->b().name, tx_ns_->name())),
            std::string::npos)
      << f.dump();
  EXPECT_EQ(f["fix"], fmt::format("set rx_checksum = \"verify\" in port 'p' ({}:6), or turn the offload off: ip netns "
                                  "exec {} ethtool -K {} tx off",
                                  off.string(), tx_ns_->name(), veth_->b().name));
  // The warned effect: the run succeeds and every frame it delivered carries a wrong checksum.
  auto verdicts = run_and_tap("off", off, "off.pcap");
  ASSERT_EQ(verdicts.size(), 20u);
  for (const std::string& v : verdicts) EXPECT_EQ(v, "Bad");

  // rx_checksum = "verify": doctor ok, the frames are completed.
  const fs::path verify = config("verify", text("verify", "verify.pcap"));
  j = doctor(verify, 0);
  EXPECT_EQ(finding(j, "checksums " + ifname_)["level"], "ok") << j.dump(2);
  verdicts = run_and_tap("verify", verify, "verify.pcap");
  ASSERT_EQ(verdicts.size(), 20u);
  for (const std::string& v : verdicts) EXPECT_EQ(v, "Good");

  // The fix doctor gave, applied: with the offload off, nothing to warn about, and good checksums.
  ASSERT_TRUE(veth_->exec_b({"ethtool", "-K", veth_->b().name, "tx", "off"}));
  j = doctor(off, 0);
  f = finding(j, "checksums " + ifname_);
  EXPECT_EQ(f["level"], "ok") << f.dump();
  verdicts = run_and_tap("fixed", off, "off.pcap");
  ASSERT_EQ(verdicts.size(), 20u);
  for (const std::string& v : verdicts) EXPECT_EQ(v, "Good");
}

}  // namespace
}  // namespace rawpipe::fault
