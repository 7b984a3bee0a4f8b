// The XDP program rawpipe attaches to an AF_XDP port's interface (xdp_steer.bpf.c), and the maps
// through which the driver steers traffic to its sockets. Control path only.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "rawpipe/status.hh"
#include "pmd/af_xdp/af_xdp.hh"

struct bpf_object;

namespace rawpipe {
struct SteeringRules;
}

namespace rawpipe::af_xdp {

// Where the compiled program is looked for: $RAWPIPE_XDP_OBJ alone when it is set; else, for code
// running from the build tree, the build's object; for an installed copy, the installed object
// relative to the library or executable it was loaded from (so a --destdir tree or a moved prefix
// uses its own), then the configured install path. Returns the first that exists or an error
// listing where it looked.
Result<std::string> find_program_object();

class SteerProgram {
 public:
  // Opens the object, loads it and attaches it to ifindex through a bpf_link in the requested
  // mode. "auto" tries native (driver) mode first and falls back to generic (skb) mode. A rawpipe
  // program already there is refused when a live process holds it and removed when none does.
  static Result<std::unique_ptr<SteerProgram>> attach(const std::string& ifname, int ifindex, Attach attach,
                                                      SteerMode mode);
  // Loads the program and its maps without attaching it anywhere: for running it on crafted
  // frames with BPF_PROG_TEST_RUN (tests) and checking what steering would decide.
  static Result<std::unique_ptr<SteerProgram>> load_unattached(SteerMode mode);
  ~SteerProgram();  // detaches and unloads

  // Runs the program once on `frame` (BPF_PROG_TEST_RUN); returns the XDP action. The
  // "xdp_redirected" counter tells a match from a pass, since with no socket in the map a
  // redirect falls back to XDP_PASS.
  Result<int> test_run(const std::uint8_t* frame, std::size_t len);

  // "native" or "generic": what the kernel really attached.
  const std::string& attach_mode() const { return attach_mode_; }
  const std::string& object_path() const { return path_; }
  // What attach() had to clean up first (a leftover program of a dead run), or "".
  const std::string& removed_leftover() const { return removed_leftover_; }
  int xsks_map_fd() const { return xsks_fd_; }

  // Replaces the steering tries with `rules`. Returns the number of trie entries written.
  Result<unsigned> set_rules(const SteeringRules& rules);
  Status remove_socket(std::uint32_t device_queue);
  // Per-CPU counters summed: redirected, passed, not_ip.
  std::map<std::string, std::uint64_t> counters() const;

 private:
  SteerProgram() = default;
  Status find_maps(struct bpf_object* obj, SteerMode mode);
  // Returns once every run of the program that began before the call has finished.
  Status wait_for_running_programs();
  struct bpf_object* own_obj_ = nullptr;
  int link_fd_ = -1;  // the bpf_link that keeps the program attached; -1 when loaded only
  int prog_fd_ = -1;
  int ifindex_ = 0;
  std::string attach_mode_;
  std::string path_;
  std::string removed_leftover_;
  int xsks_fd_ = -1, port_fd_ = -1, proto_fd_ = -1, addr_fd_ = -1, cfg_fd_ = -1, stats_fd_ = -1;
  // A map of maps nothing reads: an update of it is the kernel's way for user space to wait for
  // the BPF programs already running (the syscall ends with synchronize_rcu for map-in-map
  // types, maybe_wait_bpf_programs in kernel/bpf/syscall.c). Made at load, while the process
  // may still create maps; updating it later needs no privilege.
  int quiesce_outer_fd_ = -1, quiesce_inner_fd_ = -1;
};

// libbpf/libxdp print through this while `capture` is alive; the text goes into error messages
// instead of stderr.
class LibMessages {
 public:
  LibMessages();
  ~LibMessages();
  std::string take();
};

}  // namespace rawpipe::af_xdp
