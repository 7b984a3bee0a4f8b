// drop_privileges() on a multi-threaded process: every thread (also ones that were busy before
// the drop, and ones they create afterwards) ends with exactly the kept capabilities, an emptied
// bounding set, no ambient set, no_new_privs, and the run user. Each case runs in a forked child,
// since a drop cannot be undone. The drops themselves need root; they skip otherwise.
#include <gtest/gtest.h>
#include <linux/capability.h>
#include <pwd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <thread>
#include <vector>

#include "rawpipe/privilege.hh"

namespace rawpipe::privilege {
namespace {

namespace fs = std::filesystem;

// Runs body in a child; the child's exit code is the number of failed checks (printed to stderr).
int in_child(const std::function<int()>& body) {
  fflush(nullptr);
  pid_t pid = fork();
  if (pid == 0) _exit(body());
  int st = 0;
  waitpid(pid, &st, 0);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 100 + WTERMSIG(st);
}

int check_all_tasks(CapMask want, uid_t uid, gid_t gid, bool bounding) {
  int bad = 0;
  unsigned n = 0;
  for (const auto& e : fs::directory_iterator("/proc/self/task")) {
    auto c = read_task_creds((e.path() / "status").string());
    if (!c) {
      fprintf(stderr, "%s\n", c.message().c_str());
      ++bad;
      continue;
    }
    const TaskCreds& t = c.value();
    const bool ok = t.eff == want && t.prm == want && t.inh == 0 && t.amb == 0 && (!bounding || t.bnd == want) &&
                    t.no_new_privs == 1 && t.uid[0] == uid && t.uid[1] == uid && t.uid[2] == uid &&
                    t.gid[0] == gid && t.gid[1] == gid && t.gid[2] == gid;
    if (!ok) {
      fprintf(stderr, "%s: eff %llx prm %llx bnd %llx amb %llx nnp %d uid %u gid %u\n", e.path().c_str(),
              (unsigned long long)t.eff, (unsigned long long)t.prm, (unsigned long long)t.bnd,
              (unsigned long long)t.amb, t.no_new_privs, t.uid[1], t.gid[1]);
      ++bad;
    }
    ++n;
  }
  if (n < 4) {
    fprintf(stderr, "only %u tasks\n", n);
    ++bad;
  }
  return bad;
}

// Three busy threads, like lcores polling, and one sleeping, like the stats publisher.
struct Workers {
  std::atomic<bool> stop{false};
  std::vector<std::thread> t;
  Workers() {
    for (int i = 0; i < 3; ++i)
      t.emplace_back([this] {
        volatile unsigned long x = 0;
        while (!stop.load(std::memory_order_relaxed)) x = x + 1;
      });
    t.emplace_back([this] {
      while (!stop.load()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    });
  }
  ~Workers() {
    stop = true;
    for (auto& th : t) th.join();
  }
};

TEST(Drop, FormatsCapabilities) {
  EXPECT_EQ(format_caps(0), "none");
  EXPECT_EQ(format_caps((CapMask{1} << CAP_NET_ADMIN) | (CapMask{1} << CAP_SYS_ADMIN)), "CAP_NET_ADMIN, CAP_SYS_ADMIN");
  // Every capability has its name (the privileges line used to print "cap 2 ... cap 40").
  EXPECT_EQ(format_caps(CapMask{1} << CAP_DAC_READ_SEARCH), "CAP_DAC_READ_SEARCH");
  EXPECT_EQ(format_caps(CapMask{1} << CAP_CHECKPOINT_RESTORE), "CAP_CHECKPOINT_RESTORE");
  for (int c = 0; c <= CAP_LAST_CAP; ++c) EXPECT_EQ(format_caps(CapMask{1} << c).find("cap "), std::string::npos) << c;
  EXPECT_EQ(format_caps(CapMask{1} << 62), "cap 62");
}

TEST(Drop, PortsNeedOnlyWhatTheyUseAfterSetup) {
  std::vector<std::string> why;
  for (const char* pmd : {"synth", "pcap", "socket", "af_packet", "mlx5-model", "mana-model"})
    EXPECT_EQ(runtime_needs_for_port(pmd, "p", why), 0u) << pmd;
  EXPECT_TRUE(why.empty());
  EXPECT_EQ(runtime_needs_for_port("af_xdp", "x", why),
            (CapMask{1} << CAP_NET_ADMIN) | (CapMask{1} << CAP_SYS_ADMIN));
  ASSERT_EQ(why.size(), 1u);
  EXPECT_NE(why[0].find("port x (af_xdp)"), std::string::npos) << why[0];
  EXPECT_EQ(runtime_needs_for_port("dpdk", "d", why), ~CapMask{0});
  EXPECT_NE(why.back().find("no least-privilege profile"), std::string::npos);
}

TEST(Drop, MissingUserOrGroupIsAClearError) {
  auto u = resolve_run_user("no-such-user-rawpipe", "");
  ASSERT_FALSE(u);
  EXPECT_NE(u.message().find("[run] user \"no-such-user-rawpipe\" does not exist"), std::string::npos) << u.message();
  if (getpwnam("nobody")) {
    auto g = resolve_run_user("nobody", "no-such-group-rawpipe");
    ASSERT_FALSE(g);
    EXPECT_NE(g.message().find("[run] group \"no-such-group-rawpipe\" does not exist"), std::string::npos);
  }
  auto root = resolve_run_user("root", "");
  ASSERT_FALSE(root);
  EXPECT_NE(root.message().find("is root"), std::string::npos);
}

TEST(Drop, EveryThreadLosesEverythingAndBecomesNobody) {
  if (geteuid() != 0) GTEST_SKIP() << "dropping to another user needs root";
  auto u = resolve_run_user("nobody", "");
  if (!u) GTEST_SKIP() << u.message();
  const RunUser user = u.value();
  EXPECT_EQ(in_child([&] {
              Workers w;
              DropRequest req;
              req.switch_user = true;
              req.user = user;
              auto r = drop_privileges(req);
              if (!r) {
                fprintf(stderr, "%s\n", r.message().c_str());
                return 50;
              }
              int bad = check_all_tasks(0, user.uid, user.gid, true);
              // A thread created after the drop inherits it.
              std::thread late([&] { bad += check_all_tasks(0, user.uid, user.gid, true); });
              late.join();
              if (r->line.find("capabilities kept: none") == std::string::npos ||
                  r->line.find("bounding set emptied") == std::string::npos) {
                fprintf(stderr, "report: %s\n", r->line.c_str());
                ++bad;
              }
              // No way back.
              if (setuid(0) == 0) ++bad;
              return bad;
            }),
            0);
}

TEST(Drop, KeptCapabilitiesSurviveTheUserSwitch) {
  if (geteuid() != 0) GTEST_SKIP() << "dropping to another user needs root";
  auto u = resolve_run_user("nobody", "");
  if (!u) GTEST_SKIP() << u.message();
  const RunUser user = u.value();
  const CapMask keep = (CapMask{1} << CAP_NET_ADMIN) | (CapMask{1} << CAP_SYS_ADMIN);
  EXPECT_EQ(in_child([&] {
              Workers w;
              DropRequest req;
              req.keep = keep;
              req.keep_why.push_back("port x (af_xdp) detaches its XDP program at stop");
              req.switch_user = true;
              req.user = user;
              auto r = drop_privileges(req);
              if (!r) {
                fprintf(stderr, "%s\n", r.message().c_str());
                return 50;
              }
              int bad = check_all_tasks(keep, user.uid, user.gid, true);
              if (r->line.find("capabilities kept: CAP_NET_ADMIN, CAP_SYS_ADMIN; port x (af_xdp)") == std::string::npos) {
                fprintf(stderr, "report: %s\n", r->line.c_str());
                ++bad;
              }
              return bad;
            }),
            0);
}

TEST(Drop, WithoutAUserRootKeepsItsUidButNoCapability) {
  if (geteuid() != 0) GTEST_SKIP() << "a full capability set needs root";
  EXPECT_EQ(in_child([&] {
              Workers w;
              auto r = drop_privileges(DropRequest{});
              if (!r) {
                fprintf(stderr, "%s\n", r.message().c_str());
                return 50;
              }
              return check_all_tasks(0, 0, 0, true);
            }),
            0);
}

TEST(Drop, AnUnprivilegedProcessStillGetsNoNewPrivs) {
  // Runs as whoever runs the tests: as root, first become nobody without help from the module.
  EXPECT_EQ(in_child([&] {
              if (geteuid() == 0) {
                const passwd* pw = getpwnam("nobody");
                if (!pw || setgid(pw->pw_gid) != 0 || setuid(pw->pw_uid) != 0) return 0;  // nothing to test
              }
              Workers w;
              auto r = drop_privileges(DropRequest{});
              if (!r) {
                fprintf(stderr, "%s\n", r.message().c_str());
                return 50;
              }
              if (r->line.find("bounding set unchanged (no CAP_SETPCAP)") == std::string::npos) return 40;
              return check_all_tasks(0, getuid(), getgid(), false);
            }),
            0);
}

}  // namespace
}  // namespace rawpipe::privilege
