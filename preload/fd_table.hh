// What the preload library knows about each file descriptor: nothing (the kernel's), a UDP
// socket it watches until bind decides, or an offloaded socket served from an endpoint slot.
//
// The application's fd always stays a real kernel socket (fd numbers, getsockname, fcntl and
// close stay kernel-true, and any socket can go back to the kernel); an offloaded fd only points
// at a slot. Entries are plain atomics in one array sized by RLIMIT_NOFILE at load, so the check
// every interposed call makes ("is this fd ours?") is one load.
#pragma once

#include <atomic>
#include <cstdint>

namespace rawpipe::preload {

enum class FdKind : std::uint8_t {
  kNone = 0,       // not a socket we watch: every call goes to the kernel untouched
  kUdp = 1,        // an AF_INET/AF_INET6 datagram socket, not (yet) offloaded
  kOffloaded = 2,  // served by slot `slot` while the slot's generation equals `gen`
  kEpoll = 3,      // an epoll set: epoll_ctl maps offloaded members to their endpoint's fd
};

// Why a watched UDP socket is the kernel's (rawpipe stat's sockets table says it).
enum class KernelWhy : std::uint8_t {
  kNotBound = 0,          // offload is decided at bind
  kNoRuleMatches,         // offload rules exist and none names its address
  kRuleSaysKernel,        // the first matching rule says os
  kLoopback,              // a loopback address never crosses the interface
  kNotStarted,            // the pipeline could not start (its line on stderr says why)
  kOtherInterface,        // a unicast address of another interface than RAWPIPE_INTERFACE's
  kNoFreeEndpoint,        // every socket endpoint was in use (RAWPIPE_SOCKETS)
  kRuleRefused,           // the pipeline refused the socket's steering rule
  kForkedChild,           // a forked child keeps its sockets on the kernel
  kNoAddress,             // getsockname gave no IPv4/IPv6 address
};

struct FdEntry {
  std::atomic<FdKind> kind{FdKind::kNone};
  std::atomic<std::uint16_t> slot{0};
  std::atomic<std::uint32_t> gen{0};
  std::atomic<bool> nonblock{false};
  std::atomic<std::uint8_t> family{0};
  std::atomic<KernelWhy> why{KernelWhy::kNotBound};  // while kind is kUdp
};

// The entry of fd, or nullptr when fd is negative or beyond the table (then it is the kernel's).
FdEntry* fd_entry(int fd);
// The descriptor an entry belongs to.
int fd_of(const FdEntry& e);
// One more than the highest fd ever given a kind (what a scan of the table must cover).
int fd_high_water();
// Notes that fd now has a kind.
void fd_touch(int fd);
// Resets an entry to kNone (after close, or when a new descriptor takes the number).
void fd_forget(int fd);

}  // namespace rawpipe::preload
