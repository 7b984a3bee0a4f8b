// Least privilege after setup: once the ports are open (sockets bound, XDP attached, pools mapped,
// plugins loaded, the stats segment created) the process gives up what it no longer needs.
//
// drop_privileges() does, on EVERY thread of the process (capabilities, the bounding set, the
// ambient set and no_new_privs are per-thread on Linux; a thread created later inherits them from
// its creator):
//   - empties the bounding set except the kept capabilities (needs CAP_SETPCAP; without it the
//     bounding set is left as is and the report says so),
//   - clears the ambient set,
//   - sets PR_SET_NO_NEW_PRIVS (no execve can gain privileges again),
//   - optionally switches the whole process to an unprivileged user and group (setgroups to the
//     group alone, setresgid, setresuid; glibc applies these to every thread),
//   - sets effective = permitted = the kept capabilities, inheritable = none.
// Threads that already run (lcores, the consumer, the stats publisher, device-model threads) are
// reached with a real-time signal whose handler makes the same system calls, as glibc does for
// setuid(); afterwards every task under /proc/self/task is read back and checked.
//
// What is kept is decided per port by runtime_needs_for_port(): only the capabilities a port still
// uses after setup (e.g. detaching an XDP program at stop needs CAP_NET_ADMIN). Steering updates
// on AF_XDP go through the map fd the port already holds and need none.
//
// Control path only; one caller at a time.
#pragma once

#include "rawpipe/api.h"

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "rawpipe/status.hh"

namespace rawpipe::privilege {

// A bit per capability number (1ull << CAP_NET_ADMIN, ...).
using CapMask = std::uint64_t;

// "CAP_NET_ADMIN, CAP_BPF" or "none".
RAWPIPE_API std::string format_caps(CapMask caps);

struct RunUser {
  std::string user;   // as configured
  std::string group;  // as configured, or the user's primary group's name
  uid_t uid = 0;
  gid_t gid = 0;
};

// Resolves [run] user / group before anything is set up, so a typo stops the run before a port
// opens. An empty group means the user's primary group.
RAWPIPE_API Result<RunUser> resolve_run_user(const std::string& user, const std::string& group);

// Capabilities a port of driver `pmd` (the name the opened port reports, so "auto" is already
// resolved) still needs after Pipeline::start(), and why (appended to `why`).
RAWPIPE_API CapMask runtime_needs_for_port(std::string_view pmd, std::string_view port_name, std::vector<std::string>& why);

struct DropRequest {
  CapMask keep = 0;                     // capabilities every thread keeps
  std::vector<std::string> keep_why;    // one reason per kept capability group, for the report
  bool switch_user = false;
  RunUser user;
  // Files created during setup that the process must still remove at exit (the stats segment):
  // handed to the run user before the switch. Symlinks are not followed.
  std::vector<std::string> hand_over;
};

struct DropReport {
  uid_t uid = 0;
  gid_t gid = 0;
  CapMask kept = 0;
  bool bounding_dropped = false;  // false when the process lacked CAP_SETPCAP
  unsigned threads = 0;           // tasks checked after the drop
  std::string line;               // the one line `rawpipe run` prints
};

// Applies the request to every thread and verifies it through /proc/self/task/*/status.
RAWPIPE_API Result<DropReport> drop_privileges(const DropRequest& request);

// One thread's credentials as /proc/<pid>/task/<tid>/status shows them (for tests and checks).
struct TaskCreds {
  CapMask inh = 0, prm = 0, eff = 0, bnd = 0, amb = 0;
  uid_t uid[4] = {};  // real, effective, saved, fs
  gid_t gid[4] = {};
  int no_new_privs = -1;
};
RAWPIPE_API Result<TaskCreds> read_task_creds(const std::string& status_path);

}  // namespace rawpipe::privilege
