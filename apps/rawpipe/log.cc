#include "log.hh"

#include <chrono>
#include <cstdio>
#include <ctime>

namespace rawpipe::app {
namespace {

LogLevel g_level = LogLevel::kInfo;

// 2026-11-24T13:45:01.123Z: UTC, so lines from machines in different zones sort together.
std::string timestamp() {
  const auto now = std::chrono::system_clock::now();
  const std::time_t t = std::chrono::system_clock::to_time_t(now);
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  return fmt::format("{}.{:03}Z", buf, ms);
}

constexpr std::string_view kNames[] = {"error", "warn", "info", "debug"};

}  // namespace

std::optional<LogLevel> parse_log_level(std::string_view name) {
  for (std::size_t i = 0; i < std::size(kNames); ++i)
    if (name == kNames[i]) return static_cast<LogLevel>(i);
  return std::nullopt;
}

void set_log_level(LogLevel level) { g_level = level; }
bool log_enabled(LogLevel level) { return level <= g_level; }

void log_text(LogLevel level, std::string_view text) {
  if (!log_enabled(level)) return;
  std::FILE* to = level == LogLevel::kInfo ? stdout : stderr;
  const std::string stamp = timestamp();
  const std::string_view name = kNames[static_cast<int>(level)];
  while (!text.empty()) {
    const auto nl = text.find('\n');
    const std::string_view line = text.substr(0, nl);
    // Info lines carry no level word: they are most of what a run prints.
    if (level == LogLevel::kInfo)
      fmt::print(to, "{} {}\n", stamp, line);
    else
      fmt::print(to, "{} rawpipe {}: {}\n", stamp, name, line);
    if (nl == std::string_view::npos) break;
    text.remove_prefix(nl + 1);
  }
  std::fflush(to);
}

}  // namespace rawpipe::app
