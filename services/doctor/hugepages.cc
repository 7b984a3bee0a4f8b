// Pools map 2 MiB hugepages anonymously (MAP_HUGETLB: no hugetlbfs mount needed) unless
// huge_pages = "never"; "require" fails without them, "auto" falls back to transparent huge
// pages. DPDK's EAL is different: it maps hugepages through a hugetlbfs mount it can write.
#include <unistd.h>

#include <fmt/format.h>

#include "services/doctor/checks.hh"

namespace rawpipe::doctor {

void check_hugepages(const Needs* needs, const HostFacts& h, Report& r) {
  const std::uint64_t available = h.hugepages_free > h.hugepages_reserved ? h.hugepages_free - h.hugepages_reserved : 0;
  const std::string have = fmt::format("{} of {} 2 MiB hugepages free ({} reserved by others)", h.hugepages_free,
                                       h.hugepages_total, h.hugepages_reserved);
  if (!h.hugepages_known) {
    r.warn("hugepages", "cannot read /sys/kernel/mm/hugepages/hugepages-2048kB (no hugepage support?)",
           "pools will use transparent huge pages; set huge_pages = \"never\" or \"auto\" on every pool");
  } else {
    std::uint64_t need_require = 0, need_auto = 0;
    std::string require_pools, auto_pools;
    if (needs)
      for (const PoolNeed& p : needs->pools) {
        const std::uint64_t pages = p.bytes / kHugePageBytes;
        if (p.huge_pages == HugePages::kRequire) {
          need_require += pages;
          require_pools += fmt::format("{}{} ({} pages, {})", require_pools.empty() ? "" : ", ", p.name, pages, p.where);
        } else if (p.huge_pages == HugePages::kAuto) {
          need_auto += pages;
          auto_pools += fmt::format("{}{} ({} pages)", auto_pools.empty() ? "" : ", ", p.name, pages);
        }
      }
    const std::uint64_t need = need_require + need_auto;
    auto reserve_fix = [&](std::uint64_t pages) {
      const std::uint64_t target = h.hugepages_total + (pages > available ? pages - available : 0);
      return fmt::format("reserve them: echo {} | sudo tee /sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages "
                         "(persist with vm.nr_hugepages = {} in /etc/sysctl.d/)",
                         target, target);
    };
    if (!needs) {
      if (available == 0)
        r.warn("hugepages", have + "; pools fall back to transparent huge pages (more TLB misses, no guaranteed "
                                   "contiguity)",
               reserve_fix(1024) + "; 1024 pages = 2 GiB, size it to your pools");
      else
        r.ok("hugepages", have);
    } else if (need_require > available) {
      r.fail("hugepages", fmt::format("{}; pools with huge_pages = \"require\" need {}: {}", have, need_require, require_pools),
             reserve_fix(need) + ", or set huge_pages = \"auto\" on those pools");
    } else if (need > available) {
      r.warn("hugepages", fmt::format("{}; pools with huge_pages = \"auto\" want {} ({}) and fall back to transparent "
                                      "huge pages for the rest",
                                      have, need, auto_pools),
             reserve_fix(need));
    } else {
      r.ok("hugepages", fmt::format("{}; the pools need {}", have, need));
    }
  }

  bool dpdk = false;
  if (needs)
    for (const PortNeed& p : needs->ports) dpdk = dpdk || p.pmd == "dpdk";
  if (!dpdk) return;
  const MountEntry* m = find_mount(h.mounts, "hugetlbfs");
  if (!m) {
    r.fail("hugetlbfs", "the dpdk port's EAL maps hugepages through a hugetlbfs mount and none is mounted",
           "sudo mkdir -p /dev/hugepages && sudo mount -t hugetlbfs nodev /dev/hugepages");
  } else if (access(m->point.c_str(), W_OK | X_OK) != 0) {
    r.fail("hugetlbfs", fmt::format("{} is mounted but this user cannot create files in it", m->point),
           fmt::format("run as root, or remount it with this user's uid: sudo mount -o remount,uid={} {}", getuid(), m->point));
  } else {
    r.ok("hugetlbfs", fmt::format("mounted at {} and writable", m->point));
  }
}

}  // namespace rawpipe::doctor
