#include "tests/support/scratch_dir.hh"

#include <unistd.h>

#include <algorithm>
#include <string>

#include <gtest/gtest.h>

namespace rawpipe::test {

std::filesystem::path make_scratch_dir(std::string_view prefix) {
  std::string test = ::testing::UnitTest::GetInstance()->current_test_info()->name();
  std::replace(test.begin(), test.end(), '/', '_');
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / (std::string(prefix) + "-" + std::to_string(getpid()) + "-" + test);
  // A directory of the same pid and name can only be left from a pid reused since: not ours.
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

}  // namespace rawpipe::test
