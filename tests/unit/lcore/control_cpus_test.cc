// Control threads move off the pinned lcores' CPUs, and threads they start afterwards inherit it.
#include "rawpipe/control_cpus.hh"

#include <gtest/gtest.h>
#include <pthread.h>
#include <sched.h>

#include <thread>

namespace rawpipe {
namespace {

std::vector<int> affinity_of_this_thread() {
  cpu_set_t set;
  CPU_ZERO(&set);
  EXPECT_EQ(pthread_getaffinity_np(pthread_self(), sizeof set, &set), 0);
  std::vector<int> out;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) out.push_back(c);
  return out;
}

Plan plan_with_lcores_on(std::vector<int> cpus) {
  Plan p;
  for (std::size_t i = 0; i < cpus.size(); ++i) {
    LcorePlan l;
    l.id = static_cast<std::uint16_t>(i);
    l.cpu = cpus[i];
    p.lcores.push_back(l);
  }
  return p;
}

// Each case runs on its own thread so the test process keeps its affinity.
template <typename F>
void on_a_thread(F f) {
  std::thread t(f);
  t.join();
}

TEST(ControlCpus, MovesOffTheLcoreCpusAndNewThreadsInherit) {
  const std::vector<int> allowed = affinity_of_this_thread();
  if (allowed.size() < 2) GTEST_SKIP() << "needs 2 allowed CPUs, this process has " << allowed.size();
  on_a_thread([&] {
    auto r = keep_control_threads_off_lcores(plan_with_lcores_on({allowed.back(), -1}));
    ASSERT_TRUE(r) << r.message();
    EXPECT_TRUE(r->applied);
    EXPECT_EQ(r->lcore_cpus, std::vector<int>{allowed.back()});
    const std::vector<int> expect(allowed.begin(), allowed.end() - 1);
    EXPECT_EQ(r->cpus, expect);
    EXPECT_EQ(affinity_of_this_thread(), expect);
    std::vector<int> child;
    std::thread([&] { child = affinity_of_this_thread(); }).join();
    EXPECT_EQ(child, expect) << "a thread started afterwards did not inherit the control CPUs";
    EXPECT_NE(r->note.find("(off the lcore CPU"), std::string::npos) << r->note;
  });
}

TEST(ControlCpus, LeavesAffinityAloneWhenNothingRemainsOrNothingIsPinned) {
  const std::vector<int> allowed = affinity_of_this_thread();
  on_a_thread([&] {
    auto r = keep_control_threads_off_lcores(plan_with_lcores_on({-1, -1}));
    ASSERT_TRUE(r) << r.message();
    EXPECT_FALSE(r->applied);
    EXPECT_EQ(affinity_of_this_thread(), allowed);
    r = keep_control_threads_off_lcores(plan_with_lcores_on(allowed));
    ASSERT_TRUE(r) << r.message();
    EXPECT_FALSE(r->applied);
    EXPECT_NE(r->note.find("leave one CPU without an lcore"), std::string::npos) << r->note;
    EXPECT_EQ(affinity_of_this_thread(), allowed);
  });
}

}  // namespace
}  // namespace rawpipe
