// libxdp pins its multi-program dispatcher and our program under /sys/fs/bpf. Without bpffs it
// cannot, so our program attaches alone: it works, but no other XDP program can share the
// interface and a crashed run leaves the program attached until the next start replaces it.
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
         "no BPF filesystem at /sys/fs/bpf: libxdp cannot pin its dispatcher, so the XDP program attaches alone "
         "(no other XDP program can share the interface)",
         "sudo mount -t bpf bpf /sys/fs/bpf (persist: 'bpf /sys/fs/bpf bpf defaults 0 0' in /etc/fstab)");
}

}  // namespace rawpipe::doctor
