// `rawpipe check` and `rawpipe list-pmds`.
#include <fmt/core.h>

#include "commands.hh"
#include "report.hh"
#include "rawpipe/config.hh"

namespace rawpipe::app {

int check_command(const CheckOptions& options) {
  const std::string& config = options.config;
  auto loaded = load_config(config, LoadOptions{});
  if (!loaded) {
    // Every error of the config, one per line, so one edit fixes them all.
    std::size_t count = 0;
    std::string_view all = loaded.message();
    while (!all.empty()) {
      const std::size_t eol = all.find('\n');
      fmt::print(stderr, "rawpipe: {}\n", all.substr(0, eol));
      ++count;
      all = eol == std::string_view::npos ? std::string_view() : all.substr(eol + 1);
    }
    if (count > 1) fmt::print(stderr, "rawpipe: {}: {} errors\n", config, count);
    return 1;
  }
  fmt::print("{}", describe_plan(loaded->plan));
  if (loaded->app.consumer_cpu >= 0) fmt::print("  ring consumer on cpu {}\n", loaded->app.consumer_cpu);
  fmt::print("{}: valid\n", config);
  return 0;
}

int list_pmds_command() {
  for (const DriverInfo& d : builtin_drivers()) fmt::print("{:<12} {}\n", d.name, d.summary);
  return 0;
}

}  // namespace rawpipe::app
