// libFuzzer target for the config loader (pipeline/config/loader.cc and every driver's parse()).
//
// Each input is the text of a config file. It goes through load_config_string with the real
// driver lookup, as `rawpipe check` would. The loader must never crash, and every error it
// returns must start with "fuzz.toml:LINE:" where LINE is a line of the input (1 to lines + 1), so
// a user can always find what to fix. An accepted config must describe itself.
//
// Seeds: tests/fuzz/corpus/config/ (the shipped example configs and some broken variants).
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "rawpipe/config.hh"
#include "pipeline/port/registry.hh"

namespace {

// Names the failed check on stderr before aborting, so a crash input explains itself.
#define check(cond)                                                           \
  do {                                                                         \
    if (!(cond)) {                                                             \
      std::fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                            \
    }                                                                          \
  } while (0)

constexpr std::string_view kFile = "fuzz.toml";

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace rawpipe;
  if (size > 64 * 1024) return -1;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  LoadOptions opt;
  opt.find_pmd = &find_pmd;
  opt.cpu_count = 4;
  auto r = load_config_string(text, std::string(kFile), opt);
  if (r) {
    check(!describe_plan(r.value().plan).empty());
    return 0;
  }
  const std::string& msg = r.message();
  check(msg.size() > kFile.size() + 2 && msg.compare(0, kFile.size(), kFile) == 0 && msg[kFile.size()] == ':');
  std::size_t i = kFile.size() + 1;
  std::size_t line = 0;
  const std::size_t digits_at = i;
  while (i < msg.size() && msg[i] >= '0' && msg[i] <= '9' && i - digits_at < 9) line = line * 10 + (msg[i++] - '0');
  check(i > digits_at && i < msg.size() && msg[i] == ':');
  const std::size_t lines = static_cast<std::size_t>(std::count(text.begin(), text.end(), '\n')) + 1;
  check(line >= 1 && line <= lines + 1);
  return 0;
}
