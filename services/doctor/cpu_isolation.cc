// An lcore polls without pause; every time the kernel runs something else on its CPU (another
// task, the scheduler tick, RCU callbacks, an interrupt) packets wait and rings fill. Linux
// keeps a CPU to itself when the kernel command line says so: isolcpus (no other task is
// placed there), nohz_full (no periodic tick while one task runs), rcu_nocbs (RCU callbacks run
// elsewhere) and irqaffinity (interrupts default elsewhere). This check compares the lcore CPUs
// of a config with what the running kernel applied, and with where each IRQ is delivered, and
// gives the exact parameters to add.
#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "services/doctor/checks.hh"

namespace rawpipe::doctor {
namespace {

std::vector<int> missing_from(const std::vector<int>& want, const std::vector<int>& have) {
  std::vector<int> out;
  for (int c : want)
    if (!std::binary_search(have.begin(), have.end(), c)) out.push_back(c);
  return out;
}

std::vector<int> united(std::vector<int> a, const std::vector<int>& b) {
  a.insert(a.end(), b.begin(), b.end());
  std::sort(a.begin(), a.end());
  a.erase(std::unique(a.begin(), a.end()), a.end());
  return a;
}

}  // namespace

void check_cpu_isolation(const Needs* needs, const HostFacts& h, Report& r) {
  const std::string check = "cpu isolation";
  // What isolcpus said on the command line counts too (the sysfs file only shows its domain part).
  const std::vector<int> isolated = united(h.isolated_cpus, cmdline_cpus(h.cmdline, "isolcpus", h.online_cpus));
  const std::vector<int> nohz = united(h.nohz_full_cpus, cmdline_cpus(h.cmdline, "nohz_full", h.online_cpus));
  const std::vector<int> nocbs = cmdline_cpus(h.cmdline, "rcu_nocbs", h.online_cpus);
  if (!needs) {
    r.ok(check, fmt::format("isolated CPUs: {}; nohz_full: {}; rcu_nocbs: {}", isolated.empty() ? "none" : format_cpu_list(isolated),
                            nohz.empty() ? "none" : format_cpu_list(nohz), nocbs.empty() ? "none" : format_cpu_list(nocbs)));
    return;
  }
  std::set<int> cpu_set;
  std::set<std::uint16_t> unpinned;
  for (const PortNeed& p : needs->ports)
    for (const LcoreNeed& l : p.lcores) {
      if (l.cpu >= 0) cpu_set.insert(l.cpu);
      else unpinned.insert(l.id);
    }
  if (cpu_set.empty() && unpinned.empty()) return;
  if (!unpinned.empty()) {
    std::string ids;
    for (std::uint16_t id : unpinned) ids += fmt::format("{}{}", ids.empty() ? "" : ", ", id);
    // Not a warning: an unpinned lcore is a choice (tests, shared machines); the way to more is said.
    r.ok(check, fmt::format("lcore {} unpinned: the scheduler moves it and shares its CPU with other tasks; for steady "
                            "latency set cpu = N in [[lcores]] and run doctor again to isolate that CPU", ids));
    if (cpu_set.empty()) return;
  }
  const std::vector<int> lcores(cpu_set.begin(), cpu_set.end());
  const std::string lc = format_cpu_list(lcores);
  const char* cpus_word = lcores.size() == 1 ? "CPU" : "CPUs";
  if (!h.cpus_known) {
    r.warn(check, "the online CPUs could not be read (/sys/devices/system/cpu/online)",
           fmt::format("check by hand that CPUs {} are in isolcpus, nohz_full and rcu_nocbs", lc));
    return;
  }
  const std::vector<int> housekeeping = missing_from(h.online_cpus, lcores);
  if (housekeeping.empty()) {
    r.warn(check, fmt::format("the lcores use every online CPU ({}): the kernel, interrupts and rawpipe's control threads "
                              "must share them", lc),
           "leave at least one CPU without an lcore (CPU 0 is the usual choice)");
    return;
  }
  const std::string hk = format_cpu_list(housekeeping);
  std::vector<std::string> problems, params;
  if (auto m = missing_from(lcores, isolated); !m.empty()) {
    problems.push_back(fmt::format("CPU {} not in isolcpus (other tasks are scheduled there)", format_cpu_list(m)));
    params.push_back(fmt::format("isolcpus=managed_irq,domain,{}", format_cpu_list(united(isolated, lcores))));
  }
  if (auto m = missing_from(lcores, nohz); !m.empty()) {
    problems.push_back(fmt::format("CPU {} not in nohz_full (the scheduler tick interrupts the lcore)", format_cpu_list(m)));
    params.push_back(fmt::format("nohz_full={}", format_cpu_list(united(nohz, lcores))));
  }
  if (auto m = missing_from(lcores, nocbs); !m.empty()) {
    problems.push_back(fmt::format("CPU {} not in rcu_nocbs (RCU callbacks run on it)", format_cpu_list(m)));
    params.push_back(fmt::format("rcu_nocbs={}", format_cpu_list(united(nocbs, lcores))));
  }
  std::vector<int> irqs;
  for (const auto& [irq, cpus] : h.irq_cpus)
    if (std::any_of(cpus.begin(), cpus.end(), [&](int c) { return cpu_set.count(c) != 0; })) irqs.push_back(irq);
  std::string irq_fix;
  if (!irqs.empty()) {
    std::string shown, all;
    for (std::size_t i = 0; i < irqs.size(); ++i) {
      all += fmt::format("{}{}", i ? " " : "", irqs[i]);
      if (i < 8) shown = all;
    }
    problems.push_back(fmt::format("{} IRQ{} delivered to lcore CPUs ({}{})", irqs.size(), irqs.size() == 1 ? "" : "s",
                                   shown, irqs.size() > 8 ? " ..." : ""));
    params.push_back(fmt::format("irqaffinity={}", hk));
    irq_fix = fmt::format("; now, without a reboot: for i in {}; do echo {} > /proc/irq/$i/smp_affinity_list; done "
                          "(IRQs the kernel manages refuse; managed_irq in isolcpus moves them)",
                          all, hk);
  }
  if (problems.empty()) {
    r.ok(check, fmt::format("lcore {} {} in isolcpus, nohz_full and rcu_nocbs, and no IRQ is delivered there; "
                            "the kernel and control threads use CPUs {}", cpus_word, lc, hk));
    return;
  }
  std::string detail = fmt::format("lcore {} {}: ", cpus_word, lc);
  for (std::size_t i = 0; i < problems.size(); ++i) detail += (i ? "; " : "") + problems[i];
  std::string fix = "add to the kernel command line (GRUB_CMDLINE_LINUX in /etc/default/grub, then update-grub and "
                    "reboot):";
  for (const std::string& p : params) fix += " " + p;
  r.warn(check, detail, fix + irq_fix);
}

}  // namespace rawpipe::doctor
