// The rawpipe subcommands. Each returns the process exit code.
#pragma once

#include <optional>
#include <string>

namespace rawpipe::app {

struct RunOptions {
  std::string config;
  std::optional<double> duration_s;  // overrides [run] duration
  std::string json_file;             // empty: no JSON summary; "-": stdout
  bool quiet = false;                // only warnings and errors
  bool reasons = false;              // drop and loss reasons after every live line
  double reasons_every_s = 0;        // or every this many seconds (0: never)
};

struct DoctorOptions {
  std::string config;  // empty: check the machine in general
  bool json = false;
};

int run_command(const RunOptions& options);
int doctor_command(const DoctorOptions& options);
int check_command(const std::string& config);
int list_pmds_command();

}  // namespace rawpipe::app
