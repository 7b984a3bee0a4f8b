// How often the kernel took an lcore's CPU away: the thread's involuntary context switches.
//
// The lcore thread records its thread id once when it starts and its final count once when it
// leaves its loop (getrusage, off the data path); any other thread reads the live count from
// /proc/self/task/TID/status on the control path (the stats publisher, the metrics server). An
// isolated lcore CPU (isolcpus, nohz_full) shows none; a shared one shows the scheduler at work,
// and its packets wait meanwhile.
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>
#include <string_view>

namespace rawpipe {

// The "nonvoluntary_ctxt_switches" figure of a /proc/.../status text.
std::optional<std::uint64_t> parse_involuntary_switches(std::string_view status) noexcept;

class LcorePreemption {
 public:
  // On the lcore thread: before its loop, and after it.
  void thread_started() noexcept;
  void thread_leaving() noexcept;
  // Any thread: the count so far (0 before the thread started); never decreases.
  std::uint64_t involuntary_switches() const noexcept;

 private:
  // R/A: thread_leaving stores final_ (relaxed) then clears tid_ (release); a reader that finds
  // the task gone (or tid_ 0, acquire) reads final_ after it.
  std::atomic<int> tid_{0};
  std::atomic<std::uint64_t> final_{0};
  mutable std::atomic<std::uint64_t> seen_{0};  // the largest count handed out (readers only)
};

}  // namespace rawpipe
