// The sample configs under configs/, for the tests that run one test per sample: the files in
// order, and a test name made from each file's stem (GoogleTest allows only [A-Za-z0-9_]).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <string>
#include <vector>

#include "tests/support/build_tree.hh"

namespace rawpipe::test {

inline std::vector<std::filesystem::path> sample_configs() {
  std::vector<std::filesystem::path> out;
  for (const auto& e : std::filesystem::directory_iterator(source_dir() / "configs"))
    if (e.path().extension() == ".toml") out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

inline std::string sample_test_name(const ::testing::TestParamInfo<std::filesystem::path>& info) {
  std::string name = info.param.stem().string();
  for (char& c : name)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return name;
}

}  // namespace rawpipe::test
