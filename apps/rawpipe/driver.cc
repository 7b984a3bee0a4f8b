#include "driver.hh"

#include <poll.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace rawpipe::app {

Status ThreadlessDriver::start(Pipeline& pipeline) {
  if (!pipeline.has_threadless_lcores()) return Status::ok();
  const Pipeline::ProgressFds& queues = pipeline.progress_fds();
  const bool nap = !queues.missing.empty();  // a queue without a descriptor: wake every millisecond
  std::vector<int> queue_fds = queues.fds;
  if (stop_fd_ < 0) {
    stop_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (stop_fd_ < 0) return Status::errorf("lcore driver: eventfd: {}", std::strerror(errno));
  }
  stop_.store(false, std::memory_order_relaxed);
  thread_ = std::thread(&ThreadlessDriver::loop, this, &pipeline, std::move(queue_fds), nap);
  pthread_setname_np(thread_.native_handle(), "rawpipe-drive");  // shows in top -H, perf
  return Status::ok();
}

void ThreadlessDriver::stop() {
  // Relaxed: the flag carries no data; join() is the synchronisation.
  stop_.store(true, std::memory_order_relaxed);
  if (thread_.joinable()) {
    const std::uint64_t one = 1;
    (void)!::write(stop_fd_, &one, sizeof one);
    thread_.join();
  }
}

ThreadlessDriver::~ThreadlessDriver() {
  stop();
  if (stop_fd_ >= 0) ::close(stop_fd_);
}

void ThreadlessDriver::loop(Pipeline* pipeline, std::vector<int> queue_fds, bool nap) {
  std::vector<pollfd> fds{{stop_fd_, POLLIN, 0}};
  for (int fd : queue_fds) fds.push_back({fd, POLLIN, 0});
  unsigned idle = 0;
  while (!stop_.load(std::memory_order_relaxed)) {
    if (pipeline->progress() != 0) {
      idle = 0;
      continue;
    }
    if (++idle < kIdlePasses) continue;
    idle = 0;
    // The queue descriptors are level-triggered: packets that arrived since the last pass end
    // the sleep at once.
    sleeps_.fetch_add(1, std::memory_order_relaxed);
    (void)::poll(fds.data(), fds.size(), nap ? 1 : -1);
  }
}

}  // namespace rawpipe::app
