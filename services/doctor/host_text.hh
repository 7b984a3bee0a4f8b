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

// /proc/meminfo lines "Key:   value kB" -> value (kB for sizes, a count for HugePages_*).
std::map<std::string, std::uint64_t, std::less<>> parse_meminfo(std::string_view text);

// A decimal number on its own (sysfs single-value files); fails on anything else.
Result<std::int64_t> parse_sysfs_int(std::string_view text);

}  // namespace rawpipe::doctor
