#include "pipeline/filter/plugin.hh"

#include <dlfcn.h>

namespace rawpipe {

Result<std::unique_ptr<FilterPlugin>> FilterPlugin::load(const std::string& path, const rawpipe_api_t* api,
                                                         const std::vector<std::pair<std::string, std::string>>& config) {
  std::unique_ptr<FilterPlugin> p(new FilterPlugin);
  p->path_ = path;
  // RTLD_LOCAL: two plugins may define the same helper names.
  p->dl_ = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!p->dl_) return Status::errorf("filter plugin '{}': cannot load: {}", path, dlerror());
  auto entry = reinterpret_cast<rawpipe_filter_plugin_entry_fn>(dlsym(p->dl_, RAWPIPE_FILTER_PLUGIN_ENTRY_NAME));
  if (!entry)
    return Status::errorf("filter plugin '{}': no symbol {}; is it a rawpipe filter plugin (include/rawpipe/filter_plugin.h)?",
                          path, RAWPIPE_FILTER_PLUGIN_ENTRY_NAME);
  const rawpipe_filter_plugin* d = entry();
  if (!d) return Status::errorf("filter plugin '{}': {}() returned NULL", path, RAWPIPE_FILTER_PLUGIN_ENTRY_NAME);
  if (d->abi_version != RAWPIPE_FILTER_PLUGIN_ABI_VERSION)
    return Status::errorf("filter plugin '{}' was built for filter ABI version {}, this rawpipe provides version {}; "
                          "rebuild the plugin against this rawpipe's headers",
                          path, d->abi_version, RAWPIPE_FILTER_PLUGIN_ABI_VERSION);
  if (!d->create || (!d->filter == !d->filter_burst))
    return Status::errorf("filter plugin '{}': its descriptor needs create() and exactly one of filter / filter_burst", path);
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

}  // namespace rawpipe
