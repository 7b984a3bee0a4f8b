// What the metrics listener answers: the request line of one HTTP/1.x request mapped to a page,
// or the error reply (400, 404, 405) that ends the exchange. Exposed for tests.
//
//   GET /metrics            Prometheus text of a fresh snapshot
//   GET /metrics.json       the same snapshot as the stats document (JSON), with its "snapshot" number
//   GET /metrics?snapshot=N, /metrics.json?snapshot=N
//                           a snapshot already served (the last few are kept), so a reader of the
//                           dashboard can fetch the very figures the page drew; 404 once evicted
//   GET / or /dashboard     the live dashboard page
//   GET /chart.js           the chart library the page draws with (read at run time, see dashboard.hh)
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

namespace rawpipe::ops {

enum class HttpPage { kMetrics, kMetricsJson, kDashboard, kChartJs };

struct HttpRoute {
  HttpPage page = HttpPage::kMetrics;
  std::optional<std::uint64_t> snapshot;  // only for kMetrics and kMetricsJson
};

// The route of a request text (request line and headers), or the complete error reply.
std::variant<HttpRoute, std::string> route_http_request(std::string_view request);

// A complete HTTP/1.0 reply that closes the connection; `extra_header` is one "Name: value" or empty.
std::string http_reply(int code, std::string_view reason, std::string_view content_type, std::string_view body,
                       std::string_view extra_header = {});
std::string http_error(int code, std::string_view reason, std::string_view why);

inline constexpr std::string_view kPrometheusContentType = "text/plain; version=0.0.4; charset=utf-8";

}  // namespace rawpipe::ops
