// mlx5 and mana ports need rdma-core at run time (libibverbs and the provider, dlopened), the
// kernel's RDMA side and the interface's RDMA device: the drivers' own preflight
// (pmd/rdma/preflight.hh, run through the auto ladder's probes) says which is missing. MANA also
// gives a vPort either to the kernel netdev or to raw queues, never both.
#include <fmt/format.h>

#include "services/doctor/checks.hh"

namespace rawpipe::doctor {

void check_rdma(const Needs* needs, const HostFacts& h, Report& r) {
  bool wanted = !needs;
  if (needs)
    for (const PortNeed& p : needs->ports) wanted = wanted || p.pmd == "mlx5" || p.pmd == "mana";
  if (!wanted) return;
  std::string devices;
  for (const std::string& d : h.rdma_devices) devices += fmt::format("{}{}", devices.empty() ? "" : ", ", d);
  if (!h.rdma_built) {
    const std::string fix = "install libibverbs-dev and rebuild rawpipe";
    if (needs)
      r.fail("rdma-core", "this binary was built without the rdma-core headers: mlx5 and mana are not in it", fix);
    else
      r.warn("rdma-core", "this binary was built without the rdma-core headers: mlx5 and mana are not in it", fix);
  } else if (!h.ibverbs_error.empty()) {
    const std::string fix = "sudo apt-get install libibverbs1 ibverbs-providers (Debian/Ubuntu; rdma-core elsewhere)";
    if (needs)
      r.fail("rdma-core", h.ibverbs_error, fix);
    else
      r.warn("rdma-core", h.ibverbs_error + " (only mlx5 and mana ports need it)", fix);
  } else {
    r.ok("rdma-core", fmt::format("libibverbs loads; RDMA devices: {}", devices.empty() ? std::string("none") : devices));
  }
  if (!needs) return;
  for (const PortNeed& p : needs->ports) {
    if (p.pmd != "mlx5" && p.pmd != "mana") continue;
    auto it = h.netdevs.find(p.interface);
    if (it == h.netdevs.end() || !it->second.exists) continue;  // interface.cc reported it
    const NetdevFacts& n = it->second;
    if (n.driver != (p.pmd == "mlx5" ? "mlx5_core" : "mana")) continue;  // so did the driver mismatch
    const std::string check = fmt::format("rdma {}", p.interface);
    auto probe = n.probes.find(p.pmd);
    if (probe != n.probes.end() && !probe->second.empty()) {
      r.fail(check, fmt::format("port '{}': the {} preflight fails", p.name, p.pmd), probe->second);
    } else if (probe != n.probes.end()) {
      r.ok(check, fmt::format("port '{}': RDMA device {} port {}, rdma-core and CAP_NET_RAW in place", p.name,
                              n.rdma_devices.empty() ? std::string("?") : n.rdma_devices.front(), n.rdma_port));
    }
    if (p.pmd != "mana") continue;
    const std::string vport = fmt::format("vPort of {} = {} port {} (dev_port {})", p.interface,
                                          n.rdma_devices.empty() ? std::string("<no RDMA device>") : n.rdma_devices.front(),
                                          n.rdma_port, n.rdma_port - 1);
    if (n.up)
      r.fail(fmt::format("mana vport {}", p.interface),
             fmt::format("{} is held by the kernel netdev (the interface is up): raw queues cannot take it", vport),
             fmt::format("sudo ip link set {} down (a secondary NIC, never the one your SSH session uses); keep the "
                         "mana, mana_ib and ib_uverbs modules loaded",
                         p.interface));
    else
      r.ok(fmt::format("mana vport {}", p.interface), fmt::format("{} is free (the netdev is down)", vport));
  }
}

}  // namespace rawpipe::doctor
