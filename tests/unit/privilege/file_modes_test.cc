// Files rawpipe creates that hold traffic or counters are private (0600) whatever the umask:
// the shared-memory stats segment (pipeline/ops) and capture files (pipeline/capture), also when
// a capture file already existed with a wider mode.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "pipeline/capture/writer.hh"
#include "rawpipe/shm_stats.hh"

namespace rawpipe {
namespace {

namespace fs = std::filesystem;

class Umask {
 public:
  explicit Umask(mode_t m) : old_(umask(m)) {}
  ~Umask() { umask(old_); }

 private:
  mode_t old_;
};

mode_t mode_of(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(stat(path.c_str(), &st), 0) << path;
  return st.st_mode & 07777;
}

class FileModes : public ::testing::TestWithParam<mode_t> {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("rawpipe-modes-" + std::to_string(getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_P(FileModes, StatsSegmentIs0600) {
  Umask u(GetParam());
  auto w = ops::ShmStatsWriter::create("privilege-modes");
  ASSERT_TRUE(w) << w.message();
  EXPECT_EQ(mode_of(w->path()), 0600u) << "umask " << std::oct << GetParam();
}

TEST_P(FileModes, CaptureFilesAre0600) {
  Umask u(GetParam());
  for (auto format : {CaptureFormat::kPcap, CaptureFormat::kPcapng}) {
    const std::string path = (dir_ / (format == CaptureFormat::kPcap ? "a.pcap" : "a.pcapng")).string();
    auto w = CaptureWriter::create(path, format, 128);
    ASSERT_TRUE(w) << w.message();
    EXPECT_EQ(mode_of(path), 0600u) << path << " umask " << std::oct << GetParam();
  }
}

TEST_P(FileModes, AnExistingWiderCaptureFileBecomes0600) {
  Umask u(GetParam());
  const std::string path = (dir_ / "old.pcap").string();
  std::ofstream(path) << "old";
  ASSERT_EQ(chmod(path.c_str(), 0666), 0);
  auto w = CaptureWriter::create(path, CaptureFormat::kPcap, 128);
  ASSERT_TRUE(w) << w.message();
  EXPECT_EQ(mode_of(path), 0600u);
}

// 0: nothing masked (the risky case); 022 the usual one; 0777: everything masked (O_CREAT alone
// would leave a file nobody can read, not even its owner).
INSTANTIATE_TEST_SUITE_P(Umasks, FileModes, ::testing::Values(mode_t{0}, mode_t{022}, mode_t{0777}));

}  // namespace
}  // namespace rawpipe
