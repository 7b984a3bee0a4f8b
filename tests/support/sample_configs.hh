// The sample configs under configs/, for the tests that run one test per sample: the files in
// order, a test name made from each file's stem (GoogleTest allows only [A-Za-z0-9_]), and a
// sample's text with its output files moved into a test's directory.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <iterator>
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

// The sample's text with every "/tmp/" made "DIR/": the samples write their captures and transmit
// files to fixed names under /tmp for a user to open, which a test run must neither leave behind
// nor share with another run.
inline std::string sample_text_writing_into(const std::filesystem::path& file, const std::filesystem::path& dir) {
  std::ifstream in(file);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string to = dir.string() + "/";
  for (std::size_t at = 0; (at = text.find("/tmp/", at)) != std::string::npos; at += to.size()) text.replace(at, 5, to);
  return text;
}

}  // namespace rawpipe::test
