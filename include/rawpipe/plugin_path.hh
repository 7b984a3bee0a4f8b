// Where filter plugins may be loaded from.
//
// A plugin is code that runs inside the lcores with every privilege the pipeline had while loading
// it, so it must come from a place only trusted users can write, as sshd's StrictModes and ld.so's
// secure mode demand. The rules, checked on the opened file (no time-of-check/time-of-use gap:
// the file is opened once, checked through its descriptor and loaded as /proc/self/fd/N):
//   1. inside-plugin-dirs: the file's real path (symlinks resolved) lies inside one of the
//      allowed directories ([run] plugin_dirs; default: the absolute directories of the
//      RAWPIPE_PLUGIN_PATH environment variable unless the process is set-id (AT_SECURE), this
//      build's plugins/ directory and the install's <libdir>/rawpipe/filters). A symlink in a
//      plugin dir pointing elsewhere is refused. The other rules apply to every directory alike.
//   2. regular-file: the path names a regular file.
//   3. file-not-world-writable: the file is not writable by every user.
//   4. trusted-owner: the file and every directory above it are owned by root or by the user
//      running rawpipe.
//   5. no-world-writable-dir: no directory from the file's up to / is writable by every user,
//      unless it has the sticky bit (like /tmp: others cannot rename or delete what is in it).
// Every refusal names the path and the rule.
#pragma once

#include "rawpipe/api.h"

#include <string>
#include <vector>

#include "rawpipe/status.hh"

namespace rawpipe {

// RAWPIPE_PLUGIN_PATH's absolute directories (not when AT_SECURE); then, for code running from
// its build tree, that build's plugins directory, and for an installed copy, the plugin directory
// beside it (a moved or --destdir install); then the configured install's plugin directory. An
// installed copy never allows the directory it was built in.
RAWPIPE_API std::vector<std::string> default_plugin_dirs();

// The process-wide allowed directories (the app sets them from [run] plugin_dirs before creating
// the pipeline; an embedding application may too). Until set: default_plugin_dirs(). MT-safe.
RAWPIPE_API void set_plugin_dirs(std::vector<std::string> dirs);
RAWPIPE_API std::vector<std::string> plugin_dirs();

// An opened, checked plugin file. dlopen(dlopen_path()) loads exactly the checked file. Once
// handed out by check_plugin_path the descriptor is pinned: it stays open for the life of the
// process (one per distinct file), so its /proc/self/fd/N name never comes to mean another file
// while a library loaded under that name is still in the process.
class RAWPIPE_API PluginFile {
 public:
  PluginFile() = default;
  PluginFile(PluginFile&& o) noexcept;
  PluginFile& operator=(PluginFile&& o) noexcept;
  ~PluginFile();
  int fd() const noexcept { return fd_; }
  const std::string& real_path() const noexcept { return real_path_; }
  std::string dlopen_path() const;

 private:
  friend Status check_plugin_path(const std::string&, const std::vector<std::string>&, PluginFile*);
  int fd_ = -1;
  bool pinned_ = false;
  std::string real_path_;
};

// Opens `path` and checks the rules above against `allowed_dirs`. On success and when `out` is
// given, the opened file is handed over for loading.
RAWPIPE_API Status check_plugin_path(const std::string& path, const std::vector<std::string>& allowed_dirs,
                         PluginFile* out = nullptr);

}  // namespace rawpipe
