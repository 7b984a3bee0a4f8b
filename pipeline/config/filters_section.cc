#include "pipeline/config/filters_section.hh"

#include <cstdlib>
#include <map>
#include <optional>

#include "pipeline/config/section.hh"
#include "pipeline/config/tables.hh"
#include "pipeline/filter/plugin.hh"

namespace rawpipe {
namespace {

const KeyDoc kFilterDocs[] = {
    {"path", "string", "a plugin file or name in the plugin dirs", "required", "the filter plugin (a shared object)"},
    {"endpoint", "string", "an [[endpoints]] name; or queue", "one of endpoint, queue",
     "run the filter on this endpoint's packets"},
    {"queue", "string", "\"PORT:QUEUE\"; or endpoint", "one of endpoint, queue",
     "run the filter on every packet of this rx queue, before classify"},
    {"config", "table", "string, number or boolean values", "{}", "handed to the plugin as text key/value pairs"},
};

}  // namespace

const KeyTable kFilterKeys{"filters", "[[filters]]", "filter plugins (VMA/XLIO receive-callback semantics)",
                           kFilterDocs};

namespace {

// "port:queue" -> (port id, queue); records the error at `queue` otherwise.
bool resolve_queue(ConfigSection& s, const Plan& plan, const std::string& text, FilterPlan& f) {
  const std::size_t colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == text.size()) {
    s.fail("queue", fmt::format("\"{}\" is not \"port:queue\" (e.g. \"synth0:0\")", text));
    return false;
  }
  const std::string port = text.substr(0, colon);
  const std::string queue = text.substr(colon + 1);
  const PortPlan* p = nullptr;
  for (const PortPlan& pp : plan.ports)
    if (pp.name == port) p = &pp;
  if (!p) {
    s.fail("queue", fmt::format("\"{}\": no [[ports]] table is named \"{}\"", text, port));
    return false;
  }
  char* end = nullptr;
  const unsigned long q = std::strtoul(queue.c_str(), &end, 10);
  if (*end != '\0' || queue[0] == '-' || q >= p->rx_queues) {
    s.fail("queue", fmt::format("\"{}\": port \"{}\" has {} rx queue{} (0 to {})", text, port, p->rx_queues,
                                p->rx_queues == 1 ? "" : "s", p->rx_queues - 1));
    return false;
  }
  f.on_queue = true;
  f.port = p->id;
  f.rx_queue = static_cast<std::uint16_t>(q);
  return true;
}

}  // namespace

void load_filters(ConfigSection& root, Plan& plan) {
  std::vector<ConfigSection> sections = root.table_array("filters");
  std::map<std::string, std::string> attached;  // "endpoint md" / "queue 0:1" -> label
  for (std::size_t i = 0; i < sections.size(); ++i) {
    ConfigSection& s = sections[i];
    s.declare(kFilterKeys);
    s.set_label(fmt::format("filters[{}]", i));
    FilterPlan f;
    f.label = s.label();
    f.where = {s.file(), s.line()};
    f.path_line = s.line_of("path");
    f.config_line = s.line_of("config");

    const std::string path = s.string("path");
    bool ok = s.has("path") && !path.empty();
    if (s.has("path") && path.empty()) s.fail("path", "expected the path or name of a filter plugin, got \"\"");
    if (ok) {
      // [run] comes before [[filters]] in load order: its plugin_dirs govern these plugins.
      const std::vector<std::string>* allowed = plan.plugin_dirs_set ? &plan.plugin_dirs : nullptr;
      auto resolved = resolve_plugin_path(path, allowed);
      if (!resolved) {
        s.fail("path", resolved.message());
        ok = false;
      } else if (Status probe = probe_filter_plugin(resolved.value(), allowed); !probe) {
        s.fail("path", probe.message());
        ok = false;
      } else {
        f.path = std::move(resolved).value();
      }
    }

    std::string where_key;
    if (s.has("endpoint") == s.has("queue")) {
      s.fail(s.has("queue") ? "queue" : "", "expected exactly one of 'endpoint = \"NAME\"' or 'queue = \"PORT:QUEUE\"'");
      (void)s.string("endpoint", "");
      (void)s.string("queue", "");
      ok = false;
    } else if (s.has("endpoint")) {
      const std::string name = s.string("endpoint");
      bool found = false;
      for (const EndpointPlan& e : plan.endpoints)
        if (e.name == name) {
          f.endpoint = e.id;
          found = true;
        }
      if (!found) {
        s.fail("endpoint", fmt::format("no [[endpoints]] table is named \"{}\"", name));
        ok = false;
      }
      where_key = "endpoint";
    } else {
      ok &= resolve_queue(s, plan, s.string("queue"), f);
      where_key = "queue";
    }
    if (ok) {
      const std::string point = f.on_queue ? fmt::format("queue {}:{}", plan.ports[f.port].name, f.rx_queue)
                                           : fmt::format("endpoint {}", plan.endpoints[f.endpoint].name);
      auto [it, fresh] = attached.emplace(point, s.label());
      if (!fresh) {
        s.fail(where_key, fmt::format("{} already has a filter from {}; each endpoint and rx queue takes one", point,
                                      it->second));
        ok = false;
      }
    }

    if (std::optional<ConfigSection> cfg = s.table("config")) {
      f.config = cfg->scalars_as_text();
      (void)cfg->finish();
    }
    (void)s.finish();
    if (ok) plan.filters.push_back(std::move(f));
  }
}
}  // namespace rawpipe
