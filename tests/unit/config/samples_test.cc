// `rawpipe check` passes on every sample config, the ones this host can run run for a second with
// every packet accounted for, `check --json` parses back to the plan, and the rule warnings
// (shadowed rules, unbracketed IPv6 with a port-like last group) name both places.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cctype>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>

#include "rawpipe/config.hh"
#include "tests/support/build_tree.hh"
#include "tests/support/sample_configs.hh"
#include "tests/support/scratch_dir.hh"

namespace rawpipe {
namespace {

namespace fs = std::filesystem;

struct Ran {
  int status = -1;
  std::string out;  // stdout and stderr
};

Ran run(const std::string& args, bool merge_stderr = true) {
  Ran r;
  const std::string cmd = test::rawpipe_binary().string() + " " + args + (merge_stderr ? " 2>&1" : " 2>/dev/null");
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return r;
  char buf[4096];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  const int st = ::pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

std::set<std::string> pmds_of(const fs::path& file) {
  std::ifstream in(file);
  std::set<std::string> out;
  std::string line;
  const std::regex pmd(R"re(^\s*pmd\s*=\s*"([^"]+)")re");
  std::smatch m;
  while (std::getline(in, line))
    if (std::regex_search(line, m, pmd)) out.insert(m[1]);
  return out;
}

// Drivers that need nothing from the host: no interface, no privilege, no device.
const std::set<std::string> kRunsAnywhere = {"synth", "pcap", "mlx5-model", "mana-model", "dpdk"};

// The ports of a sample that need the host's interfaces, comma-separated; empty when it runs anywhere.
std::string host_ports(const fs::path& file) {
  std::string needs;
  for (const auto& p : pmds_of(file))
    if (!kRunsAnywhere.count(p)) needs += (needs.empty() ? "" : ", ") + p;
  return needs;
}

// One test per sample, named after the file, so a sample this host cannot run is listed as
// skipped with its reason, and a failing one is named by the test itself.
class SampleConfig : public ::testing::TestWithParam<fs::path> {};

TEST_P(SampleConfig, CheckAcceptsIt) {
  const fs::path& f = GetParam();
  const Ran r = run("check " + f.string());
  EXPECT_EQ(r.status, 0) << f << ":\n" << r.out;
  EXPECT_NE(r.out.find(f.string() + ": valid"), std::string::npos) << r.out;
}

TEST_P(SampleConfig, RunsForASecond) {
  const fs::path& f = GetParam();
  if (const std::string needs = host_ports(f); !needs.empty())
    GTEST_SKIP() << "its " << needs << " port needs the interface the file's header names (a veth pair, root)";
  // The samples write their captures to fixed names under /tmp for a user to open; the copy run
  // here writes them into its own directory instead, which goes with the test.
  const fs::path dir = test::make_scratch_dir("rawpipe-sample");
  const fs::path copy = dir / f.filename();
  std::ofstream(copy) << test::sample_text_writing_into(f, dir);
  const Ran r = run("run --duration 1 " + copy.string());
  EXPECT_EQ(r.status, 0) << f << ":\n" << r.out;
  EXPECT_NE(r.out.find("every packet accounted for, every buffer back in its pool"), std::string::npos)
      << f << ":\n" << r.out;
  if (!HasFailure()) fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Samples, SampleConfig, ::testing::ValuesIn(rawpipe::test::sample_configs()),
                         rawpipe::test::sample_test_name);

// The per-sample runs skip whatever needs the host; this keeps the samples that run on every
// machine from all turning into host-only ones unnoticed.
TEST(SampleConfigs, AtLeastFourRunAnywhere) {
  int anywhere = 0;
  for (const fs::path& f : rawpipe::test::sample_configs()) anywhere += host_ports(f).empty();
  EXPECT_GE(anywhere, 4);  // the synth samples and the two device models at least
}

TEST(CheckCommand, JsonParsesBackToThePlan) {
  const fs::path f = test::source_dir() / "configs" / "capture-taps.toml";
  const Ran r = run("check --json - " + f.string(), /*merge_stderr=*/false);
  ASSERT_EQ(r.status, 0) << r.out;
  const nlohmann::json j = nlohmann::json::parse(r.out);  // stdout holds the document and nothing else
  auto loaded = load_config(f.string());
  ASSERT_TRUE(loaded) << loaded.message();
  const Plan& plan = loaded->plan;
  EXPECT_EQ(j["config"], f.string());
  ASSERT_EQ(j["ports"].size(), plan.ports.size());
  EXPECT_EQ(j["ports"][0]["name"], plan.ports[0].name);
  EXPECT_EQ(j["ports"][0]["pmd"], plan.ports[0].pmd);
  ASSERT_EQ(j["endpoints"].size(), plan.endpoints.size());
  EXPECT_EQ(j["endpoints"][0]["rules"].get<std::vector<std::string>>(), plan.endpoints[0].match);
  ASSERT_EQ(j["lcores"].size(), plan.lcores.size());
  ASSERT_EQ(j["taps"].size(), plan.taps.size());
  ASSERT_FALSE(plan.taps.empty());
  EXPECT_EQ(j["taps"][0]["path"], plan.taps[0].path);
  EXPECT_EQ(j["metrics"]["latency_sample"], plan.metrics.latency_sample);
  EXPECT_TRUE(j["filters"].is_array());
  EXPECT_TRUE(j["privileges"]["setup"].is_array());
  EXPECT_TRUE(j["warnings"].empty());
}

TEST(CheckCommand, JsonToAFile) {
  const fs::path out = fs::temp_directory_path() / fmt::format("rawpipe-check-{}.json", ::getpid());
  const Ran r = run("check --json " + out.string() + " " + (test::source_dir() / "configs" / "default.toml").string());
  ASSERT_EQ(r.status, 0) << r.out;
  std::ifstream in(out);
  const nlohmann::json j = nlohmann::json::parse(in);
  EXPECT_EQ(j["ports"][0]["name"], "synth0");
  fs::remove(out);
}

const char* const kBase = R"([[pools]]
name = "rx"

[[ports]]
name = "s0"
pmd = "synth"

[[endpoints]]
name = "a"
action = "sink"
match = ["udp dst 239.1.1.1:5000"]

[[endpoints]]
name = "b"
action = "sink"
match = [RULES]

[[lcores]]
rx = ["s0:0"]
)";

std::vector<std::string> warnings_for(const std::string& rules) {
  std::string text = kBase;
  text.replace(text.find("RULES"), 5, rules);
  LoadOptions o;
  o.cpu_count = 2;
  auto r = load_config_string(text, "w.toml", o);
  EXPECT_TRUE(r) << r.message();
  return r ? r->warnings : std::vector<std::string>{};
}

TEST(RuleWarnings, IdenticalRuleOnAnotherEndpointNamesBothPlaces) {
  const auto w = warnings_for("\"udp dst 239.1.1.1:5000\"");
  ASSERT_EQ(w.size(), 1u);
  EXPECT_EQ(w[0], "w.toml:16: endpoints[1] 'b': key 'match': rule \"udp dst 239.1.1.1:5000\" never matches: the "
                  "identical rule \"udp dst 239.1.1.1:5000\" of endpoint \"a\" (w.toml:8) takes every packet it would; "
                  "remove one of them or make this one more specific");
}

TEST(RuleWarnings, DistinctOrNarrowerRulesAreFine) {
  EXPECT_TRUE(warnings_for("\"udp dst 239.1.1.2:5000\"").empty());
  // More specific than a's rule: the classifier looks at it first, so it does receive packets.
  EXPECT_TRUE(warnings_for("\"udp dst 239.1.1.1:5000 src 10.0.0.1:1024\"").empty());
  EXPECT_TRUE(warnings_for("\"udp dst *:5000\"").empty());
}

TEST(RuleWarnings, UnbracketedIpv6WithAPortLikeTail) {
  const auto w = warnings_for("\"udp dst ff15::1:5000\"");
  ASSERT_EQ(w.size(), 1u);
  EXPECT_EQ(w[0], "w.toml:16: endpoints[1] 'b': key 'match': rule \"udp dst ff15::1:5000\": dst ff15::1:5000 is read "
                  "as the IPv6 address ff15::1:5000 with any port; for address ff15::1 port 5000 write dst "
                  "[ff15::1]:5000 (and dst [ff15::1:5000]:* keeps this meaning without the warning)");
  EXPECT_TRUE(warnings_for("\"udp dst [ff15::1]:5000\", \"udp dst [ff15::1:5000]:*\", \"udp dst ff15::1\"").empty());
}

TEST(RuleWarnings, CheckPrintsThemAndStillSucceeds) {
  const fs::path f = fs::temp_directory_path() / fmt::format("rawpipe-warn-{}.toml", ::getpid());
  std::string text = kBase;
  text.replace(text.find("RULES"), 5, "\"udp dst 239.1.1.1:5000\"");
  std::ofstream(f) << text;
  const Ran r = run("check " + f.string());
  fs::remove(f);
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("rawpipe: warning: " + f.string() + ":16: endpoints[1] 'b'"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(": valid, 1 warning"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace rawpipe
