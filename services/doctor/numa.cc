// A NIC sits on one NUMA node; an lcore polling it from another node pays a cross-node hop for
// every descriptor and packet. The fix is to pin the lcore to a CPU of the NIC's node.
#include <fmt/format.h>

#include <set>

#include "services/doctor/checks.hh"

namespace rawpipe::doctor {

void check_numa(const Needs* needs, const HostFacts& h, Report& r) {
  std::map<int, std::vector<int>> node_cpus;
  for (const auto& [cpu, node] : h.cpu_node) node_cpus[node].push_back(cpu);
  if (!needs) {
    for (const auto& [name, n] : h.netdevs)
      if (n.exists && n.numa_node >= 0)
        r.ok(fmt::format("numa {}", name), fmt::format("on node {} (CPUs {})", n.numa_node,
                                                       format_cpu_list(node_cpus[n.numa_node])));
    return;
  }
  std::set<std::string> placeless;  // interfaces already reported as having no node to match
  for (const PortNeed& p : needs->ports) {
    auto it = h.netdevs.find(p.interface);
    if (p.interface.empty() || it == h.netdevs.end() || !it->second.exists) continue;
    const int node = it->second.numa_node;
    const std::string check = fmt::format("numa {}", p.interface);
    if (node < 0 || node_cpus.size() < 2) {
      if (!placeless.insert(p.interface).second) continue;
      r.ok(check, node < 0 ? fmt::format("{} reports no NUMA node (virtual device or one-node machine)", p.interface)
                           : fmt::format("{} is on node {}, the only node", p.interface, node));
      continue;
    }
    const std::string cpus = format_cpu_list(node_cpus[node]);
    bool all_fine = true;
    for (const LcoreNeed& l : p.lcores) {
      if (l.cpu < 0) {
        all_fine = false;
        r.warn(check, fmt::format("lcore {} polls port '{}' unpinned; {} is on node {}", l.id, p.name, p.interface, node),
               fmt::format("set cpu = <one of {}> in [[lcores]] id {}", cpus, l.id));
        continue;
      }
      auto cn = h.cpu_node.find(l.cpu);
      if (cn != h.cpu_node.end() && cn->second != node) {
        all_fine = false;
        r.warn(check,
               fmt::format("lcore {} on CPU {} (node {}) polls port '{}', whose NIC {} is on node {}: every packet "
                           "crosses the interconnect",
                           l.id, l.cpu, cn->second, p.name, p.interface, node),
               fmt::format("set cpu = <one of {}> in [[lcores]] id {}", cpus, l.id));
      }
    }
    if (all_fine) r.ok(check, fmt::format("{} is on node {}; the lcores polling it run there", p.interface, node));
  }
}

}  // namespace rawpipe::doctor
