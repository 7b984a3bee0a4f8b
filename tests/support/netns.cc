#include "tests/support/netns.hh"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <exception>
#include <optional>
#include <regex>
#include <sstream>

extern char** environ;

namespace rawpipe::test {
namespace {

std::string join(const std::vector<std::string>& argv) {
  std::string s;
  for (const auto& a : argv) {
    if (!s.empty()) s += ' ';
    s += a;
  }
  return s;
}

struct Captured {
  int status = 0;
  std::string out, err;
};

Result<Captured> spawn_and_wait(const std::vector<std::string>& argv) {
  int out_pipe[2], err_pipe[2];
  if (pipe2(out_pipe, O_CLOEXEC) != 0) return Status::errorf("pipe: {}", std::strerror(errno));
  if (pipe2(err_pipe, O_CLOEXEC) != 0) {
    close(out_pipe[0]);
    close(out_pipe[1]);
    return Status::errorf("pipe: {}", std::strerror(errno));
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, out_pipe[1], 1);
  posix_spawn_file_actions_adddup2(&fa, err_pipe[1], 2);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid;
  int rc = posix_spawnp(&pid, args[0], &fa, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  close(out_pipe[1]);
  close(err_pipe[1]);
  Captured c;
  if (rc != 0) {
    close(out_pipe[0]);
    close(err_pipe[0]);
    return Status::errorf("cannot run '{}': {}", join(argv), std::strerror(rc));
  }
  // Both pipes are drained together so a chatty command cannot block on a full pipe.
  pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
  int open_fds = 2;
  char buf[4096];
  while (open_fds > 0) {
    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      ssize_t n = read(fds[i].fd, buf, sizeof(buf));
      if (n > 0) {
        (i == 0 ? c.out : c.err).append(buf, std::size_t(n));
      } else if (n == 0 || errno != EINTR) {
        close(fds[i].fd);
        fds[i].fd = -1;
        --open_fds;
      }
    }
  }
  while (waitpid(pid, &c.status, 0) < 0 && errno == EINTR) {
  }
  return c;
}

Result<std::string> run_checked(const std::vector<std::string>& argv) {
  auto r = spawn_and_wait(argv);
  if (!r) return r.status();
  const Captured& c = r.value();
  if (!WIFEXITED(c.status) || WEXITSTATUS(c.status) != 0) {
    std::string why = WIFEXITED(c.status) ? fmt::format("exit status {}", WEXITSTATUS(c.status))
                                          : fmt::format("killed by signal {}", WTERMSIG(c.status));
    std::string text = c.err.empty() ? c.out : c.err;
    while (!text.empty() && text.back() == '\n') text.pop_back();
    return Status::errorf("'{}' failed ({}): {}", join(argv), why, text);
  }
  return c.out;
}

std::vector<std::string> in_ns(const NetNs* ns, const std::vector<std::string>& argv) {
  if (!ns) return argv;
  std::vector<std::string> full = {"ip", "netns", "exec", ns->name()};
  full.insert(full.end(), argv.begin(), argv.end());
  return full;
}

std::vector<std::string> ip_in(const NetNs* ns, std::vector<std::string> args) {
  std::vector<std::string> full = {"ip"};
  if (ns) {
    full.push_back("-n");
    full.push_back(ns->name());
  }
  full.insert(full.end(), args.begin(), args.end());
  return full;
}

}  // namespace

Status run_command(const std::vector<std::string>& argv) { return run_checked(argv).status(); }

Result<std::string> command_output(const std::vector<std::string>& argv) { return run_checked(argv); }

Status exec_in(const NetNs* ns, const std::vector<std::string>& argv) { return run_command(in_ns(ns, argv)); }

Result<std::string> output_in(const NetNs* ns, const std::vector<std::string>& argv) {
  return command_output(in_ns(ns, argv));
}

Result<std::uint64_t> udp_csum_errors(const NetNs& ns) {
  auto snmp = output_in(&ns, {"cat", "/proc/net/snmp"});
  if (!snmp) return Status::error(snmp.message());
  // Two "Udp:" lines: the names, then the values.
  std::smatch lines;
  if (!std::regex_search(*snmp, lines, std::regex(R"(Udp: ([^\n]*)\nUdp: ([^\n]*))")))
    return Status::errorf("no Udp lines in /proc/net/snmp: {}", *snmp);
  std::istringstream names(lines[1].str()), values(lines[2].str());
  std::string name, value;
  std::optional<std::uint64_t> v4;
  while (names >> name && values >> value)
    if (name == "InCsumErrors") v4 = std::stoull(value);
  if (!v4) return Status::errorf("no Udp InCsumErrors in /proc/net/snmp: {}", *snmp);
  auto snmp6 = output_in(&ns, {"cat", "/proc/net/snmp6"});
  if (!snmp6) return Status::error(snmp6.message());
  std::smatch v6;
  if (!std::regex_search(*snmp6, v6, std::regex(R"(Udp6InCsumErrors\s+(\d+))")))
    return Status::error("no Udp6InCsumErrors in /proc/net/snmp6");
  return *v4 + std::stoull(v6[1].str());
}

std::string unique_name(std::string_view prefix) {
  static std::atomic<unsigned> counter{0};
  // Relaxed: only uniqueness matters, no data is published through the counter.
  unsigned n = counter.fetch_add(1, std::memory_order_relaxed);
  std::string name = fmt::format("{}{}x{}", prefix, getpid(), n);
  if (name.size() > 15) name = name.substr(name.size() - 15);
  return name;
}

std::optional<std::string> netns_unavailable_reason() {
  if (geteuid() != 0) return std::string("needs root to create network namespaces and veth pairs");
  auto probe = spawn_and_wait({"ip", "-V"});
  if (!probe || !WIFEXITED(probe.value().status) || WEXITSTATUS(probe.value().status) != 0)
    return std::string("needs iproute2 ('ip') in PATH");
  // Creating a namespace is the real test: containers without CAP_SYS_ADMIN refuse it.
  auto ns = NetNs::create("rpprobe");
  if (!ns) return "cannot create a network namespace: " + ns.message();
  return std::nullopt;
}

// ---- NetNs ----

Result<NetNs> NetNs::create(std::string_view prefix) {
  std::string name = unique_name(prefix);
  RAWPIPE_TRY(run_command({"ip", "netns", "add", name}));
  NetNs ns(name);
  RAWPIPE_TRY(run_command({"ip", "-n", name, "link", "set", "lo", "up"}));
  return ns;
}

NetNs::NetNs(NetNs&& other) noexcept : name_(std::move(other.name_)) { other.name_.clear(); }

NetNs& NetNs::operator=(NetNs&& other) noexcept {
  if (this != &other) {
    if (!name_.empty()) (void)run_command({"ip", "netns", "del", name_});
    name_ = std::move(other.name_);
    other.name_.clear();
  }
  return *this;
}

NetNs::~NetNs() {
  if (!name_.empty()) (void)run_command({"ip", "netns", "del", name_});
}

Status NetNs::enter_this_thread() const {
  std::string path = "/run/netns/" + name_;
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::errorf("open {}: {}", path, std::strerror(errno));
  int rc = setns(fd, CLONE_NEWNET);
  int err = errno;
  close(fd);
  if (rc != 0) return Status::errorf("setns into {}: {}", name_, std::strerror(err));
  return Status::ok();
}

Status NetNs::run(const std::function<void()>& fn) const {
  Status st;
  std::thread t([&] {
    st = enter_this_thread();
    if (st) fn();
  });
  t.join();
  return st;
}

std::thread NetNs::spawn(std::function<void()> fn) const {
  return std::thread([this, fn = std::move(fn)] {
    // A thread that cannot join its namespace must not run fn in the wrong one.
    if (!enter_this_thread()) std::terminate();
    fn();
  });
}

Status NetNs::exec(const std::vector<std::string>& argv) const { return exec_in(this, argv); }

// ---- VethPair ----

Result<VethPair> VethPair::create(VethEnd a, VethEnd b) {
  if (a.name.empty()) a.name = unique_name("rpa");
  if (b.name.empty()) b.name = unique_name("rpb");
  // Created in our namespace and moved afterwards, so the names cannot clash inside a namespace.
  RAWPIPE_TRY(run_command({"ip", "link", "add", a.name, "type", "veth", "peer", "name", b.name}));
  VethPair pair(a, b);
  pair.owned_ = true;
  for (const VethEnd* end : {&pair.a_, &pair.b_}) {
    if (end->ns) RAWPIPE_TRY(run_command({"ip", "link", "set", end->name, "netns", end->ns->name()}));
    if (!end->mac.empty())
      RAWPIPE_TRY(run_command(ip_in(end->ns, {"link", "set", end->name, "address", end->mac})));
    if (end->mtu)
      RAWPIPE_TRY(run_command(ip_in(end->ns, {"link", "set", end->name, "mtu", std::to_string(end->mtu)})));
    // Without this an IPv6 address stays "tentative" for a second and sends fail with EADDRNOTAVAIL.
    (void)exec_in(end->ns, {"sysctl", "-qw", fmt::format("net.ipv6.conf.{}.accept_dad=0", end->name)});
    for (const auto& addr : end->addrs) {
      std::vector<std::string> args = {"addr", "add", addr, "dev", end->name};
      if (addr.find(':') != std::string::npos) args.push_back("nodad");
      RAWPIPE_TRY(run_command(ip_in(end->ns, args)));
    }
  }
  for (const VethEnd* end : {&pair.a_, &pair.b_})
    RAWPIPE_TRY(run_command(ip_in(end->ns, {"link", "set", end->name, "up"})));
  return pair;
}

VethPair::VethPair(VethPair&& other) noexcept
    : a_(std::move(other.a_)), b_(std::move(other.b_)), owned_(other.owned_) {
  other.owned_ = false;
}

VethPair& VethPair::operator=(VethPair&& other) noexcept {
  if (this != &other) {
    destroy();
    a_ = std::move(other.a_);
    b_ = std::move(other.b_);
    owned_ = other.owned_;
    other.owned_ = false;
  }
  return *this;
}

VethPair::~VethPair() { destroy(); }

void VethPair::destroy() noexcept {
  if (!owned_) return;
  owned_ = false;
  // Deleting either end removes both. It may already be gone with its namespace: not an error.
  (void)run_command(ip_in(a_.ns, {"link", "del", a_.name}));
}

Status VethPair::exec_a(const std::vector<std::string>& argv) const { return exec_in(a_.ns, argv); }
Status VethPair::exec_b(const std::vector<std::string>& argv) const { return exec_in(b_.ns, argv); }

namespace {
Result<std::string> read_mac(const VethEnd& end) {
  auto out = command_output(ip_in(end.ns, {"-br", "link", "show", "dev", end.name}));
  if (!out) return out.status();
  // "<name> <state> <mac> <flags>"
  std::vector<std::string> words;
  std::string w;
  for (char ch : out.value()) {
    if (ch == ' ' || ch == '\n' || ch == '\t') {
      if (!w.empty()) words.push_back(w);
      w.clear();
    } else {
      w += ch;
    }
  }
  if (!w.empty()) words.push_back(w);
  for (const auto& word : words)
    if (word.size() == 17 && word[2] == ':' && word[14] == ':') return word;
  return Status::errorf("no MAC address for {} in '{}'", end.name, out.value());
}
}  // namespace

Result<std::string> VethPair::mac_a() const { return read_mac(a_); }
Result<std::string> VethPair::mac_b() const { return read_mac(b_); }

}  // namespace rawpipe::test
