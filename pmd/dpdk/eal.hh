// The DPDK Environment Abstraction Layer, initialised once per process and shared by every dpdk
// port.
//
// rte_eal_init can run only once in a process, so the first dpdk port to open decides the EAL
// arguments; later ports must give the same eal_args (or none) and bring their devices with
// `device`, which is hot-plugged (rte_dev_probe) when the EAL did not probe it at start. rawpipe's
// lcores are not EAL threads: they call the burst functions of the queues they own directly, which
// ethdev allows for a queue used by one thread at a time.
//
// Thread-safety: eal_acquire is MT-safe (control path only).
#pragma once

#include <string>
#include <vector>

#include "rawpipe/status.hh"

namespace rawpipe::dpdk {

// Starts the EAL with `args` (plus the defaults below) if it is not running yet. When it is already
// running, `args` must be empty or equal to the arguments it started with. An EAL started by the
// embedding application (before any rawpipe port) is accepted as is.
//
// Defaults added unless the arguments already say otherwise, so that test processes and a running
// rawpipe never collide over shared files or sockets:
//   --no-telemetry, --in-memory (or --no-shconf with --no-huge, which cannot run in memory),
//   -l <first CPU this thread may run on>, and --no-pci when `device_is_pci` is false and no
//   allow/block list is given (or -a <device> when it is true), so a vdev port never seizes a NIC.
Status eal_acquire(const std::vector<std::string>& args, const std::string& device, bool device_is_pci);

// The arguments the EAL was started with (empty when the application started it).
std::vector<std::string> eal_args_in_use();

// True when `device` looks like a PCI address (0000:03:00.0 or 03:00.0), possibly with ",args".
bool looks_like_pci(const std::string& device);

}  // namespace rawpipe::dpdk
