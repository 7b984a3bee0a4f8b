#include "live_line.hh"

#include <fmt/format.h>

namespace rawpipe::app {
namespace {

std::uint64_t lost_frames(const LiveSample& s) {
  std::uint64_t n = 0;
  for (const auto& [name, stats] : s.ports) n += loss_totals(lost_before_pipeline(stats)).frames;
  return n;
}

// Joins items with ", " after `head`, starting a new indented line before any item that would
// pass the width.
std::string wrap(const std::string& head, const std::vector<std::string>& items) {
  std::string out = head, line = head;
  for (std::size_t i = 0; i < items.size(); ++i) {
    const std::string piece = items[i] + (i + 1 < items.size() ? "," : "");
    if (line.size() + 1 + piece.size() > kLiveLineMaxWidth && line.size() > head.size()) {
      out += "\n";
      line = std::string(head.size(), ' ');
      out += line;
    }
    out += " " + piece;
    line += " " + piece;
  }
  return out + "\n";
}

}  // namespace

std::string short_rate(double r) {
  if (r >= 1e9) return fmt::format("{:.3f}G", r / 1e9);
  if (r >= 1e6) return fmt::format("{:.2f}M", r / 1e6);
  if (r >= 1e3) return fmt::format("{:.1f}k", r / 1e3);
  return fmt::format("{:.0f}", r);
}

LiveSample take_live_sample(const Pipeline& pipeline) {
  LiveSample s;
  s.snapshot = pipeline.snapshot();
  for (std::uint16_t p = 0; p < pipeline.port_count(); ++p)
    s.ports.emplace_back(pipeline.port_name(p), pipeline.port_stats(p));
  return s;
}

std::string LiveLine::line(const LiveSample& now) {
  const double dt = double(now.snapshot.time_ns - prev_.snapshot.time_ns) / 1e9;
  auto rate = [dt](std::uint64_t a, std::uint64_t b) { return short_rate(dt > 0 && a >= b ? double(a - b) / dt : 0.0); };
  const LcoreStats& t = now.snapshot.total;
  const LcoreStats& p = prev_.snapshot.total;
  std::string out = fmt::format("[{:7.1f}s] pps rx {}  delivered {}",
                                double(now.snapshot.time_ns - start_.snapshot.time_ns) / 1e9,
                                rate(t.rx_packets, p.rx_packets), rate(t.delivered, p.delivered));
  if (show_tx_) out += fmt::format("  tx {}", rate(t.transmitted, p.transmitted));
  out += fmt::format("  drops {}  lost {}", rate(t.dropped(), p.dropped()), rate(lost_frames(now), lost_frames(prev_)));
  prev_ = now;
  return out;
}

std::string LiveLine::reasons(const LiveSample& now) {
  std::vector<std::string> drops, lost;
  const LcoreStats& t = now.snapshot.total;
  for (std::size_t r = 1; r < kDropReasonCount; ++r)
    if (t.drops[r]) drops.push_back(fmt::format("{} {}", kDropReasonNames[r], t.drops[r]));
  for (const auto& [name, stats] : now.ports)
    for (const auto& [reason, n] : lost_before_pipeline(stats))
      if (!n || *n) lost.push_back(fmt::format("{} {} {}", name, reason, n ? std::to_string(*n) : "unknown"));
  std::string out;
  if (!drops.empty()) out += wrap("  drops so far:", drops);
  if (!lost.empty()) out += wrap("  lost so far:", lost);
  return out;
}

}  // namespace rawpipe::app
