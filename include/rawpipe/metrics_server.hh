// The Prometheus endpoint and live dashboard over plain HTTP/1.0, served by one control thread.
//
// GET /metrics renders the pipeline's stats document (publisher.hh) in the text format
// (prometheus.hh), GET /metrics.json the same document as JSON; each such scrape is a numbered
// snapshot, and the last kKeptSnapshots stay readable by number (?snapshot=N) so the dashboard's
// figures can be compared with the Prometheus text of the very same moment. GET / is the
// dashboard page (docs/metrics.md). The thread reads the same single-writer counters as the stats
// segment and takes no lock an lcore takes. One connection at a time: a request line and headers
// of at most 8 KiB within 2 s, then the answer, then close. Anything else gets 400, 404 or 405
// and is not interpreted further.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <thread>

#include "rawpipe/api.h"
#include "rawpipe/status.hh"
#include "rawpipe/pipeline.hh"
#include "rawpipe/stats_publisher.hh"

namespace rawpipe::ops {

struct HttpRoute;

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
  struct Snapshot {
    std::uint64_t number = 0;  // 0: empty slot (numbers start at 1)
    std::string json;
    std::string prometheus;
  };
  static constexpr std::size_t kKeptSnapshots = 16;

  void run();
  void serve(int fd);
  std::string answer(const HttpRoute& route);

  const Pipeline* pipeline_ = nullptr;
  std::string name_;
  DocumentExtension extension_;
  int listen_fd_ = -1;
  int wake_fd_ = -1;  // eventfd: stop() wakes the poll
  std::string address_;
  std::uint16_t port_ = 0;
  std::atomic<std::uint64_t> requests_{0};  // relaxed: a statistic
  // Touched by the server thread only (one connection at a time), so no lock.
  std::array<Snapshot, kKeptSnapshots> snapshots_{};
  std::uint64_t next_snapshot_ = 1;
  std::optional<Result<std::string>> chartjs_;  // read on the first request for it
  std::thread thread_;
};


}  // namespace rawpipe::ops
