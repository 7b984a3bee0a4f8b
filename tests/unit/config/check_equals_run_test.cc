// `rawpipe check` and `rawpipe run` give the same verdict on every config: the sample configs and
// a matrix of borderline ones on the synth and pcap ports. check is the loader alone; run is the
// loader followed by Pipeline::create (everything but starting the lcores). Both must accept, or
// both refuse with the same message. Each matrix entry also states the verdict it must get, so a
// check that both sides lose at once is noticed too.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "rawpipe/config.hh"
#include "rawpipe/pipeline.hh"
#include "pipeline/port/registry.hh"
#include "tests/support/build_tree.hh"
#include "tests/support/sample_configs.hh"

namespace rawpipe {
namespace {

namespace fs = std::filesystem;

struct Verdict {
  bool valid = false;
  std::string message;  // empty when valid
};

LoadOptions options() {
  LoadOptions o;
  o.find_pmd = &find_pmd;
  for (const PmdDriver* d : all_pmds()) o.known_pmds.push_back(d->name);
  // The sample configs pin lcores to CPUs 0 and 1: they are written for machines with two or more.
  o.cpu_count = std::max(2u, online_cpu_count());
  return o;
}

class CheckEqualsRun : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / fmt::format("rawpipe-check-run-{}", getpid());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // What `rawpipe check` decides.
  Verdict check(const std::string& text, const std::string& file) {
    auto loaded = load_config_string(text, file, options());
    return loaded ? Verdict{true, ""} : Verdict{false, loaded.message()};
  }

  // What `rawpipe run` decides before its lcores start. Capture taps open their files when the
  // pipeline is created: they are moved into this test's directory so nothing is left behind.
  Verdict run(const std::string& text, const std::string& file) {
    auto loaded = load_config_string(text, file, options());
    if (!loaded) return {false, loaded.message()};
    Plan plan = loaded->plan;
    for (TapConfig& t : plan.taps) t.path = (dir_ / fs::path(t.path).filename()).string();
    auto created = Pipeline::create(plan);
    return created ? Verdict{true, ""} : Verdict{false, created.message()};
  }

  void expect_same(const std::string& text, const std::string& file) {
    Verdict c = check(text, file), r = run(text, file);
    EXPECT_EQ(c.valid, r.valid) << file << ": check says " << (c.valid ? "valid" : c.message) << "; run says "
                                << (r.valid ? "valid" : r.message);
    EXPECT_EQ(c.message, r.message) << file;
  }

  fs::path dir_;
};

std::string file_text(const fs::path& file) {
  std::ifstream in(file);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Drivers whose ports open on any machine: no interface, no privilege, no device (the dpdk samples
// use DPDK's software devices).
const std::set<std::string> kOpensAnywhere = {"synth", "pcap", "mlx5-model", "mana-model", "dpdk"};

// The drivers of a plan's ports that open only where their device exists (an interface, a NIC).
std::string device_pmds(const Plan& plan) {
  std::string out;
  for (const PortPlan& p : plan.ports)
    if (!kOpensAnywhere.count(p.pmd)) out += (out.empty() ? "" : ", ") + p.pmd;
  return out;
}

// One test per sample, named after the file, so the samples compared only up to the loader are
// listed as skipped with the reason instead of passing unseen.
class CheckEqualsRunSample : public CheckEqualsRun, public ::testing::WithParamInterface<fs::path> {};

TEST_P(CheckEqualsRunSample, SameVerdict) {
  const fs::path& f = GetParam();
  // Creating the pipeline opens the ports' transmit files, which the samples put under /tmp.
  const std::string text = test::sample_text_writing_into(f, dir_);
  auto loaded = load_config_string(text, f.string(), options());
  ASSERT_TRUE(loaded) << loaded.message();
  if (const std::string devices = device_pmds(loaded->plan); !devices.empty())
    GTEST_SKIP() << "its " << devices << " port opens only where its device exists; compared up to the loader, "
                 << "which accepts it";
  expect_same(text, f.string());
}

INSTANTIATE_TEST_SUITE_P(Samples, CheckEqualsRunSample, ::testing::ValuesIn(rawpipe::test::sample_configs()),
                         rawpipe::test::sample_test_name);

// The per-sample comparisons skip device ports; enough samples must be left to compare in full.
TEST(CheckEqualsRunSamples, AtLeastFourNeedNoDevice) {
  int comparable = 0;
  for (const fs::path& f : rawpipe::test::sample_configs()) {
    auto loaded = load_config_string(file_text(f), f.string(), options());
    ASSERT_TRUE(loaded) << f << ": " << loaded.message();
    comparable += device_pmds(loaded->plan).empty();
  }
  EXPECT_GE(comparable, 4);
}

// A small valid config on a synth port; each case edits it.
const std::string kBase = R"([[pools]]
name = "rx"
count = 1024
huge_pages = "never"

[[ports]]
name = "s0"
pmd = "synth"
packets = 100
dst_ports = 4
# PORT

[[endpoints]]
name = "e0"
action = "ring"
match = ["udp dst *:5000"]
# ENDPOINT

[[lcores]]
rx = ["s0:0"]
# LCORE
)";

std::string with(std::string text, const std::string& marker, const std::string& lines) {
  auto at = text.find("# " + marker + "\n");
  EXPECT_NE(at, std::string::npos) << marker;
  if (at != std::string::npos) text.replace(at, marker.size() + 3, lines + "\n");
  return text;
}

struct Case {
  const char* name;
  std::string text;
  bool valid;
};

TEST_F(CheckEqualsRun, BorderlineMatrix) {
  const std::string pcap_tx = (dir_ / "out.pcap").string();
  const std::vector<Case> cases = {
      {"base", kBase, true},
      {"ring_size 1", with(kBase, "ENDPOINT", "ring_size = 1"), false},
      {"ring_size 2", with(kBase, "ENDPOINT", "ring_size = 2"), true},
      {"ring_size 3", with(kBase, "ENDPOINT", "ring_size = 3"), false},
      {"ring_size on a sink", with(with(kBase, "ENDPOINT", "ring_size = 64"), "PORT", ""), true},
      {"echo, tx_queues 0", with(with(kBase, "PORT", "tx_queues = 0"), "ENDPOINT", "\n[[endpoints]]\nname = \"e1\"\naction = \"echo\"\nmatch = [\"udp dst *:5001\"]"), false},
      {"echo, tx_queues 1", with(kBase, "ENDPOINT", "\n[[endpoints]]\nname = \"e1\"\naction = \"echo\"\nmatch = [\"udp dst *:5001\"]"), true},
      {"addresses, tx_queues 0", with(kBase, "PORT", "tx_queues = 0\naddresses = [\"10.0.0.2\"]\nmac = \"02:00:00:00:00:09\""), false},
      {"addresses, tx_queues 1", with(kBase, "PORT", "addresses = [\"10.0.0.2\", \"fd00::2\"]\nmac = \"02:00:00:00:00:09\""), true},
      {"addresses on two lcores, tx_queues 1",
       with(with(with(kBase, "PORT", "rx_queues = 2\naddresses = [\"10.0.0.2\"]\nmac = \"02:00:00:00:00:09\""), "LCORE",
                 "\n[[lcores]]\nrx = [\"s0:1\"]"), "ENDPOINT", ""), false},
      {"burst 0", with(kBase, "LCORE", "burst = 0"), false},
      {"burst 1", with(kBase, "LCORE", "burst = 1"), true},
      {"burst max", with(kBase, "LCORE", "burst = 256"), true},
      {"burst max+1", with(kBase, "LCORE", "burst = 257"), false},
      {"two lcores on one queue", with(kBase, "LCORE", "\n[[lcores]]\nrx = [\"s0:0\"]"), false},
      {"a queue polled by no lcore", with(kBase, "PORT", "rx_queues = 2"), false},
      {"a queue that does not exist", with(kBase, "LCORE", "\n[[lcores]]\nrx = [\"s0:1\"]"), false},
      {"missing default endpoint", "[run]\ndefault_action = \"endpoint\"\n" + kBase, false},
      {"default endpoint that does not exist", "[run]\ndefault_action = \"endpoint\"\ndefault_endpoint = \"nope\"\n" + kBase, false},
      {"default endpoint without rules",
       "[run]\ndefault_action = \"endpoint\"\ndefault_endpoint = \"all\"\n" +
           with(kBase, "ENDPOINT", "\n[[endpoints]]\nname = \"all\"\naction = \"sink\""), true},
      {"endpoint without rules", with(kBase, "ENDPOINT", "\n[[endpoints]]\nname = \"e1\"\naction = \"sink\""), false},
      {"duplicate endpoint name", with(kBase, "ENDPOINT", "\n[[endpoints]]\nname = \"e0\"\nmatch = [\"udp\"]"), false},
      {"forward to self", with(kBase, "ENDPOINT", "\n[[endpoints]]\nname = \"f\"\naction = \"forward\"\nport = \"s0\"\nmatch = [\"udp dst *:5001\"]"), true},
      {"forward to a port without tx queues",
       with(with(kBase, "PORT", "tx_queues = 0"), "ENDPOINT",
            "\n[[endpoints]]\nname = \"f\"\naction = \"forward\"\nport = \"s0\"\nmatch = [\"udp dst *:5001\"]"), false},
      {"forward from two lcores, one tx queue",
       with(with(with(kBase, "PORT", "rx_queues = 2"), "LCORE", "\n[[lcores]]\nrx = [\"s0:1\"]"), "ENDPOINT",
            "\n[[endpoints]]\nname = \"f\"\naction = \"forward\"\nport = \"s0\"\nmatch = [\"udp dst *:5001\"]"), false},
      {"rx_queues beyond the synth flows", with(kBase, "PORT", "rx_queues = 8"), false},
      {"tx_queues 256", with(kBase, "PORT", "tx_queues = 256"), false},
      {"tx_queues 64", with(kBase, "PORT", "tx_queues = 64"), true},
      {"rx_ring_size 1000", with(kBase, "PORT", "rx_ring_size = 1000"), false},
      {"idle_sleep_us too long", with(kBase, "LCORE", "idle_sleep_us = 2000000"), false},
      {"lcore cpu beyond the machine", with(kBase, "LCORE", "cpu = 4095"), false},
      {"threadless lcore", with(kBase, "LCORE", "thread = false"), true},
      {"threadless lcore pinned", with(kBase, "LCORE", "thread = false\ncpu = 0"), false},
      {"threadless lcore that sleeps", with(kBase, "LCORE", "thread = false\nidle_sleep_us = 10"), false},
      {"bad rule", with(kBase, "ENDPOINT", "\n[[endpoints]]\nname = \"e1\"\nmatch = [\"udp dst 1.2.3.4:x\"]"), false},
      {"rule naming a missing port", with(kBase, "ENDPOINT", "\n[[endpoints]]\nname = \"e1\"\nmatch = [\"udp port s9\"]"), false},
      {"pcap transmit port", with(kBase, "ENDPOINT",
                                  "\n[[endpoints]]\nname = \"f\"\naction = \"forward\"\nport = \"cap\"\nmatch = [\"udp dst *:5001\"]\n\n"
                                  "[[ports]]\nname = \"cap\"\npmd = \"pcap\"\ntx_file = \"" + pcap_tx + "\"\n"), false},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    Verdict v = check(c.text, "m.toml");
    EXPECT_EQ(v.valid, c.valid) << c.name << ": " << (v.valid ? "accepted" : v.message) << "\n" << c.text;
    expect_same(c.text, "m.toml");
  }
}

}  // namespace
}  // namespace rawpipe
