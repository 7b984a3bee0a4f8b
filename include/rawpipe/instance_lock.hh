// One pipeline per device queue and per lcore CPU on a host: each run takes an exclusive flock on a
// file per resource under /run/lock/rawpipe (or $RAWPIPE_LOCK_DIR) before it opens a port, and writes
// its pid and config into the file. A second run that wants the same resource is refused with the
// first one's pid and config. The kernel drops a flock when its holder dies, SIGKILL included, so
// nothing is ever stale; the files themselves stay (removing a lock file races with a process
// that is about to lock it).
//
// Resources are plain strings: "queue <netns inode> <interface> <n>" (interface names are per
// network namespace), "device <name> [pid <pid>] <n>" (a DPDK ethdev) and "cpu <n>".
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "rawpipe/api.h"
#include "rawpipe/plan.hh"
#include "rawpipe/status.hh"

namespace rawpipe::ops {

// "queue 4026531840 veth0 3": a device queue of an interface in the calling thread's namespace.
RAWPIPE_API std::string queue_resource(std::string_view interface, unsigned queue);
// "device dpdk 0000:03:00.0 3": a queue of a device named outside the kernel's namespaces;
// process_private adds this process's pid (a device that exists in this process only).
RAWPIPE_API std::string device_queue_resource(std::string_view device, bool process_private, unsigned queue);
RAWPIPE_API std::string cpu_resource(int cpu);

struct LockHolder {
  int pid = 0;
  std::string config;
  std::string resource;
};

class RAWPIPE_API InstanceLocks {
 public:
  InstanceLocks() = default;
  InstanceLocks(InstanceLocks&& o) noexcept : fds_(std::move(o.fds_)) { o.fds_.clear(); }
  InstanceLocks& operator=(InstanceLocks&& o) noexcept;
  InstanceLocks(const InstanceLocks&) = delete;
  InstanceLocks& operator=(const InstanceLocks&) = delete;
  ~InstanceLocks() { release(); }

  // Takes every lock or none. The error names the resource, the pid and config of its holder, and
  // what to do. `described` says each resource in words for messages ("queue 0 of veth0").
  static Result<InstanceLocks> acquire(const std::vector<std::string>& resources,
                                       const std::vector<std::string>& described, std::string_view config);
  void release() noexcept;

 private:
  std::vector<int> fds_;
};

// The directory of the lock files: $RAWPIPE_LOCK_DIR, else /run/lock/rawpipe (mode 1777, as
// /run/lock: runs as root and as users with file capabilities share it).
RAWPIPE_API std::string lock_dir();
// Every lock currently held by a live process (for `rawpipe stat --list`).
RAWPIPE_API std::vector<LockHolder> held_locks();

// The locks a plan's run needs: every device queue its ports claim (drivers that own queues of
// a kernel interface say which) and every lcore CPU; `config` names the run in a refusal.
RAWPIPE_API Result<InstanceLocks> take_instance_locks(const Plan& plan, const std::string& config);

}  // namespace rawpipe::ops
