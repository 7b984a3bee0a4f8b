#include "services/doctor/listen_probe.hh"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "pipeline/config/metrics_section.hh"
#include "pipeline/ops/listen_socket.hh"
#include "services/doctor/host_text.hh"

namespace rawpipe::doctor {
namespace {

namespace fs = std::filesystem;

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string cmdline(const fs::path& pid_dir) {
  std::string s = slurp(pid_dir / "cmdline");
  while (!s.empty() && s.back() == '\0') s.pop_back();
  std::replace(s.begin(), s.end(), '\0', ' ');
  return s;
}

}  // namespace

std::string socket_holders(std::uint64_t inode, const std::string& proc_root) {
  const std::string needle = fmt::format("socket:[{}]", inode);
  std::string out;
  std::error_code ec;
  for (const auto& p : fs::directory_iterator(proc_root, ec)) {
    const std::string pid = p.path().filename().string();
    if (pid.empty() || !std::all_of(pid.begin(), pid.end(), ::isdigit)) continue;
    std::error_code fd_ec;
    for (const auto& fd : fs::directory_iterator(p.path() / "fd", fd_ec)) {
      std::error_code link_ec;
      if (fs::read_symlink(fd.path(), link_ec).string() != needle) continue;
      out += fmt::format("{}pid {} ({})", out.empty() ? "" : ", ", pid, cmdline(p.path()));
      break;
    }
  }
  return out;
}

ListenFacts probe_listen(const std::string& listen, const std::string& proc_root) {
  ListenFacts f;
  f.listen = listen;
  auto where = parse_listen_address(listen);
  if (!where) {
    f.bind_error = where.message();
    return f;
  }
  // The server's own way of listening: what fails here fails there.
  const int fd = ops::open_listen_socket(*where, 1);
  if (fd < 0) {
    f.bind_error = std::strerror(-fd);
    f.in_use = fd == -EADDRINUSE;
  } else {
    ::close(fd);
  }
  if (!f.in_use) return f;
  for (const char* table : {"net/tcp", "net/tcp6"})
    for (const TcpSocketEntry& s : parse_proc_net_tcp(slurp(fs::path(proc_root) / table)))
      if (s.state == 0x0A && tcp_listener_blocks(s, where->addr_be, where->port) && s.inode != 0) {
        const std::string who = socket_holders(s.inode, proc_root);
        if (!who.empty()) f.owner += fmt::format("{}{}", f.owner.empty() ? "" : ", ", who);
      }
  return f;
}

}  // namespace rawpipe::doctor
