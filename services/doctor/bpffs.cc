// The af_xdp port attaches its program through a bpf_link and needs no bpffs. libxdp-based tools
// (xdp-loader, other programs meant to share the interface through a dispatcher) pin under
// /sys/fs/bpf; without it they attach alone, so nothing can share the interface with them.
#include <fmt/format.h>

#include "services/doctor/checks.hh"

namespace rawpipe::doctor {

void check_bpffs(const Needs* needs, const HostFacts& h, Report& r) {
  bool wanted = !needs;
  if (needs)
    for (const PortNeed& p : needs->ports) wanted = wanted || p.pmd == "af_xdp" || p.pmd == "auto";
  if (!wanted) return;
  if (const MountEntry* m = find_mount(h.mounts, "bpf", "/sys/fs/bpf")) {
    r.ok("bpffs", fmt::format("mounted at {}", m->point));
    return;
  }
  r.warn("bpffs",
         "no BPF filesystem at /sys/fs/bpf: rawpipe does not need it (its XDP program is attached through a "
         "bpf_link), but libxdp tools cannot pin a dispatcher, so no XDP program can share the interface",
         "sudo mount -t bpf bpf /sys/fs/bpf (persist: 'bpf /sys/fs/bpf bpf defaults 0 0' in /etc/fstab)");
}

}  // namespace rawpipe::doctor
