// Output files named on the command line are tried before a run starts, so a typo in a path costs
// a second, not the whole run.
#pragma once

#include <string>

namespace rawpipe::app {

// "" when `path` can be written (an existing file opened for writing, or a new file created and
// removed again); otherwise what failed and why, naming the path.
std::string output_path_problem(const std::string& path);

}  // namespace rawpipe::app
