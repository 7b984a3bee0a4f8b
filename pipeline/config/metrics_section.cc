#include "pipeline/config/metrics_section.hh"

#include <arpa/inet.h>

#include <charconv>
#include <string>

#include "pipeline/config/section.hh"
#include "pipeline/config/tables.hh"

namespace rawpipe {

namespace {
const KeyDoc kMetricsDocs[] = {
    {"listen", "string", "\"IPV4:PORT\" or a bare port (127.0.0.1)", "nothing listens",
     "address of the Prometheus text endpoint GET /metrics; port 0 picks a free one"},
    {"stats_segment", "boolean", "", "true", "publish /dev/shm/rawpipe.<pid> and the link /dev/shm/rawpipe-name.<config name> for `rawpipe stat`"},
    {"latency_sample", "integer", "0 to 1048576", "64", "time one queue poll in N for the latency histograms; 0: off"},
};
}  // namespace

const KeyTable kMetricsKeys{"metrics", "[metrics]", "counters for Prometheus and `rawpipe stat`", kMetricsDocs};

Result<ListenAddress> parse_listen_address(std::string_view text) {
  // A bare port ("9464" or ":9464") means this host only: the counters are not for the network
  // unless an address says so.
  std::size_t colon = text.rfind(':');
  const bool bare = colon == std::string_view::npos || colon == 0;
  if (!bare && colon + 1 == text.size())
    return Status::errorf("\"{}\" is not \"ADDRESS:PORT\" (e.g. \"127.0.0.1:9464\")", text);
  const std::string host = bare ? std::string("127.0.0.1") : std::string(text.substr(0, colon));
  if (colon == std::string_view::npos) colon = std::string_view::npos - 1;  // port_text = whole text below
  const std::string_view port_text = colon == std::string_view::npos - 1 ? text : text.substr(colon + 1);
  if (port_text.empty()) return Status::errorf("\"{}\" is not \"ADDRESS:PORT\" (e.g. \"127.0.0.1:9464\")", text);
  ListenAddress out;
  in_addr a{};
  if (inet_pton(AF_INET, host.c_str(), &a) != 1)
    return Status::errorf("\"{}\": \"{}\" is not an IPv4 address (use 127.0.0.1 to serve this host only, "
                          "0.0.0.0 for every interface)",
                          text, host);
  out.addr_be = a.s_addr;
  unsigned port = 0;
  auto [end, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (ec != std::errc() || end != port_text.data() + port_text.size() || port > 65535)
    return Status::errorf("\"{}\": port \"{}\" is not a number from 0 to 65535", text, port_text);
  out.port = static_cast<std::uint16_t>(port);
  return out;
}

void load_metrics_section(ConfigSection& root, Plan& plan) {
  std::optional<ConfigSection> t = root.table("metrics");
  if (!t) return;
  ConfigSection& s = *t;
  s.declare(kMetricsKeys);
  s.set_label("metrics");
  if (s.has("listen")) {
    plan.metrics.listen = s.string("listen");
    if (auto a = parse_listen_address(plan.metrics.listen); !a) s.fail("listen", a.message());
  }
  plan.metrics.stats_segment = s.boolean("stats_segment", true);
  plan.metrics.latency_sample =
      static_cast<std::uint32_t>(s.integer("latency_sample", 0, 1 << 20, plan.metrics.latency_sample));
  (void)s.finish();
}

}  // namespace rawpipe
