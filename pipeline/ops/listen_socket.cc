#include "pipeline/ops/listen_socket.hh"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

namespace rawpipe::ops {

int open_listen_socket(const ListenAddress& where, int backlog) noexcept {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -errno;
  const int one = 1;
  (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = where.addr_be;
  sa.sin_port = htons(where.port);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0 || ::listen(fd, backlog) != 0) {
    const int e = errno;
    ::close(fd);
    return -e;
  }
  return fd;
}

}  // namespace rawpipe::ops
