// [[filters]] config tables: each error names file, line and key; a valid entry becomes a
// FilterPlan; and a pipeline built from a config runs the plugin with exact counts (synth port,
// the example plugins of this build, found by name).
#include "pipeline/config/filters_section.hh"

#include <gtest/gtest.h>

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>

#include "rawpipe/config.hh"
#include "rawpipe/pipeline.hh"
#include "pipeline/filter/plugin.hh"
#include "pipeline/build_paths.h"
#include "pipeline/port/registry.hh"

namespace rawpipe {
namespace {

LoadOptions options() {
  LoadOptions o;
  o.find_pmd = &find_pmd;
  o.cpu_count = 2;
  return o;
}

// Line numbers in the expectations below refer to this text; `filters` goes at line 26.
std::string config(const std::string& filters, std::uint64_t packets = 0) {
  return R"([[pools]]
name = "rx"
count = 1024
huge_pages = "never"

[[ports]]
name = "synth0"
pmd = "synth"
rx_queues = 1
packets = )" + std::to_string(packets) + R"(
malformed_fraction = 0.0
src_ports = 16
dst_addrs = 4

[[endpoints]]
name = "video"
action = "sink"
match = ["udp dst 198.18.0.1:5000", "udp dst 198.18.0.2:5000"]
[[endpoints]]
name = "telemetry"
action = "sink"
match = ["udp dst 198.18.0.3:5000"]
[[lcores]]
rx = ["synth0:0"]

)" + filters;
}

Result<LoadedConfig> load(const std::string& text) { return load_config_string(text, "f.toml", options()); }

std::string error_of(const std::string& filters) {
  auto r = load(config(filters));
  EXPECT_FALSE(r) << "accepted:\n" << filters;
  return r ? std::string() : r.message();
}

#define EXPECT_HAS(text, part) EXPECT_NE((text).find(part), std::string::npos) << (text)

TEST(FiltersSection, ValidEntriesBecomeFilterPlans) {
  auto r = load(config(R"([[filters]]
path = "rawpipe_seq_gap"
queue = "synth0:0"
[filters.config]
width = 4
offset = 2
max_flows = 64

[[filters]]
path = "rawpipe_prefix_drop.so"
endpoint = "telemetry"
config = { prefix_hex = "2a2b" }
)"));
  ASSERT_TRUE(r) << r.message();
  const auto& f = r->plan.filters;
  ASSERT_EQ(f.size(), 2u);
  EXPECT_TRUE(f[0].path.ends_with("/rawpipe_seq_gap.so")) << f[0].path;
  EXPECT_TRUE(f[0].on_queue);
  EXPECT_EQ(f[0].port, 0);
  EXPECT_EQ(f[0].rx_queue, 0);
  // File order, numbers as text.
  ASSERT_EQ(f[0].config.size(), 3u);
  EXPECT_EQ(f[0].config[0], (std::pair<std::string, std::string>{"width", "4"}));
  EXPECT_EQ(f[0].config[1], (std::pair<std::string, std::string>{"offset", "2"}));
  EXPECT_EQ(f[0].config[2], (std::pair<std::string, std::string>{"max_flows", "64"}));
  EXPECT_EQ(f[0].where.line, 26);
  EXPECT_EQ(f[0].path_line, 27);
  EXPECT_FALSE(f[1].on_queue);
  EXPECT_EQ(f[1].endpoint, 1);
  ASSERT_EQ(f[1].config.size(), 1u);
  EXPECT_EQ(f[1].config[0].second, "2a2b");
}

TEST(FiltersSection, MissingPath) {
  std::string e = error_of("[[filters]]\nendpoint = \"video\"\n");
  EXPECT_HAS(e, "f.toml:26: filters[0]: key 'path': expected a string, got nothing");
}

TEST(FiltersSection, PluginNameNotFoundListsTheSearchPath) {
  std::string e = error_of("[[filters]]\npath = \"no_such_plugin\"\nendpoint = \"video\"\n");
  EXPECT_HAS(e, "f.toml:27: filters[0]: key 'path': no filter plugin 'no_such_plugin.so' in ");
  EXPECT_HAS(e, "RAWPIPE_PLUGIN_PATH");
}

TEST(FiltersSection, PathThatIsNotAFile) {
  std::string e = error_of("[[filters]]\npath = \"/nonexistent/x.so\"\nendpoint = \"video\"\n");
  EXPECT_HAS(e, "f.toml:27: filters[0]: key 'path': '/nonexistent/x.so' is not a file");
}

TEST(FiltersSection, FileThatIsNotAPlugin) {
  // This test program is a file but no plugin (refused by the loader, or by a path policy).
  std::string e = error_of("[[filters]]\npath = \"/proc/self/exe\"\nendpoint = \"video\"\n");
  EXPECT_HAS(e, "f.toml:27: filters[0]: key 'path': ");
  EXPECT_HAS(e, "/proc/self/exe");
}

TEST(FiltersSection, AbiMismatchNamesBothVersions) {
  std::string e = error_of("\n[[filters]]\npath = \"rawpipe_test_bad_abi\"\nendpoint = \"video\"\n");
  EXPECT_HAS(e, "f.toml:28: filters[0]: key 'path': filter plugin '");
  EXPECT_HAS(e, "was built for filter ABI version 43, this rawpipe provides version 2");
}

TEST(FiltersSection, NeitherOrBothAttachments) {
  std::string e = error_of("[[filters]]\npath = \"rawpipe_seq_gap\"\n");
  EXPECT_HAS(e, "f.toml:26: filters[0]: expected exactly one of 'endpoint = \"NAME\"' or 'queue = \"PORT:QUEUE\"'");
  e = error_of("[[filters]]\npath = \"rawpipe_seq_gap\"\nendpoint = \"video\"\nqueue = \"synth0:0\"\n");
  EXPECT_HAS(e, "f.toml:29: filters[0]: key 'queue': expected exactly one of");
}

TEST(FiltersSection, UnknownEndpoint) {
  std::string e = error_of("[[filters]]\npath = \"rawpipe_seq_gap\"\nendpoint = \"nope\"\n");
  EXPECT_HAS(e, "f.toml:28: filters[0]: key 'endpoint': no [[endpoints]] table is named \"nope\"");
}

TEST(FiltersSection, BadQueues) {
  std::string e = error_of("[[filters]]\npath = \"rawpipe_seq_gap\"\nqueue = \"synth0\"\n");
  EXPECT_HAS(e, "f.toml:28: filters[0]: key 'queue': \"synth0\" is not \"port:queue\"");
  e = error_of("[[filters]]\npath = \"rawpipe_seq_gap\"\nqueue = \"eth9:0\"\n");
  EXPECT_HAS(e, "key 'queue': \"eth9:0\": no [[ports]] table is named \"eth9\"");
  e = error_of("[[filters]]\npath = \"rawpipe_seq_gap\"\nqueue = \"synth0:1\"\n");
  EXPECT_HAS(e, "f.toml:28: filters[0]: key 'queue': \"synth0:1\": port \"synth0\" has 1 rx queue (0 to 0)");
  e = error_of("[[filters]]\npath = \"rawpipe_seq_gap\"\nqueue = \"synth0:x\"\n");
  EXPECT_HAS(e, "key 'queue': \"synth0:x\"");
}

TEST(FiltersSection, TwoFiltersOnOneEndpoint) {
  std::string e = error_of(R"([[filters]]
path = "rawpipe_seq_gap"
endpoint = "video"
[[filters]]
path = "rawpipe_prefix_drop"
endpoint = "video"
)");
  EXPECT_HAS(e, "f.toml:31: filters[1]: key 'endpoint': endpoint video already has a filter from filters[0]");
}

TEST(FiltersSection, UnknownKeyAndNonScalarConfigValues) {
  std::string e = error_of("[[filters]]\npath = \"rawpipe_seq_gap\"\nendpoint = \"video\"\nwidth = 4\n");
  EXPECT_HAS(e, "f.toml:29:1: filters[0]: unknown key 'width'");
  e = error_of("[[filters]]\npath = \"rawpipe_seq_gap\"\nendpoint = \"video\"\n[filters.config]\nwidth = [4]\n");
  EXPECT_HAS(e, "f.toml:30: filters[0].config: key 'width': expected a string, a number or a boolean, got an array");
  e = error_of("[[filters]]\npath = \"rawpipe_seq_gap\"\nendpoint = \"video\"\nconfig = 3\n");
  EXPECT_HAS(e, "f.toml:29: filters[0]: key 'config': expected a table, got an integer");
}

// The plugin's own config errors surface when the engine loads it, at the `config` key.
TEST(FiltersSection, PluginRefusingItsConfigIsReportedAtTheConfigKey) {
  auto r = load(config("[[filters]]\npath = \"rawpipe_seq_gap\"\nendpoint = \"video\"\n[filters.config]\nwidth = 3\n"));
  ASSERT_TRUE(r) << r.message();
  auto p = Pipeline::create(r->plan);
  ASSERT_FALSE(p);
  EXPECT_HAS(p.message(), "f.toml:29: filters[0]: key 'config': filter plugin 'seq_gap'");
  EXPECT_HAS(p.message(), "'width': 3 must be 4 or 8");
}

std::uint64_t drop(const Accounting& a, DropReason r) { return a.drops[static_cast<unsigned>(r)]; }

// End to end: a config with two plugins, run on synth until its packets are done.
TEST(FiltersSection, PipelineFromConfigRunsThePluginsWithExactCounts) {
  // synth: 1 source address x 16 source ports x 4 destinations = 64 flows, one packet per flow in
  // turn; 6400 packets = 100 per flow. seq_gap reads the same payload bytes in every packet of a
  // flow, so after each flow's first packet every packet is a repeat (a reorder).
  auto r = load(config(R"([[filters]]
path = "rawpipe_seq_gap"
endpoint = "video"
config = { width = 4 }
[[filters]]
path = "rawpipe_prefix_drop"
endpoint = "telemetry"
config = { prefix_hex = "2a2b" }
)",
                       6400));
  ASSERT_TRUE(r) << r.message();
  auto created = Pipeline::create(r->plan);
  ASSERT_TRUE(created) << created.message();
  Pipeline& p = *created.value();
  ASSERT_EQ(p.filter_plugins().size(), 2u);
  ASSERT_TRUE(p.start());
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  for (;;) {
    PipelineSnapshot s = p.snapshot();
    if (s.total.rx_packets == 6400 && s.total.delivered + s.total.transmitted + s.total.dropped() == 6400) break;
    ASSERT_LT(std::chrono::steady_clock::now(), deadline) << s.total.rx_packets;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_TRUE(p.stop());
  Accounting a = p.accounting();
  EXPECT_EQ(a.rx_packets, 6400u);
  EXPECT_EQ(a.delivered_per_endpoint[0], 3200u);                 // 198.18.0.1 and .2
  EXPECT_EQ(a.delivered_per_endpoint[1], 0u);                    // every 198.18.0.3 payload starts 2a 2b
  EXPECT_EQ(drop(a, DropReason::kFilterDrop), 1600u);
  EXPECT_EQ(drop(a, DropReason::kNoMatch), 1600u);               // 198.18.0.4
  EXPECT_TRUE(a.balanced());
  EXPECT_EQ(p.filter_plugins()[0]->report(), "flows=32 packets=3200 gaps=0 missing=0 reorders=3168 short=0 untracked=0");
  EXPECT_EQ(p.filter_plugins()[1]->report(), "dropped=1600 passed=0");
}

}  // namespace
}  // namespace rawpipe

namespace rawpipe {
namespace {

// A private plugin directory: a copy of this build's seq_gap plugin under a name no default
// directory has, in a fresh 0700 directory under /tmp (sticky, so the path policy accepts it).
struct PrivatePluginDir {
  std::string dir;
  PrivatePluginDir() {
    char tmpl[] = "/tmp/rawpipe-plugin-dirs-XXXXXX";
    dir = mkdtemp(tmpl);
    std::ifstream in(std::string(RAWPIPE_PLUGIN_BUILD_DIR) + "/rawpipe_seq_gap.so", std::ios::binary);
    std::ofstream out(dir + "/private_gap.so", std::ios::binary);
    out << in.rdbuf();
  }
  ~PrivatePluginDir() {
    std::remove((dir + "/private_gap.so").c_str());
    rmdir(dir.c_str());
  }
};

// [run] plugin_dirs governs [[filters]] in the loader (what `rawpipe check` and `rawpipe run`
// call) and in Pipeline::create (what the Extra API's create calls): a bare name is found there,
// and a path there is allowed, without the process-wide directories including it.
TEST(FiltersSection, RunPluginDirsApplyToFilters) {
  PrivatePluginDir priv;
  const std::string run = "[run]\nplugin_dirs = [\"" + priv.dir + "\"]\n";
  for (const std::string& path : {std::string("private_gap"), priv.dir + "/private_gap.so"}) {
    auto r = load(config(run + "[[filters]]\npath = \"" + path + "\"\nendpoint = \"video\"\n", 200));
    ASSERT_TRUE(r) << r.message();
    ASSERT_EQ(r.value().plan.filters.size(), 1u);
    EXPECT_EQ(r.value().plan.filters[0].path, priv.dir + "/private_gap.so");
    auto p = Pipeline::create(r.value().plan);
    ASSERT_TRUE(p) << p.message();
    EXPECT_EQ(p.value()->filter_plugins().size(), 1u);
  }
  // Without [run] plugin_dirs the same path is refused by the path policy, naming the key.
  const std::string e = error_of("[[filters]]\npath = \"" + priv.dir + "/private_gap.so\"\nendpoint = \"video\"\n");
  EXPECT_HAS(e, "inside-plugin-dirs");
}

}  // namespace
}  // namespace rawpipe
