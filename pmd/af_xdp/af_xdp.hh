// AF_XDP poll-mode driver: internal declarations shared by its translation units.
//
// Layout of the driver:
//   device.cc    config keys, open/start/stop, stats, path report (control path)
//   program.cc   finding, loading and attaching xdp_steer.bpf.o; steering map updates
//   umem.cc      UMEM and XSK creation over the pool's region, teardown that returns every buffer
//   rx.cc, tx.cc the burst functions (data path)
//
// Buffers: the UMEM is the pool's whole region and one UMEM frame is one pool slot, so the address
// the kernel writes into an rx descriptor names the slot (addr / buf_size) and the offset of the
// packet inside it, and the frame reaches the consumer with no copy. Every slot this queue hands
// to the kernel (fill ring, tx ring) is marked in `held`, and unmarked when it comes back (rx
// ring, completion ring); stop() frees whatever is still marked once the socket is gone, so no
// buffer is lost whatever state the rings were in.
#pragma once

#include <xdp/xsk.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "pipeline/buf/pool.hh"
#include "pipeline/port/driver.hh"

namespace rawpipe::af_xdp {

enum class SteerMode { kSteer, kAll };
enum class ZeroCopy { kAuto, kRequire, kNever };
enum class Attach { kAuto, kNative, kGeneric };

struct Config {
  std::string interface;
  std::uint32_t queue_offset = 0;
  SteerMode mode = SteerMode::kSteer;
  ZeroCopy zero_copy = ZeroCopy::kAuto;
  Attach attach = Attach::kAuto;
  bool need_wakeup = true;
  // Preferred busy polling (SO_PREFER_BUSY_POLL, Linux 5.11): when a receive finds the ring empty
  // the lcore calls recvfrom(), which runs the interface's NAPI poll on its own CPU for up to
  // busy_poll_us, taking up to busy_poll_budget frames per poll, instead of leaving that work to
  // the softirq of whichever CPU raised it. 0 leaves it off. DPDK's net_af_xdp turns it on by
  // default (busy_budget=64, 20 us).
  std::uint32_t busy_poll_budget = 0;
  std::uint32_t busy_poll_us = 20;
  // Verify UDP/TCP checksums in software and complete those a local or veth sender left to
  // offload (the XSK gives no checksum verdict): rx_burst_verify_csum instead of rx_burst.
  bool verify_checksums = true;
};

// One writer (the queue's lcore), relaxed readers (stats): a plain load+store, no RMW needed.
struct Counter {
  std::atomic<std::uint64_t> v{0};
  void add(std::uint64_t n) noexcept {
    // Relaxed: a statistic; single writer, readers only need an eventually fresh value.
    v.store(v.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
  }
  std::uint64_t get() const noexcept { return v.load(std::memory_order_relaxed); }
};

// One XSK: its four rings and what the burst functions need, nothing else on the hot lines.
struct alignas(kFalseSharingRange) XskQueue {
  xsk_ring_cons rx{};
  xsk_ring_prod fill{};
  xsk_ring_prod tx{};
  xsk_ring_cons comp{};
  std::uint8_t* base = nullptr;  // UMEM start == pool region
  Pool* pool = nullptr;
  std::uint64_t* held = nullptr; // bitmap, one bit per pool slot handed to the kernel
  std::uint32_t slot_shift = 0;  // log2(buf_size)
  std::uint32_t fill_size = 0;
  int fd = -1;
  std::uint16_t port_id = 0;
  std::uint16_t queue_id = 0;    // port queue number
  bool need_wakeup = true;       // the socket was bound with XDP_USE_NEED_WAKEUP
  bool busy_poll = false;        // preferred busy polling is set on the socket

  Counter rx_packets, rx_bytes, rx_wakeups, rx_busy_polls, fill_alloc_failed;
  Counter csum_completed, csum_bad;  // rx_burst_verify_csum only
  Counter tx_packets, tx_bytes, tx_wakeups, tx_copied, tx_foreign_nombuf, tx_ring_full;
  // Wakeup system calls the kernel refused (the interface went down or away): counted, and the
  // last errno kept for Port::notices(). Written by the queue's lcore, read relaxed (a statistic).
  Counter tx_kick_errors, rx_wakeup_errors;
  std::atomic<int> last_errno{0};

  // Control path.
  xsk_socket* xsk = nullptr;
  std::uint32_t device_queue = 0;
  bool zero_copy = false;
  std::vector<std::uint64_t> held_bits;

  void mark(std::uint32_t slot) noexcept { held[slot >> 6] |= std::uint64_t(1) << (slot & 63); }
  void unmark(std::uint32_t slot) noexcept { held[slot >> 6] &= ~(std::uint64_t(1) << (slot & 63)); }
};

std::uint16_t rx_burst(void* queue, Mbuf** pkts, std::uint16_t n) noexcept;
// rx_burst, then each UDP/TCP checksum verified (kL4CsumGood / kL4CsumBad) or completed in place.
std::uint16_t rx_burst_verify_csum(void* queue, Mbuf** pkts, std::uint16_t n) noexcept;
std::uint16_t tx_burst(void* queue, Mbuf** pkts, std::uint16_t n) noexcept;

// Tops the fill ring up from the pool. Data path (called by rx_burst) and start().
void refill(XskQueue& q) noexcept;
// Frees buffers of completed transmits. Data path (called by tx_burst) and stop().
void reclaim_completions(XskQueue& q) noexcept;

}  // namespace rawpipe::af_xdp
