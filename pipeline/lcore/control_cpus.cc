#include "rawpipe/control_cpus.hh"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <cstring>
#include <set>

namespace rawpipe {
namespace {

std::string cpu_text(const std::vector<int>& cpus) {
  std::string out;
  for (std::size_t i = 0; i < cpus.size();) {
    std::size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    out += fmt::format("{}{}", out.empty() ? "" : ",", j == i ? fmt::format("{}", cpus[i]) : fmt::format("{}-{}", cpus[i], cpus[j]));
    i = j + 1;
  }
  return out;
}

// "CPU 3" or "CPUs 1-2".
std::string cpus_text(const std::vector<int>& cpus) {
  return fmt::format("{} {}", cpus.size() == 1 ? "CPU" : "CPUs", cpu_text(cpus));
}

}  // namespace

Result<ControlCpus> keep_control_threads_off_lcores(const Plan& plan) {
  ControlCpus out;
  std::set<int> lcore_set;
  for (const LcorePlan& l : plan.lcores)
    if (l.cpu >= 0 && l.cpu < CPU_SETSIZE) lcore_set.insert(l.cpu);
  out.lcore_cpus.assign(lcore_set.begin(), lcore_set.end());
  if (lcore_set.empty()) {
    out.note = "control threads: no lcore is pinned; they share all CPUs";
    return out;
  }
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (int err = pthread_getaffinity_np(pthread_self(), sizeof allowed, &allowed); err != 0)
    return Status::errorf("control threads: cannot read this thread's CPU affinity: {}", std::strerror(err));
  cpu_set_t rest = allowed;
  for (int c : lcore_set) CPU_CLR(c, &rest);
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &rest)) out.cpus.push_back(c);
  if (out.cpus.empty()) {
    out.note = fmt::format("control threads: share the lcore {}, which are every CPU this process may use; leave "
                           "one CPU without an lcore to keep them apart",
                           cpus_text(out.lcore_cpus));
    return out;
  }
  if (CPU_EQUAL(&rest, &allowed)) {
    out.note = fmt::format("control threads: {} (the lcore {} outside this process's affinity)",
                           cpus_text(out.cpus), cpus_text(out.lcore_cpus));
    return out;
  }
  if (int err = pthread_setaffinity_np(pthread_self(), sizeof rest, &rest); err != 0)
    return Status::errorf("control threads: cannot move off the lcore {} to {}: {}", cpus_text(out.lcore_cpus),
                          cpus_text(out.cpus), std::strerror(err));
  out.applied = true;
  out.note = fmt::format("control threads: {} (off the lcore {})", cpus_text(out.cpus), cpus_text(out.lcore_cpus));
  return out;
}

}  // namespace rawpipe
