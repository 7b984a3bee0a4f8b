#include "pipeline/filter/plugin.hh"

#include <dlfcn.h>
#include <sys/stat.h>

#include <cstdlib>

#include "rawpipe/plugin_path.hh"

namespace rawpipe {
namespace {

struct OpenedLibrary {
  void* dl = nullptr;
  const rawpipe_filter_plugin* desc = nullptr;
};

// The one way a plugin's code gets into the process: every load (config [[filters]], api
// load_filter_plugin, `rawpipe check`'s probe) comes through here. On success the caller owns
// `dl` (dlclose).
Result<OpenedLibrary> open_library(const std::string& path, const std::vector<std::string>* allowed) {
  // The path policy (pipeline/privilege/plugin_path.hh: allowed directories, no world-writable
  // location) runs before dlopen runs any of the file's code, and dlopen loads the descriptor it
  // checked, so the file cannot be swapped in between.
  PluginFile file;
  RAWPIPE_TRY(check_plugin_path(path, allowed ? *allowed : plugin_dirs(), &file));
  OpenedLibrary lib;
  // RTLD_LOCAL: two plugins may define the same helper names.
  lib.dl = dlopen(file.dlopen_path().c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib.dl) return Status::errorf("filter plugin '{}': cannot load: {}", path, dlerror());
  auto entry = reinterpret_cast<rawpipe_filter_plugin_entry_fn>(dlsym(lib.dl, RAWPIPE_FILTER_PLUGIN_ENTRY_NAME));
  Status bad;
  if (!entry) {
    bad = Status::errorf("filter plugin '{}': no symbol {}; is it a rawpipe filter plugin (include/rawpipe/filter_plugin.h)?",
                         path, RAWPIPE_FILTER_PLUGIN_ENTRY_NAME);
  } else if (!(lib.desc = entry())) {
    bad = Status::errorf("filter plugin '{}': {}() returned NULL", path, RAWPIPE_FILTER_PLUGIN_ENTRY_NAME);
  } else if (lib.desc->abi_version != RAWPIPE_FILTER_PLUGIN_ABI_VERSION) {
    bad = Status::errorf("filter plugin '{}' was built for filter ABI version {}, this rawpipe provides version {}; "
                         "rebuild the plugin against this rawpipe's headers",
                         path, lib.desc->abi_version, RAWPIPE_FILTER_PLUGIN_ABI_VERSION);
  } else if (!lib.desc->create || (!lib.desc->filter == !lib.desc->filter_burst)) {
    bad = Status::errorf("filter plugin '{}': its descriptor needs create() and exactly one of filter / filter_burst",
                         path);
  }
  if (!bad.is_ok()) {
    dlclose(lib.dl);
    return bad;
  }
  return lib;
}

bool is_regular_file(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

}  // namespace

std::vector<std::string> plugin_search_path() {
  // The same directories the path policy allows by default: a name resolves only where a load
  // would be allowed (and never to the build tree from an installed copy).
  return default_plugin_dirs();
}

Result<std::string> resolve_plugin_path(std::string_view path, const std::vector<std::string>* allowed) {
  if (path.empty()) return Status::error("expected the path or name of a filter plugin (.so), got an empty string");
  if (path.find('/') != std::string_view::npos) {
    std::string p(path);
    if (!is_regular_file(p)) return Status::errorf("'{}' is not a file", p);
    return p;
  }
  std::string name(path);
  if (!name.ends_with(".so")) name += ".so";
  std::string tried;
  std::vector<std::string> dirs = allowed ? *allowed : std::vector<std::string>{};
  for (std::string& d : plugin_search_path()) dirs.push_back(std::move(d));
  for (const std::string& dir : dirs) {
    std::string candidate = dir + "/" + name;
    if (is_regular_file(candidate)) return candidate;
    tried += fmt::format("{}{}", tried.empty() ? "" : ", ", dir);
  }
  return Status::errorf("no filter plugin '{}' in {} (set RAWPIPE_PLUGIN_PATH, or give a path with a '/')", name,
                        tried);
}

Status probe_filter_plugin(const std::string& path, const std::vector<std::string>* allowed) {
  auto lib = open_library(path, allowed);
  if (!lib) return lib.status();
  dlclose(lib->dl);
  return Status::ok();
}

Result<std::unique_ptr<FilterPlugin>> FilterPlugin::load(const std::string& path, const rawpipe_api_t* api,
                                                         const std::vector<std::pair<std::string, std::string>>& config,
                                                         bool* config_refused, const std::vector<std::string>* allowed) {
  if (config_refused) *config_refused = false;
  auto lib = open_library(path, allowed);
  if (!lib) return lib.status();
  std::unique_ptr<FilterPlugin> p(new FilterPlugin);
  p->path_ = path;
  p->dl_ = lib->dl;
  const rawpipe_filter_plugin* d = lib->desc;
  p->name_ = d->name ? d->name : path;
  std::vector<const char*> keys, values;
  for (const auto& [k, v] : config) {
    keys.push_back(k.c_str());
    values.push_back(v.c_str());
  }
  char err[512] = "";
  p->state_ = d->create(api, keys.data(), values.data(), static_cast<unsigned>(keys.size()), err, sizeof err);
  if (!p->state_) {
    err[sizeof err - 1] = '\0';
    if (config_refused) *config_refused = true;
    return Status::errorf("filter plugin '{}' ({}): {}", p->name_, path, err[0] ? err : "create() failed without a reason");
  }
  p->desc_ = d;
  return p;
}

FilterPlugin::~FilterPlugin() {
  if (desc_ && desc_->destroy && state_) desc_->destroy(state_);
  if (dl_) dlclose(dl_);
}

std::string FilterPlugin::report() const {
  if (!desc_ || !desc_->report) return "";
  char buf[1024] = "";
  desc_->report(state_, buf, sizeof buf);
  buf[sizeof buf - 1] = '\0';
  return buf;
}

Result<std::vector<std::unique_ptr<FilterPlugin>>> attach_plan_filters(const std::vector<FilterPlan>& filters,
                                                                        FilterStage& stage, const rawpipe_api_t* api,
                                                                        const std::vector<std::string>* allowed) {
  std::vector<std::unique_ptr<FilterPlugin>> out;
  auto where = [](const FilterPlan& f, std::string_view key, int line) {
    return fmt::format("{}:{}: {}: key '{}'", f.where.file, line ? line : f.where.line, f.label, key);
  };
  auto detach_all = [&] {
    for (const FilterPlan& f : filters)
      (void)(f.on_queue ? stage.set_queue_filter(f.port, f.rx_queue, {}) : stage.set_endpoint_filter(f.endpoint, {}));
  };
  for (const FilterPlan& f : filters) {
    bool config_refused = false;
    auto plugin = FilterPlugin::load(f.path, api, f.config, &config_refused, allowed);
    if (!plugin) {
      detach_all();
      // create() refusing its keys is the config table's fault; a library that does not open
      // (changed since the config was checked) is the path's.
      return Status::errorf("{}: {}", config_refused ? where(f, "config", f.config_line) : where(f, "path", f.path_line),
                            plugin.message());
    }
    const FilterFn fn = plugin.value()->filter();
    Status s = f.on_queue ? stage.set_queue_filter(f.port, f.rx_queue, fn) : stage.set_endpoint_filter(f.endpoint, fn);
    if (!s) {
      detach_all();
      return Status::errorf("{}: {}", where(f, f.on_queue ? "queue" : "endpoint", 0), s.message());
    }
    out.push_back(std::move(plugin).value());
  }
  return out;
}

}  // namespace rawpipe
