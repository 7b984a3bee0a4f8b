// Where the build and source trees are, for tests that run the built binaries or read the sample
// configs. Found from the test's own executable, so a test works whatever directory it runs in
// (meson test, a hand run from anywhere, the sanitizer builds of tools/test).
#pragma once

#include <filesystem>

namespace rawpipe::test {

struct BuildDirs {
  std::filesystem::path source, build;
};

// The meson build directory this test binary lives in (the first directory above it with
// meson-info) and the source directory meson-info names; empty paths when there is none.
BuildDirs build_dirs();
std::filesystem::path build_dir();
std::filesystem::path source_dir();
// <build>/apps/rawpipe/rawpipe (which may not be built).
std::filesystem::path rawpipe_binary();

}  // namespace rawpipe::test
