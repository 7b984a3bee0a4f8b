#include "pipeline/config/taps_section.hh"

#include <filesystem>
#include <map>

#include "pipeline/capture/tap.hh"
#include "pipeline/config/section.hh"
#include "pipeline/config/tables.hh"

namespace rawpipe {

void load_taps(ConfigSection& root, Plan& plan) {
  std::vector<ConfigSection> sections = root.table_array("taps");
  std::map<std::string, std::string> names, paths;
  for (std::size_t i = 0; i < sections.size(); ++i) {
    ConfigSection& s = sections[i];
    s.declare(kTapKeys);
    std::string name = s.string("name", fmt::format("taps[{}]", i));
    if (name.empty()) s.fail("name", "expected a non-empty string");
    s.set_label(s.has("name") ? fmt::format("taps[{}] '{}'", i, name) : fmt::format("taps[{}]", i));
    auto [it, fresh] = names.emplace(name, s.label());
    if (!fresh) s.fail("name", fmt::format("tap name \"{}\" is already used by {}", name, it->second));
    auto tap = parse_tap_config(s, name);
    if (tap) {
      TapConfig c = std::move(tap).value();
      std::string key = std::filesystem::path(c.path).lexically_normal().string();
      auto [pit, pfresh] = paths.emplace(key, s.label());
      if (!pfresh) s.fail("path", fmt::format("\"{}\" is already written by {}", c.path, pit->second));
      if (!c.port.empty()) {
        for (const PortPlan& p : plan.ports)
          if (p.name == c.port) c.port_id = p.id;
        if (c.port_id < 0) s.fail("port", fmt::format("no [[ports]] table is named \"{}\"", c.port));
      }
      if (!c.endpoint.empty()) {
        for (const EndpointPlan& e : plan.endpoints)
          if (e.name == c.endpoint) c.endpoint_id = e.id;
        if (c.endpoint_id < 0) s.fail("endpoint", fmt::format("no [[endpoints]] table is named \"{}\"", c.endpoint));
      }
      plan.taps.push_back(std::move(c));
    }
    (void)s.finish();
  }
}

}  // namespace rawpipe
