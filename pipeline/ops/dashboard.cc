#include "pipeline/ops/dashboard.hh"

#include <fmt/core.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "dashboard_config.h"
#include "dashboard_html.h"

namespace rawpipe::ops {

std::string_view dashboard_html() noexcept { return kDashboardHtml; }

std::string_view chartjs_path() noexcept { return RAWPIPE_CHARTJS_PATH; }

Result<std::string> read_chartjs() {
  std::ifstream in{std::string(chartjs_path()), std::ios::binary};
  if (!in)
    return Status::errorf("the chart library {} cannot be read ({}): install the Debian package libjs-chart.js; "
                          "the dashboard shows its tables without charts meanwhile",
                          chartjs_path(), std::strerror(errno));
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace rawpipe::ops
