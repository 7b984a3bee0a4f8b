// `rawpipe run`: build the pipeline from a config, run it with a live stats line, stop on
// duration or a signal (SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE), print the accounting and optionally write it as JSON.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <thread>

#include <fmt/core.h>

#include "commands.hh"
#include "consumer.hh"
#include "driver.hh"
#include "live_line.hh"
#include "log.hh"
#include "output_path.hh"
#include "report.hh"
#include "stop_signals.hh"
#include "rawpipe/instance_lock.hh"
#include "rawpipe/control_cpus.hh"
#include "rawpipe/metrics_server.hh"
#include "rawpipe/plugin_path.hh"
#include "rawpipe/privilege.hh"
#include "rawpipe/shm_stats.hh"
#include "rawpipe/stats_publisher.hh"

namespace rawpipe::app {
namespace {

// The running pipeline, for the signal handler. request_stop() is async-signal-safe (one relaxed
// atomic store); the pointer is set before the handler is installed and cleared after it is removed.
std::atomic<Pipeline*> g_pipeline{nullptr};
static_assert(std::atomic<Pipeline*>::is_always_lock_free);
// An eventfd the handler writes after requesting the stop, so the control loop sleeps until its
// next line is due instead of waking every few milliseconds to look at the flag: it shares a CPU
// with the ring consumer, and each wake-up takes that CPU away from it. -1 when there is none.
std::atomic<int> g_stop_wake_fd{-1};
static_assert(std::atomic<int>::is_always_lock_free);
// Set by the first stop signal; read when the handlers are taken down.
std::atomic<bool> g_stop_signalled{false};
static_assert(std::atomic<bool>::is_always_lock_free);

// True when fd is a pipe or socket whose reader went away (poll reports POLLERR for a pipe with no
// reader). Async-signal-safe.
bool reader_gone(int fd) {
  pollfd p{fd, POLLOUT, 0};
  return poll(&p, 1, 0) == 1 && (p.revents & (POLLERR | POLLHUP)) != 0;
}

// Every stop signal ends the run the same orderly way: the lcores stop, the summary and JSON are
// written, the stats segment is removed. Any number of them may arrive (a second SIGTERM from a
// service manager no longer kills the process half way); SIGKILL remains for a stop that hangs,
// and the XDP program goes with the process then too (its bpf_link closes).
extern "C" void on_stop_signal(int sig) {
  if (sig == SIGPIPE) {
    const bool out = reader_gone(STDOUT_FILENO), err = reader_gone(STDERR_FILENO);
    // A socket peer (a /metrics client) went away: its writer sees EPIPE, the run goes on.
    if (!out && !err) return;
    // `rawpipe run ... | head`: the rest of the output, summary included, goes nowhere instead of
    // failing every write; the JSON file is still written.
    const int saved = errno;
    int null_fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
    if (null_fd >= 0) {
      if (out) dup2(null_fd, STDOUT_FILENO);
      if (err) dup2(null_fd, STDERR_FILENO);
      close(null_fd);
    }
    errno = saved;
  }
  g_stop_signalled.store(true, std::memory_order_relaxed);
  if (Pipeline* p = g_pipeline.load(std::memory_order_relaxed)) p->request_stop();
  if (const int fd = g_stop_wake_fd.load(std::memory_order_relaxed); fd >= 0) {
    const int saved = errno;
    const std::uint64_t one = 1;
    (void)!::write(fd, &one, sizeof one);  // fails only when the counter is full: readable then
    errno = saved;
  }
}

class SignalGuard {
 public:
  static constexpr int kSignals[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE};

  explicit SignalGuard(Pipeline& p) {
    g_pipeline.store(&p, std::memory_order_relaxed);
    wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    g_stop_wake_fd.store(wake_fd_, std::memory_order_relaxed);
    struct sigaction sa {};
    sa.sa_handler = on_stop_signal;
    sigfillset(&sa.sa_mask);  // one handler at a time: the dup2 dance must not interleave
    sa.sa_flags = SA_RESTART;
    for (std::size_t i = 0; i < std::size(kSignals); ++i) sigaction(kSignals[i], &sa, &old_[i]);
  }
  ~SignalGuard() {
    take_down_stop_handlers(kSignals, old_, g_stop_signalled.load(std::memory_order_relaxed));
    g_pipeline.store(nullptr, std::memory_order_relaxed);
    g_stop_wake_fd.store(-1, std::memory_order_relaxed);
    if (wake_fd_ >= 0) ::close(wake_fd_);
  }
  SignalGuard(const SignalGuard&) = delete;
  SignalGuard& operator=(const SignalGuard&) = delete;

  // Sleeps until `until` or until a stop signal arrives, whichever is first. Without an eventfd
  // (descriptor limit), it naps in 20 ms steps so that a signal is still noticed quickly.
  void wait_until(std::chrono::steady_clock::time_point until) const {
    auto left = until - std::chrono::steady_clock::now();
    if (wake_fd_ < 0) left = std::min<std::chrono::steady_clock::duration>(left, std::chrono::milliseconds(20));
    if (left <= left.zero()) return;
    pollfd p{wake_fd_, POLLIN, 0};
    (void)::poll(&p, 1, static_cast<int>(std::chrono::ceil<std::chrono::milliseconds>(left).count()));
  }

 private:
  struct sigaction old_[std::size(kSignals)] {};
  int wake_fd_ = -1;
};

// `--json -`: the JSON alone on stdout, for a pipe into jq; everything else the run prints goes to
// stderr. Returns the descriptor the JSON is written to later, or -1.
int json_to_stdout() {
  std::fflush(stdout);
  const int fd = fcntl(STDOUT_FILENO, F_DUPFD_CLOEXEC, 3);
  if (fd >= 0) dup2(STDERR_FILENO, STDOUT_FILENO);
  return fd;
}

Status write_json_fd(int fd, const nlohmann::json& j) {
  const std::string text = j.dump(2) + "\n";
  for (std::size_t done = 0; done < text.size();) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return Status::errorf("cannot write the JSON summary to stdout: {}", std::strerror(errno));
    done += static_cast<std::size_t>(n);
  }
  return Status::ok();
}

Status write_json(const std::string& file, const nlohmann::json& j) {
  std::ofstream out(file, std::ios::trunc);
  if (!out) return Status::errorf("cannot write the JSON summary to {}: {}", file, std::strerror(errno));
  out << j.dump(2) << "\n";
  out.close();
  if (!out) return Status::errorf("cannot write the JSON summary to {}: {}", file, std::strerror(errno));
  return Status::ok();
}

}  // namespace

int run_command(const RunOptions& options) {
  if (options.quiet && log_enabled(LogLevel::kInfo)) set_log_level(LogLevel::kWarn);
  const bool json_stdout = options.json_file == "-";
  const int json_fd = json_stdout ? json_to_stdout() : -1;
  if (json_stdout && json_fd < 0) {
    log_error("--json -: cannot keep stdout for the JSON: {}", std::strerror(errno));
    return 1;
  }
  auto loaded = load_config(options.config);
  if (!loaded) {
    log_error("{}", loaded.message());
    return 1;
  }
  // What `rawpipe check` warns about, said where it happens too: a run started without a check
  // would otherwise report the consequence (a shadowed rule's silence, frames lost as rx_nombuf)
  // without its cause.
  for (const std::string& w : loaded->warnings) log_warn("{}", w);
  // Before any port opens: a run that cannot write its summary should not start.
  if (!options.json_file.empty() && !json_stdout)
    if (const std::string problem = output_path_problem(options.json_file); !problem.empty()) {
      log_error("--json: {}", problem);
      return 1;
    }
  Plan plan = std::move(loaded->plan);
  const AppSettings app = loaded->app;
  if (options.duration_s) plan.duration_s = *options.duration_s;
  // Before anything is set up: plugins load only from [run] plugin_dirs, and a [run] user that
  // does not exist stops the run before a port opens.
  if (app.privilege.plugin_dirs_set) set_plugin_dirs(app.privilege.plugin_dirs);
  std::optional<privilege::RunUser> run_user;
  if (!app.privilege.user.empty()) {
    auto u = privilege::resolve_run_user(app.privilege.user, app.privilege.group);
    if (!u) {
      log_error("{}: {}", options.config, u.message());
      return 1;
    }
    run_user = u.value();
  }

  // One pipeline per device queue and per lcore CPU: Pipeline::create takes the locks before any
  // port opens, so a second run of a config attaches, binds and steers nothing the first one uses.
  // What a run killed by SIGKILL or a crash left in /dev/shm (its XDP program went with it).
  for (const std::string& m : ops::remove_stale_stats_segments()) log_warn("{}", m);

  auto created = Pipeline::create(plan);
  if (!created) {
    log_error("{}", created.message());
    return 1;
  }
  std::unique_ptr<Pipeline> pipeline = std::move(created).value();

  for (const auto& p : plan.pools)
    if (std::string notice = pipeline->pool_memory_notice(p.config.name); !notice.empty()) log_info("{}", notice);
  for (const auto& e : plan.endpoints)
    log_info("endpoint {}: {}", e.name,
               e.action == EndpointAction::kRing   ? "ring, drained and freed by the app's consumer thread"
               : e.action == EndpointAction::kSink ? "sink (counted and freed on the lcore)"
               : e.action == EndpointAction::kEcho ? "echo (addresses swapped, sent back on the ingress port)"
                                                   : "forward");
  log_info("{}", plan.duration_s > 0 ? fmt::format("running for {} s (Ctrl-C stops earlier)", plan.duration_s)
                                     : std::string("running until Ctrl-C"));

  SignalGuard signals(*pipeline);
  if (Status s = pipeline->start(); !s) {
    log_error("{}", s.message());
    return 1;
  }
  // The path report once started: only then does a port know its real mode (AF_XDP zero-copy or copy).
  std::vector<std::string> port_paths;
  for (std::uint16_t p = 0; p < pipeline->port_count(); ++p) {
    port_paths.push_back(pipeline->port_path_report(p));
    log_info("{}", port_paths.back().ends_with('\n') ? port_paths.back().substr(0, port_paths.back().size() - 1)
                                                  : port_paths.back());
  }
  // The lcores run on their CPUs; every thread made from here on (consumer unless pinned, stats,
  // metrics) and this loop stay off them.
  if (auto control = keep_control_threads_off_lcores(plan); !control)
    log_warn("{}", control.message());
  else if (control->applied)
    log_info("{}", control->note);
  // Port-to-consumer latency of stamped packets, sampled like the stage timing ([metrics]).
  E2eLatency e2e(pipeline->endpoint_count(), plan.metrics.latency_sample);
  RingConsumer consumer;
  // Only a port that stamps packets (PortCaps::timestamps) gives a port-to-consumer latency.
  bool stamped = false;
  for (std::uint16_t p = 0; p < pipeline->port_count(); ++p) stamped |= pipeline->port_caps(p).timestamps;
  if (plan.metrics.latency_sample && stamped) consumer.set_e2e(&e2e);
  const ops::DocumentExtension add_e2e = [&e2e, &pipeline](nlohmann::json& doc) {
    doc["end_to_end"] = e2e.json(*pipeline);
  };
  if (Status s = consumer.start(*pipeline, app.consumer_cpu); !s) {
    log_error("{}", s.message());
    (void)pipeline->stop();
    return 1;
  }
  // Lcores with thread = false: this run has no application thread to drive them.
  ThreadlessDriver driver;
  if (Status s = driver.start(*pipeline); !s) {
    log_error("{}", s.message());
    consumer.stop();
    (void)pipeline->stop();
    return 1;
  }
  if (driver.running())
    log_info("lcores with thread = false: one thread drives them, sleeping on the ports' queues when they are idle");

  // Counters for `rawpipe stat`, published off the lcores; a pipeline runs without them if /dev/shm fails.
  ops::StatsPublisher publisher;
  publisher.set_extension(add_e2e);
  const std::string stats_name = std::filesystem::path(options.config).stem().string();
  if (!plan.metrics.stats_segment) {
    // [metrics] stats_segment = false: no segment.
  } else if (Status s = publisher.start(*pipeline, stats_name, std::chrono::milliseconds(
                                            std::max<long>(100, static_cast<long>(plan.stats_interval_s * 1000))));
             !s)
    log_warn("live stats unavailable: {}", s.message());
  else if (publisher.name_owner())
    log_warn("the stats name '{}' belongs to running pid {}; `rawpipe stat {}` shows this pipeline", stats_name,
             publisher.name_owner(), getpid());
  // Prometheus /metrics ([metrics] listen): asked for explicitly, so failing to serve it stops the run.
  ops::MetricsServer metrics;
  metrics.set_extension(add_e2e);
  if (!plan.metrics.listen.empty()) {
    if (Status s = metrics.start(*pipeline, stats_name, plan.metrics.listen); !s) {
      log_error("{}", s.message());
      driver.stop();
      consumer.stop();
      (void)pipeline->stop();
      return 1;
    }
    log_info("metrics: http://{}/metrics", metrics.address());
  }

  // Setup is complete (ports started, lcores running, stats segment created): give up what the
  // run no longer needs, on every thread (pipeline/privilege/drop.hh).
  if (app.privilege.drop) {
    privilege::DropRequest req;
    for (std::uint16_t p = 0; p < pipeline->port_count(); ++p)
      req.keep |= privilege::runtime_needs_for_port(pipeline->port_pmd(p), pipeline->port_name(p), req.keep_why);
    req.switch_user = run_user.has_value();
    if (run_user) req.user = *run_user;
    if (!publisher.path().empty()) req.hand_over.push_back(publisher.path());
    auto dropped = privilege::drop_privileges(req);
    if (!dropped) {
      log_error("cannot drop privileges, stopping: {}", dropped.message());
      driver.stop();
      consumer.stop();
      (void)pipeline->stop();
      publisher.stop();
      return 1;
    }
    log_info("{}", dropped->line);
  }

  using Clock = std::chrono::steady_clock;
  const bool transmits = std::any_of(plan.endpoints.begin(), plan.endpoints.end(), [](const EndpointPlan& e) {
    return e.action == EndpointAction::kEcho || e.action == EndpointAction::kForward;
  });
  const LiveSample first_sample = take_live_sample(*pipeline);
  const PipelineSnapshot& first = first_sample.snapshot;
  LiveLine live(first_sample, transmits);
  const auto reasons_every = std::chrono::duration<double>(options.reasons_every_s);
  const auto t0 = Clock::now();
  const auto interval = std::chrono::duration<double>(plan.stats_interval_s);
  const auto deadline = plan.duration_s > 0 ? t0 + std::chrono::duration_cast<Clock::duration>(
                                                       std::chrono::duration<double>(plan.duration_s))
                                            : Clock::time_point::max();
  auto next_line = t0 + std::chrono::duration_cast<Clock::duration>(interval);
  auto next_reasons = options.reasons_every_s > 0 ? t0 + std::chrono::duration_cast<Clock::duration>(reasons_every)
                                                  : Clock::time_point::max();
  while (!pipeline->stop_requested()) {
    const auto now = Clock::now();
    if (now >= deadline) break;
    if (now >= next_line || now >= next_reasons) {
      const LiveSample sample = take_live_sample(*pipeline);
      std::string text;
      if (now >= next_line) {
        text = live.line(sample) + "\n";
        if (options.reasons) text += LiveLine::reasons(sample);
        next_line += std::chrono::duration_cast<Clock::duration>(interval);
      }
      if (now >= next_reasons) {
        if (!options.reasons) text += LiveLine::reasons(sample);
        next_reasons += std::chrono::duration_cast<Clock::duration>(reasons_every);
      }
      if (!options.quiet) {
        fmt::print("{}", text);
        std::fflush(stdout);
      }
    }
    // A stop signal wakes the wait at once. The one-second bound is for a stop requested some
    // other way than a signal.
    signals.wait_until(std::min({deadline, next_line, next_reasons, now + std::chrono::seconds(1)}));
  }
  const PipelineSnapshot last = pipeline->snapshot();
  driver.stop();
  consumer.stop();
  Status stopped = pipeline->stop();
  if (!stopped) log_error("stopping: {}", stopped.message());
  publisher.publish_now();  // the final figures, running = false
  publisher.stop();

  RunSummary summary;
  summary.config = options.config;
  summary.window = RateWindow::between(first, last);
  summary.seconds = summary.window.seconds;
  summary.accounting = pipeline->accounting();
  summary.lcores = pipeline->snapshot().lcores;
  for (const auto& e : plan.endpoints) {
    summary.endpoint_names.push_back(e.name);
    summary.endpoint_transmits.push_back(e.action == EndpointAction::kEcho || e.action == EndpointAction::kForward);
  }
  for (const auto& p : plan.ports) summary.port_names.push_back(p.name);
  summary.consumed = consumer.received();
  for (std::uint16_t p = 0; p < pipeline->port_count(); ++p) summary.port_stats.push_back(pipeline->port_stats(p));
  summary.port_paths = port_paths;
  for (std::uint16_t p = 0; p < pipeline->port_count(); ++p)
    for (const std::string& n : pipeline->port_notices(p))
      log_warn("port '{}': {}", pipeline->port_name(p), n);
  // --quiet: the exit status and --json carry the verdict.
  std::string report = format_summary(summary);
  for (const FilterReport& f : pipeline->filter_reports()) report += fmt::format("filter {} ({}): {}\n", f.label, f.name, f.report);
  nlohmann::json extra_json = nlohmann::json::object();
  for (const TapReport& t : pipeline->tap_reports()) {
    report += fmt::format("tap {}: {} captured, {} lost (lane full), {} written to {} file(s), {} bytes\n", t.name,
                          t.captured, t.lost, t.written, t.files_opened, t.bytes);
    extra_json["taps"][t.name] = {{"captured", t.captured}, {"lost", t.lost}, {"written", t.written},
                                  {"files", t.files}, {"bytes", t.bytes}};
  }
  if (std::any_of(plan.ports.begin(), plan.ports.end(), [](const PortPlan& p) { return !p.neigh.addresses.empty(); })) {
    const NeighStats ns = pipeline->neigh_stats();
    report += fmt::format("neigh: {} ARP/ND replies sent, {} requests for other addresses ignored, {} malformed, {} "
                          "replies not taken by tx\n", ns.replies, ns.ignored, ns.malformed, ns.tx_failed);
    extra_json["neigh"] = {{"replies", ns.replies}, {"ignored", ns.ignored}, {"malformed", ns.malformed},
                           {"tx_failed", ns.tx_failed}};
  }
  if (!options.quiet) fmt::print("{}", report);
  std::fflush(stdout);

  // 2: the pipeline's own accounting failed; 3: [run] on_loss = "fail" and a port lost frames
  // before the pipeline (or could not say whether it did).
  int rc = summary.ok() && stopped ? 0 : 2;
  if (rc == 0 && app.fail_on_loss && !summary.lossless()) rc = 3;
  if (!options.json_file.empty()) {
    nlohmann::json j = summary_json(summary);
    j.update(extra_json);
    if (Status s = json_stdout ? write_json_fd(json_fd, j) : write_json(options.json_file, j); !s) {
      log_error("{}", s.message());
      rc = rc ? rc : 1;
    }
  }
  return rc;
}

}  // namespace rawpipe::app
