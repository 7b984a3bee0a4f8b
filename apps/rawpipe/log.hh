// The app's log lines: a level, a UTC timestamp, one line each. Errors and warnings go to stderr;
// info (what a run set up) goes to stdout beside the live line and the summary, so a reader of
// stdout sees the whole story in order. The level comes from --log-level or RAWPIPE_LOG_LEVEL.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include <fmt/core.h>

namespace rawpipe::app {

enum class LogLevel { kError, kWarn, kInfo, kDebug };

// "error", "warn", "info", "debug"; nullopt for anything else.
std::optional<LogLevel> parse_log_level(std::string_view name);
void set_log_level(LogLevel level);
bool log_enabled(LogLevel level);

// Writes `text` (which may hold several lines) with one timestamp and level prefix per line.
void log_text(LogLevel level, std::string_view text);

template <typename... Args>
void log_error(fmt::format_string<Args...> f, Args&&... args) {
  log_text(LogLevel::kError, fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
void log_warn(fmt::format_string<Args...> f, Args&&... args) {
  if (log_enabled(LogLevel::kWarn)) log_text(LogLevel::kWarn, fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
void log_info(fmt::format_string<Args...> f, Args&&... args) {
  if (log_enabled(LogLevel::kInfo)) log_text(LogLevel::kInfo, fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace rawpipe::app
