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
#include "pipeline/ops/dashboard.hh"
#include "pipeline/ops/http_routes.hh"
#include "pipeline/ops/listen_socket.hh"
#include "pipeline/ops/prometheus.hh"
#include "pipeline/ops/publisher.hh"

namespace rawpipe::ops {
namespace {

constexpr std::size_t kMaxRequest = 8192;
constexpr int kRequestTimeoutMs = 2000;

void write_all(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // the client went away; nothing to tell it
    data.remove_prefix(static_cast<std::size_t>(n));
  }
}

}  // namespace

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
    if (req.size() >= kMaxRequest) return write_all(fd, http_error(400, "Bad Request", "request too large"));
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return write_all(fd, http_error(400, "Bad Request", "request not complete within 2 s"));
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
  auto routed = route_http_request(req);
  if (auto* err = std::get_if<std::string>(&routed)) return write_all(fd, *err);
  write_all(fd, answer(std::get<HttpRoute>(routed)));
}

std::string MetricsServer::answer(const HttpRoute& route) {
  switch (route.page) {
    case HttpPage::kDashboard: return http_reply(200, "OK", "text/html; charset=utf-8", dashboard_html());
    case HttpPage::kChartJs: {
      if (!chartjs_) chartjs_ = read_chartjs();
      if (!*chartjs_) return http_error(404, "Not Found", chartjs_->message());
      return http_reply(200, "OK", "text/javascript; charset=utf-8", chartjs_->value());
    }
    case HttpPage::kMetrics:
    case HttpPage::kMetricsJson: break;
  }
  const Snapshot* snap = nullptr;
  if (route.snapshot) {
    for (const Snapshot& s : snapshots_)
      if (s.number == *route.snapshot && s.number != 0) snap = &s;
    if (!snap)
      return http_error(404, "Not Found",
                        fmt::format("snapshot {} is not kept (the last {} served are; the newest is {})",
                                    *route.snapshot, snapshots_.size(), next_snapshot_ - 1));
  } else {
    // Only a scrape that asks for fresh figures takes a snapshot (and pays for rendering).
    nlohmann::json doc = stats_document(*pipeline_, name_);
    if (extension_) extension_(doc);
    doc["snapshot"] = next_snapshot_;
    Snapshot& slot = snapshots_[next_snapshot_ % snapshots_.size()];
    slot.number = next_snapshot_++;
    slot.json = doc.dump();
    slot.prometheus = prometheus_text(doc);
    snap = &slot;
  }
  const std::string header = fmt::format("X-Rawpipe-Snapshot: {}", snap->number);
  if (route.page == HttpPage::kMetricsJson) return http_reply(200, "OK", "application/json", snap->json, header);
  return http_reply(200, "OK", kPrometheusContentType, snap->prometheus, header);
}

}  // namespace rawpipe::ops
