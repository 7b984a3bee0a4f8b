// The plugin path policy (pipeline/privilege/plugin_path.hh): each rule refuses what it should,
// with a message naming the path and the rule, and a plugin in a good place is accepted.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "pipeline/filter/plugin.hh"
#include "rawpipe/plugin_path.hh"
#include "tests/support/scratch_dir.hh"

namespace rawpipe {
namespace {

namespace fs = std::filesystem;

class PluginPath : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = test::make_scratch_dir("rawpipe-plugin-path");
    fs::create_directories(root_ / "good");
    fs::create_directories(root_ / "other");
    chmod(root_.c_str(), 0755);
    chmod((root_ / "good").c_str(), 0755);
    chmod((root_ / "other").c_str(), 0755);
    good_ = (root_ / "good" / "f.so").string();
    other_ = (root_ / "other" / "f.so").string();
    for (const auto& p : {good_, other_}) {
      std::ofstream(p) << "not really ELF; the policy does not load it";
      chmod(p.c_str(), 0644);
    }
  }
  void TearDown() override {
    chmod((root_ / "good").c_str(), 0755);
    fs::remove_all(root_);
  }
  std::vector<std::string> good_dir() const { return {(root_ / "good").string()}; }

  fs::path root_;
  std::string good_, other_;
};

TEST_F(PluginPath, AcceptsARegularFileInsideAnAllowedDirectory) {
  PluginFile f;
  Status s = check_plugin_path(good_, good_dir(), &f);
  ASSERT_TRUE(s) << s.message();
  EXPECT_EQ(f.real_path(), fs::canonical(good_).string());
  EXPECT_GE(f.fd(), 0);
  // The descriptor path names the same file as the checked path.
  struct stat a {}, b {};
  ASSERT_EQ(stat(f.dlopen_path().c_str(), &a), 0);
  ASSERT_EQ(stat(good_.c_str(), &b), 0);
  EXPECT_EQ(a.st_ino, b.st_ino);
}

TEST_F(PluginPath, RefusesAPathOutsideThePluginDirs) {
  Status s = check_plugin_path(other_, good_dir());
  ASSERT_FALSE(s);
  EXPECT_NE(s.message().find(other_), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("rule inside-plugin-dirs"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find((root_ / "good").string()), std::string::npos) << s.message();
  // A directory whose name is a prefix of another is not its parent.
  fs::create_directories(root_ / "goodness");
  std::ofstream(root_ / "goodness" / "f.so") << "x";
  EXPECT_FALSE(check_plugin_path((root_ / "goodness" / "f.so").string(), good_dir()));
}

TEST_F(PluginPath, RefusesASymlinkThatEscapesThePluginDir) {
  const fs::path link = root_ / "good" / "escape.so";
  fs::create_symlink(other_, link);
  Status s = check_plugin_path(link.string(), good_dir());
  ASSERT_FALSE(s);
  EXPECT_NE(s.message().find(link.string()), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("resolves to " + fs::canonical(other_).string()), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("rule inside-plugin-dirs"), std::string::npos) << s.message();
  // A symlink that stays inside is fine: the file it names is what is checked.
  const fs::path inner = root_ / "good" / "alias.so";
  fs::create_symlink(good_, inner);
  EXPECT_TRUE(check_plugin_path(inner.string(), good_dir()));
  // And a path that climbs out with ".." is resolved the same way.
  EXPECT_FALSE(check_plugin_path((root_ / "good" / ".." / "other" / "f.so").string(), good_dir()));
}

TEST_F(PluginPath, RefusesAWorldWritableDirectoryWithoutStickyBit) {
  ASSERT_EQ(chmod((root_ / "good").c_str(), 0777), 0);
  Status s = check_plugin_path(good_, good_dir());
  ASSERT_FALSE(s);
  EXPECT_NE(s.message().find(good_), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("rule no-world-writable-dir"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("directory " + (root_ / "good").string()), std::string::npos) << s.message();
  // With the sticky bit (like /tmp) others cannot replace the file: accepted.
  ASSERT_EQ(chmod((root_ / "good").c_str(), 01777), 0);
  EXPECT_TRUE(check_plugin_path(good_, good_dir()));
}

TEST_F(PluginPath, RefusesAWorldWritableParentFurtherUp) {
  // The allowed dir itself is fine, but its parent is writable by everyone: anyone could rename it.
  ASSERT_EQ(chmod(root_.c_str(), 0777), 0);
  Status s = check_plugin_path(good_, good_dir());
  chmod(root_.c_str(), 0755);
  ASSERT_FALSE(s);
  EXPECT_NE(s.message().find("directory " + root_.string() + " is writable by every user"), std::string::npos)
      << s.message();
}

TEST_F(PluginPath, RefusesAWorldWritableFile) {
  ASSERT_EQ(chmod(good_.c_str(), 0666), 0);
  Status s = check_plugin_path(good_, good_dir());
  ASSERT_FALSE(s);
  EXPECT_NE(s.message().find(good_), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("rule file-not-world-writable"), std::string::npos) << s.message();
}

TEST_F(PluginPath, RefusesADirectoryAndAMissingFile) {
  Status dir = check_plugin_path((root_ / "good").string(), {root_.string()});
  ASSERT_FALSE(dir);
  EXPECT_NE(dir.message().find("rule regular-file"), std::string::npos) << dir.message();
  Status missing = check_plugin_path((root_ / "good" / "nope.so").string(), good_dir());
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.message().find("nope.so': cannot load: cannot open it"), std::string::npos) << missing.message();
}

TEST_F(PluginPath, AnAllowedDirectoryThatDoesNotExistAllowsNothing) {
  Status s = check_plugin_path(good_, {(root_ / "absent").string()});
  ASSERT_FALSE(s);
  EXPECT_NE(s.message().find("rule inside-plugin-dirs"), std::string::npos);
}

TEST_F(PluginPath, ProcessWideDirsDefaultToTheBuildAndInstallDirs) {
  unsetenv("RAWPIPE_PLUGIN_PATH");
  auto defaults = default_plugin_dirs();
  ASSERT_EQ(defaults.size(), 2u);
  EXPECT_TRUE(defaults[0].ends_with("/plugins")) << defaults[0];
  EXPECT_TRUE(defaults[1].ends_with("/rawpipe/filters")) << defaults[1];
  // The environment adds its absolute directories in front; relative ones are ignored.
  setenv("RAWPIPE_PLUGIN_PATH", "/opt/a:relative::/opt/b", 1);
  const auto with_env = default_plugin_dirs();
  unsetenv("RAWPIPE_PLUGIN_PATH");
  ASSERT_EQ(with_env.size(), 4u);
  EXPECT_EQ(with_env[0], "/opt/a");
  EXPECT_EQ(with_env[1], "/opt/b");
  EXPECT_EQ(with_env[2], defaults[0]);
  EXPECT_EQ(plugin_dirs(), defaults);
  set_plugin_dirs(good_dir());
  EXPECT_EQ(plugin_dirs(), good_dir());
  set_plugin_dirs(defaults);
}

// dlopen matches loaded objects by name first: two files must never share a /proc/self/fd name,
// and the same file keeps its name.
TEST_F(PluginPath, EachFileKeepsItsOwnDescriptorName) {
  const std::string second = (root_ / "good" / "g.so").string();
  std::ofstream(second) << "another file";
  chmod(second.c_str(), 0644);
  std::string first_name, second_name, again_name;
  {
    PluginFile a;
    ASSERT_TRUE(check_plugin_path(good_, good_dir(), &a));
    first_name = a.dlopen_path();
  }  // the first descriptor is not reused once its PluginFile is gone
  {
    PluginFile b;
    ASSERT_TRUE(check_plugin_path(second, good_dir(), &b));
    second_name = b.dlopen_path();
  }
  PluginFile c;
  ASSERT_TRUE(check_plugin_path(good_, good_dir(), &c));
  again_name = c.dlopen_path();
  EXPECT_NE(first_name, second_name);
  EXPECT_EQ(first_name, again_name);
  struct stat x {}, y {};
  ASSERT_EQ(stat(again_name.c_str(), &x), 0);
  ASSERT_EQ(stat(good_.c_str(), &y), 0);
  EXPECT_EQ(x.st_ino, y.st_ino);
}

// The policy sits in the filter plugin load path: a refused file never reaches dlopen, an accepted
// one does (these files are not ELF, so dlopen itself then fails, and says so).
TEST_F(PluginPath, FilterPluginLoadAppliesThePolicy) {
  const auto saved = plugin_dirs();
  set_plugin_dirs(good_dir());
  auto refused = FilterPlugin::load(other_, nullptr, {});
  auto reached = FilterPlugin::load(good_, nullptr, {});
  set_plugin_dirs(saved);
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.message().find("rule inside-plugin-dirs"), std::string::npos) << refused.message();
  EXPECT_EQ(refused.message().find("cannot load"), std::string::npos) << refused.message();
  ASSERT_FALSE(reached);
  EXPECT_EQ(reached.message().find("refused"), std::string::npos) << reached.message();
  EXPECT_NE(reached.message().find("cannot load"), std::string::npos) << reached.message();
  EXPECT_NE(reached.message().find(good_), std::string::npos) << reached.message();
}

}  // namespace
}  // namespace rawpipe
