// Loading filter plugins (include/rawpipe/filter_plugin.h): dlopen by path, ABI check, create
// with the attachment's config, attach to the filter stage.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "pipeline/common/status.hh"
#include "pipeline/filter/filter.hh"
#include "rawpipe/filter_plugin.h"

namespace rawpipe {

// Where a plugin's filter goes: "endpoint NAME" / an endpoint id, or a (port, queue).
struct FilterAttach {
  bool queue = false;
  std::uint16_t endpoint = 0;
  std::uint16_t port = 0;
  std::uint16_t rx_queue = 0;
};

class FilterPlugin {
 public:
  // Opens `path`, checks its ABI and creates its state. Does not attach it.
  static Result<std::unique_ptr<FilterPlugin>> load(const std::string& path, const rawpipe_api_t* api,
                                                    const std::vector<std::pair<std::string, std::string>>& config);
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

}  // namespace rawpipe
