#include "rawpipe/instance_lock.hh"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>

#include "pipeline/port/driver.hh"

namespace rawpipe::ops {
namespace {

// A file name for a resource: its words joined by '.', anything unusual replaced.
std::string file_for(const std::string& resource) {
  std::string f;
  for (char c : resource)
    f += (c == ' ') ? '.' : (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_') ? c : '%';
  return lock_dir() + "/" + f + ".lock";
}

std::string read_all(int fd) {
  std::string s;
  char buf[512];
  ssize_t n;
  off_t off = 0;
  while ((n = pread(fd, buf, sizeof buf, off)) > 0) {
    s.append(buf, static_cast<std::size_t>(n));
    off += n;
  }
  return s;
}

// The file holds "pid\nconfig\nresource\n".
LockHolder parse_holder(const std::string& text) {
  LockHolder h;
  const auto nl = text.find('\n');
  const std::string pid = text.substr(0, nl);
  std::from_chars(pid.data(), pid.data() + pid.size(), h.pid);
  if (nl != std::string::npos) {
    const auto nl2 = text.find('\n', nl + 1);
    h.config = text.substr(nl + 1, nl2 == std::string::npos ? std::string::npos : nl2 - nl - 1);
    if (nl2 != std::string::npos) {
      h.resource = text.substr(nl2 + 1);
      while (!h.resource.empty() && h.resource.back() == '\n') h.resource.pop_back();
    }
  }
  return h;
}

}  // namespace

std::string lock_dir() {
  if (const char* d = std::getenv("RAWPIPE_LOCK_DIR"); d && *d) return d;
  return "/run/lock/rawpipe";
}

std::string queue_resource(std::string_view interface, unsigned queue) {
  struct stat st {};
  const unsigned long long ns = stat("/proc/thread-self/ns/net", &st) == 0 ? st.st_ino : 0;
  return fmt::format("queue {} {} {}", ns, interface, queue);
}

std::string device_queue_resource(std::string_view device, bool process_private, unsigned queue) {
  return process_private ? fmt::format("device {} pid {} {}", device, getpid(), queue)
                         : fmt::format("device {} {}", device, queue);
}

std::string cpu_resource(int cpu) { return fmt::format("cpu {}", cpu); }

InstanceLocks& InstanceLocks::operator=(InstanceLocks&& o) noexcept {
  if (this != &o) {
    release();
    fds_ = std::move(o.fds_);
    o.fds_.clear();
  }
  return *this;
}

void InstanceLocks::release() noexcept {
  // Closing drops the flock. The file keeps the last holder's text; a reader trusts it only while
  // the lock is held.
  for (int fd : fds_) close(fd);
  fds_.clear();
}

Result<InstanceLocks> InstanceLocks::acquire(const std::vector<std::string>& resources,
                                             const std::vector<std::string>& described, std::string_view config) {
  InstanceLocks locks;
  if (resources.empty()) return locks;
  const std::string dir = lock_dir();
  std::error_code ec;
  // Like /run/lock itself: every user may add lock files (root and file-capability runs must see
  // each other's locks), the sticky bit keeps them from removing each other's.
  if (std::filesystem::create_directories(dir, ec) && !ec) (void)chmod(dir.c_str(), 01777);
  if (ec)
    return Status::errorf("cannot create the lock directory {}: {}; create it (writable by the user running "
                          "rawpipe) or point RAWPIPE_LOCK_DIR at one",
                          dir, ec.message());
  for (std::size_t i = 0; i < resources.size(); ++i) {
    const std::string path = file_for(resources[i]);
    const std::string what = i < described.size() ? described[i] : resources[i];
    int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666);
    if (fd >= 0) (void)fchmod(fd, 0666);  // whatever the umask: the next run may be another user
    if (fd < 0)
      return Status::errorf("cannot open the lock file {} for {}: {}", path, what, std::strerror(errno));
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
      const int err = errno;
      // The holder writes its text right after locking: a moment's wait covers that window.
      LockHolder h = parse_holder(read_all(fd));
      for (int tries = 0; h.pid == 0 && tries < 20; ++tries) {
        usleep(5000);
        h = parse_holder(read_all(fd));
      }
      close(fd);
      if (err != EWOULDBLOCK)
        return Status::errorf("cannot lock {} for {}: {}", path, what, std::strerror(err));
      return Status::errorf("{} is already used by another pipeline: pid {} running {}; stop it, or choose "
                            "another queue or CPU",
                            what, h.pid, h.config.empty() ? std::string("(unknown config)") : h.config);
    }
    const std::string text = fmt::format("{}\n{}\n{}\n", getpid(), config, resources[i]);
    if (ftruncate(fd, 0) != 0 || pwrite(fd, text.data(), text.size(), 0) != static_cast<ssize_t>(text.size())) {
      const int err = errno;
      close(fd);
      return Status::errorf("cannot write the lock file {}: {}", path, std::strerror(err));
    }
    locks.fds_.push_back(fd);
  }
  return locks;
}

std::vector<LockHolder> held_locks() {
  std::vector<LockHolder> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(lock_dir(), ec)) {
    if (e.path().extension() != ".lock") continue;
    int fd = open(e.path().c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    // A shared lock we can take means no one holds the exclusive one: a lock of a finished run.
    if (flock(fd, LOCK_SH | LOCK_NB) == 0) {
      close(fd);
      continue;
    }
    LockHolder h = parse_holder(read_all(fd));
    close(fd);
    if (h.pid) out.push_back(std::move(h));
  }
  return out;
}

Result<InstanceLocks> take_instance_locks(const Plan& plan, const std::string& config) {
  std::vector<std::string> resources, described;
  for (const auto& p : plan.ports) {
    if (!p.spec) continue;
    const auto claim = p.spec->claimed_queues();
    if (claim.interface.empty() && claim.device.empty()) continue;
    for (unsigned q = 0; q < std::max(p.rx_queues, p.tx_queues); ++q) {
      if (!claim.interface.empty()) {
        resources.push_back(queue_resource(claim.interface, claim.first + q));
        described.push_back(fmt::format("queue {} of interface {} (port '{}')", claim.first + q, claim.interface, p.name));
      } else {
        resources.push_back(device_queue_resource(claim.device, claim.process_private, claim.first + q));
        described.push_back(fmt::format("queue {} of device {} (port '{}')", claim.first + q, claim.device, p.name));
      }
    }
  }
  for (const auto& l : plan.lcores) {
    if (l.cpu < 0) continue;
    resources.push_back(cpu_resource(l.cpu));
    described.push_back(fmt::format("CPU {} (lcore {})", l.cpu, l.id));
  }
  // A config file is named by its absolute path; anything else (a plan built in code) as given.
  std::error_code ec;
  const bool is_file = std::filesystem::exists(config, ec);
  const std::string where = is_file ? std::filesystem::absolute(config, ec).string() : config;
  return InstanceLocks::acquire(resources, described, ec ? config : where);
}

}  // namespace rawpipe::ops
