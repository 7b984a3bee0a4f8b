#include "pipeline/extra/stats_section.hh"

#include <string>

#include "rawpipe/extra.h"

namespace rawpipe {

bool stats_section_name_ok(std::string_view name) {
  if (name.empty() || name.size() > 63) return false;
  for (const char c : name)
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-')) return false;
  return true;
}

ops::SectionFn c_stats_section(CStatsSectionFn fn, void* ctx) {
  // The buffer lives with the section and keeps the size the last publish needed, so a section
  // of steady size costs no allocation per publish.
  return [fn, ctx, buf = std::string(4096, '\0')]() mutable -> std::optional<std::string> {
    long n = fn(ctx, buf.data(), buf.size());
    if (n > static_cast<long>(buf.size()) && n <= static_cast<long>(RAWPIPE_STATS_SECTION_MAX)) {
      buf.resize(static_cast<std::size_t>(n));
      n = fn(ctx, buf.data(), buf.size());
    }
    if (n < 0 || n > static_cast<long>(buf.size())) return std::nullopt;
    return buf.substr(0, static_cast<std::size_t>(n));
  };
}

}  // namespace rawpipe
