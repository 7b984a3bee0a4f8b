#include "consumer.hh"

#include <pthread.h>
#include <sched.h>

#include <cstring>


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
  if (thread_.joinable()) thread_.join();
}

std::vector<std::uint64_t> RingConsumer::received() const {
  std::vector<std::uint64_t> out(endpoint_count_);
  for (std::size_t i = 0; i < endpoint_count_; ++i) out[i] = received_[i].load(std::memory_order_relaxed);
  return out;
}

void RingConsumer::loop(Pipeline* pipeline, std::vector<std::uint16_t> endpoints) {
  Mbuf* burst[kMaxBurst];
  std::vector<std::uint64_t> local(endpoint_count_, 0);
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
    } else if (++idle > 1024) {
      // Nothing for a while: let another thread have the core (the consumer may share one).
      sched_yield();
      idle = 0;
    } else {
      cpu_relax();
    }
  }
}

}  // namespace rawpipe::app
