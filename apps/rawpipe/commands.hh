// The rawpipe subcommands. Each returns the process exit code.
#pragma once

#include <optional>
#include <string>

namespace rawpipe::app {

struct RunOptions {
  std::string config;
  std::optional<double> duration_s;  // overrides [run] duration
  std::string json_file;             // empty: no JSON summary
};

int run_command(const RunOptions& options);
int check_command(const std::string& config);
int list_pmds_command();

}  // namespace rawpipe::app
