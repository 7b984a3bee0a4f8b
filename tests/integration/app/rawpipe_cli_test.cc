// The rawpipe command line as a user meets it: every exit status the README documents (one table,
// each row run against the built binary), help and version on every subcommand, `--json -`, output
// paths tried before a run starts, the live line's width, and no terminal control codes into a
// file or pipe. Needs no privileges.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "tests/support/process.hh"
#include "tests/support/scratch_dir.hh"

namespace {

namespace fs = std::filesystem;
using namespace rawpipe::test;

class RawpipeCli : public ::testing::Test {
 protected:
  void SetUp() override {
    d_ = build_dirs();
    ASSERT_FALSE(d_.build.empty()) << "cannot find meson-info above this test";
    bin_ = rawpipe_binary();
    ASSERT_TRUE(fs::exists(bin_)) << bin_ << " is not built";
    tmp_ = make_scratch_dir("rawpipe-cli-test");
    // Synth at full speed into a sink: quick, no privileges, every packet accounted for.
    write("ok.toml", "[run]\nstats_interval = 0.2\n[[pools]]\nname = \"rx\"\ncount = 1024\n[[ports]]\nname = \"s0\"\n"
                     "pmd = \"synth\"\nmalformed_fraction = 0.05\n[[endpoints]]\nname = \"all\"\naction = \"sink\"\n"
                     "match = [\"udp dst 239.1.1.1:5000\"]\n[[lcores]]\nrx = [\"s0:0\"]\n");
  }
  void TearDown() override { fs::remove_all(tmp_); }

  fs::path write(const std::string& name, const std::string& text) {
    std::ofstream(tmp_ / name) << text;
    return tmp_ / name;
  }

  ProcessOutput run(std::vector<std::string> args) {
    args.insert(args.begin(), bin_.string());
    return run_process(args, tmp_, {.timeout = std::chrono::seconds(30)});
  }

  BuildDirs d_;
  fs::path bin_, tmp_;
};

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

TEST_F(RawpipeCli, RunSaysWhatCheckWarnsAbout) {
  // The second endpoint's rule can never match: the first one's identical rule takes its packets.
  const std::string cfg = write("shadowed.toml", "[[pools]]\nname = \"rx\"\ncount = 1024\n[[ports]]\nname = \"s0\"\n"
                                                 "pmd = \"synth\"\n[[endpoints]]\nname = \"all\"\naction = \"sink\"\n"
                                                 "match = [\"udp dst 239.1.1.1:5000\"]\n[[endpoints]]\nname = \"late\"\naction = \"sink\"\n"
                                                 "match = [\"udp dst 239.1.1.1:5000\"]\n[[lcores]]\nrx = [\"s0:0\"]\n")
                              .string();
  const ProcessOutput check = run({"check", cfg});
  ASSERT_EQ(check.status, 0) << check.err;
  const std::string prefix = "rawpipe: warning: ";
  const auto at = check.err.find(prefix);
  ASSERT_NE(at, std::string::npos) << check.err;
  const std::string warning = check.err.substr(at + prefix.size(), check.err.find('\n', at) - at - prefix.size());
  EXPECT_NE(warning.find("shadowed.toml:"), std::string::npos) << warning;
  const ProcessOutput r = run({"run", cfg, "--duration", "0.2"});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find(warning), std::string::npos) << "check warned: " << warning << "\nrun said:\n" << r.err;
}

TEST_F(RawpipeCli, EveryExitStatusAsDocumented) {
  const std::string ok = (tmp_ / "ok.toml").string();
  const std::string bad = write("bad.toml", "[[pools]]\nname = \"rx\"\ncount = 3\n").string();
  // on_loss = "fail" with a pool too small for the generator: the port counts rx_nombuf, a loss
  // before the pipeline, while everything the pipeline received balances.
  const std::string lossy = write("lossy.toml", "[run]\non_loss = \"fail\"\n[[pools]]\nname = \"rx\"\ncount = 64\n"
                                                "cache_size = 0\n[[ports]]\nname = \"s0\"\npmd = \"synth\"\n"
                                                "[[endpoints]]\nname = \"all\"\naction = \"ring\"\nmatch = [\"udp\"]\n"
                                                "[[lcores]]\nrx = [\"s0:0\"]\n").string();
  // A plugin that HOLDs every packet and never frees it: buffers outstanding at the end.
  const std::string leaky =
      write("leaky.toml", "[[pools]]\nname = \"rx\"\ncount = 1024\n[[ports]]\nname = \"s0\"\npmd = \"synth\"\n"
                          "packets = 100\n[[endpoints]]\nname = \"all\"\naction = \"sink\"\nmatch = [\"udp\"]\n"
                          "[[lcores]]\nrx = [\"s0:0\"]\n[[filters]]\npath = \"" +
                              (d_.build / "plugins" / "rawpipe_test_hold_forever.so").string() + "\"\nendpoint = \"all\"\n")
          .string();
  struct Row {
    std::vector<std::string> args;
    int status;
    std::string err_has;  // in stderr, when not empty
  };
  const Row rows[] = {
      {{}, 1, "A subcommand is required"},
      {{"bogus"}, 1, ""},
      {{"--no-such-flag"}, 1, ""},
      {{"run"}, 1, "config is required"},
      {{"run", (tmp_ / "missing.toml").string()}, 1, "File does not exist"},
      {{"run", ok, "--no-such-flag"}, 1, ""},
      {{"run", ok, "--duration", "-1"}, 1, "expected 0 (run until Ctrl-C) or a number of seconds"},
      {{"run", ok, "--duration", "soon"}, 1, "expected a number of seconds, got 'soon'"},
      {{"run", ok, "--duration"}, 1, ""},
      {{"run", ok, "--log-level", "loud"}, 1, "loud"},
      {{"run", ok, "--json", (tmp_ / "no-dir" / "x.json").string()}, 1, "its directory does not exist"},
      {{"run", ok, "--json", tmp_.string()}, 1, "is a directory"},
      {{"run", bad}, 1, "bad.toml"},
      {{"check", bad}, 1, "bad.toml"},
      {{"check"}, 1, ""},
      {{"dissect", (tmp_ / "missing.pcap").string()}, 1, ""},
      {{"stat", "no-such-pipeline-name"}, 1, ""},
      {{"help", "nope"}, 1, "no subcommand 'nope'"},
      {{"run", ok, "-d", "0.3"}, 0, ""},
      {{"run", ok, "-d", "0.3", "--quiet"}, 0, ""},
      {{"run", leaky, "-d", "0.3", "--quiet"}, 2, ""},
      {{"run", lossy, "-d", "0.5", "--quiet"}, 3, ""},
      {{"check", ok}, 0, ""},
      {{"list-pmds"}, 0, ""},
      {{"help"}, 0, ""},
      {{"--help"}, 0, ""},
      {{"version"}, 0, ""},
  };
  for (const Row& r : rows) {
    std::string line = "rawpipe";
    for (const auto& a : r.args) line += " " + a;
    ProcessOutput o = run(r.args);
    EXPECT_EQ(o.status, r.status) << line << "\nstdout:\n" << o.out << "stderr:\n" << o.err;
    if (!r.err_has.empty()) {
      EXPECT_NE(o.err.find(r.err_has), std::string::npos) << line << "\n" << o.err;
    }
    // A plain message, not CLI11's spelled-out range of a double (0 to 1.79769e+308 in 300 digits).
    for (const std::string& l : lines(o.err)) EXPECT_LE(l.size(), 400u) << line << "\n" << l;
  }
}

TEST_F(RawpipeCli, HelpAndVersionOnEverySubcommand) {
  for (const char* sub : {"run", "check", "doctor", "list-pmds", "stat", "dissect"}) {
    // Required arguments missing: --version still answers.
    ProcessOutput v = run({sub, "--version"});
    EXPECT_EQ(v.status, 0) << sub << "\n" << v.out << v.err;
    EXPECT_EQ(v.out.rfind("rawpipe 0.1.0 (commit ", 0), 0u) << sub << "\n" << v.out;
    ProcessOutput h = run({"help", sub});
    EXPECT_EQ(h.status, 0) << sub << "\n" << h.err;
    EXPECT_NE(h.out.find(std::string("rawpipe ") + sub), std::string::npos) << h.out;
    EXPECT_NE(h.out.find("--version"), std::string::npos) << h.out;
    EXPECT_NE(h.out.find("Exit status:"), std::string::npos) << h.out;
  }
  ProcessOutput v = run({"version"});
  ASSERT_EQ(v.status, 0);
  EXPECT_EQ(v.out, run({"--version"}).out);
  // Commit, build type, the drivers list-pmds shows, and a line per library.
  EXPECT_NE(v.out.find(" build)"), std::string::npos) << v.out;
  EXPECT_EQ(v.out.find("commit unknown"), std::string::npos) << "a git checkout names its commit\n" << v.out;
  ProcessOutput l = run({"list-pmds"});
  for (const std::string& row : lines(l.out)) {
    const std::string name = row.substr(0, row.find(' '));
    EXPECT_NE(v.out.find(" " + name), std::string::npos) << name << " missing from\n" << v.out;
  }
  for (const char* lib : {"\nDPDK ", "\nlibxdp ", "\nrdma-core "}) EXPECT_NE(v.out.find(lib), std::string::npos) << v.out;
  ProcessOutput h = run({"help"});
  EXPECT_EQ(h.out, run({"--help"}).out);
  EXPECT_NE(h.out.find("3  run: [run] on_loss = \"fail\""), std::string::npos) << h.out;
}

TEST_F(RawpipeCli, JsonDashWritesOnlyJsonToStdout) {
  ProcessOutput o = run({"run", (tmp_ / "ok.toml").string(), "-d", "0.5", "--json", "-"});
  ASSERT_EQ(o.status, 0) << o.err;
  const auto j = nlohmann::json::parse(o.out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << "stdout is not one JSON document:\n" << o.out;
  EXPECT_TRUE(j["ok"].get<bool>());
  EXPECT_GT(j["rx_packets"].get<std::uint64_t>(), 0u);
  // The human output moved to stderr, not lost.
  EXPECT_NE(o.err.find("accounting: rx "), std::string::npos) << o.err;
  EXPECT_NE(o.err.find("[    0.2s] pps rx "), std::string::npos) << o.err;
  EXPECT_FALSE(fs::exists(tmp_ / "-"));
}

TEST_F(RawpipeCli, OutputPathIsTriedBeforeTheRunStarts) {
  const auto t0 = std::chrono::steady_clock::now();
  // A run of a minute that must not start at all.
  ProcessOutput o = run({"run", (tmp_ / "ok.toml").string(), "-d", "60", "--json", (tmp_ / "nope" / "s.json").string()});
  EXPECT_EQ(o.status, 1);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(10));
  EXPECT_NE(o.err.find((tmp_ / "nope" / "s.json").string()), std::string::npos) << o.err;
  EXPECT_EQ(o.out.find("running for"), std::string::npos) << o.out;
  // An existing file is not truncated by the check, and a writable new path leaves nothing behind.
  write("keep.json", "old");
  fs::permissions(tmp_ / "keep.json", fs::perms::owner_read);
  if (geteuid() != 0) {
    ProcessOutput ro = run({"run", (tmp_ / "ok.toml").string(), "-d", "60", "--json", (tmp_ / "keep.json").string()});
    EXPECT_EQ(ro.status, 1) << ro.err;
  }
  EXPECT_EQ(slurp(tmp_ / "keep.json"), "old");
}

TEST_F(RawpipeCli, LiveLineFitsEightyColumnsAndCarriesNoControlCodes) {
  ProcessOutput o = run({"run", (tmp_ / "ok.toml").string(), "-d", "1.1", "--reasons"});
  ASSERT_EQ(o.status, 0) << o.err;
  int live = 0, reasons = 0;
  for (const std::string& l : lines(o.out)) {
    if (l.starts_with("[")) {
      ++live;
      EXPECT_LE(l.size(), 80u) << l;
      for (const char* field : {"pps rx ", "delivered ", "drops ", "lost "}) EXPECT_NE(l.find(field), std::string::npos) << l;
    }
    if (l.starts_with("  drops so far:")) ++reasons;
    if (live && !l.starts_with("[") && !l.starts_with(" ")) break;  // the summary follows
    if (live) {
      EXPECT_LE(l.size(), 80u) << l;
    }
  }
  EXPECT_GE(live, 4) << o.out;
  EXPECT_EQ(reasons, live) << "--reasons: a reasons block after every live line\n" << o.out;
  EXPECT_NE(o.out.find(" no_match "), std::string::npos) << o.out;
  EXPECT_NE(o.out.find(" truncated_ipv4 "), std::string::npos) << o.out;
  EXPECT_EQ(o.out.find('\x1b'), std::string::npos) << o.out;
  EXPECT_EQ(o.err.find('\x1b'), std::string::npos) << o.err;
  // --quiet: nothing on stdout at all.
  ProcessOutput q = run({"run", (tmp_ / "ok.toml").string(), "-d", "0.5", "--quiet"});
  EXPECT_EQ(q.status, 0);
  EXPECT_EQ(q.out, "");
}

TEST_F(RawpipeCli, StatIntoAFileWritesNoClearScreen) {
  const fs::path cfg = write("statme.toml", slurp(tmp_ / "ok.toml"));
  const pid_t pid = start_process({bin_.string(), "run", cfg.string(), "-d", "2.5", "--quiet"}, tmp_ / "run.out", tmp_ / "run.err");
  ASSERT_GT(pid, 0);
  ProcessOutput s;
  for (int i = 0; i < 50; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    s = run({"stat", std::to_string(pid), "--drops"});
    if (s.status == 0) break;
  }
  EXPECT_EQ(wait_process(pid), 0) << slurp(tmp_ / "run.err");
  ASSERT_EQ(s.status, 0) << s.err;
  EXPECT_NE(s.out.find("inside the pipeline"), std::string::npos) << s.out;
  EXPECT_EQ(s.out.find('\x1b'), std::string::npos) << "terminal codes into a file:\n" << s.out;
}

TEST_F(RawpipeCli, EchoEndpointLinesCountWhatWasTransmitted) {
  // Synth's tx queue counts and frees, so an echo endpoint transmits everything it matches.
  const fs::path cfg =
      write("echo.toml", "[[pools]]\nname = \"rx\"\ncount = 1024\n[[ports]]\nname = \"s0\"\npmd = \"synth\"\n"
                         "packets = 5000\nmalformed_fraction = 0.0\n[[endpoints]]\nname = \"pong\"\naction = \"echo\"\nmatch = [\"udp\"]\n"
                         "[[endpoints]]\nname = \"quiet\"\naction = \"sink\"\nmatch = [\"udp dst 192.0.2.1:9\"]\n"
                         "[[lcores]]\nrx = [\"s0:0\"]\n");
  ProcessOutput o = run({"run", cfg.string(), "-d", "0.5", "--json", "-"});
  ASSERT_EQ(o.status, 0) << o.err;
  const auto j = nlohmann::json::parse(o.out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << o.out;
  const std::uint64_t tx = j["transmitted"].get<std::uint64_t>();
  EXPECT_EQ(tx, 5000u) << o.out;
  EXPECT_EQ(j["transmitted_per_endpoint"]["pong"].get<std::uint64_t>(), tx) << o.out;
  EXPECT_EQ(j["transmitted_per_endpoint"]["quiet"].get<std::uint64_t>(), 0u) << o.out;
  EXPECT_NE(o.err.find("endpoint pong             0 (transmitted 5000)"), std::string::npos) << o.err;
}

TEST_F(RawpipeCli, LogLevelFromTheEnvironmentAndTheFlag) {
  // info lines carry a UTC timestamp; warn hides them; the flag wins over RAWPIPE_LOG_LEVEL.
  ProcessOutput info = run({"run", (tmp_ / "ok.toml").string(), "-d", "0.3"});
  ASSERT_EQ(info.status, 0);
  bool stamped = false;
  for (const std::string& l : lines(info.out))
    if (l.find("running for") != std::string::npos) stamped = l.size() > 24 && l[4] == '-' && l[10] == 'T' && l[23] == 'Z';
  EXPECT_TRUE(stamped) << info.out;
  setenv("RAWPIPE_LOG_LEVEL", "warn", 1);
  ProcessOutput warn = run({"run", (tmp_ / "ok.toml").string(), "-d", "0.3"});
  ProcessOutput flag = run({"run", (tmp_ / "ok.toml").string(), "-d", "0.3", "--log-level", "info"});
  unsetenv("RAWPIPE_LOG_LEVEL");
  EXPECT_EQ(warn.out.find("running for"), std::string::npos) << warn.out;
  EXPECT_NE(warn.out.find("accounting: rx "), std::string::npos) << warn.out;  // the summary is not a log line
  EXPECT_NE(flag.out.find("running for"), std::string::npos) << flag.out;
}

}  // namespace
