// What the doctor knows about this machine, gathered once (gather_host) and then judged by the
// checks. Keeping facts and judgement apart lets tests feed the checks fabricated machines.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "services/doctor/host_text.hh"
#include "pmd/host/caps.hh"
#include "pmd/host/netdev.hh"

namespace rawpipe::doctor {

inline constexpr std::uint64_t kUnlimited = ~std::uint64_t(0);

struct NetdevFacts {
  std::string name;
  bool exists = false;
  std::string error;                  // why it is missing
  std::string driver;                 // "" for virtual interfaces without one
  std::uint32_t mtu = 0;
  bool up = false;
  bool channels_known = false;
  host::Channels channels;
  std::string channels_error;
  int numa_node = -1;
  std::vector<std::string> rdma_devices;
  std::uint8_t rdma_port = 1;
  // Rung probes of the auto ladder (pmd/mlx5/probe.hh, pmd/mana/probe.hh): "" = usable, else why not.
  std::map<std::string, std::string> probes;
  // The XDP program already attached (pmd/af_xdp/installed.hh): id 0 when none or unknown.
  std::uint32_t xdp_prog_id = 0;
  std::string xdp_prog_name;
  bool xdp_prog_rawpipe = false;
  std::string xdp_prog_holders;  // "pid 12 (rawpipe run a.toml)", "" when no process holds it
  std::string xdp_query_error;
  // The interface whose transmit path feeds this one: a veth's peer (possibly in another network
  // namespace), or the interface itself for lo. Its tx checksum offload (`ethtool -k`
  // tx-checksumming) decides whether frames arrive with checksums left partial.
  bool peer_known = false;
  std::string peer_name;         // "veth1", with " (namespace NAME)" when it lives elsewhere
  std::string peer_exec;         // "ip netns exec NAME " to run a command beside the peer, or ""
  std::string peer_ifname;       // the bare interface name
  bool peer_tx_csum = false;     // tx-checksumming on
  std::string peer_error;        // why the peer or its offloads could not be read ("" when known or not a veth)
};

// A directory a capture tap writes into.
struct DirFacts {
  bool exists = false;
  bool is_dir = false;
  bool writable = false;         // for this process's effective ids (faccessat AT_EACCESS)
  std::string error;             // why not writable / not found
  bool space_known = false;
  std::uint64_t free_bytes = 0;  // available to this user (statvfs f_bavail)
};

// The metrics address tried the way the metrics server binds it.
struct ListenFacts {
  std::string listen;
  std::string bind_error;        // "" when bind and listen succeeded
  bool in_use = false;           // EADDRINUSE
  std::string owner;             // "pid 123 (python3 -m http.server)", "" when not found
};

struct HostFacts {
  bool caps_known = false;
  host::CapSet caps;
  bool is_root = false;
  std::uint64_t memlock_soft = 0, memlock_hard = 0;  // bytes; kUnlimited for RLIM_INFINITY
  bool hugepages_known = false;
  std::uint64_t hugepages_total = 0, hugepages_free = 0, hugepages_reserved = 0;  // 2 MiB pages
  // /proc/meminfo (bytes) and the overcommit policy: what an anonymous pool mapping can get.
  bool meminfo_known = false;
  std::uint64_t mem_total = 0, mem_available = 0, swap_total = 0, swap_free = 0;
  std::uint64_t commit_limit = 0, committed_as = 0;
  int overcommit_mode = 0;            // /proc/sys/vm/overcommit_memory
  std::map<std::string, DirFacts> tap_dirs;  // by directory
  bool metrics_checked = false;
  ListenFacts metrics;
  std::vector<MountEntry> mounts;
  std::map<int, int> cpu_node;        // online CPU -> NUMA node (empty: no NUMA information)
  std::vector<std::string> interfaces;  // every interface in this namespace
  std::map<std::string, NetdevFacts> netdevs;
  // rdma-core: whether libibverbs loads (error text when not), and the RDMA devices sysfs lists.
  bool rdma_built = false;
  std::string ibverbs_error;
  std::vector<std::string> rdma_devices;
  // The XDP program af_xdp ports attach (pmd/af_xdp/program.hh finds it): its path, or why not.
  bool af_xdp_built = false;
  std::string xdp_object;
  std::string xdp_object_error;
  // CPU isolation (cpu_isolation.cc): the kernel command line and what the kernel made of it.
  bool cpus_known = false;            // online CPUs read
  std::string cmdline;                // /proc/cmdline
  std::vector<int> online_cpus;       // /sys/devices/system/cpu/online
  std::vector<int> isolated_cpus;     // /sys/devices/system/cpu/isolated (isolcpus' domain isolation)
  std::vector<int> nohz_full_cpus;    // /sys/devices/system/cpu/nohz_full
  // IRQ number -> the CPUs it is delivered to: /proc/irq/N/effective_affinity_list where the
  // kernel has it, else smp_affinity_list.
  std::map<int, std::vector<int>> irq_cpus;
  // [run] user and group resolved by the function `rawpipe run` calls before it sets anything
  // up: the uid and gid it switches to, or why it refuses (run_user_error).
  bool run_user_checked = false;
  std::string run_user, run_group;    // as resolved (the group defaults to the user's primary one)
  bool run_user_exists = false;       // the passwd database has the user (run_uid is then its uid)
  unsigned run_uid = 0, run_gid = 0;
  std::string run_user_error;
  std::string kernel;                 // uname -r
  std::string binary;                 // /proc/self/exe, for setcap fixes
};

struct GatherOptions {
  std::string sysfs_root = "/sys";
  std::string proc_root = "/proc";
  // Interfaces to look at in detail, with the rung probes to run on each ("mlx5", "mana").
  std::map<std::string, std::vector<std::string>> interfaces;
  bool all_interfaces = false;        // look at every interface (doctor without a config)
  std::vector<std::string> tap_dirs;  // directories capture taps write into
  std::string metrics_listen;         // [metrics] listen to try, "" for none
  std::string run_user, run_group;    // [run] user and group to resolve, "" for none
};

HostFacts gather_host(const GatherOptions& options);

// CPU -> node from <sysfs_root>/devices/system/node/node*/cpulist.
std::map<int, int> read_cpu_nodes(const std::string& sysfs_root);

}  // namespace rawpipe::doctor
