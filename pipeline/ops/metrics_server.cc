#include "rawpipe/metrics_server.hh"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "pipeline/config/metrics_section.hh"
#include "pipeline/ops/listen_socket.hh"
#include "pipeline/ops/prometheus.hh"
#include "pipeline/ops/publisher.hh"

namespace rawpipe::ops {
namespace {

constexpr std::size_t kMaxRequest = 8192;
constexpr int kRequestTimeoutMs = 2000;

std::string reply(int code, std::string_view reason, std::string_view content_type, std::string_view body) {
  return fmt::format("HTTP/1.0 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{}", code,
                     reason, content_type, body.size(), body);
}

std::string error_reply(int code, std::string_view reason, std::string_view why) {
  return reply(code, reason, "text/plain; charset=utf-8", fmt::format("{}\n", why));
}

void write_all(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // the client went away; nothing to tell it
    data.remove_prefix(static_cast<std::size_t>(n));
  }
}

}  // namespace

std::string metrics_http_response(std::string_view request, const std::string& metrics_body) {
  const std::size_t eol = request.find('\n');
  if (eol == std::string_view::npos) return error_reply(400, "Bad Request", "no request line");
  std::string_view line = request.substr(0, eol);
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  const std::size_t sp1 = line.find(' ');
  const std::size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos || line.find(' ', sp2 + 1) != std::string_view::npos)
    return error_reply(400, "Bad Request", "expected \"METHOD TARGET HTTP/1.x\"");
  const std::string_view method = line.substr(0, sp1);
  const std::string_view target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  const std::string_view version = line.substr(sp2 + 1);
  if (version != "HTTP/1.0" && version != "HTTP/1.1") return error_reply(400, "Bad Request", "expected HTTP/1.0 or HTTP/1.1");
  if (target != "/metrics") return error_reply(404, "Not Found", "only /metrics is served here");
  if (method != "GET") return error_reply(405, "Method Not Allowed", "only GET is served here");
  return reply(200, "OK", "text/plain; version=0.0.4; charset=utf-8", metrics_body);
}

Status MetricsServer::start(const Pipeline& pipeline, std::string name, const std::string& listen) {
  if (thread_.joinable()) return Status::error("the metrics server is already running");
  auto where = parse_listen_address(listen);
  if (!where) return Status::errorf("[metrics] listen: {}", where.message());
  const int fd = ops::open_listen_socket(*where, 8);
  if (fd < 0)
    return Status::errorf("metrics endpoint: cannot listen on {}: {}{}", listen, std::strerror(-fd),
                          fd == -EADDRINUSE ? " (another process uses the port; change [metrics] listen)" : "");
  sockaddr_in sa{};
  socklen_t len = sizeof sa;
  (void)getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len);
  char host[INET_ADDRSTRLEN] = "";
  inet_ntop(AF_INET, &sa.sin_addr, host, sizeof host);
  port_ = ntohs(sa.sin_port);
  address_ = fmt::format("{}:{}", host, port_);
  wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake_fd_ < 0) {
    ::close(fd);
    return Status::errorf("metrics endpoint: eventfd: {}", std::strerror(errno));
  }
  listen_fd_ = fd;
  pipeline_ = &pipeline;
  name_ = std::move(name);
  thread_ = std::thread([this] { run(); });
  pthread_setname_np(thread_.native_handle(), "rawpipe-metrics");
  return Status::ok();
}

void MetricsServer::stop() {
  if (thread_.joinable()) {
    const std::uint64_t one = 1;
    (void)!::write(wake_fd_, &one, sizeof one);
    thread_.join();
  }
  if (listen_fd_ >= 0) ::close(listen_fd_);
  if (wake_fd_ >= 0) ::close(wake_fd_);
  listen_fd_ = wake_fd_ = -1;
}

void MetricsServer::run() {
  for (;;) {
    pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (fds[1].revents) return;
    if (!(fds[0].revents & POLLIN)) continue;
    const int c = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (c < 0) continue;
    serve(c);
    ::close(c);
  }
}

void MetricsServer::serve(int fd) {
  // Read until the end of the headers, the size limit, the deadline or a stop request.
  std::string req;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(kRequestTimeoutMs);
  while (req.find("\r\n\r\n") == std::string::npos && req.find("\n\n") == std::string::npos) {
    if (req.size() >= kMaxRequest) return write_all(fd, error_reply(400, "Bad Request", "request too large"));
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return write_all(fd, error_reply(400, "Bad Request", "request not complete within 2 s"));
    pollfd fds[2] = {{fd, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
    if (::poll(fds, 2, static_cast<int>(left.count())) < 0 && errno != EINTR) return;
    if (fds[1].revents) return;
    if (!fds[0].revents) continue;
    char buf[2048];
    const ssize_t n = ::recv(fd, buf, std::min(sizeof buf, kMaxRequest - req.size()), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // closed early: answer what arrived (a bare request line is still a request)
    req.append(buf, static_cast<std::size_t>(n));
  }
  requests_.fetch_add(1, std::memory_order_relaxed);
  // Only a well-formed GET /metrics pays for rendering.
  const std::string probe = metrics_http_response(req, "");
  if (!probe.starts_with("HTTP/1.0 200")) return write_all(fd, probe);
  nlohmann::json doc = stats_document(*pipeline_, name_);
  if (extension_) extension_(doc);
  write_all(fd, metrics_http_response(req, prometheus_text(doc)));
}

}  // namespace rawpipe::ops
