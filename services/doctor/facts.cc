#include "services/doctor/facts.hh"

#include <fcntl.h>
#include <net/if.h>
#include <pwd.h>
#include <sys/resource.h>
#include <sys/statvfs.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "rawpipe/privilege.hh"
#include "services/doctor/listen_probe.hh"
#include "services/doctor/peer.hh"

#if defined(RAWPIPE_HAVE_RDMA)
#include "pmd/rdma/discovery.hh"
#include "pmd/rdma/loader.hh"
#endif
#if defined(RAWPIPE_HAVE_PMD_AF_XDP)
#include "pmd/af_xdp/installed.hh"
#include "pmd/af_xdp/program.hh"
#endif
#if defined(RAWPIPE_HAVE_PMD_MLX5)
#include "pmd/mlx5/probe.hh"
#endif
#if defined(RAWPIPE_HAVE_PMD_MANA)
#include "pmd/mana/probe.hh"
#endif

namespace rawpipe::doctor {
namespace {

namespace fs = std::filesystem;

std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::uint64_t sysfs_u64(const fs::path& p, bool& ok) {
  auto v = parse_sysfs_int(slurp(p));
  if (!v || *v < 0) {
    ok = false;
    return 0;
  }
  return static_cast<std::uint64_t>(*v);
}

std::string run_probe(const std::string& rung, const std::string& ifname) {
  (void)ifname;
#if defined(RAWPIPE_HAVE_PMD_MLX5)
  if (rung == "mlx5") return probe_mlx5(ifname).message();
#endif
#if defined(RAWPIPE_HAVE_PMD_MANA)
  if (rung == "mana") return probe_mana(ifname).message();
#endif
  return fmt::format("the {} driver is not built into this binary", rung);
}

DirFacts dir_facts(const std::string& dir) {
  DirFacts d;
  std::error_code ec;
  const fs::file_status st = fs::status(dir, ec);
  d.exists = fs::exists(st);
  d.is_dir = fs::is_directory(st);
  if (!d.exists) {
    d.error = ec ? ec.message() : std::string("No such file or directory");
    return d;
  }
  if (!d.is_dir) {
    d.error = "not a directory";
    return d;
  }
  // Effective ids, as open(O_CREAT) will use them (root passes unless the filesystem is read-only).
  d.writable = faccessat(AT_FDCWD, dir.c_str(), W_OK | X_OK, AT_EACCESS) == 0;
  if (!d.writable) d.error = std::strerror(errno);
  struct statvfs v {};
  if (statvfs(dir.c_str(), &v) == 0) {
    d.space_known = true;
    d.free_bytes = std::uint64_t(v.f_bavail) * v.f_frsize;
  }
  return d;
}

NetdevFacts netdev_facts(const std::string& name, const std::vector<std::string>& probes, const GatherOptions& o) {
  NetdevFacts f;
  f.name = name;
  auto flags = host::interface_flags(name);
  if (!flags) {
    f.error = flags.message();
    return f;
  }
  f.exists = true;
  f.mtu = flags->mtu;
  f.up = flags->up;
#if defined(RAWPIPE_HAVE_PMD_AF_XDP)
  if (auto x = af_xdp::installed_program(static_cast<int>(if_nametoindex(name.c_str()))); !x) {
    f.xdp_query_error = x.message();
  } else if (x.value()) {
    f.xdp_prog_id = x.value()->id;
    f.xdp_prog_name = x.value()->name;
    f.xdp_prog_rawpipe = x.value()->is_rawpipe();
    f.xdp_prog_holders = af_xdp::describe_holders(x.value()->holders);
  }
#endif
#if defined(RAWPIPE_HAVE_RDMA)
  if (auto d = rdma::discover_netdev(name, o.sysfs_root)) {
    f.driver = d->driver;
    f.rdma_devices = d->rdma_devices;
    f.rdma_port = d->rdma_port;
  }
#endif
  if (f.driver.empty()) {
    std::error_code ec;
    fs::path target = fs::read_symlink(fs::path(o.sysfs_root) / "class/net" / name / "device/driver", ec);
    f.driver = !ec ? target.filename().string() : std::string();
  }
#if defined(RAWPIPE_HAVE_RDMA)
  if (f.driver.empty()) f.driver = rdma::ethtool_driver(name);
#endif
  if (auto ch = host::ethtool_channels(name)) {
    f.channels_known = true;
    f.channels = ch.value();
  } else {
    f.channels_error = ch.message();
  }
  f.numa_node = host::netdev_numa_node(name, o.sysfs_root);
  for (const std::string& rung : probes) f.probes[rung] = run_probe(rung, name);
  read_peer_offload(f, current_netns_name());
  return f;
}

}  // namespace

std::map<int, int> read_cpu_nodes(const std::string& sysfs_root) {
  std::map<int, int> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(fs::path(sysfs_root) / "devices/system/node", ec)) {
    const std::string n = e.path().filename().string();
    if (!n.starts_with("node") || n.size() == 4 || !std::all_of(n.begin() + 4, n.end(), ::isdigit)) continue;
    auto cpus = parse_cpu_list(slurp(e.path() / "cpulist"));
    if (!cpus) continue;
    for (int c : cpus.value()) out[c] = std::atoi(n.c_str() + 4);
  }
  return out;
}

// For check_cpu_isolation: what isolates CPUs (the command line and its effect) and where IRQs go.
static void read_cpu_isolation(HostFacts& h, const GatherOptions& o) {
  const fs::path cpu = fs::path(o.sysfs_root) / "devices/system/cpu";
  if (auto online = parse_cpu_list(slurp(cpu / "online")); online && !online.value().empty()) {
    h.cpus_known = true;
    h.online_cpus = online.value();
  }
  // Empty files (nothing isolated) parse as no CPUs.
  if (auto v = parse_cpu_list(slurp(cpu / "isolated"))) h.isolated_cpus = v.value();
  if (auto v = parse_cpu_list(slurp(cpu / "nohz_full"))) h.nohz_full_cpus = v.value();
  h.cmdline = slurp(fs::path(o.proc_root) / "cmdline");
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(fs::path(o.proc_root) / "irq", ec)) {
    const std::string n = e.path().filename().string();
    if (n.empty() || !std::all_of(n.begin(), n.end(), ::isdigit)) continue;
    std::string text = slurp(e.path() / "effective_affinity_list");
    auto cpus = parse_cpu_list(text);
    if (!cpus || cpus.value().empty()) cpus = parse_cpu_list(slurp(e.path() / "smp_affinity_list"));
    if (cpus && !cpus.value().empty()) h.irq_cpus[std::atoi(n.c_str())] = cpus.value();
  }
}

HostFacts gather_host(const GatherOptions& o) {
  HostFacts h;
  if (auto caps = host::read_caps()) {
    h.caps_known = true;
    h.caps = caps.value();
  }
  h.is_root = geteuid() == 0;
  rlimit rl{};
  if (getrlimit(RLIMIT_MEMLOCK, &rl) == 0) {
    h.memlock_soft = rl.rlim_cur == RLIM_INFINITY ? kUnlimited : rl.rlim_cur;
    h.memlock_hard = rl.rlim_max == RLIM_INFINITY ? kUnlimited : rl.rlim_max;
  }
  const fs::path huge = fs::path(o.sysfs_root) / "kernel/mm/hugepages/hugepages-2048kB";
  bool ok = true;
  h.hugepages_total = sysfs_u64(huge / "nr_hugepages", ok);
  h.hugepages_free = sysfs_u64(huge / "free_hugepages", ok);
  h.hugepages_reserved = sysfs_u64(huge / "resv_hugepages", ok);
  h.hugepages_known = ok;
  const auto mem = parse_meminfo(slurp(fs::path(o.proc_root) / "meminfo"));
  auto kib = [&](std::string_view key, bool& found) -> std::uint64_t {
    auto it = mem.find(key);
    if (it == mem.end()) {
      found = false;
      return 0;
    }
    return it->second * 1024;
  };
  bool mem_ok = true;
  h.mem_total = kib("MemTotal", mem_ok);
  h.mem_available = kib("MemAvailable", mem_ok);
  h.swap_total = kib("SwapTotal", mem_ok);
  h.swap_free = kib("SwapFree", mem_ok);
  h.commit_limit = kib("CommitLimit", mem_ok);
  h.committed_as = kib("Committed_AS", mem_ok);
  h.meminfo_known = mem_ok;
  if (auto mode = parse_sysfs_int(slurp(fs::path(o.proc_root) / "sys/vm/overcommit_memory")))
    h.overcommit_mode = static_cast<int>(*mode);
  for (const std::string& dir : o.tap_dirs) h.tap_dirs[dir] = dir_facts(dir);
  if (!o.metrics_listen.empty()) {
    h.metrics_checked = true;
    h.metrics = probe_listen(o.metrics_listen, o.proc_root);
  }
  if (!o.run_user.empty()) {
    h.run_user_checked = true;
    if (auto u = privilege::resolve_run_user(o.run_user, o.run_group)) {
      h.run_user = u->user;
      h.run_group = u->group;
      h.run_uid = u->uid;
      h.run_gid = u->gid;
      h.run_user_exists = true;
    } else {
      h.run_user = o.run_user;
      h.run_group = o.run_group;
      h.run_user_error = u.message();
      // Which fix applies: a missing user, root, or (the user being fine) a missing group.
      if (const passwd* pw = getpwnam(o.run_user.c_str())) {
        h.run_user_exists = true;
        h.run_uid = pw->pw_uid;
      }
    }
  }
  h.mounts = parse_mounts(slurp(fs::path(o.proc_root) / "self/mounts"));
  h.cpu_node = read_cpu_nodes(o.sysfs_root);
  read_cpu_isolation(h, o);

  std::error_code ec;
  for (const auto& e : fs::directory_iterator(fs::path(o.sysfs_root) / "class/net", ec))
    h.interfaces.push_back(e.path().filename().string());
  std::sort(h.interfaces.begin(), h.interfaces.end());
  for (const auto& [name, probes] : o.interfaces) h.netdevs[name] = netdev_facts(name, probes, o);
  if (o.all_interfaces)
    for (const std::string& name : h.interfaces)
      if (!h.netdevs.count(name)) h.netdevs[name] = netdev_facts(name, {"mlx5", "mana"}, o);

#if defined(RAWPIPE_HAVE_RDMA)
  h.rdma_built = true;
  if (auto v = rdma::load_ibverbs(); !v) h.ibverbs_error = v.message();
#endif
  for (const auto& e : fs::directory_iterator(fs::path(o.sysfs_root) / "class/infiniband", ec))
    h.rdma_devices.push_back(e.path().filename().string());
  std::sort(h.rdma_devices.begin(), h.rdma_devices.end());

#if defined(RAWPIPE_HAVE_PMD_AF_XDP)
  h.af_xdp_built = true;
  if (auto obj = af_xdp::find_program_object())
    h.xdp_object = obj.value();
  else
    h.xdp_object_error = obj.message();
#endif
  utsname u{};
  if (uname(&u) == 0) h.kernel = u.release;
  h.binary = fs::read_symlink(fs::path(o.proc_root) / "self/exe", ec).string();
  return h;
}

}  // namespace rawpipe::doctor
