#include <fmt/format.h>

#include <algorithm>

#include "services/doctor/checks.hh"

namespace rawpipe::doctor {

GatherOptions gather_options_for(const Needs* needs) {
  GatherOptions o;
  if (!needs) {
    o.all_interfaces = true;
    return o;
  }
  for (const PortNeed& p : needs->ports) {
    if (p.interface.empty() || !pmd_uses_interface(p.pmd)) continue;
    auto& probes = o.interfaces[p.interface];
    if (p.pmd == "mlx5" || p.pmd == "auto") probes.push_back("mlx5");
    if (p.pmd == "mana" || p.pmd == "auto") probes.push_back("mana");
  }
  for (const TapNeed& t : needs->taps)
    if (std::find(o.tap_dirs.begin(), o.tap_dirs.end(), t.dir) == o.tap_dirs.end()) o.tap_dirs.push_back(t.dir);
  o.metrics_listen = needs->metrics_listen;
  o.run_user = needs->run_user;
  o.run_group = needs->run_group;
  return o;
}

Report run_checks(const Needs* needs, const HostFacts& host) {
  Report r;
  check_capabilities(needs, host, r);
  check_memlock(needs, host, r);
  check_hugepages(needs, host, r);
  check_memory(needs, host, r);
  check_interfaces(needs, host, r);
  check_xdp_program(needs, host, r);
  check_bpffs(needs, host, r);
  check_rdma(needs, host, r);
  check_numa(needs, host, r);
  check_cpu_isolation(needs, host, r);
  check_checksum_offload(needs, host, r);
  check_taps(needs, host, r);
  check_metrics_port(needs, host, r);
  check_paths(needs, host, r);
  check_run_user(needs, host, r);
  return r;
}

}  // namespace rawpipe::doctor
