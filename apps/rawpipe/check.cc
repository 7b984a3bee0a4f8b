// `rawpipe check` and `rawpipe list-pmds`.
#include <fmt/core.h>

#include "apps/rawpipe/commands.hh"
#include "apps/rawpipe/report.hh"
#include "pipeline/config/loader.hh"
#include "pipeline/port/registry.hh"

namespace rawpipe::app {

int check_command(const std::string& config) {
  auto loaded = load_config(config, default_load_options());
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
  for (const PmdDriver* d : all_pmds()) fmt::print("{:<12} {}\n", d->name, d->summary);
  return 0;
}

}  // namespace rawpipe::app
