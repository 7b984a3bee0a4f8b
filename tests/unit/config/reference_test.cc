// The config reference is generated from the key tables the parsers use: docs/config.md must equal
// `rawpipe config-ref --markdown`, every built-in driver has a table, a read of an undeclared key
// is refused. And the diagnostics those tables give: "did you mean" for unknown keys and names,
// every error of a config in one pass, TOML syntax errors in plain words.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "pipeline/config/section.hh"
#include "pipeline/port/driver.hh"
#include "pipeline/port/registry.hh"
#include "rawpipe/config.hh"
#include "tests/support/build_tree.hh"

namespace rawpipe {
namespace {

namespace fs = std::filesystem;

std::string run_and_read(const std::string& command) {
  std::string out;
  FILE* p = ::popen(command.c_str(), "r");
  if (!p) return out;
  char buf[4096];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  ::pclose(p);
  return out;
}

TEST(ConfigReference, DocsConfigMdIsTheCommandsOutput) {
  if (all_pmds().size() < 11)
    GTEST_SKIP() << "this build lacks some drivers (" << all_pmds().size()
                 << " of 11), so its reference is not the one docs/config.md holds";
  const fs::path doc = test::source_dir() / "docs" / "config.md";
  std::ifstream in(doc);
  ASSERT_TRUE(in) << doc << " is missing; create it with `rawpipe config-ref --markdown > docs/config.md`";
  std::stringstream file;
  file << in.rdbuf();
  const std::string generated = run_and_read(test::rawpipe_binary().string() + " config-ref --markdown");
  ASSERT_FALSE(generated.empty());
  EXPECT_TRUE(file.str() == generated)
      << "docs/config.md is stale: the key tables changed. Regenerate it with\n  "
      << test::rawpipe_binary().string() << " config-ref --markdown > docs/config.md";
}

TEST(ConfigReference, EveryBuiltInDriverDeclaresItsKeysOnce) {
  auto names_of = [](const KeyTable* t) {
    std::vector<std::string_view> out;
    for (; t; t = t->also)
      for (const KeyDoc& k : t->keys) out.push_back(k.name);
    return out;
  };
  auto port = config_reference("ports");
  ASSERT_TRUE(port);
  for (const PmdDriver* d : all_pmds()) {
    ASSERT_NE(d->keys, nullptr) << d->name << " has no key table";
    EXPECT_EQ(d->keys->name, d->name);
    std::set<std::string_view> seen;
    for (std::string_view k : names_of(d->keys)) {
      EXPECT_TRUE(seen.insert(k).second) << d->name << ": key " << k << " declared twice";
      EXPECT_EQ(port->find(fmt::format("\n  {} ", k)), std::string::npos)
          << d->name << ": key " << k << " is also a generic port key";
    }
    auto text = config_reference(d->name);
    ASSERT_TRUE(text) << text.message();
    EXPECT_NE(text->find(d->summary.substr(0, 0)), std::string::npos);
  }
}

TEST(ConfigReference, ReadingAnUndeclaredKeyIsRefused) {
  static const KeyDoc docs[] = {{"count", "integer", "", "1", "how many"}};
  static const KeyTable table{"t", "[t]", "a test table", docs};
  auto root = ConfigSection::parse_string("count = 2\nspeed = 3\n", "u.toml");
  ASSERT_TRUE(root);
  root->declare(table);
  EXPECT_EQ(root->integer("count", 0, 10, 1), 2);
  (void)root->integer("speed", 0, 10, 1);
  const Status s = root->finish();
  ASSERT_FALSE(s);
  EXPECT_NE(s.message().find("u.toml:2: top level: key 'speed': key 'speed' is read but not declared in the config "
                             "reference"),
            std::string::npos)
      << s.message();
}

TEST(ConfigReference, UnknownNameSuggestsTheClosest) {
  auto r = config_reference("synht");
  ASSERT_FALSE(r);
  EXPECT_NE(r.message().find("no config section or driver is named \"synht\" (did you mean \"synth\"?)"),
            std::string::npos)
      << r.message();
}

const char* const kValid = R"([run]
duration = 1

[[pools]]
name = "rx"
count = 1024

[[ports]]
name = "s0"
pmd = "synth"

[[endpoints]]
name = "a"
action = "sink"
match = ["udp dst *:5000"]

[[lcores]]
rx = ["s0:0"]

[[taps]]
path = "/tmp/rawpipe-reference-test.pcap"
stage = "drops"
)";

std::string replaced(std::string text, const std::string& from, const std::string& to) {
  const auto at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) text.replace(at, from.size(), to);
  return text;
}

std::string error_of(const std::string& text) {
  LoadOptions o;
  o.cpu_count = 2;
  auto r = load_config_string(text, "ref.toml", o);
  return r ? std::string() : r.message();
}

TEST(ConfigDiagnostics, TheBaseConfigIsValid) { EXPECT_EQ(error_of(kValid), ""); }

// Every typo of the config at once, each with its place and the likely intended name.
TEST(ConfigDiagnostics, EveryTypoReportedInOnePassWithDidYouMean) {
  std::string t = kValid;
  t = replaced(t, "duration = 1", "duration = 1\ndefualt_action = \"drop\"");  // unknown key in [run]
  t = replaced(t, "count = 1024", "cuont = 1024");                              // unknown key in [[pools]]
  t = replaced(t, "pmd = \"synth\"", "pmd = \"synht\"");                       // unknown pmd
  t = replaced(t, "action = \"sink\"", "action = \"snik\"");                   // unknown endpoint kind
  t = replaced(t, "stage = \"drops\"", "stage = \"drops\"\ndrop_reasons = [\"no_mtch\"]");  // unknown drop reason
  t += "\n[lcore]\ncpu = 0\n";                                                  // unknown section
  const std::string e = error_of(t);
  const std::vector<std::string> want = {
      "ref.toml:3:1: [run]: unknown key 'defualt_action' (did you mean \"default_action\"?)",
      "ref.toml:7:1: pools[0] 'rx': unknown key 'cuont' (did you mean \"count\"?)",
      "ref.toml:11: ports[0] 's0': key 'pmd': no driver named \"synht\" is built into this binary (did you mean "
      "\"synth\"?)",
      "ref.toml:15: endpoints[0] 'a': key 'action': expected one of \"ring\", \"sink\", \"echo\", \"forward\", got "
      "\"snik\" (did you mean \"sink\"?)",
      "ref.toml:24: taps[0]: key 'drop_reasons': unknown drop reason 'no_mtch' (did you mean \"no_match\"?)",
      "ref.toml:26:2: top level: unknown key 'lcore' (did you mean \"lcores\"?)",
  };
  for (const auto& w : want) EXPECT_NE(e.find(w), std::string::npos) << "missing: " << w << "\nin:\n" << e;
  EXPECT_EQ(std::count(e.begin(), e.end(), '\n') + 1, static_cast<long>(want.size())) << e;
}

TEST(ConfigDiagnostics, NoSuggestionForAnUnrelatedWord) {
  const std::string e = error_of(replaced(kValid, "count = 1024", "count = 1024\nwhatever = 1"));
  EXPECT_EQ(e, "ref.toml:7:1: pools[0] 'rx': unknown key 'whatever' (`rawpipe config-ref pools` lists the keys this "
               "table takes)");
}

TEST(ConfigDiagnostics, DriverKeyTypoSuggestsTheDriversKey) {
  const std::string e = error_of(replaced(kValid, "pmd = \"synth\"", "pmd = \"synth\"\nrate_ps = 10"));
  EXPECT_EQ(e, "ref.toml:11:1: ports[0] 's0': unknown key 'rate_ps' (did you mean \"rate_pps\"?)");
}

TEST(ConfigDiagnostics, SyntaxErrorsInPlainWords) {
  EXPECT_EQ(error_of(replaced(kValid, "name = \"a\"", "name = \"a")),
            "ref.toml:13:10: missing closing quote: the string that starts at column 8 runs to the end of the line; "
            "end it with \"");
  EXPECT_EQ(error_of(replaced(kValid, "[[pools]]", "[[pools]")),
            "ref.toml:4:9: missing ']]' at the end of the table header [[pools: write [[pools]]");
  EXPECT_EQ(error_of(replaced(kValid, "[run]", "[run")), "ref.toml:1:5: missing ']' at the end of the table header [run: write [run]");
  EXPECT_EQ(error_of(replaced(kValid, "duration = 1", "duration = 1\nduration = 2")),
            "ref.toml:3:12: duplicate key 'duration': it is already set in this table; keep one of the two");
  EXPECT_EQ(error_of(std::string(kValid) + "[run]\n"),
            "ref.toml:23:1: duplicate table 'run': [run] appears twice; merge the two into one (only [[arrays of "
            "tables]] repeat)");
  // A cause we do not translate keeps the parser's own words and the position.
  EXPECT_EQ(error_of(replaced(kValid, "duration = 1", "duration = 1 2")).rfind("ref.toml:2:14: not valid TOML: ", 0), 0u);
}

}  // namespace
}  // namespace rawpipe
