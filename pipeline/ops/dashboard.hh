// The live dashboard the metrics listener serves at / (docs/metrics.md, "Dashboard").
//
// The page (pipeline/ops/dashboard.html) is embedded in the library at build time: it is ours and
// must match the JSON it reads. The chart library is not: it is Debian's libjs-chart.js, read at
// run time from the path the build was configured with (meson option chartjs_path), so the
// distribution's security updates reach it and the library carries no second copy. Without it
// the page still shows every figure in its tables and says what to install.
#pragma once

#include <string>
#include <string_view>

#include "rawpipe/status.hh"

namespace rawpipe::ops {

std::string_view dashboard_html() noexcept;

// Where the chart library is looked for, and its text or why it cannot be served.
std::string_view chartjs_path() noexcept;
Result<std::string> read_chartjs();

}  // namespace rawpipe::ops
