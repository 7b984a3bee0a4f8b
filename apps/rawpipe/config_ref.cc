// `rawpipe config-ref [SECTION|DRIVER] [--markdown]`: the config reference, from the key tables
// the parsers use (docs/config.md is its --markdown output).
#include <fmt/core.h>

#include "commands.hh"
#include "rawpipe/config.hh"

namespace rawpipe::app {

int config_ref_command(const ConfigRefOptions& options) {
  auto text = config_reference(options.which, options.markdown);
  if (!text) {
    fmt::print(stderr, "rawpipe: {}\n", text.message());
    return 1;
  }
  fmt::print("{}", text.value());
  return 0;
}

}  // namespace rawpipe::app
