// The pipeline inside a preloaded process and the endpoint slots its sockets are served from.
//
// The pipeline starts on the first bind that the offload rules give to rawpipe: from the config
// in RAWPIPE_CONFIG (set by `rawpipe exec --config`), or one built from RAWPIPE_INTERFACE (pmd
// "auto", one lcore, the interface's addresses as the port's own). Either way the library adds
// RAWPIPE_SOCKETS (default 16) ring endpoints, "socket0".., with no rules: bind takes a free one
// and adds the socket's rule (add_conf_rule), close removes it and returns the slot. When the
// pipeline cannot start, every socket stays the kernel's and one line on stderr says why.
#pragma once

#include <netinet/in.h>
#include <sys/epoll.h>
#include <sys/socket.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>

#include "rawpipe/extra.h"
#include "preload/fd_table.hh"
#include "preload/kernel_side.hh"

namespace rawpipe::preload {

inline constexpr unsigned kMaxSlots = 256;
inline constexpr unsigned kMaxRules = 8;    // bind + joined groups per socket
inline constexpr unsigned kMaxEpolls = 16;
// A receive looks at the kernel side at least once per this many datagrams from the ring (VMA's
// VMA_RX_UDP_POLL_OS_RATIO default).
inline constexpr unsigned kKernelLookRatio = 100;
// Datagrams one offloaded socket holds before it drops (its SO_RCVBUF, in effect).
inline constexpr unsigned kSocketRingSize = 1024;  // epoll sets one offloaded socket can be in (ENOSPC beyond)

// One application epoll set's membership of an offloaded socket: the endpoint's descriptor is
// registered in the set with this record as its data, so epoll_wait can check the ring and hand
// the application its own data.
struct EpollLink {
  int epfd = -1;
  epoll_data_t app_data{};
  std::uint32_t app_events = 0;
  // The socket's kernel side (Slot::read_kernel) is in the set too, with this byte's address as
  // its data.
  bool kernel_registered = false;
  int kernel_fd = -1;  // the descriptor registered
  char kernel_tag = 0;
};

struct Slot {
  // Fixed at start.
  std::uint16_t endpoint = 0;
  int wake_fd = -1;
  // The socket's ring descriptor for VMA's get_socket_rings_fds / socketxtreme_poll: wake_fd, or
  // in no-lcore mode an epoll descriptor over wake_fd and the port's queues (a wait on it must
  // also end when a pass is due, since no thread runs one otherwise).
  int ring_fd = -1;

  // Bumped when the socket behind the slot is closed: an fd entry or a waiting thread holding an
  // older value learns that its socket is gone.
  std::atomic<std::uint32_t> gen{1};
  std::atomic<bool> in_use{false};
  std::atomic<int> fds{0};            // descriptors naming this slot (dup)
  // The one thread touching the endpoint's ring and the stash (acquire/release pairs with itself).
  std::atomic<bool> consumer{false};

  // Set at bind, read by the data path (published by the release store of the fd entry's kind).
  int family = 0;
  rawpipe_addr local{};               // bound address and port
  bool local_specific = false;        // a unicast address rather than the wildcard or a group
  int first_fd = -1;                  // for messages and the summary
  // The kernel socket is read too (preload/kernel_side.hh): what the pipeline never sees. Set
  // at bind; cleared in a parent that forks (the child's copy of the socket takes everything).
  std::atomic<bool> read_kernel{false};

  // Socket options the data path honours.
  std::atomic<int> timestamp{0};      // 0, SO_TIMESTAMP or SO_TIMESTAMPNS
  std::atomic<long> rcvtimeo_ms{-1};  // SO_RCVTIMEO; -1 none
  std::atomic<bool> connected{false};
  rawpipe_addr peer{};
  // Connected, but the rules could not be made to name the peer (set_peer): the receive calls
  // drop what is not from it instead.
  std::atomic<bool> filter_peer{false};

  // A packet taken from the ring but not consumed (MSG_PEEK, FIONREAD, poll's check).
  bool has_stash = false;
  rawpipe_packet stash{};
  // Datagrams read from the ring since the kernel side was last looked at: a ring that never
  // empties must not starve it (consumer only).
  unsigned since_kernel_look = 0;

  // Control state (under the runtime's lock).
  long rules[kMaxRules] = {};
  rawpipe_addr rule_groups[kMaxRules] = {};
  unsigned n_rules = 0;
  EpollLink epolls[kMaxEpolls];
  // The endpoint's ring_full count when this socket took the slot: its own drops are the rest.
  std::uint64_t ring_full_at_bind = 0;

  // Counters for the summary and dump_fd_stats.
  std::atomic<std::uint64_t> rx_packets{0}, rx_bytes{0}, rx_truncated{0};
  // Datagrams from another source than a connected socket's peer: dropped, as the kernel does.
  std::atomic<std::uint64_t> rx_not_peer{0};
  std::atomic<std::uint64_t> tx_packets{0}, tx_kernel{0};
  std::atomic<std::uint64_t> rx_kernel{0};  // datagrams read from the kernel side
};

inline constexpr int kMaxQueueFds = 16;

struct Runtime {
  const rawpipe_api_t* api = nullptr;
  rawpipe_pipeline* pipeline = nullptr;
  std::uint16_t port = 0;
  unsigned n_slots = 0;
  // "No lcore" mode (RAWPIPE_LCORE=none, or a config whose lcores have thread = false): no
  // thread polls the port; a thread that waits for a socket runs the pipeline's passes itself
  // (progress) and, once its spin budget is spent, sleeps on the port's queues as well as on
  // its sockets. Fixed at start.
  bool drive = false;
  // Offloaded sockets' kernel sides are read where the library knows which datagrams reach the
  // pipeline as copies of the kernel's (`copies`: the af_packet and auto ports' interfaces; none
  // on af_xdp): the ports' interfaces and drivers are known, from RAWPIPE_INTERFACE or the config.
  // Fixed at start.
  bool read_kernel = false;
  CopyInterfaces copies;
  int n_queue_fds = 0;                 // -1: a queue has no descriptor: sleep 1 ms at most
  int queue_fds[kMaxQueueFds] = {};
  Slot slots[kMaxSlots];
};

// No-lcore mode: runs one pass of the pipeline on the calling thread when no other thread is
// running it. Returns whether packets arrived (then look at the rings again). Nothing otherwise.
inline bool drive(Runtime& rt) { return rt.drive && rt.api->progress(rt.pipeline) > 0; }
// The longest a kernel wait may sleep in no-lcore mode: -1 (no limit) when the queues' own
// descriptors are in the wait, else 1 ms, so that a pass runs at least that often.
inline int drive_nap_ms(const Runtime& rt) { return rt.drive && rt.n_queue_fds < 0 ? 1 : -1; }
// Caps a poll timeout (ms, -1 for none) by drive_nap_ms.
inline int capped_wait_ms(const Runtime& rt, int wait_ms) {
  const int nap = drive_nap_ms(rt);
  return nap >= 0 && (wait_ms < 0 || wait_ms > nap) ? nap : wait_ms;
}

// The runtime, or nullptr when nothing is offloaded in this process (yet, or at all).
Runtime* running();
// In a forked child of a process that offloaded: the parent's runtime as the fork copied it. Its
// addresses identify the records the parent left in epoll sets the child shares; nothing else
// in it is the child's to use.
Runtime* inherited();

// Bound-address check, rules, pipeline start, slot and rule: called after the kernel bind of a
// UDP socket succeeded. Leaves the entry kUdp when the socket stays the kernel's.
void offer_bind(int fd, FdEntry& e);

// The slot an entry names, or nullptr (not offloaded, or its socket was closed meanwhile).
Slot* slot_of(const FdEntry& e, std::uint32_t* gen = nullptr);
inline bool is_offloaded(const FdEntry* e) { return e && e->kind.load(std::memory_order_acquire) == FdKind::kOffloaded; }

// A descriptor naming the slot went away (close, dup2 over it); the last one frees the slot.
void drop_fd(Slot& s);
// dup: one more descriptor names the slot.
void add_fd(Slot& s);

// VMA's add_conf_rule: one offload rule at the top of the list, for later binds. False with *error.
bool add_offload_rule(const char* line, std::string* error);

// Multicast membership on an offloaded socket (the kernel join already happened).
void join_group(Slot& s, const rawpipe_addr& group);
void leave_group(Slot& s, const rawpipe_addr& group);
// connect on an offloaded socket: its peer (nullptr: AF_UNSPEC, disconnected) goes into its
// rules, as the kernel's lookup prefers a connected socket for its peer's datagrams.
void set_peer(Slot& s, const rawpipe_addr* peer);

// Takes/gives back the slot's consumer right. Returns false when the slot's socket is gone.
bool consumer_enter(Slot& s, std::uint32_t gen);
void consumer_leave(Slot& s);

// Spin budget of a waiting thread before it sleeps (RAWPIPE_SPIN_US, default 100).
long spin_ns();

// True while the calling thread is inside the library (creating the pipeline): interposed calls
// then go straight to the kernel.
bool inside();

// "10.0.0.1:5001", "[fd00::1]:5001", "*:5001".
std::string addr_text(const rawpipe_addr& a);

// The control lock (bind, close, joins) when no other thread holds it: the stats publisher
// reads the slots' control state under it and never waits for it.
std::unique_lock<std::mutex> try_control_lock();

// Conversions between sockaddr and rawpipe_addr (an IPv4-mapped IPv6 address becomes IPv4).
bool to_rawpipe_addr(const sockaddr* sa, socklen_t len, rawpipe_addr* out);
socklen_t to_sockaddr(const rawpipe_addr& a, int socket_family, sockaddr_storage* out);

}  // namespace rawpipe::preload
