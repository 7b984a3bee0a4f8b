// The Prometheus text exposition format (version 0.0.4) of a stats document
// (pipeline/ops/publisher.hh), so /metrics and `rawpipe stat` show the same numbers.
//
// Names and labels are listed in docs/metrics.md: prefix rawpipe_, counters end in _total, time
// in seconds, sizes in bytes; latency histograms are summaries (quantile 0.5, 0.99, 0.999, with
// _sum and _count) plus a _max gauge.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <string_view>

namespace rawpipe::ops {

std::string prometheus_text(const nlohmann::json& doc);

// A label value escaped for the text format (backslash, double quote, line feed).
std::string prometheus_escape_label(std::string_view value);

}  // namespace rawpipe::ops
