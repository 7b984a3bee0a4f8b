// Pinned memory: an AF_XDP UMEM and an ibv_reg_mr region are charged against RLIMIT_MEMLOCK
// (the UMEM to the user's locked_vm, shared by all its processes) unless the process has
// CAP_IPC_LOCK. Each port registers its whole pool region, so two ports on one pool pin it twice.
#include <linux/capability.h>

#include <fmt/format.h>

#include "services/doctor/checks.hh"

namespace rawpipe::doctor {
namespace {

std::string mib(std::uint64_t bytes) {
  return bytes == kUnlimited ? std::string("unlimited") : fmt::format("{:.1f} MiB", double(bytes) / (1 << 20));
}

}  // namespace

void check_memlock(const Needs* needs, const HostFacts& h, Report& r) {
  const bool ipc_lock = h.caps_known && h.caps.has(CAP_IPC_LOCK);
  std::uint64_t need = 0;
  std::string who;
  bool only_auto = true;
  if (needs)
    for (const PortNeed& p : needs->ports) {
      if (!(p.pmd == "af_xdp" || p.pmd == "mlx5" || p.pmd == "mana" || p.pmd == "auto") || !p.pool) continue;
      need += p.pool->bytes;
      who += fmt::format("{}{} ({} over pool {})", who.empty() ? "" : ", ", p.name, p.pmd, p.pool->name);
      only_auto = only_auto && p.pmd == "auto";
    }
  const std::string limit = fmt::format("RLIMIT_MEMLOCK {} (hard {})", mib(h.memlock_soft), mib(h.memlock_hard));
  if (!needs) {
    r.ok("memlock", fmt::format("{}{}", limit, ipc_lock ? "; CAP_IPC_LOCK held, so the limit does not apply" : ""));
    return;
  }
  if (need == 0) {
    r.ok("memlock", fmt::format("{}; no port pins pool memory", limit));
    return;
  }
  if (ipc_lock) {
    r.ok("memlock", fmt::format("CAP_IPC_LOCK held: {} of pinned pool memory for {} is not limited", mib(need), who));
    return;
  }
  if (h.memlock_soft != kUnlimited && h.memlock_soft < need) {
    const std::uint64_t kib = (need + 1023) / 1024 + 1024;  // rings and maps come on top
    std::string fix = fmt::format(
        "raise the limit before starting rawpipe: `ulimit -l {}` (or `ulimit -l unlimited`; the hard limit is {}; "
        "systemd: LimitMEMLOCK=infinity; /etc/security/limits.conf: '<user> - memlock unlimited'), or grant "
        "CAP_IPC_LOCK: sudo setcap {}+ep {}",
        kib, mib(h.memlock_hard), config_setcap_caps(needs), h.binary.empty() ? std::string("$(command -v rawpipe)") : h.binary);
    const std::string detail = fmt::format("{} but {} pin {} (AF_XDP UMEM / ibv_reg_mr)", limit, who, mib(need));
    if (only_auto)
      r.warn("memlock", detail + "; pmd = \"auto\" falls back to af_packet", fix);
    else
      r.fail("memlock", detail, fix);
    return;
  }
  r.ok("memlock", fmt::format("{} covers the {} {} pin (other processes of this user share the limit)", limit,
                              mib(need), who));
}

}  // namespace rawpipe::doctor
