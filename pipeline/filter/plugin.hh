// Loading filter plugins (include/rawpipe/filter_plugin.h): dlopen by path, ABI check, create
// with the attachment's config, attach to the filter stage.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "rawpipe/status.hh"
#include "pipeline/filter/filter.hh"
#include "rawpipe/plan.hh"
#include "rawpipe/filter_plugin.h"

namespace rawpipe {

// Where a plugin's filter goes: "endpoint NAME" / an endpoint id, or a (port, queue).
struct FilterAttach {
  bool queue = false;
  std::uint16_t endpoint = 0;
  std::uint16_t port = 0;
  std::uint16_t rx_queue = 0;
};

// Plugin names. A path with a '/' is used as given (relative to the current directory). A bare
// name ("rawpipe_seq_gap", with or without ".so") is looked for in the path policy's default
// directories (default_plugin_dirs(): RAWPIPE_PLUGIN_PATH's absolute directories, then this
// build's plugins/ directory for build-tree code or the installed plugin directory for an
// installed copy). With `allowed` (a config's [run] plugin_dirs) its directories come first.
std::vector<std::string> plugin_search_path();
Result<std::string> resolve_plugin_path(std::string_view path, const std::vector<std::string>* allowed = nullptr);

// Opens `path` and checks its ABI without creating the plugin (what `rawpipe check` can do).
// `allowed`: the directories the path policy accepts (null: the process-wide plugin_dirs()).
Status probe_filter_plugin(const std::string& path, const std::vector<std::string>* allowed = nullptr);

class FilterPlugin {
 public:
  // Opens `path`, checks its ABI and creates its state. Does not attach it. On error,
  // *config_refused (when given) says whether the library opened and its create() refused.
  static Result<std::unique_ptr<FilterPlugin>> load(const std::string& path, const rawpipe_api_t* api,
                                                    const std::vector<std::pair<std::string, std::string>>& config,
                                                    bool* config_refused = nullptr,
                                                    const std::vector<std::string>* allowed = nullptr);
  ~FilterPlugin();
  FilterPlugin(const FilterPlugin&) = delete;
  FilterPlugin& operator=(const FilterPlugin&) = delete;

  FilterFn filter() const noexcept { return {desc_->filter, desc_->filter_burst, state_, name_.c_str()}; }
  const std::string& name() const noexcept { return name_; }
  const std::string& path() const noexcept { return path_; }
  // The plugin's one-line summary ("" when it has none).
  std::string report() const;

 private:
  FilterPlugin() = default;
  void* dl_ = nullptr;
  const rawpipe_filter_plugin* desc_ = nullptr;
  void* state_ = nullptr;
  std::string name_;
  std::string path_;
};

// Loads the plugins of a plan's [[filters]] entries in order and attaches each to `stage`. Errors
// name the config file, line and key ('path' when the library does not open, 'config' when the
// plugin's create() refuses its config); on error nothing stays attached. `allowed` as for load.
Result<std::vector<std::unique_ptr<FilterPlugin>>> attach_plan_filters(const std::vector<FilterPlan>& filters,
                                                                        FilterStage& stage, const rawpipe_api_t* api,
                                                                        const std::vector<std::string>* allowed = nullptr);

}  // namespace rawpipe
