#include "preload/kernel_only_stats.hh"

#include <signal.h>
#include <stdio.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <thread>

#include <nlohmann/json.hpp>

#include "preload/socket_stats.hh"
#include "rawpipe/shm_stats.hh"

namespace rawpipe::preload {
namespace {

struct Publisher {
  ops::ShmStatsWriter segment;
  std::string name;
  std::string why;
  pid_t owner = 0;  // the process that made the segment; only it may remove it
  std::mutex mu;
  std::condition_variable wake;
  bool stop = false;
  std::thread thread;
};

// Made once and never destroyed by the runtime: a forked child's exit must not run the segment's
// destructor, which would remove its parent's segment. A child never makes its own (its sockets
// stay the kernel's without a start), and its exit handler leaves this one alone (owner).
Publisher* g_publisher = nullptr;

std::string document(const Publisher& p, bool with_sockets) {
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  nlohmann::json doc = {
      {"name", p.name},
      {"pid", static_cast<long>(p.owner)},
      {"running", true},
      {"time_ns", std::chrono::duration_cast<std::chrono::nanoseconds>(now).count()},
      {"nothing_offloaded", p.why},
  };
  doc["sections"]["sockets"] =
      with_sockets ? nlohmann::json::parse(sockets_now(nullptr), nullptr, false) : nlohmann::json::array();
  return doc.dump();
}

// Once a second, as a pipeline's publisher does ([run] stats_interval's default): the kernel's
// drop counts and the sockets bound since move on without the application doing anything.
void publish_loop(Publisher* p) {
  std::unique_lock lock(p->mu);
  while (!p->stop) {
    lock.unlock();
    (void)p->segment.publish(document(*p, true));
    lock.lock();
    p->wake.wait_for(lock, std::chrono::seconds(1), [p] { return p->stop; });
  }
}

void stop_at_exit() {
  Publisher* p = g_publisher;
  if (!p || p->owner != getpid()) return;
  {
    std::lock_guard lock(p->mu);
    p->stop = true;
  }
  p->wake.notify_all();
  if (p->thread.joinable()) p->thread.join();
  // Removes /dev/shm/rawpipe.<pid> and the name link: nothing is left once the process is gone.
  p->segment = ops::ShmStatsWriter();
}

}  // namespace

void publish_kernel_only(const std::string& why) {
  if (g_publisher) return;
  const pid_t pid = getpid();
  // The name a running pipeline of this process would have taken (its config file's stem).
  const std::string name = "rawpipe-preload-" + std::to_string(static_cast<long>(pid));
  auto segment = ops::ShmStatsWriter::create(name);
  if (!segment) {
    const std::string line = "rawpipe-preload: no stats segment for rawpipe stat: " + segment.message() + "\n";
    (void)!::write(2, line.data(), line.size());
    return;
  }
  auto* p = new Publisher;
  p->segment = std::move(segment).value();
  p->name = name;
  p->why = why;
  p->owner = pid;
  // Without the rows: the caller holds the control lock they are read under. The thread publishes
  // them at once.
  (void)p->segment.publish(document(*p, false));
  // The application's signals stay the application's: the thread takes none of them.
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  try {
    p->thread = std::thread(publish_loop, p);
    pthread_setname_np(p->thread.native_handle(), "rawpipe-stats");
  } catch (const std::system_error&) {
    // No thread: the reason stays readable, without the sockets.
  }
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  g_publisher = p;
  std::atexit(stop_at_exit);
}

}  // namespace rawpipe::preload
