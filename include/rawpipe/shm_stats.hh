// The stats segment: a POSIX shared-memory object (/dev/shm/rawpipe.<pid>, mode 0600) holding the
// latest stats document of a running pipeline, so `rawpipe stat` can read it from another process.
//
// Concurrency: one writer (the app's stats publisher thread), any number of readers, no locks. A
// sequence counter brackets each publish (odd while writing); a reader copies the document and
// retries when the counter was odd or changed. The writer never waits for readers. The document
// is stored in 64-bit atomic words (relaxed) so the racing copy is not a data race; the fences
// below give the ordering.
//
// Names: `rawpipe stat NAME` finds the segment through a symlink /dev/shm/rawpipe-name.<NAME>
// pointing at rawpipe.<pid>, created by the writer and removed with the segment.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "rawpipe/api.h"
#include "rawpipe/status.hh"

namespace rawpipe::ops {

inline constexpr std::uint64_t kShmStatsMagic = 0x5241575053544154ull;  // "RAWPSTAT"
inline constexpr std::uint32_t kShmStatsVersion = 1;
inline constexpr std::size_t kShmStatsCapacity = 4u << 20;  // document bytes; tmpfs backs only pages written
// How long ShmStatsReader::read() waits for a publish in progress to end. The publisher writes
// once per stats interval and a publish takes microseconds; a second covers any preemption a
// running writer meets, and a reader of a dead one learns it within that time.
inline constexpr std::chrono::milliseconds kShmStatsReadPatience{1000};

struct ShmStatsHeader {
  std::uint64_t magic;
  std::uint32_t version;
  std::uint32_t pid;
  char name[64];                     // NUL-terminated pipeline name
  std::uint64_t capacity;            // bytes available for the document
  std::atomic<std::uint64_t> seq;    // odd while a publish is in progress
  std::atomic<std::uint64_t> length; // document bytes
  std::atomic<std::uint64_t> publishes;
};
static_assert(sizeof(ShmStatsHeader) == 112, "the segment layout is read by other processes");
static_assert(std::atomic<std::uint64_t>::is_always_lock_free, "shared between processes");

RAWPIPE_API std::string shm_stats_path(int pid);
RAWPIPE_API std::string shm_stats_name_link(std::string_view name);

// True while process pid exists (a pid of a dead process may be reused later; a segment's pid
// names its writer until it is removed).
RAWPIPE_API bool pid_alive(int pid);

struct LiveSegment {
  int pid = 0;
  std::string name;  // the name the writer published under (its name link may belong to another)
};
// The stats segments whose writer is alive, by pid.
RAWPIPE_API std::vector<LiveSegment> live_stats_segments();
// Removes the segments of dead processes and name links that point at no live segment (a run
// killed by SIGKILL or a crash leaves both behind); one line per thing removed, for the user.
// Touches nothing a live process owns.
RAWPIPE_API std::vector<std::string> remove_stale_stats_segments();

class RAWPIPE_API ShmStatsWriter {
 public:
  // Creates /dev/shm/rawpipe.<pid> (replacing a stale one of the same pid) and the name link.
  static Result<ShmStatsWriter> create(std::string_view name);
  ShmStatsWriter() = default;
  ShmStatsWriter(ShmStatsWriter&& o) noexcept;
  ShmStatsWriter& operator=(ShmStatsWriter&& o) noexcept;
  ~ShmStatsWriter();

  // Publishes a document; returns false when it does not fit (the previous one stays).
  bool publish(std::string_view document) noexcept;
  const std::string& path() const noexcept { return path_; }
  // The pid of a live process whose name link this writer left alone (its name is taken), or 0.
  int name_owner() const noexcept { return name_owner_; }

 private:
  void release() noexcept;
  ShmStatsHeader* header_ = nullptr;
  std::size_t map_size_ = 0;
  std::string path_;
  std::string link_;
  int name_owner_ = 0;
};

class RAWPIPE_API ShmStatsReader {
 public:
  // `target` is a pid or a pipeline name.
  static Result<ShmStatsReader> open(std::string_view target);
  ShmStatsReader() = default;
  ShmStatsReader(ShmStatsReader&& o) noexcept;
  ShmStatsReader& operator=(ShmStatsReader&& o) noexcept;
  ~ShmStatsReader();

  // A consistent copy of the latest document (empty before the first publish). Waits, without
  // spinning, while the writer is in the middle of a publish (it may be preempted there), and fails
  // with a message once `patience` has passed: the writer is stopped, starved or dead mid-publish,
  // or publishes faster than the copy completes.
  Result<std::string> read() const;  // patience kShmStatsReadPatience
  Result<std::string> read(std::chrono::milliseconds patience) const;
  std::uint32_t pid() const noexcept { return header_ ? header_->pid : 0; }
  std::string name() const;

 private:
  const ShmStatsHeader* header_ = nullptr;
  std::size_t map_size_ = 0;
};

}  // namespace rawpipe::ops
