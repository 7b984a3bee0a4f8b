// Waking a ring endpoint's consumer that sleeps, without a system call while it busy-polls.
//
// The consumer asks for a descriptor (an eventfd; pipeline/extra/wait.hh), then, whenever it runs
// out of packets and wants to sleep, arms it and sleeps in epoll/poll/select. The lcore that
// queues packets for the endpoint writes the eventfd only while it is armed, and disarms it in
// the same step, so a consumer that busy-polls (never arms) costs the lcore no system call and a
// sleeping one costs one write per wake-up, not per packet. Endpoints whose consumer never asked
// for a descriptor cost one relaxed load of a flag that never changes per delivered run.
//
// Lost wake-ups are excluded as in a futex or io_uring's SQ wake-up:
//   consumer (arm):                      lcore (after enqueue, when enabled):
//     armed = true                         enqueue (ring tail, release)
//     fence                     (F1)       fence                         (F2)
//     ring empty? -> sleep                 armed? -> armed = false, write(fd)
// F1 and F2 order each side's store before its load: the consumer sees the packets, or the lcore
// sees the flag (or both; a spare wake-up is harmless, the consumer re-checks). Both are
// sequentially consistent fences, unless the consumer asked for WakeFence::kRareSleep and the
// kernel allows it: then F2, on every delivered run, is a compiler barrier and F1, once per
// sleep, is membarrier(2), which runs a full barrier on the lcores' CPUs (membarrier.hh).
#pragma once

#include <unistd.h>

#include <atomic>
#include <cstdint>

#include "rawpipe/compiler.hh"

namespace rawpipe {

struct alignas(kFalseSharingRange) EndpointWake {
  EndpointWake() = default;
  EndpointWake(const EndpointWake&) = delete;
  EndpointWake& operator=(const EndpointWake&) = delete;
  ~EndpointWake() {
    if (fd >= 0) ::close(fd);
  }

  // Lcore, after it queued packets to the endpoint's ring on this lcore.
  void after_enqueue() noexcept {
    // Relaxed: set once by the consumer before it first arms; a late sight only delays the
    // lcore's first look by one run, before the consumer could have slept.
    if (!enabled.load(std::memory_order_relaxed)) [[likely]] return;
    // F2, pairs with F1 in wake_arm. Relaxed: `asymmetric` is set before `enabled` (a stale
    // false only costs a full fence, which pairs with either F1) and only ever cleared after
    // that, when the consumer does not sleep until the lcores see it.
    if (asymmetric.load(std::memory_order_relaxed)) [[likely]]
      std::atomic_signal_fence(std::memory_order_seq_cst);
    else
      std::atomic_thread_fence(std::memory_order_seq_cst);
    if (!armed.load(std::memory_order_relaxed)) return;
    if (!armed.exchange(false, std::memory_order_acq_rel)) return;  // another lcore woke it
    // Counted before the write: the consumer it wakes may read the statistic at once, and must
    // find its own wake-up in it (the write is a system call, which orders the two).
    wakeups.fetch_add(1, std::memory_order_relaxed);
    const std::uint64_t one = 1;
    // An eventfd write of 1 fails only when the counter would overflow: it is readable then.
    (void)!::write(fd, &one, sizeof one);
  }

  std::atomic<bool> enabled{false};      // the consumer has the descriptor (fd is valid)
  std::atomic<bool> armed{false};        // the consumer is about to sleep on fd
  std::atomic<bool> asymmetric{false};   // F1 is membarrier(2), F2 a compiler barrier (WakeFence::kRareSleep)
  int fd = -1;                           // eventfd (EFD_NONBLOCK | EFD_CLOEXEC)
  std::atomic<std::uint64_t> wakeups{0}; // eventfd writes made (statistic)
};

}  // namespace rawpipe
