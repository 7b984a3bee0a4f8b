// Network namespaces and veth pairs for integration tests.
//
// A test builds its own little network, uses it and tears it down, also when an assertion fails
// half way: every object here removes what it created in its destructor. Names carry the process
// id and a counter, so tests running at the same time, or a crashed earlier run, never collide
// with each other (a leftover from a killed run is named after a dead pid and can be removed with
// `ip netns del`).
//
// Setup uses iproute2 (`ip`) and `ethtool`: these are tests, and the commands are what a person
// would type to reproduce a failure. Code that must run *inside* a namespace (open a socket, open
// an AF_XDP port, send datagrams) runs on a thread that has joined the namespace with setns();
// the namespace of the calling thread never changes.
//
// Thread-safety: a NetNs or VethPair is owned by one thread; run()/spawn() may be called
// concurrently.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "rawpipe/status.hh"

namespace rawpipe::test {

// Why integration tests cannot build namespaces on this host (not root, no `ip`, no netns), or
// nullopt when they can. Tests call GTEST_SKIP() << *reason.
std::optional<std::string> netns_unavailable_reason();

// Runs argv (argv[0] looked up in PATH) and waits. Fails with the command line, the exit status
// and what it printed.
Status run_command(const std::vector<std::string>& argv);
// Same, returning what the command printed on stdout.
Result<std::string> command_output(const std::vector<std::string>& argv);

// A unique name: prefix + pid + counter, at most 15 characters (IFNAMSIZ - 1).
std::string unique_name(std::string_view prefix);

class NetNs {
 public:
  // Creates a named namespace (visible in `ip netns list`) with its loopback up.
  static Result<NetNs> create(std::string_view prefix = "rpns");
  NetNs(NetNs&& other) noexcept;
  NetNs& operator=(NetNs&& other) noexcept;
  NetNs(const NetNs&) = delete;
  NetNs& operator=(const NetNs&) = delete;
  ~NetNs();  // deletes the namespace and with it every interface inside

  const std::string& name() const { return name_; }

  // Joins the calling thread to this namespace for good. Only for threads the caller created
  // for this purpose.
  Status enter_this_thread() const;
  // Runs fn on a fresh thread inside the namespace and waits for it.
  Status run(const std::function<void()>& fn) const;
  // Starts fn on a thread inside the namespace; the caller joins it.
  std::thread spawn(std::function<void()> fn) const;
  // Runs a command inside the namespace (`ip netns exec NAME ...`).
  Status exec(const std::vector<std::string>& argv) const;

 private:
  explicit NetNs(std::string name) : name_(std::move(name)) {}
  std::string name_;
};

// Where one end of a veth pair lives and how it is configured.
// The NetNs an end points to must outlive the VethPair and stay where it is (not moved).
struct VethEnd {
  const NetNs* ns = nullptr;      // nullptr: the test process's namespace
  std::string name;               // empty: generated
  std::vector<std::string> addrs; // "10.1.0.1/24", "fd00::1/64"
  std::string mac;                // empty: kernel-chosen
  unsigned mtu = 0;               // 0: default
};

class VethPair {
 public:
  // Creates the pair, moves each end to its namespace, assigns addresses and brings both up.
  // IPv6 duplicate address detection is turned off on both ends so addresses work at once.
  static Result<VethPair> create(VethEnd a, VethEnd b);
  VethPair(VethPair&& other) noexcept;
  VethPair& operator=(VethPair&& other) noexcept;
  VethPair(const VethPair&) = delete;
  VethPair& operator=(const VethPair&) = delete;
  ~VethPair();  // deletes the pair unless its namespace already took it away

  const VethEnd& a() const { return a_; }
  const VethEnd& b() const { return b_; }
  // Runs a command (e.g. {"ethtool", "-K", name, "gro", "on"}) in the namespace of end a or b.
  Status exec_a(const std::vector<std::string>& argv) const;
  Status exec_b(const std::vector<std::string>& argv) const;
  // Reads the MAC address of an end ("aa:bb:..").
  Result<std::string> mac_a() const;
  Result<std::string> mac_b() const;

 private:
  VethPair(VethEnd a, VethEnd b) : a_(std::move(a)), b_(std::move(b)) {}
  void destroy() noexcept;
  VethEnd a_, b_;
  bool owned_ = false;
};

// Runs argv in ns (or in the current namespace when ns is nullptr).
Status exec_in(const NetNs* ns, const std::vector<std::string>& argv);
Result<std::string> output_in(const NetNs* ns, const std::vector<std::string>& argv);

// The kernel's count of UDP datagrams ns dropped for a bad checksum, IPv4 (Udp InCsumErrors in
// /proc/net/snmp) and IPv6 (Udp6InCsumErrors in /proc/net/snmp6) together.
Result<std::uint64_t> udp_csum_errors(const NetNs& ns);

}  // namespace rawpipe::test
