// `rawpipe gen CONFIG --port NAME`: transmit the frames a config's synth port makes (or any port's
// receive queue: a pcap replay) on another port, at a rate or flat out, with a line per interval
// and a final count (rawpipe/generator.hh does the work).
#include <signal.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstring>
#include <fstream>
#include <thread>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "commands.hh"
#include "report.hh"
#include "stop_signals.hh"
#include "rawpipe/config.hh"
#include "rawpipe/generator.hh"

namespace rawpipe::app {
namespace {

std::atomic<TrafficGenerator*> g_gen{nullptr};
static_assert(std::atomic<TrafficGenerator*>::is_always_lock_free);
std::atomic<bool> g_gen_stop_signalled{false};
static_assert(std::atomic<bool>::is_always_lock_free);

extern "C" void on_gen_signal(int) {
  g_gen_stop_signalled.store(true, std::memory_order_relaxed);
  if (TrafficGenerator* g = g_gen.load(std::memory_order_relaxed)) g->request_stop();
}

std::string gbits(double bytes_per_s) { return fmt::format("{:.2f} Gbit/s", bytes_per_s * 8 / 1e9); }

}  // namespace

int gen_command(const GenOptions& options) {
  auto loaded = load_config(options.config);
  if (!loaded) {
    fmt::print(stderr, "rawpipe gen: {}\n", loaded.message());
    return 1;
  }
  const Plan& plan = loaded->plan;
  GeneratorOptions go;
  go.source = options.source;
  go.target = options.port;
  go.target_queue = options.queue;
  go.rate_pps = options.rate_pps;
  go.count = options.count;
  // Without --cpu or --burst, the config's lcore that polls the source queue says them.
  std::string src = go.source;
  if (src.empty())
    for (const PortPlan& p : plan.ports)
      if (p.pmd == "synth") src = p.name;
  for (const LcorePlan& l : plan.lcores)
    for (const auto& q : l.rx)
      if (q.port < plan.ports.size() && plan.ports[q.port].name == src && q.queue == go.source_queue) {
        go.cpu = l.cpu;
        go.burst = l.burst;
      }
  if (options.cpu) go.cpu = *options.cpu;
  if (options.burst) go.burst = *options.burst;

  auto created = TrafficGenerator::create(plan, go);
  if (!created) {
    fmt::print(stderr, "rawpipe gen: {}\n", created.message());
    return 1;
  }
  std::unique_ptr<TrafficGenerator> gen = std::move(created).value();

  g_gen.store(gen.get(), std::memory_order_relaxed);
  constexpr int kStopSignals[] = {SIGINT, SIGTERM};
  struct sigaction sa {}, old[std::size(kStopSignals)] {};
  sa.sa_handler = on_gen_signal;
  sigemptyset(&sa.sa_mask);
  for (std::size_t i = 0; i < std::size(kStopSignals); ++i) sigaction(kStopSignals[i], &sa, &old[i]);

  int rc = 0;
  if (Status s = gen->start(); !s) {
    fmt::print(stderr, "rawpipe gen: {}\n", s.message());
    rc = 1;
  } else {
    // Once started: only then does a port know its real mode (AF_XDP zero-copy or copy).
    fmt::print("{}\n", gen->describe());
    std::fflush(stdout);
  }
  using Clock = std::chrono::steady_clock;
  const GeneratorCounts first = gen->counts();
  GeneratorCounts prev = first;
  const auto t0 = Clock::now();
  const auto deadline = options.duration_s > 0 ? t0 + std::chrono::duration_cast<Clock::duration>(
                                                          std::chrono::duration<double>(options.duration_s))
                                               : Clock::time_point::max();
  const auto interval = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(options.interval_s));
  auto next_line = t0 + interval;
  while (rc == 0) {
    const GeneratorCounts c = gen->counts();
    if (c.finished || Clock::now() >= deadline) break;
    if (Clock::now() >= next_line) {
      const double dt = double(c.time_ns - prev.time_ns) / 1e9;
      auto rate = [dt](std::uint64_t a, std::uint64_t b) { return dt > 0 ? double(a - b) / dt : 0.0; };
      fmt::print("[{:7.1f}s] sent {} ({})  refused {}  total sent {}\n", double(c.time_ns - first.time_ns) / 1e9,
                 format_rate(rate(c.sent, prev.sent)), gbits(rate(c.sent_bytes, prev.sent_bytes)),
                 format_rate(rate(c.refused, prev.refused)), c.sent);
      std::fflush(stdout);
      prev = c;
      next_line += interval;
    }
    std::this_thread::sleep_until(std::min({deadline, next_line, Clock::now() + std::chrono::milliseconds(10)}));
  }
  const GeneratorCounts end_of_window = gen->counts();
  gen->stop();
  take_down_stop_handlers(kStopSignals, old, g_gen_stop_signalled.load(std::memory_order_relaxed));
  g_gen.store(nullptr, std::memory_order_relaxed);
  const GeneratorCounts c = gen->counts();
  for (const std::string& n : gen->notices()) fmt::print(stderr, "rawpipe gen: {}\n", n);

  // The rate: what was sent between the first reading after start and the last before stop, over
  // exactly that time (as `rawpipe run` counts its window).
  const double secs = double(end_of_window.time_ns - first.time_ns) / 1e9;
  const double pps = secs > 0 ? double(end_of_window.sent - first.sent) / secs : 0;
  const double bps = secs > 0 ? double(end_of_window.sent_bytes - first.sent_bytes) / secs : 0;
  fmt::print("gen summary: generated {}, sent {} ({} bytes), refused {} (tx queue full, freed)\n", c.generated, c.sent,
             c.sent_bytes, c.refused);
  fmt::print("  rate over the {:.3f} s window: sent {} ({})\n", secs, format_rate(pps), gbits(bps));
  if (go.rate_pps > 0 && secs > 0.5 && pps < 0.95 * go.rate_pps)
    fmt::print("  note: sent {:.1f}% of the asked {:.0f} pps: the sending thread did not get its CPU often enough "
               "(another busy thread on cpu {}?) or the transmit queue was full; quote the sent rate, not the asked "
               "one\n", 100 * pps / go.rate_pps, go.rate_pps, go.cpu);
  // What the source port lost before the thread took it (a receive port as the source: its kernel
  // ring, NIC or pool ran short) is part of the verdict, as in `rawpipe run`: never a bare OK.
  const PortLosses source_losses = lost_before_pipeline(gen->source_stats());
  const LossTotals lost = loss_totals(source_losses);
  if (!lost.lossless()) fmt::print("  port {} lost before gen took them: {}\n", src, loss_reasons(source_losses));
  const bool balanced = c.generated == c.sent + c.refused && c.outstanding == 0;
  fmt::print("  {}: generated {} {} sent {} + refused {}; {} buffer(s) outstanding{}\n",
             !balanced ? "FAILED" : lost.lossless() ? "OK" : "LOSSY", c.generated,
             c.generated == c.sent + c.refused ? "==" : "!=", c.sent, c.refused, c.outstanding,
             lost.lossless() ? "" : fmt::format("; {} frame(s) lost at the source before gen took them{}", lost.frames,
                                                lost.unknown.empty() ? "" : " and counters that could not be read"));
  if (rc == 0 && !balanced) rc = 2;
  if (rc == 0 && loaded->app.fail_on_loss && !lost.lossless()) rc = 3;
  if (!options.json_file.empty()) {
    nlohmann::json j = {{"config", options.config}, {"generated", c.generated}, {"sent", c.sent},
                        {"sent_bytes", c.sent_bytes}, {"refused", c.refused}, {"outstanding", c.outstanding},
                        {"window_seconds", secs}, {"sent_mpps", pps / 1e6}, {"sent_gbps", bps * 8 / 1e9},
                        {"rate_pps", go.rate_pps}, {"count", go.count}, {"ok", balanced},
                        {"lossless", lost.lossless()}, {"lost_at_source", lost.frames}};
    nlohmann::json& by_reason = j["source_losses"] = nlohmann::json::object();
    for (const auto& [reason, n] : source_losses)
      by_reason[reason] = n ? nlohmann::json(*n) : nlohmann::json(nullptr);
    std::ofstream out(options.json_file, std::ios::trunc);
    out << j.dump(2) << "\n";
    out.close();
    if (!out) {
      fmt::print(stderr, "rawpipe gen: cannot write {}: {}\n", options.json_file, std::strerror(errno));
      if (rc == 0) rc = 1;
    }
  }
  return rc;
}

}  // namespace rawpipe::app
