#include "output_path.hh"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/core.h>

namespace rawpipe::app {

std::string output_path_problem(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) return fmt::format("'{}' is a directory; name a file", path);
    // Opened without O_TRUNC: the check must not destroy what a failed run would have replaced.
    const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return fmt::format("cannot write '{}': {}", path, std::strerror(errno));
    ::close(fd);
    return {};
  }
  if (errno != ENOENT) return fmt::format("cannot write '{}': {}", path, std::strerror(errno));
  // The real test of a directory's permissions (read-only mounts, ACLs, root squash) is to create.
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) {
    const int err = errno;
    if (err == ENOENT) return fmt::format("cannot write '{}': its directory does not exist", path);
    return fmt::format("cannot write '{}': {}", path, std::strerror(err));
  }
  ::close(fd);
  ::unlink(path.c_str());
  return {};
}

}  // namespace rawpipe::app
