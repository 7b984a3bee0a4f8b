#include "pipeline/lcore/preemption.hh"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstdio>

namespace rawpipe {

std::optional<std::uint64_t> parse_involuntary_switches(std::string_view status) noexcept {
  constexpr std::string_view kKey = "nonvoluntary_ctxt_switches:";
  std::size_t at = 0;
  while ((at = status.find(kKey, at)) != std::string_view::npos) {
    if (at == 0 || status[at - 1] == '\n') break;
    at += kKey.size();
  }
  if (at == std::string_view::npos) return std::nullopt;
  std::string_view rest = status.substr(at + kKey.size());
  while (!rest.empty() && (rest.front() == ' ' || rest.front() == '\t')) rest.remove_prefix(1);
  std::uint64_t v = 0;
  const auto [end, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), v);
  if (ec != std::errc() || end == rest.data()) return std::nullopt;
  return v;
}

void LcorePreemption::thread_started() noexcept {
  tid_.store(static_cast<int>(::syscall(SYS_gettid)), std::memory_order_release);
}

void LcorePreemption::thread_leaving() noexcept {
  rusage ru{};
  if (::getrusage(RUSAGE_THREAD, &ru) == 0) final_.store(static_cast<std::uint64_t>(ru.ru_nivcsw), std::memory_order_relaxed);
  tid_.store(0, std::memory_order_release);  // R: pairs with the acquire in involuntary_switches()
}

std::uint64_t LcorePreemption::involuntary_switches() const noexcept {
  std::uint64_t v = 0;
  bool live = false;
  if (const int tid = tid_.load(std::memory_order_acquire)) {  // A: pairs with the release stores
    char path[64];
    std::snprintf(path, sizeof path, "/proc/self/task/%d/status", tid);
    const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
      char buf[8192];  // the status file is about 1.5 KiB; the count is near its end
      const ssize_t n = ::read(fd, buf, sizeof buf);
      ::close(fd);
      if (n > 0) {
        if (auto parsed = parse_involuntary_switches(std::string_view(buf, static_cast<std::size_t>(n)))) {
          v = *parsed;
          live = true;
        }
      }
    }
  }
  // The task is gone (or never started): its last count, stored before tid_ was cleared.
  if (!live) v = final_.load(std::memory_order_relaxed);
  // Readers race with the thread's exit; hand out the largest count seen so a counter never goes back.
  std::uint64_t prev = seen_.load(std::memory_order_relaxed);
  while (prev < v && !seen_.compare_exchange_weak(prev, v, std::memory_order_relaxed)) {
  }
  return std::max(prev, v);
}

}  // namespace rawpipe
