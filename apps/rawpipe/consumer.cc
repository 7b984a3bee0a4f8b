#include "consumer.hh"

#include <poll.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>

#include <cstring>

#include <fmt/core.h>

namespace rawpipe::app {

Status RingConsumer::start(Pipeline& pipeline, int cpu) {
  std::vector<std::uint16_t> endpoints;
  const Plan& plan = pipeline.plan();
  for (const auto& e : plan.endpoints)
    if (e.action == EndpointAction::kRing) endpoints.push_back(e.id);
  endpoint_count_ = plan.endpoints.size();
  received_ = std::make_unique<std::atomic<std::uint64_t>[]>(endpoint_count_);
  for (std::size_t i = 0; i < endpoint_count_; ++i) received_[i].store(0, std::memory_order_relaxed);
  if (endpoints.empty()) return Status::ok();

  stop_.store(false, std::memory_order_relaxed);
  if (stop_fd_ < 0) {
    stop_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (stop_fd_ < 0) return Status::errorf("ring consumer: eventfd: {}", std::strerror(errno));
  }
  thread_ = std::thread(&RingConsumer::loop, this, &pipeline, std::move(endpoints));
  pthread_setname_np(thread_.native_handle(), "rawpipe-consume");  // shows in top -H, perf
  if (cpu >= 0) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    int err = pthread_setaffinity_np(thread_.native_handle(), sizeof set, &set);
    if (err != 0) {
      stop();
      return Status::errorf("cannot pin the ring consumer to cpu {}: {}; change [run] consumer_cpu", cpu,
                            std::strerror(err));
    }
  }
  return Status::ok();
}

void RingConsumer::stop() {
  // Relaxed: the flag carries no data; join() below is the synchronisation.
  stop_.store(true, std::memory_order_relaxed);
  if (thread_.joinable()) {
    // Wakes the thread if it sleeps; the eventfd write happens after the store above, and the
    // thread re-reads the flag after every wake-up.
    const std::uint64_t one = 1;
    (void)!::write(stop_fd_, &one, sizeof one);
    thread_.join();
  }
}

RingConsumer::~RingConsumer() {
  stop();
  if (stop_fd_ >= 0) ::close(stop_fd_);
}

std::vector<std::uint64_t> RingConsumer::received() const {
  std::vector<std::uint64_t> out(endpoint_count_);
  for (std::size_t i = 0; i < endpoint_count_; ++i) out[i] = received_[i].load(std::memory_order_relaxed);
  return out;
}

// Wait policy (docs/consumer-wait.md): after kSpinPolls passes that found every ring empty the
// thread arms each endpoint's descriptor and sleeps in poll() until an lcore queues packets (one
// eventfd write per wake-up, none while the thread spins) or stop() writes stop_fd_. Under load
// the rings never stay empty that long, so the thread never sleeps and the lcores never write.
void RingConsumer::loop(Pipeline* pipeline, std::vector<std::uint16_t> endpoints) {
  Mbuf* burst[kMaxBurst];
  std::vector<std::uint64_t> local(endpoint_count_, 0);
  std::vector<pollfd> fds;
  fds.push_back({stop_fd_, POLLIN, 0});
  for (std::uint16_t e : endpoints) {
    // This thread sleeps only when traffic stops: membarrier once per sleep is cheaper for the
    // lcores than a fence on every run they deliver.
    auto fd = endpoint_wait_fd(*pipeline, e, WakeFence::kRareSleep);
    if (!fd) {
      // Without a descriptor the thread can only spin; say so once rather than fail the run.
      fmt::print(stderr, "rawpipe: ring consumer: {}; it will poll without sleeping\n", fd.message());
      fds.clear();
      break;
    }
    fds.push_back({fd.value(), POLLIN, 0});
  }
  unsigned idle = 0;
  while (!stop_.load(std::memory_order_relaxed)) {
    bool any = false;
    for (std::uint16_t e : endpoints) {
      unsigned n = pipeline->endpoint_receive(e, burst, kMaxBurst);
      if (n == 0) continue;
      any = true;
      if (e2e_) e2e_->on_batch(e, burst, n);  // sampled; reads the stamps before the free below
      // Back to the lcore that queued them, which frees them where their headers are cached;
      // this thread never touches a header.
      pipeline->endpoint_release(e, burst, n);
      local[e] += n;
      // Single writer: publish the running total for the stats line.
      received_[e].store(local[e], std::memory_order_relaxed);
    }
    if (any) {
      idle = 0;
      continue;
    }
    if (++idle < kSpinPolls || fds.empty()) {
      cpu_relax();
      continue;
    }
    idle = 0;
    bool waiting = false;
    for (std::uint16_t e : endpoints) {
      auto armed = endpoint_arm(*pipeline, e);
      waiting |= !armed || armed.value();  // an error: look again rather than sleep blind
    }
    if (waiting) continue;
    sleeps_.fetch_add(1, std::memory_order_relaxed);
    // No time limit: a packet or stop() wakes the thread. EINTR (a signal) just looks again.
    (void)::poll(fds.data(), fds.size(), -1);
  }
}

}  // namespace rawpipe::app
