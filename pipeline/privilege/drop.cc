#include "rawpipe/privilege.hh"

#include <dirent.h>
#include <grp.h>
#include <linux/capability.h>
#include <pwd.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

namespace rawpipe::privilege {
namespace {

constexpr CapMask bit(int cap) { return CapMask{1} << cap; }

// Every capability the kernel headers name, in number order (capabilities(7)); a kernel newer
// than the headers may report more, printed as "cap N".
#define RAWPIPE_CAP(name) std::pair<int, std::string_view>{CAP_##name, "CAP_" #name}
constexpr std::pair<int, std::string_view> kCapNames[] = {
    RAWPIPE_CAP(CHOWN), RAWPIPE_CAP(DAC_OVERRIDE), RAWPIPE_CAP(DAC_READ_SEARCH), RAWPIPE_CAP(FOWNER),
    RAWPIPE_CAP(FSETID), RAWPIPE_CAP(KILL), RAWPIPE_CAP(SETGID), RAWPIPE_CAP(SETUID), RAWPIPE_CAP(SETPCAP),
    RAWPIPE_CAP(LINUX_IMMUTABLE), RAWPIPE_CAP(NET_BIND_SERVICE), RAWPIPE_CAP(NET_BROADCAST),
    RAWPIPE_CAP(NET_ADMIN), RAWPIPE_CAP(NET_RAW), RAWPIPE_CAP(IPC_LOCK), RAWPIPE_CAP(IPC_OWNER),
    RAWPIPE_CAP(SYS_MODULE), RAWPIPE_CAP(SYS_RAWIO), RAWPIPE_CAP(SYS_CHROOT), RAWPIPE_CAP(SYS_PTRACE),
    RAWPIPE_CAP(SYS_PACCT), RAWPIPE_CAP(SYS_ADMIN), RAWPIPE_CAP(SYS_BOOT), RAWPIPE_CAP(SYS_NICE),
    RAWPIPE_CAP(SYS_RESOURCE), RAWPIPE_CAP(SYS_TIME), RAWPIPE_CAP(SYS_TTY_CONFIG), RAWPIPE_CAP(MKNOD),
    RAWPIPE_CAP(LEASE), RAWPIPE_CAP(AUDIT_WRITE), RAWPIPE_CAP(AUDIT_CONTROL), RAWPIPE_CAP(SETFCAP),
    RAWPIPE_CAP(MAC_OVERRIDE), RAWPIPE_CAP(MAC_ADMIN), RAWPIPE_CAP(SYSLOG), RAWPIPE_CAP(WAKE_ALARM),
    RAWPIPE_CAP(BLOCK_SUSPEND), RAWPIPE_CAP(AUDIT_READ), RAWPIPE_CAP(PERFMON), RAWPIPE_CAP(BPF),
    RAWPIPE_CAP(CHECKPOINT_RESTORE),
};
#undef RAWPIPE_CAP
constexpr bool caps_in_number_order() {
  for (std::size_t i = 0; i < std::size(kCapNames); ++i)
    if (kCapNames[i].first != int(i)) return false;
  return std::size(kCapNames) == CAP_LAST_CAP + 1;
}
static_assert(caps_in_number_order(), "kCapNames[c] names capability c, for every c the headers know");

int last_cap() {
  std::ifstream in("/proc/sys/kernel/cap_last_cap");
  int n = CAP_LAST_CAP;
  if (!(in >> n) || n < 0 || n > 63) n = CAP_LAST_CAP;
  return n;
}

pid_t current_tid() { return static_cast<pid_t>(syscall(SYS_gettid)); }

// ---- the per-thread part ----

// What each thread does. Everything here is a plain system call: it also runs in a signal handler.
struct ThreadStep {
  bool drop_bounding = false;
  int last_cap = CAP_LAST_CAP;
  CapMask keep = 0;
  bool clear_ambient = false;
  int keepcaps = -1;  // -1: leave; 0/1: PR_SET_KEEPCAPS
  bool set_caps = false;
  bool no_new_privs = false;
};

// Returns 0 or an errno; `*failed` names the call that failed.
int apply_step(const ThreadStep& s, const char** failed) noexcept {
  if (s.drop_bounding) {
    for (int c = 0; c <= s.last_cap; ++c) {
      if (s.keep & bit(c)) continue;
      if (prctl(PR_CAPBSET_DROP, c, 0, 0, 0) != 0 && errno != EINVAL) {
        *failed = "prctl(PR_CAPBSET_DROP)";
        return errno;
      }
    }
  }
  if (s.clear_ambient && prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0 && errno != EINVAL) {
    *failed = "prctl(PR_CAP_AMBIENT_CLEAR_ALL)";
    return errno;
  }
  if (s.keepcaps >= 0 && prctl(PR_SET_KEEPCAPS, s.keepcaps, 0, 0, 0) != 0) {
    *failed = "prctl(PR_SET_KEEPCAPS)";
    return errno;
  }
  if (s.set_caps) {
    __user_cap_header_struct hdr{_LINUX_CAPABILITY_VERSION_3, 0};
    __user_cap_data_struct data[2] = {};
    for (int i = 0; i < 2; ++i) {
      const auto word = static_cast<std::uint32_t>(s.keep >> (32 * i));
      data[i].effective = word;
      data[i].permitted = word;
      data[i].inheritable = 0;
    }
    if (syscall(SYS_capset, &hdr, data) != 0) {
      *failed = "capset";
      return errno;
    }
  }
  if (s.no_new_privs && prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
    *failed = "prctl(PR_SET_NO_NEW_PRIVS)";
    return errno;
  }
  return 0;
}

// The broadcast, after glibc's setxid and libcap's psx: every other thread gets a signal whose
// handler applies the step to itself and acknowledges with its tid.
constexpr std::size_t kMaxThreads = 4096;
std::atomic<const ThreadStep*> g_step{nullptr};
std::atomic<int> g_error{0};
std::atomic<const char*> g_failed{nullptr};
std::array<std::atomic<pid_t>, kMaxThreads> g_acked{};
std::atomic<std::size_t> g_acks{0};

extern "C" void on_step_signal(int) {
  const int saved = errno;
  // B1: pairs with the release store of g_step in broadcast() (before tgkill): the step is complete.
  const ThreadStep* s = g_step.load(std::memory_order_acquire);
  if (s) {
    const char* failed = nullptr;
    if (int e = apply_step(*s, &failed)) {
      int expected = 0;
      if (g_error.compare_exchange_strong(expected, e, std::memory_order_relaxed))
        g_failed.store(failed, std::memory_order_relaxed);
    }
    const std::size_t i = g_acks.fetch_add(1, std::memory_order_relaxed);
    // B2: release pairs with the acquire loads in broadcast(): the ack is seen after the calls
    // (and the error recorded above) took effect.
    if (i < kMaxThreads) g_acked[i].store(current_tid(), std::memory_order_release);
  }
  errno = saved;
}

std::vector<pid_t> list_tasks() {
  std::vector<pid_t> out;
  DIR* d = opendir("/proc/self/task");
  if (!d) return out;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    out.push_back(static_cast<pid_t>(std::atoi(e->d_name)));
  }
  closedir(d);
  return out;
}

bool task_exists(pid_t tid) {
  struct stat st {};
  return stat(fmt::format("/proc/self/task/{}", tid).c_str(), &st) == 0;
}

std::mutex g_broadcast_mu;  // one broadcast at a time (the handler state is global)

Status broadcast(const ThreadStep& step, std::string_view what) {
  std::lock_guard lock(g_broadcast_mu);
  const char* failed = nullptr;
  if (int e = apply_step(step, &failed))
    return Status::errorf("{}: {} failed on the control thread: {}", what, failed, std::strerror(e));

  const int sig = SIGRTMIN + 4;
  struct sigaction sa {}, old {};
  sa.sa_handler = on_step_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;  // an interrupted read/write/sendto resumes instead of failing
  if (sigaction(sig, &sa, &old) != 0) return Status::errorf("{}: sigaction: {}", what, std::strerror(errno));
  g_error.store(0, std::memory_order_relaxed);
  g_failed.store(nullptr, std::memory_order_relaxed);
  g_acks.store(0, std::memory_order_relaxed);
  for (auto& a : g_acked) a.store(0, std::memory_order_relaxed);
  g_step.store(&step, std::memory_order_release);  // B1

  Status result;
  const pid_t self = current_tid();
  std::set<pid_t> handled{self};
  std::set<pid_t> pending;
  // A thread signalled before it created another passes the new state on; one created before it
  // was signalled shows up in the next listing. Repeat until a listing brings no new thread.
  for (int round = 0; round < 100 && result.is_ok(); ++round) {
    bool fresh = false;
    for (pid_t tid : list_tasks()) {
      if (handled.count(tid)) continue;
      handled.insert(tid);
      if (syscall(SYS_tgkill, getpid(), tid, sig) == 0) {
        pending.insert(tid);
        fresh = true;
      }
    }
    if (!fresh) break;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    while (!pending.empty()) {
      const std::size_t acks = std::min(g_acks.load(std::memory_order_relaxed), kMaxThreads);
      for (std::size_t i = 0; i < acks; ++i) pending.erase(g_acked[i].load(std::memory_order_acquire));  // B2
      if (pending.empty()) break;
      if (std::chrono::steady_clock::now() > deadline) {
        // A thread that exited with the signal pending never answers; that is fine.
        for (auto it = pending.begin(); it != pending.end();) it = task_exists(*it) ? std::next(it) : pending.erase(it);
        if (!pending.empty())
          result = Status::errorf("{}: thread {} did not handle signal {} within 2 s (does it block signals?)", what,
                                  *pending.begin(), sig);
        break;
      }
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  }
  g_step.store(nullptr, std::memory_order_relaxed);
  sigaction(sig, &old, nullptr);
  if (!result) return result;
  if (int e = g_error.load(std::memory_order_relaxed)) {
    const char* f = g_failed.load(std::memory_order_relaxed);
    return Status::errorf("{}: {} failed on a pipeline thread: {}", what, f ? f : "a call", std::strerror(e));
  }
  return Status::ok();
}

Result<CapMask> own_effective_caps() {
  __user_cap_header_struct hdr{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2] = {};
  if (syscall(SYS_capget, &hdr, data) != 0) return Status::errorf("capget: {}", std::strerror(errno));
  return CapMask{data[0].effective} | (CapMask{data[1].effective} << 32);
}

std::string name_of_uid(uid_t uid) {
  if (const passwd* pw = getpwuid(uid)) return pw->pw_name;
  return std::to_string(uid);
}
std::string name_of_gid(gid_t gid) {
  if (const group* gr = getgrgid(gid)) return gr->gr_name;
  return std::to_string(gid);
}

}  // namespace

std::string format_caps(CapMask caps) {
  if (!caps) return "none";
  std::string out;
  for (int c = 0; c < 64; ++c) {
    if (!(caps & bit(c))) continue;
    const std::string name = c < int(std::size(kCapNames)) ? std::string(kCapNames[c].second) : fmt::format("cap {}", c);
    out += fmt::format("{}{}", out.empty() ? "" : ", ", name);
  }
  return out;
}

Result<RunUser> resolve_run_user(const std::string& user, const std::string& group) {
  RunUser r;
  r.user = user;
  const passwd* pw = getpwnam(user.c_str());
  if (!pw)
    return Status::errorf("[run] user \"{}\" does not exist on this host (see getent passwd); create it or name "
                          "another unprivileged user such as \"nobody\"",
                          user);
  r.uid = pw->pw_uid;
  r.gid = pw->pw_gid;
  if (r.uid == 0)
    return Status::errorf("[run] user \"{}\" is root (uid 0): switching to it drops nothing; name an unprivileged "
                          "user or remove the key",
                          user);
  if (!group.empty()) {
    const struct group* gr = getgrnam(group.c_str());
    if (!gr)
      return Status::errorf("[run] group \"{}\" does not exist on this host (see getent group)", group);
    r.gid = gr->gr_gid;
  }
  r.group = group.empty() ? name_of_gid(r.gid) : group;
  return r;
}

CapMask runtime_needs_for_port(std::string_view pmd, std::string_view port_name, std::vector<std::string>& why) {
  // Drivers whose queues work on descriptors opened at setup: packet sockets and AF_XDP sockets
  // need CAP_NET_RAW only to be created; files, memory and the device models need nothing.
  if (pmd == "synth" || pmd == "pcap" || pmd == "socket" || pmd == "af_packet" || pmd == "mlx5-model" ||
      pmd == "mana-model" || pmd == "mana")
    return 0;
  if (pmd == "af_xdp") {
    // stop() detaches the XDP program: libxdp finds the attached program by id
    // (BPF_PROG_GET_FD_BY_ID: CAP_SYS_ADMIN) and removes it over netlink (CAP_NET_ADMIN).
    // Steering updates write the map through the fd the port holds and need neither.
    why.push_back(fmt::format("port {} (af_xdp) detaches its XDP program at stop: CAP_NET_ADMIN, CAP_SYS_ADMIN",
                              port_name));
    return bit(CAP_NET_ADMIN) | bit(CAP_SYS_ADMIN);
  }
  if (pmd == "mlx5") {
    // Endpoint rules added at run time become ibv_create_flow rules on a raw packet QP.
    why.push_back(fmt::format("port {} (mlx5) installs flow rules when rules change: CAP_NET_RAW", port_name));
    return bit(CAP_NET_RAW);
  }
  // No profile (e.g. dpdk, whose EAL cleans up hugepage files and devices at exit): keep all.
  why.push_back(fmt::format("port {} ({}) has no least-privilege profile: all capabilities kept", port_name, pmd));
  return ~CapMask{0};
}

Result<TaskCreds> read_task_creds(const std::string& status_path) {
  std::ifstream in(status_path);
  if (!in) return Status::errorf("cannot read {}: {}", status_path, std::strerror(errno));
  TaskCreds c;
  std::string line;
  auto hex = [](const std::string& v) { return static_cast<CapMask>(std::stoull(v, nullptr, 16)); };
  while (std::getline(in, line)) {
    auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string key = line.substr(0, colon);
    std::istringstream v(line.substr(colon + 1));
    std::string w;
    if (key == "CapInh" && v >> w) c.inh = hex(w);
    else if (key == "CapPrm" && v >> w) c.prm = hex(w);
    else if (key == "CapEff" && v >> w) c.eff = hex(w);
    else if (key == "CapBnd" && v >> w) c.bnd = hex(w);
    else if (key == "CapAmb" && v >> w) c.amb = hex(w);
    else if (key == "NoNewPrivs") v >> c.no_new_privs;
    else if (key == "Uid") v >> c.uid[0] >> c.uid[1] >> c.uid[2] >> c.uid[3];
    else if (key == "Gid") v >> c.gid[0] >> c.gid[1] >> c.gid[2] >> c.gid[3];
  }
  return c;
}

Result<DropReport> drop_privileges(const DropRequest& request) {
  auto held = own_effective_caps();
  if (!held) return held.status();
  const int top = last_cap();
  const CapMask all = top >= 63 ? ~CapMask{0} : (bit(top + 1) - 1);
  const CapMask keep = request.keep & held.value() & all;
  DropReport report;

  if (request.switch_user) {
    const CapMask need = bit(CAP_SETUID) | bit(CAP_SETGID);
    if ((held.value() & need) != need)
      return Status::errorf("switching to user \"{}\" needs root (CAP_SETUID and CAP_SETGID); this process has {}",
                            request.user.user, format_caps(held.value()));
    // The stats segment is removed at exit by the process, which will no longer be root.
    for (const auto& path : request.hand_over)
      if (lchown(path.c_str(), request.user.uid, request.user.gid) != 0 && errno != ENOENT)
        return Status::errorf("cannot hand {} to user \"{}\": {}", path, request.user.user, std::strerror(errno));
  }

  // Phase 1, every thread: bounding set, ambient set, no_new_privs, and keep the permitted set
  // across the uid change if anything is kept.
  ThreadStep first;
  first.drop_bounding = (held.value() & bit(CAP_SETPCAP)) != 0;
  first.last_cap = top;
  first.keep = keep;
  first.clear_ambient = true;
  first.no_new_privs = true;
  first.keepcaps = request.switch_user && keep ? 1 : -1;
  RAWPIPE_TRY(broadcast(first, "dropping the bounding set"));
  report.bounding_dropped = first.drop_bounding;

  // Phase 2, the process: glibc runs each set*id call on every thread.
  if (request.switch_user) {
    const gid_t gid = request.user.gid;
    if (setgroups(1, &gid) != 0) return Status::errorf("setgroups({}): {}", gid, std::strerror(errno));
    if (setresgid(gid, gid, gid) != 0) return Status::errorf("setresgid({}): {}", gid, std::strerror(errno));
    if (setresuid(request.user.uid, request.user.uid, request.user.uid) != 0)
      return Status::errorf("setresuid({}): {}", request.user.uid, std::strerror(errno));
  }

  // Phase 3, every thread: effective = permitted = kept.
  ThreadStep last;
  last.keep = keep;
  last.set_caps = true;
  last.keepcaps = request.switch_user && keep ? 0 : -1;
  RAWPIPE_TRY(broadcast(last, "dropping capabilities"));

  // Read every task back: this is what another process (or an attacker in this one) sees.
  const uid_t want_uid = request.switch_user ? request.user.uid : getuid();
  const gid_t want_gid = request.switch_user ? request.user.gid : getgid();
  for (pid_t tid : list_tasks()) {
    auto c = read_task_creds(fmt::format("/proc/self/task/{}/status", tid));
    if (!c) {
      if (!task_exists(tid)) continue;
      return c.status();
    }
    const TaskCreds& t = c.value();
    const bool bnd_ok = !report.bounding_dropped || (t.bnd & ~keep) == 0;
    if (t.eff != keep || t.prm != keep || t.inh != 0 || t.amb != 0 || !bnd_ok || t.no_new_privs != 1 ||
        t.uid[1] != want_uid || t.gid[1] != want_gid)
      return Status::errorf("thread {} still has CapEff {:016x} CapPrm {:016x} CapBnd {:016x} NoNewPrivs {} uid {} "
                            "after the drop (wanted caps {:016x}, uid {})",
                            tid, t.eff, t.prm, t.bnd, t.no_new_privs, t.uid[1], keep, want_uid);
    ++report.threads;
  }

  report.uid = want_uid;
  report.gid = want_gid;
  report.kept = keep;
  std::string why;
  for (const auto& w : request.keep_why) why += fmt::format("; {}", w);
  report.line = fmt::format("privileges: running as {} ({}) group {} ({}) on {} thread{}; capabilities kept: {}{}; "
                            "bounding set {}; no_new_privs set",
                            name_of_uid(want_uid), want_uid, name_of_gid(want_gid), want_gid, report.threads,
                            report.threads == 1 ? "" : "s", format_caps(keep), keep ? why : std::string(),
                            report.bounding_dropped ? (keep ? "reduced to the kept ones" : "emptied")
                                                    : "unchanged (no CAP_SETPCAP)");
  return report;
}

}  // namespace rawpipe::privilege
