// rawpipe exec: run an unmodified program with its UDP sockets on rawpipe, the way `onload` and
// `vma` wrap one: put librawpipe-preload.so in LD_PRELOAD, pass the settings in the environment
// the library reads, and exec the program (same pid, same stdio, its exit code).
#include <fmt/core.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "commands.hh"

namespace rawpipe::app {
namespace {

// The library beside this binary's build tree first (running from the build), then the
// installed one.
std::string preload_library() {
  if (const char* env = std::getenv("RAWPIPE_PRELOAD_LIB"); env && *env) return env;
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  const std::filesystem::path build = RAWPIPE_PRELOAD_BUILD_PATH;
  if (!ec && self.parent_path().parent_path().parent_path() == build.parent_path().parent_path() &&
      std::filesystem::exists(build))
    return build.string();
  return RAWPIPE_PRELOAD_INSTALL_PATH;
}

}  // namespace

int exec_command(const ExecOptions& o) {
  if (o.argv.empty()) {
    fmt::print(stderr, "rawpipe exec: no program given (rawpipe exec [--config F | --interface IF] -- program args)\n");
    return 2;
  }
  const std::string lib = preload_library();
  if (access(lib.c_str(), R_OK) != 0) {
    fmt::print(stderr, "rawpipe exec: cannot read the preload library {}: {} (set RAWPIPE_PRELOAD_LIB)\n", lib,
               std::strerror(errno));
    return 2;
  }
  if (!o.config.empty()) {
    const std::string abs = std::filesystem::absolute(o.config).string();
    setenv("RAWPIPE_CONFIG", abs.c_str(), 1);
  }
  if (!o.interface.empty()) setenv("RAWPIPE_INTERFACE", o.interface.c_str(), 1);
  if (!o.offload.empty()) setenv("RAWPIPE_OFFLOAD", o.offload.c_str(), 1);
  if (o.no_lcore) {
    if (!o.config.empty()) {
      fmt::print(stderr, "rawpipe exec: --no-lcore goes with --interface; with --config, give the config's [[lcores]] "
                         "thread = false\n");
      return 2;
    }
    setenv("RAWPIPE_LCORE", "none", 1);
  }
  std::string preload = lib;
  if (const char* old = std::getenv("LD_PRELOAD"); old && *old) preload += std::string(":") + old;
  setenv("LD_PRELOAD", preload.c_str(), 1);
  std::vector<char*> args;
  for (const std::string& a : o.argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  execvp(args[0], args.data());
  fmt::print(stderr, "rawpipe exec: cannot run {}: {}\n", o.argv[0], std::strerror(errno));
  return errno == ENOENT ? 127 : 126;
}

}  // namespace rawpipe::app
