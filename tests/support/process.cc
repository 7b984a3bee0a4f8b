#include "tests/support/process.hh"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

extern char** environ;

namespace rawpipe::test {

namespace fs = std::filesystem;

std::string slurp(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

pid_t start_process(const std::vector<std::string>& argv, const fs::path& out, const fs::path& err) {
  if (argv.empty()) {
    ADD_FAILURE() << "start_process: no command";
    return -1;
  }
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&fa, 2, err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  pid_t pid = -1;
  const int rc = posix_spawnp(&pid, args[0], &fa, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) {
    ADD_FAILURE() << "cannot start " << argv[0] << ": " << std::strerror(rc);
    return -1;
  }
  return pid;
}

int wait_process(pid_t pid, WaitLimits limits) {
  if (pid <= 0) return -1;
  const auto start = std::chrono::steady_clock::now();
  bool interrupted = false;
  int status = 0;
  while (waitpid(pid, &status, WNOHANG) != pid) {
    // Not yet reaped, so the pid is still this process's child: the signal cannot reach another.
    if (limits.repeat_signal != 0) kill(pid, limits.repeat_signal);
    const auto elapsed = std::chrono::steady_clock::now() - start;
    if (!interrupted && limits.interrupt_after.count() >= 0 && elapsed > limits.interrupt_after) {
      kill(pid, SIGINT);
      interrupted = true;
    }
    if (elapsed > limits.timeout) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      ADD_FAILURE() << "process " << pid << " did not finish within "
                    << std::chrono::duration_cast<std::chrono::seconds>(limits.timeout).count() << " s";
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(limits.repeat_signal != 0 ? 1 : 10));
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

ProcessOutput run_process(const std::vector<std::string>& argv, const fs::path& scratch, WaitLimits limits) {
  const fs::path out = scratch / "stdout", err = scratch / "stderr";
  ProcessOutput o;
  const pid_t pid = start_process(argv, out, err);
  if (pid < 0) return o;
  o.status = wait_process(pid, limits);
  o.out = slurp(out);
  o.err = slurp(err);
  return o;
}

}  // namespace rawpipe::test
