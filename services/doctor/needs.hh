// What a config needs from the machine, in the terms the checks use: each pool's memory and
// hugepage policy, each port's driver, interface, queues and the CPUs of the lcores that poll it.
// Built from the validated Plan plus the driver keys the Plan keeps opaque (interface,
// queue_offset, attach, zero_copy), which are read again from the same file.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "pipeline/buf/pool.hh"
#include "rawpipe/status.hh"
#include "rawpipe/config.hh"

namespace rawpipe::doctor {

inline constexpr std::uint64_t kHugePageBytes = 2u << 20;

struct PoolNeed {
  std::string name;
  std::uint64_t bytes = 0;     // the region as Pool::create maps it (rounded up to 2 MiB)
  std::uint32_t buf_size = 0;
  HugePages huge_pages = HugePages::kAuto;
  std::string where;           // "file:line"
};

struct LcoreNeed {
  std::uint16_t id = 0;
  int cpu = -1;                // -1: not pinned
};

struct PortNeed {
  std::string name;
  std::string pmd;
  std::string interface;       // empty for drivers without one (synth, pcap, dpdk, socket unbound)
  std::uint16_t rx_queues = 1;
  std::uint16_t tx_queues = 1;
  std::uint32_t queue_offset = 0;   // af_xdp
  std::string attach = "auto";      // af_xdp: auto, native, generic
  std::string zero_copy = "auto";   // af_xdp: auto, require, never
  std::string rx_checksum = "verify";  // af_xdp: verify, off
  const PoolNeed* pool = nullptr;   // points into Needs::pools
  std::vector<LcoreNeed> lcores;    // lcores polling any of its rx queues
  std::string where;
};

struct TapNeed {
  std::string name;
  std::string path;
  std::string dir;             // the directory the file is created in
  std::uint64_t rotate_bytes = 0;
  std::uint32_t max_files = 0;
};

struct Needs {
  std::string config;
  std::vector<PoolNeed> pools;
  std::vector<PortNeed> ports;
  std::vector<TapNeed> taps;
  std::string metrics_listen;  // [metrics] listen, "" when none
  std::string run_user;        // [run] user, "" when the run keeps its uid
  std::string run_group;       // [run] group, "" for the user's primary group
  Needs() = default;
  Needs(const Needs&) = delete;  // ports point into pools
  Needs(Needs&&) = default;
};

// Loads and validates the config (errors name file, line and key) and derives the needs.
Result<Needs> needs_from_config(const std::string& file, const LoadOptions& options);
Result<Needs> needs_from_text(std::string_view text, const std::string& file, const LoadOptions& options);

// True for drivers that reach a NIC through the kernel interface named by `interface`.
bool pmd_uses_interface(std::string_view pmd);

}  // namespace rawpipe::doctor
