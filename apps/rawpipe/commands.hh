// The rawpipe subcommands. Each returns the process exit code.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace rawpipe::app {

struct RunOptions {
  std::string config;
  std::optional<double> duration_s;  // overrides [run] duration
  std::string json_file;             // empty: no JSON summary; "-": stdout
  bool quiet = false;                // only warnings and errors
  bool reasons = false;              // drop and loss reasons after every live line
  double reasons_every_s = 0;        // or every this many seconds (0: never)
};

// rawpipe gen (gen.cc).
struct GenOptions {
  std::string config;
  std::string port;                     // transmit on this port
  std::string source;                   // frames from this port's rx queue 0; empty: the only synth port
  std::uint16_t queue = 0;              // tx queue of `port`
  double rate_pps = 0;                  // 0: flat out
  std::uint64_t count = 0;              // 0: until the duration ends or Ctrl-C
  double duration_s = 0;                // 0: until the count is sent or Ctrl-C
  double interval_s = 1.0;              // seconds between rate lines
  std::optional<int> cpu;               // unset: the cpu of the config's lcore polling the source
  std::optional<std::uint16_t> burst;   // unset: that lcore's burst
  std::string json_file;
};

struct DoctorOptions {
  std::string config;  // empty: check the machine in general
  bool json = false;
};

// rawpipe exec: the program and its arguments under librawpipe-preload.so.
struct ExecOptions {
  std::string config;     // RAWPIPE_CONFIG
  std::string interface;  // RAWPIPE_INTERFACE
  std::string offload;    // RAWPIPE_OFFLOAD rules
  bool no_lcore = false;  // RAWPIPE_LCORE=none
  std::vector<std::string> argv;
};

struct ConfigRefOptions {
  std::string which;  // a section or driver name; empty: all
  bool markdown = false;
};

struct CheckOptions {
  std::string config;
  std::string json_file;  // "-": stdout; empty: no JSON
};

int run_command(const RunOptions& options);
int config_ref_command(const ConfigRefOptions& options);
int exec_command(const ExecOptions& options);
int doctor_command(const DoctorOptions& options);
int check_command(const CheckOptions& options);
int list_pmds_command();
int gen_command(const GenOptions& options);

}  // namespace rawpipe::app
