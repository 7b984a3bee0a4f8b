// `rawpipe check` and `rawpipe list-pmds`.
#include <fmt/core.h>

#include "commands.hh"
#include "report.hh"
#include "rawpipe/config.hh"

namespace rawpipe::app {

int check_command(const std::string& config) {
  auto loaded = load_config(config, LoadOptions{});
  if (!loaded) {
    fmt::print(stderr, "rawpipe: {}\n", loaded.message());
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
