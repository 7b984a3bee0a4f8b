#include "pmd/dpdk/eal.hh"

#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <mutex>
#include <regex>

#include <fmt/ranges.h>
#include <rte_eal.h>
#include <rte_errno.h>

namespace rawpipe::dpdk {
namespace {

std::mutex g_mu;
bool g_started = false;
bool g_started_by_app = false;
std::vector<std::string> g_user_args;  // what the first port asked for
std::vector<std::string> g_full_args;  // what rte_eal_init got
std::string g_failure;                  // rte_eal_init cannot be retried in a process that it failed in

bool has_any(const std::vector<std::string>& args, std::initializer_list<std::string_view> opts) {
  for (const std::string& a : args)
    for (std::string_view o : opts)
      if (a == o || (a.size() > o.size() && a.compare(0, o.size(), o) == 0 && a[o.size()] == '='))
        return true;
  return false;
}

std::vector<std::string> with_defaults(const std::vector<std::string>& user, const std::string& device,
                                       bool device_is_pci) {
  std::vector<std::string> args = user;
  if (!has_any(args, {"--no-telemetry", "--telemetry"})) args.push_back("--no-telemetry");
  if (!has_any(args, {"--in-memory", "--no-shconf", "--file-prefix", "--proc-type"}))
    args.push_back(has_any(args, {"--no-huge"}) ? "--no-shconf" : "--in-memory");
  if (!has_any(args, {"-l", "-c", "--lcores"})) {
    // The main lcore is this control thread; pick a CPU it may actually run on (taskset, cgroups).
    cpu_set_t set;
    CPU_ZERO(&set);
    int cpu = 0;
    if (pthread_getaffinity_np(pthread_self(), sizeof(set), &set) == 0)
      for (int c = 0; c < CPU_SETSIZE; ++c)
        if (CPU_ISSET(c, &set)) {
          cpu = c;
          break;
        }
    args.push_back("-l");
    args.push_back(std::to_string(cpu));
  }
  if (!has_any(args, {"-a", "--allow", "-b", "--block", "--no-pci"})) {
    if (device_is_pci) {
      args.push_back("-a");
      args.push_back(device);
    } else {
      args.push_back("--no-pci");
    }
  }
  return args;
}

}  // namespace

bool looks_like_pci(const std::string& device) {
  static const std::regex kPci(R"(^([0-9a-fA-F]{4,8}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7](,.*)?$)");
  return std::regex_match(device, kPci);
}

std::vector<std::string> eal_args_in_use() {
  std::lock_guard lock(g_mu);
  return g_full_args;
}

Status eal_acquire(const std::vector<std::string>& args, const std::string& device, bool device_is_pci) {
  std::lock_guard lock(g_mu);
  if (!g_failure.empty())
    return Status::errorf("{} (the EAL cannot be started twice in one process; restart after fixing it)", g_failure);
  if (g_started) {
    if (args.empty() || args == g_user_args || g_started_by_app) return Status::ok();
    return Status::errorf(
        "the DPDK EAL already runs in this process with eal_args [{}]; it starts once per process and every dpdk "
        "port shares it: give the same eal_args (or none) here and name this port's device with 'device'",
        fmt::join(g_user_args, ", "));
  }

  // The EAL may keep pointers into argv, so the strings and the array live as long as the process.
  static std::string prog = "rawpipe";
  static std::vector<std::string> full;
  static std::vector<char*> argv;
  full = with_defaults(args, device, device_is_pci);
  argv.clear();
  argv.push_back(prog.data());
  for (std::string& a : full) argv.push_back(a.data());
  argv.push_back(nullptr);

  // rte_eal_init pins the calling thread to the main lcore's CPU, and threads created later inherit
  // that mask; give this thread its mask back so lcores and consumers are placed by rawpipe's plan.
  cpu_set_t saved;
  bool have_saved = pthread_getaffinity_np(pthread_self(), sizeof(saved), &saved) == 0;
  int rc = rte_eal_init(static_cast<int>(argv.size() - 1), argv.data());
  int err = rte_errno;
  if (have_saved) (void)pthread_setaffinity_np(pthread_self(), sizeof(saved), &saved);
  optind = 1;  // the EAL parses with getopt; leave it clean for whoever parses next

  if (rc < 0) {
    if (err == EALREADY) {
      // The embedding application runs the EAL itself; use it as it is.
      g_started = true;
      g_started_by_app = true;
      return Status::ok();
    }
    g_failure = fmt::format(
        "rte_eal_init failed ({}) with arguments [{}]; without reserved hugepages add \"--no-huge\" to eal_args, "
        "and see the EAL messages above for the exact cause",
        rte_strerror(err), fmt::join(full, " "));
    return Status::error(g_failure);
  }
  g_started = true;
  g_user_args = args;
  g_full_args = full;
  return Status::ok();
}

}  // namespace rawpipe::dpdk
