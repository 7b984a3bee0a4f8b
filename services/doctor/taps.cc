// Capture taps create their files when the pipeline starts (a missing or read-only directory
// fails the run there) and fail the run at stop when a write failed (a full filesystem).
#include <fmt/format.h>

#include <unistd.h>

#include "services/doctor/checks.hh"

namespace rawpipe::doctor {
namespace {

// Below this nothing past the file header and the first buffered block fits.
constexpr std::uint64_t kTapMinFree = 1u << 20;

std::string size(std::uint64_t bytes) {
  return bytes >= (1ull << 30) ? fmt::format("{:.1f} GiB", double(bytes) / double(1ull << 30))
                               : fmt::format("{:.1f} MiB", double(bytes) / double(1ull << 20));
}

}  // namespace

void check_taps(const Needs* needs, const HostFacts& h, Report& r) {
  if (!needs) return;
  for (const TapNeed& t : needs->taps) {
    auto it = h.tap_dirs.find(t.dir);
    if (it == h.tap_dirs.end()) continue;
    const DirFacts& d = it->second;
    const std::string check = fmt::format("tap {}", t.name);
    if (!d.exists) {
      r.fail(check, fmt::format("tap '{}' writes {} but directory {} does not exist", t.name, t.path, t.dir),
             fmt::format("mkdir -p {}, or change the tap's path", t.dir));
    } else if (!d.is_dir) {
      r.fail(check, fmt::format("tap '{}' writes {} but {} is not a directory", t.name, t.path, t.dir),
             "change the tap's path");
    } else if (!d.writable) {
      r.fail(check,
             fmt::format("tap '{}' cannot create {}: directory {} is not writable for uid {} ({})", t.name, t.path,
                         t.dir, geteuid(), d.error),
             fmt::format("point the tap at a directory this user owns, or: sudo chown {} {}", geteuid(), t.dir));
    } else if (d.space_known && d.free_bytes < kTapMinFree) {
      r.fail(check,
             fmt::format("the filesystem of {} has {} free: tap '{}' fails on its first write", t.dir,
                         size(d.free_bytes), t.name),
             "free space there, or point the tap at another filesystem");
    } else if (d.space_known && t.rotate_bytes && t.max_files && t.rotate_bytes * t.max_files > d.free_bytes) {
      r.warn(check,
             fmt::format("tap '{}' keeps up to {} files of {} ({}) but {} has {} free: the run fails when the disk "
                         "fills",
                         t.name, t.max_files, size(t.rotate_bytes), size(t.rotate_bytes * t.max_files), t.dir,
                         size(d.free_bytes)),
             "lower rotate_bytes or max_files, or free space");
    } else if (d.space_known && !t.max_files) {
      r.ok(check, fmt::format("{} is writable, {} free (the tap keeps every file it writes: watch the space)", t.dir,
                              size(d.free_bytes)));
    } else {
      r.ok(check, fmt::format("{} is writable{}", t.dir, d.space_known ? ", " + size(d.free_bytes) + " free" : ""));
    }
  }
}

}  // namespace rawpipe::doctor
