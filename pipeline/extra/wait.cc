#include "pipeline/extra/wait.hh"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "pipeline/dispatch/membarrier.hh"
#include "pipeline/dispatch/wake.hh"
#include "rawpipe/endpoint_wait.hh"
#include "rawpipe/pipeline.hh"

namespace rawpipe {

Result<int> wake_fd(EndpointWake& w, bool asymmetric) {
  if (w.fd >= 0) return w.fd;
  const int fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (fd < 0) return Status::errorf("eventfd: {}", std::strerror(errno));
  w.fd = fd;
  // Before `enabled`: an lcore that still sees asymmetric false runs a full fence, which pairs
  // with either kind of F1. Registration belongs to the address space, so it is asked for here
  // (control path, idempotent) rather than once per process: a child after fork() needs its own.
  if (asymmetric && membarrier_register()) w.asymmetric.store(true, std::memory_order_relaxed);
  // Release: an lcore that sees enabled sees fd.
  w.enabled.store(true, std::memory_order_release);
  return fd;
}

bool wake_arm(EndpointWake& w, const Pipeline& p, std::uint16_t endpoint) {
  std::uint64_t drained;
  while (::read(w.fd, &drained, sizeof drained) == sizeof drained) {
  }
  w.armed.store(true, std::memory_order_relaxed);
  // F1, pairs with F2 in after_enqueue (pipeline/dispatch/wake.hh).
  if (w.asymmetric.load(std::memory_order_relaxed)) {
    if (!membarrier_private()) {
      // Never seen once registered; should it happen, both sides go back to full fences. The
      // lcores may still skip theirs for a run or two, so look again instead of sleeping now.
      w.asymmetric.store(false, std::memory_order_relaxed);
      std::atomic_thread_fence(std::memory_order_seq_cst);
      w.armed.store(false, std::memory_order_relaxed);
      return true;
    }
  } else {
    std::atomic_thread_fence(std::memory_order_seq_cst);
  }
  if (p.endpoint_queued(endpoint) == 0) return false;
  w.armed.store(false, std::memory_order_relaxed);
  return true;
}

Result<bool> wake_sleep(int fd, int timeout_ms, std::span<const int> also) {
  pollfd small[8];
  std::vector<pollfd> big;
  pollfd* pfd = small;
  const std::size_t n = 1 + also.size();
  if (n > std::size(small)) {
    big.resize(n);
    pfd = big.data();
  }
  pfd[0] = {fd, POLLIN, 0};
  for (std::size_t i = 0; i < also.size(); ++i) pfd[i + 1] = {also[i], POLLIN, 0};
  for (;;) {
    const int r = ::poll(pfd, n, timeout_ms);
    if (r > 0) return true;
    if (r == 0) return false;
    if (errno != EINTR) return Status::errorf("poll: {}", std::strerror(errno));
  }
}

Result<int> endpoint_wait_fd(Pipeline& pipeline, std::uint16_t endpoint) {
  EndpointWake* w = pipeline.endpoint_wake(endpoint);
  if (!w)
    return Status::errorf("endpoint {} is not a ring endpoint: only a ring has a consumer to wake", endpoint);
  return wake_fd(*w);
}

Result<int> endpoint_wait_fd(Pipeline& pipeline, std::uint16_t endpoint, WakeFence fence) {
  EndpointWake* w = pipeline.endpoint_wake(endpoint);
  if (!w)
    return Status::errorf("endpoint {} is not a ring endpoint: only a ring has a consumer to wake", endpoint);
  return wake_fd(*w, fence == WakeFence::kRareSleep);
}

Result<bool> endpoint_arm(Pipeline& pipeline, std::uint16_t endpoint) {
  EndpointWake* w = pipeline.endpoint_wake(endpoint);
  if (!w)
    return Status::errorf("endpoint {} is not a ring endpoint: only a ring has a consumer to wake", endpoint);
  if (w->fd < 0)
    return Status::errorf("endpoint {} has no wait descriptor yet; call endpoint_wait_fd first", endpoint);
  return wake_arm(*w, pipeline, endpoint);
}

}  // namespace rawpipe
