// A scratch directory of the running GoogleTest test's own, for its configs, outputs and lock files.
#pragma once

#include <filesystem>
#include <string_view>

namespace rawpipe::test {

// Creates, empty, TMPDIR/PREFIX-PID-TEST and returns it; TEST is the running test's name, with the
// '/' of a parameterised test ("Name/0") made '_': as a path separator it would nest the directory
// one level down, and removing the test's directory would leave its parent behind in TMPDIR.
std::filesystem::path make_scratch_dir(std::string_view prefix);

}  // namespace rawpipe::test
