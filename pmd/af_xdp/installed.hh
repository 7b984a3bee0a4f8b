// What XDP program an interface already carries, which processes hold it, and removing one that a
// dead run left behind. Control path, used by SteerProgram::attach before it attaches.
//
// A program attached through a bpf_link lives as long as some process holds the link's fd (or a
// pin in bpffs holds it); one attached through netlink (`ip link set xdp`, libxdp without a
// dispatcher) stays until someone detaches it, also after its owner died. The kernel shows every
// fd a process holds on a program or link in /proc/PID/fdinfo/FD as "prog_id: N", so the holders
// of a program are found there, and a rawpipe program with no holder is a leftover.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "rawpipe/status.hh"

namespace rawpipe::af_xdp {

// The name the kernel gives rawpipe's program (the function in xdp_steer.bpf.c, at most 15 bytes).
inline constexpr const char* kSteerProgramName = "rawpipe_steer";

struct ProgramHolder {
  pid_t pid = 0;
  std::string command;  // /proc/PID/cmdline, arguments separated by spaces
};

struct InstalledProgram {
  std::uint32_t id = 0;
  std::string name;
  std::uint8_t attach_mode = 0;   // XDP_ATTACHED_DRV / SKB / HW / MULTI
  bool through_link = false;      // attached by a bpf_link (goes away with its last holder)
  std::vector<ProgramHolder> holders;
  bool is_rawpipe() const { return name == kSteerProgramName; }
};

// The program attached to ifindex in the calling thread's namespace, or nullopt when none.
Result<std::optional<InstalledProgram>> installed_program(int ifindex);

// Processes other than this one with an fd on program `prog_id` (a link or the program itself).
std::vector<ProgramHolder> program_holders(std::uint32_t prog_id);

// Detaches a program no process holds (checked again just before). Fails when it is attached by a
// pinned link or the kernel refuses.
Status remove_leftover(int ifindex, const InstalledProgram& prog);

// "pid 123 (rawpipe run a.toml)" for each holder, joined.
std::string describe_holders(const std::vector<ProgramHolder>& holders);

}  // namespace rawpipe::af_xdp
