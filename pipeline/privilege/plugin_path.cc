#include "rawpipe/plugin_path.hh"

#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/auxv.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>

#include "pipeline/build_paths.h"
#include "pipeline/privilege/module_location.hh"

namespace rawpipe {
namespace {

std::mutex g_mu;
std::optional<std::vector<std::string>> g_dirs;

// Descriptors of checked plugin files, kept open for the life of the process, one per file.
// glibc's dlopen first matches an already loaded object by its name ("/proc/self/fd/N"): were N
// closed and reused for another file while the first object stays loaded (it is still attached,
// or cannot be unloaded), dlopen would hand back the wrong library. A pinned N always names the
// same file, and loading the same file again reuses its N.
std::mutex g_pin_mu;
std::map<std::pair<dev_t, ino_t>, int> g_pinned;

Status refuse(const std::string& path, std::string_view rule, const std::string& why) {
  return Status::errorf("filter plugin '{}': refused by rule {}: {}", path, rule, why);
}

bool inside(const std::string& real, const std::string& dir) {
  if (dir == "/") return true;
  return real.size() > dir.size() && real.compare(0, dir.size(), dir) == 0 && real[dir.size()] == '/';
}

bool trusted_owner(uid_t uid) { return uid == 0 || uid == geteuid(); }

}  // namespace

std::vector<std::string> default_plugin_dirs() {
  std::vector<std::string> dirs;
  // Like ld.so's LD_LIBRARY_PATH: honoured unless the process was started set-id or with file
  // capabilities (AT_SECURE), where the environment belongs to a less trusted caller.
  if (const char* env = getauxval(AT_SECURE) ? nullptr : std::getenv("RAWPIPE_PLUGIN_PATH")) {
    std::string_view rest(env);
    while (!rest.empty()) {
      const std::size_t colon = rest.find(':');
      std::string_view dir = rest.substr(0, colon);
      if (!dir.empty() && dir.front() == '/') dirs.emplace_back(dir);
      if (colon == std::string_view::npos) break;
      rest.remove_prefix(colon + 1);
    }
  }
  // An installed copy never trusts the directory it was built in (module_location.hh says why);
  // it looks beside itself first, then at the configured install directory.
  if (running_from_build_tree()) {
    dirs.emplace_back(RAWPIPE_PLUGIN_BUILD_DIR);
  } else if (std::string beside = relocated_install_path(RAWPIPE_PLUGIN_INSTALL_DIR);
             beside != RAWPIPE_PLUGIN_INSTALL_DIR) {
    dirs.push_back(std::move(beside));
  }
  dirs.emplace_back(RAWPIPE_PLUGIN_INSTALL_DIR);
  return dirs;
}

void set_plugin_dirs(std::vector<std::string> dirs) {
  std::lock_guard lock(g_mu);
  g_dirs = std::move(dirs);
}

std::vector<std::string> plugin_dirs() {
  std::lock_guard lock(g_mu);
  return g_dirs ? *g_dirs : default_plugin_dirs();
}

PluginFile::PluginFile(PluginFile&& o) noexcept { *this = std::move(o); }
PluginFile& PluginFile::operator=(PluginFile&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0 && !pinned_) close(fd_);
    fd_ = std::exchange(o.fd_, -1);
    pinned_ = std::exchange(o.pinned_, false);
    real_path_ = std::move(o.real_path_);
  }
  return *this;
}
PluginFile::~PluginFile() {
  if (fd_ >= 0 && !pinned_) close(fd_);
}
std::string PluginFile::dlopen_path() const { return fmt::format("/proc/self/fd/{}", fd_); }

Status check_plugin_path(const std::string& path, const std::vector<std::string>& allowed_dirs, PluginFile* out) {
  PluginFile f;
  f.fd_ = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (f.fd_ < 0) return Status::errorf("filter plugin '{}': cannot load: cannot open it: {}", path, std::strerror(errno));
  struct stat st {};
  if (fstat(f.fd_, &st) != 0) return Status::errorf("filter plugin '{}': fstat: {}", path, std::strerror(errno));
  if (!S_ISREG(st.st_mode)) return refuse(path, "regular-file", "it is not a regular file");

  // The name the kernel has for what we opened: every symlink resolved, no later swap can change it.
  char buf[PATH_MAX];
  ssize_t n = readlink(f.dlopen_path().c_str(), buf, sizeof buf - 1);
  if (n <= 0) return Status::errorf("filter plugin '{}': cannot resolve the opened file: {}", path, std::strerror(errno));
  f.real_path_.assign(buf, static_cast<std::size_t>(n));
  if (f.real_path_.ends_with(" (deleted)") || f.real_path_.front() != '/')
    return Status::errorf("filter plugin '{}': the file was removed while it was opened", path);

  std::string dirs_text;
  bool allowed = false;
  for (const auto& d : allowed_dirs) {
    dirs_text += fmt::format("{}{}", dirs_text.empty() ? "" : ", ", d);
    char real[PATH_MAX];
    if (d.empty() || !realpath(d.c_str(), real)) continue;  // a configured dir that does not exist allows nothing
    allowed |= inside(f.real_path_, real);
  }
  if (!allowed)
    return refuse(path, "inside-plugin-dirs",
                  fmt::format("{} is not inside an allowed plugin directory ({}); copy it there or add its directory "
                              "to [run] plugin_dirs",
                              f.real_path_ == path ? std::string("it") : fmt::format("it resolves to {}, which", f.real_path_),
                              dirs_text.empty() ? "none configured" : dirs_text));

  if (st.st_mode & S_IWOTH)
    return refuse(path, "file-not-world-writable",
                  fmt::format("{} is writable by every user (mode {:04o}); chmod o-w it", f.real_path_, st.st_mode & 07777));
  if (!trusted_owner(st.st_uid))
    return refuse(path, "trusted-owner",
                  fmt::format("{} is owned by uid {}, neither root nor this process's user (uid {})", f.real_path_,
                              st.st_uid, geteuid()));

  // Walk the real path's directories up to /.
  std::string dir = f.real_path_;
  while (true) {
    auto slash = dir.rfind('/');
    dir = slash == 0 ? "/" : dir.substr(0, slash);
    struct stat ds {};
    if (stat(dir.c_str(), &ds) != 0)
      return Status::errorf("filter plugin '{}': cannot check directory {}: {}", path, dir, std::strerror(errno));
    if ((ds.st_mode & S_IWOTH) && !(ds.st_mode & S_ISVTX))
      return refuse(path, "no-world-writable-dir",
                    fmt::format("directory {} is writable by every user without the sticky bit (mode {:04o}), so "
                                "anyone could replace the plugin; chmod o-w it or move the plugin",
                                dir, ds.st_mode & 07777));
    if (!trusted_owner(ds.st_uid))
      return refuse(path, "trusted-owner",
                    fmt::format("directory {} is owned by uid {}, neither root nor this process's user (uid {})", dir,
                                ds.st_uid, geteuid()));
    if (dir == "/") break;
  }
  if (out) {
    std::lock_guard lock(g_pin_mu);
    auto [it, fresh] = g_pinned.emplace(std::make_pair(st.st_dev, st.st_ino), f.fd_);
    if (!fresh) close(f.fd_);  // the same file: its pinned descriptor names it already
    f.fd_ = it->second;
    f.pinned_ = true;
    *out = std::move(f);
  }
  return Status::ok();
}

}  // namespace rawpipe
