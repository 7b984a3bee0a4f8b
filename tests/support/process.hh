// Child processes for the tests that run the rawpipe binary or a tool (tshark, ip netns exec):
// starting a command with its output in files, waiting with a time limit.
//
// Output goes to files rather than pipes so a test can read what a still-running process has
// printed so far (its stats lines, the line it prints after dropping privileges) and so that a
// failure message can quote it after the process is gone.
//
// A failure to start (naming the command) and a time-out (naming the pid) are test failures
// (ADD_FAILURE); the calls still return, so the test can print what the process wrote.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

#include "tests/support/build_tree.hh"

namespace rawpipe::test {

// The whole file, or "" when it cannot be read.
std::string slurp(const std::filesystem::path& path);

// Starts argv (argv[0] a path, or a name looked up in PATH) with stdout and stderr truncated into
// the two files. Returns the pid, or -1 after adding a test failure.
pid_t start_process(const std::vector<std::string>& argv, const std::filesystem::path& out,
                    const std::filesystem::path& err);

struct WaitLimits {
  std::chrono::milliseconds timeout{std::chrono::seconds(60)};
  // Sends SIGINT once this long has passed (the way a person stops `rawpipe run`); negative: never.
  std::chrono::milliseconds interrupt_after{-1};
  // Sent again every millisecond until the process ends (0: none): a stop repeated for as long as
  // the process takes to go, so that one lands in every stage of its exit.
  int repeat_signal = 0;
};

// The exit status, 128 + the signal that ended it, or -1 when the time limit ran out (the process
// is then killed and reaped, and a test failure added).
int wait_process(pid_t pid, WaitLimits limits = {});

struct ProcessOutput {
  int status = -1;  // as wait_process
  std::string out, err;
};

// start_process + wait_process, with the output in scratch/stdout and scratch/stderr.
ProcessOutput run_process(const std::vector<std::string>& argv, const std::filesystem::path& scratch,
                          WaitLimits limits = {});

}  // namespace rawpipe::test
