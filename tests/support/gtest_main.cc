// The main() of every GoogleTest program here.
//
// meson reports a test program as skipped only when it exits 77 (the GNU skip code); GoogleTest
// exits 0 when every test called GTEST_SKIP, so a host without root, a NIC or a peer tool would
// show "OK" for tests that never ran. Here a program whose selected tests all skipped exits 77,
// and one where only some skipped still passes but names each skipped test with its reason on
// stderr, which meson keeps in the test log (and prints with --print-errorlogs on failure).
//
// meson has no partial skip. Its test(protocol: 'gtest') does not add one either: in meson 1.0
// (mtest.py, TestRunGTest) the verdict still comes from the exit code alone, and the per-test
// cases only go to meson-logs/testlog.junit.xml, through an XML file the program writes into the
// working directory under its test's name. The lines below are what `meson test` can show.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

namespace {

constexpr int kMesonSkip = 77;

std::string skip_reason(const testing::TestResult& result) {
  for (int i = 0; i < result.total_part_count(); ++i) {
    const testing::TestPartResult& part = result.GetTestPartResult(i);
    if (part.skipped()) {
      std::string why = part.message();
      while (!why.empty() && (why.back() == '\n' || why.back() == ' ')) why.pop_back();
      return why.empty() ? "(no reason given)" : why;
    }
  }
  return "(skipped by its suite's SetUpTestSuite)";
}

}  // namespace

// Pipeline::create takes host-wide instance locks on pinned CPUs and device queues
// (rawpipe/instance_lock.hh). Test programs run in parallel with each other and with whatever
// else runs on the machine, so each gets its own lock directory unless the environment names one;
// a test about a second instance sets RAWPIPE_LOCK_DIR itself for the processes it compares.
struct PrivateLockDir {
  std::string dir;
  PrivateLockDir() {
    if (const char* d = std::getenv("RAWPIPE_LOCK_DIR"); d && *d) return;
    char path[] = "/tmp/rawpipe-test-locks-XXXXXX";
    if (!mkdtemp(path)) return;
    dir = path;
    setenv("RAWPIPE_LOCK_DIR", path, 1);
  }
  ~PrivateLockDir() {
    if (dir.empty()) return;
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
};

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  const PrivateLockDir locks;
  const int status = RUN_ALL_TESTS();
  const testing::UnitTest& unit = *testing::UnitTest::GetInstance();
  const int skipped = unit.skipped_test_count();
  if (skipped == 0) return status;

  for (int s = 0; s < unit.total_test_suite_count(); ++s) {
    const testing::TestSuite& suite = *unit.GetTestSuite(s);
    for (int t = 0; t < suite.total_test_count(); ++t) {
      const testing::TestInfo& test = *suite.GetTestInfo(t);
      if (test.should_run() && test.result()->Skipped())
        std::fprintf(stderr, "skipped: %s.%s: %s\n", suite.name(), test.name(), skip_reason(*test.result()).c_str());
    }
  }
  if (status != 0) return status;
  if (skipped == unit.test_to_run_count()) {
    std::fprintf(stderr, "skipped: all %d tests of this program (reported to meson as a skip, exit %d)\n", skipped,
                 kMesonSkip);
    return kMesonSkip;
  }
  std::fprintf(stderr, "skipped: %d of %d tests; the rest passed\n", skipped, unit.test_to_run_count());
  return status;
}
