// Every sample config in configs/ loads and validates (what `rawpipe check` does), so the shipped
// configs cannot rot as keys and rules change.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "rawpipe/config.hh"
#include "pipeline/port/registry.hh"
#include "tests/support/build_tree.hh"
#include "pipeline/port/driver.hh"

namespace rawpipe {
namespace {

namespace fs = std::filesystem;

TEST(SampleConfigs, EveryConfigValidates) {
  fs::path root = rawpipe::test::source_dir();
  ASSERT_FALSE(root.empty()) << "cannot find meson-info above " << fs::read_symlink("/proc/self/exe");
  LoadOptions options;
  options.find_pmd = &find_pmd;
  for (const PmdDriver* d : all_pmds()) options.known_pmds.push_back(d->name);
  // The configs pin lcores to CPUs 0 and 1: they are written for machines with two or more.
  options.cpu_count = std::max(2u, online_cpu_count());

  std::set<std::string> checked;
  for (const auto& entry : fs::directory_iterator(root / "configs")) {
    if (entry.path().extension() != ".toml") continue;
    auto loaded = load_config(entry.path().string(), options);
    EXPECT_TRUE(loaded) << loaded.message();
    if (loaded) {
      EXPECT_FALSE(loaded->plan.lcores.empty()) << entry.path();
    }
    checked.insert(entry.path().filename().string());
  }
  // The README and tools/bench name these; they must exist.
  for (const char* name : {"default.toml", "bench-synth.toml", "imix-malformed.toml", "multi-lcore.toml"})
    EXPECT_TRUE(checked.count(name)) << name << " is missing from configs/";
}

TEST(SampleConfigs, EveryKeyIsCommented) {
  // "Every key commented": each key line is preceded, within its table, by a comment line that is
  // not separated from it by a blank line or a table header. Keys in a run of consecutive keys
  // share the comment above the run.
  fs::path root = rawpipe::test::source_dir();
  ASSERT_FALSE(root.empty());
  for (const auto& entry : fs::directory_iterator(root / "configs")) {
    if (entry.path().extension() != ".toml") continue;
    std::ifstream in(entry.path());
    std::string line;
    int number = 0;
    bool commented = false;
    bool in_array = false;
    while (std::getline(in, line)) {
      ++number;
      std::string t = line.substr(std::min(line.find_first_not_of(" \t"), line.size()));
      if (in_array) {
        in_array = t.find(']') == std::string::npos || t.back() == ',';
        continue;
      }
      if (t.empty() || t[0] == '[') {
        commented = false;
        continue;
      }
      if (t[0] == '#') {
        commented = true;
        continue;
      }
      EXPECT_TRUE(commented) << entry.path().filename().string() << ":" << number << ": key without a comment: " << t;
      in_array = t.find('[') != std::string::npos && t.back() == ',';
    }
  }
}

}  // namespace
}  // namespace rawpipe
