// RAM for the pools. Pool::create maps each region anonymously (after trying hugetlb pages) and
// writes every buffer header, so the whole region is faulted in before the first packet: a region
// the overcommit policy refuses fails the run at once ("cannot map"), and one larger than the
// memory the kernel can still hand out gets rawpipe (or a neighbour) killed by the OOM killer
// while the pools fill. Hugetlb-backed pools come from the reserved pages hugepages.cc judges.
#include <fmt/format.h>

#include <algorithm>

#include "services/doctor/checks.hh"

namespace rawpipe::doctor {
namespace {

std::string gib(std::uint64_t bytes) { return fmt::format("{:.1f} GiB", double(bytes) / double(1ull << 30)); }
std::string mib(std::uint64_t bytes) { return fmt::format("{:.1f} MiB", double(bytes) / double(1ull << 20)); }
std::string size(std::uint64_t bytes) { return bytes >= (1ull << 30) ? gib(bytes) : mib(bytes); }

}  // namespace

void check_memory(const Needs* needs, const HostFacts& h, Report& r) {
  if (!h.meminfo_known) {
    r.warn("memory", "cannot read /proc/meminfo: the pools' size is not compared with the RAM",
           "compare the pools' count x buf_size with `free -b` by hand");
    return;
  }
  const std::string have = fmt::format("{} available of {} RAM, {} swap free", size(h.mem_available),
                                        size(h.mem_total), size(h.swap_free));
  if (!needs || needs->pools.empty()) {
    r.ok("memory", have);
    return;
  }
  // Hugetlb pages go to pools in config order, as Pool::create asks for them.
  std::uint64_t huge_left =
      (h.hugepages_free > h.hugepages_reserved ? h.hugepages_free - h.hugepages_reserved : 0) * kHugePageBytes;
  std::uint64_t anon = 0, largest = 0;
  std::string largest_pool, largest_where, pools;
  for (const PoolNeed& p : needs->pools) {
    if (p.huge_pages != HugePages::kNever && h.hugepages_known && p.bytes <= huge_left) {
      huge_left -= p.bytes;
      continue;
    }
    anon += p.bytes;
    pools += fmt::format("{}{} {}", pools.empty() ? "" : ", ", p.name, size(p.bytes));
    if (p.bytes > largest) {
      largest = p.bytes;
      largest_pool = p.name;
      largest_where = p.where;
    }
  }
  if (anon == 0) {
    r.ok("memory", fmt::format("{}; every pool fits on reserved hugepages", have));
    return;
  }
  const std::string shrink = fmt::format("lower count or buf_size of pool '{}' ({})", largest_pool, largest_where);
  // The overcommit policy refuses the mapping itself (mm/util.c __vm_enough_memory).
  if (h.overcommit_mode == 2 && h.committed_as + anon > h.commit_limit) {
    r.fail("memory",
           fmt::format("the pools need {} of anonymous memory ({}) but strict overcommit (vm.overcommit_memory = 2) "
                       "leaves {} to commit (CommitLimit {} minus {} committed): the mapping is refused",
                       size(anon), pools, size(h.commit_limit > h.committed_as ? h.commit_limit - h.committed_as : 0),
                       size(h.commit_limit), size(h.committed_as)),
           shrink + ", or raise vm.overcommit_ratio");
    return;
  }
  if (h.overcommit_mode == 0 && largest > h.mem_total + h.swap_total) {
    r.fail("memory",
           fmt::format("pool '{}' maps {}, more than this machine's {} RAM and {} swap: the kernel refuses the "
                       "mapping (heuristic overcommit)",
                       largest_pool, size(largest), size(h.mem_total), size(h.swap_total)),
           shrink);
    return;
  }
  const std::uint64_t can_get = h.mem_available + h.swap_free;
  if (anon > can_get) {
    r.fail("memory",
           fmt::format("the pools need {} ({}) and touch all of it at start, but only {}: the OOM killer would end "
                       "rawpipe or another process while the pools fill",
                       size(anon), pools, have),
           shrink + ", or free memory first");
    return;
  }
  if (anon > can_get / 4 * 3) {
    r.warn("memory",
           fmt::format("the pools need {} ({}), more than three quarters of the {}: the page cache and other "
                       "processes are squeezed",
                       size(anon), pools, have),
           shrink);
    return;
  }
  r.ok("memory", fmt::format("{}; the pools need {}", have, size(anon)));
}

}  // namespace rawpipe::doctor
