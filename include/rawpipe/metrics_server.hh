// The Prometheus endpoint: GET /metrics over plain HTTP/1.0, served by one control thread.
//
// Each request renders the pipeline's stats document (publisher.hh) in the text format
// (prometheus.hh); the thread reads the same single-writer counters as the stats segment and
// takes no lock an lcore takes. One connection at a time: a request line and headers of at most
// 8 KiB within 2 s, then the answer, then close. Anything but "GET /metrics HTTP/1.x" gets 400,
// 404 or 405 and is not interpreted further.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <thread>

#include "rawpipe/api.h"
#include "rawpipe/status.hh"
#include "rawpipe/pipeline.hh"
#include "rawpipe/stats_publisher.hh"

namespace rawpipe::ops {

class RAWPIPE_API MetricsServer {
 public:
  MetricsServer() = default;
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;
  ~MetricsServer() { stop(); }

  // Control path, before start(): adds the host's part to every scraped document.
  void set_extension(DocumentExtension f) { extension_ = std::move(f); }
  // Binds `listen` ("A.B.C.D:PORT"; port 0 picks a free one) and starts the thread. The pipeline
  // must outlive stop().
  Status start(const Pipeline& pipeline, std::string name, const std::string& listen);
  // Closes the socket and joins the thread (an answer in progress completes first). Idempotent.
  void stop();
  // The bound address, e.g. "127.0.0.1:9464" (the real port when 0 was asked for).
  const std::string& address() const noexcept { return address_; }
  std::uint16_t port() const noexcept { return port_; }
  std::uint64_t requests() const noexcept { return requests_.load(std::memory_order_relaxed); }

 private:
  void run();
  void serve(int fd);

  const Pipeline* pipeline_ = nullptr;
  std::string name_;
  DocumentExtension extension_;
  int listen_fd_ = -1;
  int wake_fd_ = -1;  // eventfd: stop() wakes the poll
  std::string address_;
  std::uint16_t port_ = 0;
  std::atomic<std::uint64_t> requests_{0};  // relaxed: a statistic
  std::thread thread_;
};


}  // namespace rawpipe::ops
