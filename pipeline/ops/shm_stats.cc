#include "rawpipe/shm_stats.hh"

#include <fcntl.h>
#include <sys/mman.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <charconv>
#include <filesystem>
#include <cerrno>
#include <cstring>
#include <thread>

namespace rawpipe::ops {
namespace {


std::atomic<std::uint64_t>* words(ShmStatsHeader* h) noexcept {
  return reinterpret_cast<std::atomic<std::uint64_t>*>(h + 1);
}
const std::atomic<std::uint64_t>* words(const ShmStatsHeader* h) noexcept {
  return reinterpret_cast<const std::atomic<std::uint64_t>*>(h + 1);
}

bool valid_name(std::string_view name) {
  if (name.empty() || name.size() >= sizeof(ShmStatsHeader::name)) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' ||
           c == '.';
  });
}

// The pid in a name link's target ("rawpipe.<pid>"), or 0 when there is no such link.
int link_owner(const std::string& link) {
  char target[64] = {};
  const ssize_t n = readlink(link.c_str(), target, sizeof target - 1);
  if (n <= 8 || std::strncmp(target, "rawpipe.", 8) != 0) return 0;
  int pid = 0;
  auto [p, e] = std::from_chars(target + 8, target + n, pid);
  return e == std::errc() && p == target + n ? pid : 0;
}

// The pid of a segment file name "rawpipe.<pid>", or 0.
int segment_pid(std::string_view file) {
  if (!file.starts_with("rawpipe.")) return 0;
  int pid = 0;
  auto [p, e] = std::from_chars(file.data() + 8, file.data() + file.size(), pid);
  return e == std::errc() && p == file.data() + file.size() ? pid : 0;
}

}  // namespace

bool pid_alive(int pid) { return pid > 0 && (kill(pid, 0) == 0 || errno == EPERM); }

std::vector<LiveSegment> live_stats_segments() {
  std::vector<LiveSegment> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/dev/shm", ec)) {
    const int pid = segment_pid(e.path().filename().string());
    if (!pid || !pid_alive(pid)) continue;
    LiveSegment seg{pid, ""};
    if (auto r = ShmStatsReader::open(std::to_string(pid))) seg.name = r->name();
    out.push_back(std::move(seg));
  }
  std::sort(out.begin(), out.end(), [](const LiveSegment& a, const LiveSegment& b) { return a.pid < b.pid; });
  return out;
}

std::vector<std::string> remove_stale_stats_segments() {
  std::vector<std::string> removed;
  std::error_code ec;
  std::vector<std::filesystem::path> links;
  for (const auto& e : std::filesystem::directory_iterator("/dev/shm", ec)) {
    const std::string file = e.path().filename().string();
    if (file.starts_with("rawpipe-name.")) {
      links.push_back(e.path());
      continue;
    }
    const int pid = segment_pid(file);
    if (!pid || pid_alive(pid)) continue;
    if (shm_unlink(("/" + file).c_str()) == 0)
      removed.push_back(fmt::format("removed the stats segment {} of process {}, which is gone (it ended without "
                                    "cleaning up: killed or crashed)",
                                    e.path().string(), pid));
  }
  for (const auto& l : links) {
    const int pid = link_owner(l.string());
    if (pid && pid_alive(pid) && std::filesystem::exists(shm_stats_path(pid))) continue;
    if (unlink(l.c_str()) == 0)
      removed.push_back(fmt::format("removed the stats name link {}, which named no running pipeline", l.string()));
  }
  return removed;
}

std::string shm_stats_path(int pid) { return fmt::format("/dev/shm/rawpipe.{}", pid); }
std::string shm_stats_name_link(std::string_view name) { return fmt::format("/dev/shm/rawpipe-name.{}", name); }

Result<ShmStatsWriter> ShmStatsWriter::create(std::string_view name) {
  if (!valid_name(name))
    return Status::errorf("stats segment name '{}' must be 1-63 characters of letters, digits, '_', '-', '.'", name);
  const int pid = static_cast<int>(getpid());
  ShmStatsWriter w;
  w.path_ = shm_stats_path(pid);
  const std::string shm_name = fmt::format("/rawpipe.{}", pid);
  shm_unlink(shm_name.c_str());  // a stale segment of a dead process that had our pid
  int fd = shm_open(shm_name.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
  if (fd < 0)
    return Status::errorf("cannot create the stats segment {}: {} (is /dev/shm mounted and writable?)", w.path_,
                          std::strerror(errno));
  // shm_open honours the umask; the counters are not for other users whatever it is.
  (void)fchmod(fd, 0600);
  w.map_size_ = sizeof(ShmStatsHeader) + kShmStatsCapacity;
  if (ftruncate(fd, static_cast<off_t>(w.map_size_)) != 0) {
    int e = errno;
    close(fd);
    shm_unlink(shm_name.c_str());
    return Status::errorf("cannot size the stats segment {}: {}", w.path_, std::strerror(e));
  }
  void* p = mmap(nullptr, w.map_size_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (p == MAP_FAILED) {
    shm_unlink(shm_name.c_str());
    return Status::errorf("cannot map the stats segment {}: {}", w.path_, std::strerror(errno));
  }
  auto* h = new (p) ShmStatsHeader{};
  h->version = kShmStatsVersion;
  h->pid = static_cast<std::uint32_t>(pid);
  std::memcpy(h->name, name.data(), name.size());
  h->capacity = kShmStatsCapacity;
  // Readers check the magic last-written field: a half-initialised header is not taken as valid.
  std::atomic_thread_fence(std::memory_order_release);
  h->magic = kShmStatsMagic;
  w.header_ = h;
  w.link_ = shm_stats_name_link(name);
  // The name stays with a live pipeline that has it; a link to a dead one is taken over.
  if (const int owner = link_owner(w.link_); owner > 0 && owner != pid && pid_alive(owner)) {
    w.name_owner_ = owner;
    w.link_.clear();
    return w;
  }
  unlink(w.link_.c_str());
  if (symlink(fmt::format("rawpipe.{}", pid).c_str(), w.link_.c_str()) != 0) w.link_.clear();
  return w;
}

ShmStatsWriter::ShmStatsWriter(ShmStatsWriter&& o) noexcept { *this = std::move(o); }

ShmStatsWriter& ShmStatsWriter::operator=(ShmStatsWriter&& o) noexcept {
  if (this != &o) {
    release();
    header_ = std::exchange(o.header_, nullptr);
    map_size_ = std::exchange(o.map_size_, 0);
    path_ = std::move(o.path_);
    link_ = std::move(o.link_);
    name_owner_ = std::exchange(o.name_owner_, 0);
    o.path_.clear();
    o.link_.clear();
  }
  return *this;
}

ShmStatsWriter::~ShmStatsWriter() { release(); }

void ShmStatsWriter::release() noexcept {
  if (!header_) return;
  // Remove the link only if it still points at our segment (a newer process may have taken the name).
  if (!link_.empty()) {
    char target[64] = {};
    ssize_t n = readlink(link_.c_str(), target, sizeof target - 1);
    if (n > 0 && fmt::format("/dev/shm/{}", std::string_view(target, static_cast<std::size_t>(n))) == path_)
      unlink(link_.c_str());
  }
  shm_unlink(fmt::format("/rawpipe.{}", header_->pid).c_str());
  munmap(header_, map_size_);
  header_ = nullptr;
}

bool ShmStatsWriter::publish(std::string_view document) noexcept {
  if (!header_ || document.size() > kShmStatsCapacity) return false;
  const std::uint64_t s = header_->seq.load(std::memory_order_relaxed);
  header_->seq.store(s + 1, std::memory_order_relaxed);
  // Pairs with the reader's acquire fence: a reader that sees any word below also sees seq odd.
  std::atomic_thread_fence(std::memory_order_release);
  auto* w = words(header_);
  const std::size_t n = document.size();
  for (std::size_t i = 0; i < n; i += 8) {
    std::uint64_t v = 0;
    std::memcpy(&v, document.data() + i, std::min<std::size_t>(8, n - i));
    w[i / 8].store(v, std::memory_order_relaxed);
  }
  header_->length.store(n, std::memory_order_relaxed);
  header_->publishes.fetch_add(1, std::memory_order_relaxed);
  // Release pairs with the reader's acquire load of seq: seen even => the words are complete.
  header_->seq.store(s + 2, std::memory_order_release);
  return true;
}

Result<ShmStatsReader> ShmStatsReader::open(std::string_view target) {
  const bool is_pid = !target.empty() && std::all_of(target.begin(), target.end(), [](char c) { return c >= '0' && c <= '9'; });
  std::string path;
  if (is_pid) {
    path = shm_stats_path(std::stoi(std::string(target)));
  } else {
    if (!valid_name(target)) return Status::errorf("'{}' is neither a pid nor a pipeline name", target);
    path = shm_stats_name_link(target);
  }
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return Status::errorf("no stats segment {} ({}): is a rawpipe pipeline running as {} under your user?", path,
                          std::strerror(errno), target);
  struct stat st {};
  if (fstat(fd, &st) != 0 || static_cast<std::size_t>(st.st_size) < sizeof(ShmStatsHeader) + kShmStatsCapacity) {
    close(fd);
    return Status::errorf("{} is not a rawpipe stats segment (wrong size)", path);
  }
  ShmStatsReader r;
  r.map_size_ = static_cast<std::size_t>(st.st_size);
  void* p = mmap(nullptr, r.map_size_, PROT_READ, MAP_SHARED, fd, 0);
  close(fd);
  if (p == MAP_FAILED) return Status::errorf("cannot map {}: {}", path, std::strerror(errno));
  r.header_ = static_cast<const ShmStatsHeader*>(p);
  std::atomic_thread_fence(std::memory_order_acquire);
  if (r.header_->magic != kShmStatsMagic || r.header_->version != kShmStatsVersion)
    return Status::errorf("{} is not a rawpipe stats segment of version {} (another rawpipe build?)", path,
                          kShmStatsVersion);
  return r;
}

ShmStatsReader::ShmStatsReader(ShmStatsReader&& o) noexcept { *this = std::move(o); }

ShmStatsReader& ShmStatsReader::operator=(ShmStatsReader&& o) noexcept {
  if (this != &o) {
    if (header_) munmap(const_cast<ShmStatsHeader*>(header_), map_size_);
    header_ = std::exchange(o.header_, nullptr);
    map_size_ = std::exchange(o.map_size_, 0);
  }
  return *this;
}

ShmStatsReader::~ShmStatsReader() {
  if (header_) munmap(const_cast<ShmStatsHeader*>(header_), map_size_);
}

std::string ShmStatsReader::name() const {
  if (!header_) return {};
  return std::string(header_->name, strnlen(header_->name, sizeof header_->name));
}

Result<std::string> ShmStatsReader::read() const { return read(kShmStatsReadPatience); }

Result<std::string> ShmStatsReader::read(std::chrono::milliseconds patience) const {
  // A publish takes microseconds, but the writer can be preempted in the middle of one for as long
  // as its CPU is given to something else (milliseconds on a loaded or virtual machine). The reader
  // yields a few times, then sleeps in growing steps, so a long wait costs it no CPU, and gives up
  // only when the patience is spent.
  constexpr int kYieldsBeforeSleeping = 64;
  constexpr auto kFirstSleep = std::chrono::microseconds(50);
  constexpr auto kLongestSleep = std::chrono::milliseconds(5);
  const auto deadline = std::chrono::steady_clock::now() + patience;
  auto sleep = std::chrono::microseconds(kFirstSleep);
  std::string out;
  bool saw_a_publish_in_progress = false;
  for (int attempt = 0;; ++attempt) {
    const std::uint64_t s1 = header_->seq.load(std::memory_order_acquire);
    if (!(s1 & 1)) {
      const std::size_t n = std::min<std::uint64_t>(header_->length.load(std::memory_order_relaxed), kShmStatsCapacity);
      out.resize(n);
      const auto* w = words(header_);
      for (std::size_t i = 0; i < n; i += 8) {
        const std::uint64_t v = w[i / 8].load(std::memory_order_relaxed);
        std::memcpy(out.data() + i, &v, std::min<std::size_t>(8, n - i));
      }
      // Pairs with the writer's release fence after it made seq odd.
      std::atomic_thread_fence(std::memory_order_acquire);
      if (header_->seq.load(std::memory_order_relaxed) == s1) return out;
      saw_a_publish_in_progress = false;
    } else {
      saw_a_publish_in_progress = true;
    }
    if (std::chrono::steady_clock::now() >= deadline) break;
    if (attempt < kYieldsBeforeSleeping) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(sleep);
      sleep = std::min<std::chrono::microseconds>(sleep * 2, kLongestSleep);
    }
  }
  const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(patience).count();
  if (!saw_a_publish_in_progress)
    return Status::errorf("the stats segment changed during every copy for {} ms; try again", waited);
  if (!pid_alive(static_cast<int>(header_->pid)))
    return Status::errorf("the stats segment's writer (pid {}) died in the middle of a publish; the segment is stale",
                          header_->pid);
  return Status::errorf("the stats segment's writer (pid {}) has been in the middle of a publish for {} ms: "
                        "it is stopped or starved of CPU; try again",
                        header_->pid, waited);
}

}  // namespace rawpipe::ops
