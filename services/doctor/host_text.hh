// Parsers for the /proc and /sys text the doctor reads. Pure functions over strings, so tests
// feed them fixture text; facts.cc does the reading.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "rawpipe/status.hh"

namespace rawpipe::doctor {

struct MountEntry {
  std::string source, point, type, options;
};
// /proc/self/mounts (the fstab format; octal escapes such as \040 in paths decoded).
std::vector<MountEntry> parse_mounts(std::string_view text);
// The first mount of `type` ("hugetlbfs", "bpf"), or nullptr.
const MountEntry* find_mount(const std::vector<MountEntry>& mounts, std::string_view type,
                             std::string_view point = {});

// A kernel CPU list ("0-3,8,10-11", as in /sys/devices/system/node/node0/cpulist).
Result<std::vector<int>> parse_cpu_list(std::string_view text);
// The compact form of a sorted CPU set ("0-3,8").
std::string format_cpu_list(const std::vector<int>& cpus);

// The CPUs a kernel command line parameter names ("isolcpus", "nohz_full", "rcu_nocbs") in
// /proc/cmdline text: its CPU list without isolcpus' leading flags ("managed_irq,domain,2-3"),
// "all" as every CPU of `online`. Empty when the parameter is absent or its list unreadable.
std::vector<int> cmdline_cpus(std::string_view cmdline, std::string_view param, const std::vector<int>& online);

// /proc/meminfo lines "Key:   value kB" -> value (kB for sizes, a count for HugePages_*).
std::map<std::string, std::uint64_t, std::less<>> parse_meminfo(std::string_view text);

// One socket of /proc/net/tcp or /proc/net/tcp6: the local address as the kernel prints it
// (hex, in network byte order word by word), the port, the TCP state and the socket's inode.
struct TcpSocketEntry {
  std::string local_hex;   // "0100007F" (127.0.0.1) or 32 hex digits for IPv6
  std::uint16_t port = 0;
  std::uint8_t state = 0;  // 0x0A = LISTEN
  std::uint64_t inode = 0;
};
std::vector<TcpSocketEntry> parse_proc_net_tcp(std::string_view text);
// True when a listener bound to `entry` keeps a bind to IPv4 address `addr_be` (network order)
// on the same port from succeeding: the same address, or either side the wildcard.
bool tcp_listener_blocks(const TcpSocketEntry& entry, std::uint32_t addr_be, std::uint16_t port);

// A decimal number on its own (sysfs single-value files); fails on anything else.
Result<std::int64_t> parse_sysfs_int(std::string_view text);

}  // namespace rawpipe::doctor
