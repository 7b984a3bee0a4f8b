// An lcore's involuntary context switches: parsed from /proc status text, read live from another
// thread while the lcore thread runs, kept (and never lower) after it left.
#include "pipeline/lcore/preemption.hh"

#include <gtest/gtest.h>
#include <pthread.h>
#include <sched.h>

#include <atomic>
#include <chrono>
#include <thread>

namespace rawpipe {
namespace {

TEST(Preemption, ParsesTheNonvoluntaryLineOnly) {
  constexpr std::string_view kStatus =
      "Name:\trawpipe-lc0\nState:\tR (running)\nvoluntary_ctxt_switches:\t17\nnonvoluntary_ctxt_switches:\t4242\n";
  EXPECT_EQ(parse_involuntary_switches(kStatus), 4242u);
  EXPECT_EQ(parse_involuntary_switches("voluntary_ctxt_switches:\t17\n"), std::nullopt);
  EXPECT_EQ(parse_involuntary_switches("nonvoluntary_ctxt_switches:\tx\n"), std::nullopt);
  EXPECT_EQ(parse_involuntary_switches("xnonvoluntary_ctxt_switches:\t5\nnonvoluntary_ctxt_switches: 6\n"), 6u);
  EXPECT_EQ(parse_involuntary_switches(""), std::nullopt);
}

// Two spinning threads pinned to one CPU: the scheduler must preempt them (CFS slices are a
// few ms), so within half a second the lcore's count, read from this thread, grows.
TEST(Preemption, CountsPreemptionsOfASharedCpuLiveAndAfterExit) {
  cpu_set_t allowed;
  ASSERT_EQ(sched_getaffinity(0, sizeof allowed, &allowed), 0);
  int cpu = 0;
  while (cpu < CPU_SETSIZE && !CPU_ISSET(cpu, &allowed)) ++cpu;
  ASSERT_LT(cpu, CPU_SETSIZE);
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(cpu, &one);

  LcorePreemption p;
  EXPECT_EQ(p.involuntary_switches(), 0u);  // not started
  std::atomic<bool> stop{false}, started{false};
  auto spin = [&](bool lcore) {
    (void)pthread_setaffinity_np(pthread_self(), sizeof one, &one);
    if (lcore) {
      p.thread_started();
      started.store(true);
    }
    while (!stop.load(std::memory_order_relaxed)) {
    }
    if (lcore) p.thread_leaving();
  };
  std::thread lcore(spin, true), rival(spin, false);
  while (!started.load()) std::this_thread::yield();
  std::uint64_t live = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while ((live = p.involuntary_switches()) < 3 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_GE(live, 3u) << "two spinning threads on CPU " << cpu << " were not preempted";
  stop.store(true);
  lcore.join();
  rival.join();
  const std::uint64_t after = p.involuntary_switches();  // the task is gone: the count it left
  EXPECT_GE(after, live);
  EXPECT_EQ(p.involuntary_switches(), after);
}

}  // namespace
}  // namespace rawpipe
