#include "pipeline/ops/http_routes.hh"

#include <fmt/core.h>

#include <charconv>

namespace rawpipe::ops {

std::string http_reply(int code, std::string_view reason, std::string_view content_type, std::string_view body,
                       std::string_view extra_header) {
  // no-store: a dashboard poll must reach the server, never a cache.
  return fmt::format("HTTP/1.0 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nCache-Control: no-store\r\n"
                     "{}{}Connection: close\r\n\r\n{}",
                     code, reason, content_type, body.size(), extra_header, extra_header.empty() ? "" : "\r\n", body);
}

std::string http_error(int code, std::string_view reason, std::string_view why) {
  return http_reply(code, reason, "text/plain; charset=utf-8", fmt::format("{}\n", why));
}

namespace {

constexpr std::string_view kServed = "served here: /metrics, /metrics.json, / (dashboard), /chart.js";

// "snapshot=N" (the only query understood); anything else is a 404 so a typo is not mistaken
// for a fresh snapshot.
std::variant<std::uint64_t, std::string> parse_snapshot_query(std::string_view query) {
  constexpr std::string_view kKey = "snapshot=";
  if (!query.starts_with(kKey))
    return http_error(404, "Not Found", fmt::format("unknown query '{}': only ?snapshot=N is understood", query));
  const std::string_view digits = query.substr(kKey.size());
  std::uint64_t n = 0;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), n);
  if (digits.empty() || ec != std::errc() || end != digits.data() + digits.size())
    return http_error(400, "Bad Request", fmt::format("snapshot '{}' is not a number", digits));
  return n;
}

}  // namespace

std::variant<HttpRoute, std::string> route_http_request(std::string_view request) {
  const std::size_t eol = request.find('\n');
  if (eol == std::string_view::npos) return http_error(400, "Bad Request", "no request line");
  std::string_view line = request.substr(0, eol);
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  const std::size_t sp1 = line.find(' ');
  const std::size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos || line.find(' ', sp2 + 1) != std::string_view::npos)
    return http_error(400, "Bad Request", "expected \"METHOD TARGET HTTP/1.x\"");
  const std::string_view method = line.substr(0, sp1);
  std::string_view target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  const std::string_view version = line.substr(sp2 + 1);
  if (version != "HTTP/1.0" && version != "HTTP/1.1") return http_error(400, "Bad Request", "expected HTTP/1.0 or HTTP/1.1");

  std::string_view query;
  const bool has_query = target.find('?') != std::string_view::npos;
  if (has_query) {
    query = target.substr(target.find('?') + 1);
    target = target.substr(0, target.find('?'));
  }
  HttpRoute route;
  if (target == "/metrics") route.page = HttpPage::kMetrics;
  else if (target == "/metrics.json") route.page = HttpPage::kMetricsJson;
  else if (target == "/" || target == "/dashboard") route.page = HttpPage::kDashboard;
  else if (target == "/chart.js") route.page = HttpPage::kChartJs;
  else return http_error(404, "Not Found", fmt::format("nothing at {}; {}", target, kServed));
  if (method != "GET") return http_error(405, "Method Not Allowed", "only GET is served here");
  if (has_query) {
    if (route.page != HttpPage::kMetrics && route.page != HttpPage::kMetricsJson)
      return http_error(404, "Not Found", fmt::format("{} takes no query", target));
    auto n = parse_snapshot_query(query);
    if (auto* err = std::get_if<std::string>(&n)) return std::move(*err);
    route.snapshot = std::get<std::uint64_t>(n);
  }
  return route;
}

}  // namespace rawpipe::ops
