// The Prometheus endpoint: the HTTP answer to good and bad requests, the [metrics] config table,
// and /metrics scraped from a running pipeline, checked by a strict parser of the text format
// 0.0.4 (names, labels, escaping, HELP/TYPE, values), by promtool when it is installed, for
// counters that never go back between scrapes, and for totals equal to the final accounting.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include "rawpipe/config.hh"
#include "pipeline/config/metrics_section.hh"
#include "rawpipe/pipeline.hh"
#include "pipeline/filter/filter.hh"
#include "rawpipe/metrics_server.hh"
#include "pipeline/ops/dashboard.hh"
#include "pipeline/ops/http_routes.hh"
#include "pipeline/ops/prometheus.hh"
#include "pipeline/port/registry.hh"
#include "pipeline/ops/publisher.hh"
#include "rawpipe/shm_stats.hh"
#include <nlohmann/json.hpp>
#include <atomic>

namespace rawpipe::ops {
namespace {

// ---- a strict parser of the text exposition format -----------------------------------------

struct Scrape {
  std::map<std::string, std::string> types;   // family -> type
  std::map<std::string, double> series;       // name{labels in order} -> value
  std::vector<std::string> errors;
};

bool valid_metric_name(const std::string& s) { return std::regex_match(s, std::regex("[a-zA-Z_:][a-zA-Z0-9_:]*")); }

// The family a sample belongs to (summaries add _sum and _count).
std::string family_of(const std::string& name, const std::map<std::string, std::string>& types) {
  for (const char* suffix : {"_sum", "_count"}) {
    const std::string s = suffix;
    if (name.size() > s.size() && name.ends_with(s)) {
      const std::string base = name.substr(0, name.size() - s.size());
      auto it = types.find(base);
      if (it != types.end() && (it->second == "summary" || it->second == "histogram")) return base;
    }
  }
  return name;
}

Scrape parse_exposition(const std::string& text) {
  Scrape s;
  std::set<std::string> helped, families_done;
  std::string current;
  auto err = [&](int line, const std::string& what) { s.errors.push_back(fmt::format("line {}: {}", line, what)); };
  if (text.empty() || text.back() != '\n') err(0, "the text must end with a line feed");
  std::istringstream in(text);
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    ++n;
    if (line.empty()) {
      err(n, "empty line");
      continue;
    }
    if (line[0] == '#') {
      std::smatch m;
      if (std::regex_match(line, m, std::regex("# HELP ([^ ]+) (.*)"))) {
        if (!valid_metric_name(m[1])) err(n, "bad name in HELP");
        if (!helped.insert(m[1]).second) err(n, "second HELP for " + m[1].str());
        // Only \\ and \n escapes in HELP text.
        const std::string h = m[2];
        for (std::size_t i = 0; i < h.size(); ++i)
          if (h[i] == '\\' && (i + 1 >= h.size() || (h[i + 1] != '\\' && h[i + 1] != 'n'))) err(n, "bad escape in HELP");
          else if (h[i] == '\\') ++i;
      } else if (std::regex_match(line, m, std::regex("# TYPE ([^ ]+) (counter|gauge|summary|histogram|untyped)"))) {
        if (!valid_metric_name(m[1])) err(n, "bad name in TYPE");
        if (s.types.count(m[1])) err(n, "second TYPE for " + m[1].str());
        if (!helped.count(m[1])) err(n, "TYPE without a HELP before it: " + m[1].str());
        if (families_done.count(m[1])) err(n, "TYPE after samples of " + m[1].str());
        s.types[m[1]] = m[2];
        current = m[1];
      } else {
        err(n, "comment that is neither HELP nor TYPE: " + line);
      }
      continue;
    }
    // name{label="value",...} value
    std::size_t i = 0;
    while (i < line.size() && line[i] != '{' && line[i] != ' ') ++i;
    const std::string name = line.substr(0, i);
    if (!valid_metric_name(name)) err(n, "bad metric name '" + name + "'");
    const std::string family = family_of(name, s.types);
    if (family != current) err(n, name + " is not in the group of its TYPE line");
    families_done.insert(family);
    std::string key = name + "{";
    std::set<std::string> label_names;
    if (i < line.size() && line[i] == '{') {
      ++i;
      bool first = true;
      while (i < line.size() && line[i] != '}') {
        if (!first) {
          if (line[i] != ',') { err(n, "expected ','"); break; }
          ++i;
        }
        first = false;
        std::size_t eq = line.find('=', i);
        if (eq == std::string::npos) { err(n, "label without '='"); break; }
        const std::string lname = line.substr(i, eq - i);
        if (!std::regex_match(lname, std::regex("[a-zA-Z_][a-zA-Z0-9_]*")) || lname.starts_with("__"))
          err(n, "bad label name '" + lname + "'");
        if (!label_names.insert(lname).second) err(n, "label repeated: " + lname);
        if (lname == "quantile" && s.types[family] != "summary") err(n, "quantile label outside a summary");
        i = eq + 1;
        if (i >= line.size() || line[i] != '"') { err(n, "label value not quoted"); break; }
        ++i;
        std::string value;
        bool closed = false;
        while (i < line.size()) {
          const char c = line[i++];
          if (c == '"') { closed = true; break; }
          if (c == '\\') {
            if (i >= line.size() || (line[i] != '\\' && line[i] != '"' && line[i] != 'n')) { err(n, "bad escape in label value"); break; }
            value += line[i] == 'n' ? '\n' : line[i];
            ++i;
          } else {
            value += c;
          }
        }
        if (!closed) { err(n, "label value not closed"); break; }
        key += lname + "=" + value + ",";
      }
      if (i >= line.size() || line[i] != '}') err(n, "labels not closed");
      ++i;
    }
    key += "}";
    if (i >= line.size() || line[i] != ' ') { err(n, "expected one space before the value"); continue; }
    const std::string v = line.substr(i + 1);
    double value = 0;
    if (v == "NaN") value = std::nan("");
    else if (v == "+Inf") value = INFINITY;
    else if (v == "-Inf") value = -INFINITY;
    else {
      char* end = nullptr;
      value = std::strtod(v.c_str(), &end);
      if (v.empty() || *end != '\0' || v.find_first_of(" \t") != std::string::npos) err(n, "bad value '" + v + "'");
    }
    if (!s.types.count(family)) err(n, "sample without TYPE: " + name);
    const std::string& type = s.types[family];
    if (!name.starts_with("rawpipe_")) err(n, "name without the rawpipe_ prefix: " + name);
    if (type == "counter" && !name.ends_with("_total")) err(n, "counter not ending in _total: " + name);
    if (type != "counter" && name.ends_with("_total")) err(n, "non-counter ending in _total: " + name);
    if (name.find("latency") != std::string::npos && !(family.ends_with("_seconds") || family.ends_with("_max_seconds")))
      err(n, "time not in seconds: " + name);
    if ((type == "counter" || name.ends_with("_count")) && !(value >= 0)) err(n, "negative or NaN count: " + line);
    if (!s.series.emplace(key, value).second) err(n, "duplicate series " + key);
  }
  return s;
}

TEST(MetricsParser, CatchesWhatPrometheusRejects) {
  // The parser itself must fail on broken input, or the real checks below prove nothing.
  EXPECT_FALSE(parse_exposition("# HELP rawpipe_x_total h\n# TYPE rawpipe_x_total counter\nrawpipe_x_total 1\n").errors.size());
  for (const char* bad : {
           "# TYPE rawpipe_x_total counter\nrawpipe_x_total 1\n",                                     // no HELP
           "# HELP rawpipe_x h\n# TYPE rawpipe_x counter\nrawpipe_x 1\n",                             // counter name
           "# HELP rawpipe_x_total h\n# TYPE rawpipe_x_total counter\nrawpipe_x_total{a=\"\\q\"} 1\n",  // escape
           "# HELP rawpipe_x_total h\n# TYPE rawpipe_x_total counter\nrawpipe_x_total{a=\"1\"} 1\nrawpipe_x_total{a=\"1\"} 2\n",
           "# HELP rawpipe_x_total h\n# TYPE rawpipe_x_total counter\nrawpipe_x_total one\n",
           "# HELP rawpipe_x_total h\n# TYPE rawpipe_x_total counter\nrawpipe_x_total 1",             // no final LF
           "# HELP rawpipe_x h\n# TYPE rawpipe_x gauge\nrawpipe_x{quantile=\"0.5\"} 1\n",
       })
    EXPECT_FALSE(parse_exposition(bad).errors.empty()) << bad;
}

// ---- HTTP and config -----------------------------------------------------------------------

// The error reply of a request, or "" when it is routed to a page.
std::string error_of(std::string_view request) {
  auto r = route_http_request(request);
  return std::holds_alternative<std::string>(r) ? std::get<std::string>(r) : std::string();
}

TEST(MetricsHttp, RoutesThePagesAndRefusesTheRest) {
  auto page = [](std::string_view request) {
    auto r = route_http_request(request);
    EXPECT_TRUE(std::holds_alternative<HttpRoute>(r)) << request << ": " << error_of(request);
    return std::holds_alternative<HttpRoute>(r) ? std::get<HttpRoute>(r) : HttpRoute{};
  };
  EXPECT_EQ(page("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n").page, HttpPage::kMetrics);
  EXPECT_FALSE(page("GET /metrics HTTP/1.0\r\n\r\n").snapshot.has_value());
  EXPECT_EQ(page("GET /metrics.json HTTP/1.0\r\n\r\n").page, HttpPage::kMetricsJson);
  EXPECT_EQ(page("GET / HTTP/1.1\r\n\r\n").page, HttpPage::kDashboard);
  EXPECT_EQ(page("GET /dashboard HTTP/1.1\r\n\r\n").page, HttpPage::kDashboard);
  EXPECT_EQ(page("GET /chart.js HTTP/1.1\r\n\r\n").page, HttpPage::kChartJs);
  EXPECT_EQ(page("GET /metrics?snapshot=17 HTTP/1.1\r\n\r\n").snapshot, 17u);
  EXPECT_EQ(page("GET /metrics.json?snapshot=0 HTTP/1.1\r\n\r\n").snapshot, 0u);

  const std::string ok = http_reply(200, "OK", kPrometheusContentType, "body\n", "X-Rawpipe-Snapshot: 3");
  EXPECT_TRUE(ok.starts_with("HTTP/1.0 200 OK\r\n"));
  EXPECT_NE(ok.find("Content-Type: text/plain; version=0.0.4; charset=utf-8\r\n"), std::string::npos);
  EXPECT_NE(ok.find("Content-Length: 5\r\n"), std::string::npos);
  EXPECT_NE(ok.find("\r\nX-Rawpipe-Snapshot: 3\r\n"), std::string::npos);
  EXPECT_TRUE(ok.ends_with("\r\n\r\nbody\n"));

  EXPECT_TRUE(error_of("GET /nope HTTP/1.1\r\n\r\n").starts_with("HTTP/1.0 404"));
  EXPECT_TRUE(error_of("GET /metrics?x=1 HTTP/1.1\r\n\r\n").starts_with("HTTP/1.0 404"));
  EXPECT_TRUE(error_of("GET /?snapshot=1 HTTP/1.1\r\n\r\n").starts_with("HTTP/1.0 404"));
  EXPECT_TRUE(error_of("GET /metrics?snapshot=1x HTTP/1.1\r\n\r\n").starts_with("HTTP/1.0 400"));
  EXPECT_TRUE(error_of("GET /metrics?snapshot= HTTP/1.1\r\n\r\n").starts_with("HTTP/1.0 400"));
  EXPECT_TRUE(error_of("POST /metrics HTTP/1.1\r\n\r\n").starts_with("HTTP/1.0 405"));
  EXPECT_TRUE(error_of("GET /metrics\r\n\r\n").starts_with("HTTP/1.0 400"));
  EXPECT_TRUE(error_of("GET /metrics SPDY/3\r\n\r\n").starts_with("HTTP/1.0 400"));
  EXPECT_TRUE(error_of("garbage").starts_with("HTTP/1.0 400"));
  EXPECT_TRUE(error_of("GET  /metrics HTTP/1.1\r\n\r\n").starts_with("HTTP/1.0 400"));
}

TEST(MetricsConfig, ListenAddressesAndErrors) {
  auto a = parse_listen_address("127.0.0.1:9464");
  ASSERT_TRUE(a);
  EXPECT_EQ(a->port, 9464);
  EXPECT_EQ(a->addr_be, htonl(INADDR_LOOPBACK));
  auto bare = parse_listen_address("9464");
  ASSERT_TRUE(bare) << bare.message();
  EXPECT_EQ(bare->addr_be, htonl(INADDR_LOOPBACK));
  auto colon = parse_listen_address(":9100");
  ASSERT_TRUE(colon);
  EXPECT_EQ(colon->port, 9100);
  EXPECT_EQ(colon->addr_be, htonl(INADDR_LOOPBACK));
  for (const char* bad : {"localhost:9464", "127.0.0.1:", "127.0.0.1:70000", "1.2.3:80", "127.0.0.1:9x", ""})
    EXPECT_FALSE(parse_listen_address(bad)) << bad;

  LoadOptions o;
  o.find_pmd = &find_pmd;
  o.cpu_count = 2;
  const std::string base = R"(
[[pools]]
name = "rx"
[[ports]]
name = "gen"
pmd = "synth"
[[endpoints]]
name = "e"
match = ["udp"]
[[lcores]]
rx = ["gen:0"]
)";
  auto good = load_config_string(base + "[metrics]\nlisten = \"127.0.0.1:0\"\nlatency_sample = 8\n", "m.toml", o);
  ASSERT_TRUE(good) << good.message();
  EXPECT_EQ(good->plan.metrics.listen, "127.0.0.1:0");
  EXPECT_EQ(good->plan.metrics.latency_sample, 8u);
  auto dflt = load_config_string(base, "m.toml", o);
  ASSERT_TRUE(dflt);
  EXPECT_TRUE(dflt->plan.metrics.listen.empty());
  EXPECT_EQ(dflt->plan.metrics.latency_sample, kDefaultLatencySample);
  auto typo = load_config_string(base + "[metrics]\nlisen = \"127.0.0.1:9464\"\n", "m.toml", o);
  ASSERT_FALSE(typo);
  EXPECT_NE(typo.message().find("m.toml:13"), std::string::npos) << typo.message();
  EXPECT_NE(typo.message().find("lisen"), std::string::npos) << typo.message();
  auto host = load_config_string(base + "[metrics]\nlisten = \"myhost:9464\"\n", "m.toml", o);
  ASSERT_FALSE(host);
  EXPECT_NE(host.message().find("m.toml:13"), std::string::npos) << host.message();
  EXPECT_NE(host.message().find("IPv4"), std::string::npos) << host.message();
  auto neg = load_config_string(base + "[metrics]\nlatency_sample = -1\n", "m.toml", o);
  ASSERT_FALSE(neg);
  EXPECT_NE(neg.message().find("latency_sample"), std::string::npos) << neg.message();
}

// ---- a running pipeline ---------------------------------------------------------------------

std::string http_get(std::uint16_t port, const std::string& request) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return {};
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  sa.sin_port = htons(port);
  std::string out;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0) {
    (void)!::write(fd, request.data(), request.size());
    char buf[65536];
    ssize_t n;
    while ((n = ::read(fd, buf, sizeof buf)) > 0) out.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fd);
  return out;
}

std::string body_of(const std::string& response) {
  const std::size_t p = response.find("\r\n\r\n");
  return p == std::string::npos ? std::string() : response.substr(p + 4);
}

// Sum of every series of `name` whose key contains `filter`.
double total(const Scrape& s, const std::string& name, const std::string& filter = "") {
  double sum = 0;
  for (const auto& [k, v] : s.series)
    if (k.starts_with(name + "{") && k.find(filter) != std::string::npos) sum += v;
  return sum;
}

int drop_every_fourth(const rawpipe_packet*, void* ctx) {
  auto* n = static_cast<std::uint64_t*>(ctx);
  return (*n)++ % 4 == 0 ? RAWPIPE_DROP : RAWPIPE_RECV;
}

const char* kRunConfig = R"(
[metrics]
listen = "127.0.0.1:0"
latency_sample = 4

[[pools]]
name = "rx"
count = 4096

[[ports]]
name = "gen \"one\""
pmd = "synth"
packets = 60000
rate_pps = 100000
ipv4_dst = "239.1.1.1"
dst_addrs = 2

[[endpoints]]
name = "md"
action = "sink"
match = ["udp dst 239.1.1.1:5000"]

[[lcores]]
rx = ["gen \"one\":0"]
)";

TEST(MetricsServer, ScrapesOfARunningPipelineParseGrowAndMatchTheAccounting) {
  LoadOptions o;
  o.find_pmd = &find_pmd;
  o.cpu_count = 2;
  auto loaded = load_config_string(kRunConfig, "metrics.toml", o);
  ASSERT_TRUE(loaded) << loaded.message();
  auto created = Pipeline::create(loaded->plan);
  ASSERT_TRUE(created) << created.message();
  Pipeline& pipe = *created.value();
  std::uint64_t calls = 0;
  ASSERT_TRUE(pipe.filters().set_endpoint_filter(0, {&drop_every_fourth, nullptr, &calls, "every\\fourth"}));
  ASSERT_TRUE(pipe.start());
  MetricsServer server;
  ASSERT_TRUE(server.start(pipe, "metrics-test", loaded->plan.metrics.listen));
  ASSERT_NE(server.port(), 0);
  EXPECT_EQ(server.address().rfind("127.0.0.1:", 0), 0u);

  EXPECT_TRUE(http_get(server.port(), "GET /nope HTTP/1.0\r\n\r\n").starts_with("HTTP/1.0 404"));
  EXPECT_TRUE(http_get(server.port(), "BREW /metrics HTTP/1.0\r\n\r\n").starts_with("HTTP/1.0 405"));
  EXPECT_TRUE(http_get(server.port(), std::string(9000, 'A')).starts_with("HTTP/1.0 400"));

  // Scrapes while running: each parses, counters never go back.
  std::vector<Scrape> scrapes;
  std::string last_text;
  for (int i = 0; i < 3; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    const std::string resp = http_get(server.port(), "GET /metrics HTTP/1.1\r\nHost: localhost\r\n\r\n");
    ASSERT_TRUE(resp.starts_with("HTTP/1.0 200 OK\r\n")) << resp.substr(0, 200);
    last_text = body_of(resp);
    Scrape s = parse_exposition(last_text);
    for (const auto& e : s.errors) ADD_FAILURE() << e;
    scrapes.push_back(std::move(s));
  }
  EXPECT_GT(total(scrapes[0], "rawpipe_pipeline_running"), 0);
  for (std::size_t i = 1; i < scrapes.size(); ++i)
    for (const auto& [key, v] : scrapes[i - 1].series) {
      const std::string name = key.substr(0, key.find('{'));
      const std::string fam = family_of(name, scrapes[i].types);
      const bool counter = scrapes[i].types[fam] == "counter" || name.ends_with("_count") || name.ends_with("_sum");
      if (!counter) continue;
      auto it = scrapes[i].series.find(key);
      ASSERT_NE(it, scrapes[i].series.end()) << key << " disappeared";
      EXPECT_GE(it->second, v) << key << " went backwards";
    }
  EXPECT_GT(total(scrapes.back(), "rawpipe_stage_latency_seconds_count", "stage=burst"), 0);
  // Present per lcore (read from /proc while the lcore runs); its value is the kernel's.
  EXPECT_EQ(scrapes.back().series.count("rawpipe_lcore_involuntary_context_switches_total{lcore=0,}"), 1u);

  // promtool, when installed (Debian package prometheus; tools/packages.txt lists it).
  if (std::system("promtool --version > /dev/null 2>&1") == 0) {
    const auto file = std::filesystem::temp_directory_path() / fmt::format("rawpipe-metrics-{}.txt", getpid());
    std::ofstream(file) << last_text;
    const int rc = std::system(fmt::format("promtool check metrics < {} > {}.out 2>&1", file.string(), file.string()).c_str());
    std::ifstream lint(file.string() + ".out");
    std::stringstream msg;
    msg << lint.rdbuf();
    EXPECT_EQ(rc, 0) << "promtool check metrics:\n" << msg.str();
    std::filesystem::remove(file);
    std::filesystem::remove(file.string() + ".out");
  } else {
    std::printf("promtool not installed (Debian package prometheus): checked by the built-in parser only\n");
  }

  // Let the synth port finish, stop, scrape again: the totals are the final accounting.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (pipe.accounting().rx_packets < 60000 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_TRUE(pipe.stop());
  const Scrape fin = parse_exposition(body_of(http_get(server.port(), "GET /metrics HTTP/1.0\r\n\r\n")));
  for (const auto& e : fin.errors) ADD_FAILURE() << e;
  server.stop();
  const Accounting a = pipe.accounting();
  ASSERT_EQ(a.rx_packets, 60000u);
  EXPECT_EQ(total(fin, "rawpipe_pipeline_running"), 0);
  EXPECT_EQ(total(fin, "rawpipe_lcore_rx_packets_total"), double(a.rx_packets));
  EXPECT_EQ(total(fin, "rawpipe_lcore_rx_bytes_total"), double(a.rx_bytes));
  EXPECT_EQ(total(fin, "rawpipe_lcore_delivered_packets_total"), double(a.delivered));
  EXPECT_EQ(total(fin, "rawpipe_lcore_transmitted_packets_total"), double(a.transmitted));
  EXPECT_EQ(total(fin, "rawpipe_lcore_dropped_packets_total"), double(a.dropped()));
  EXPECT_EQ(total(fin, "rawpipe_lcore_dropped_packets_total", "reason=no_match"),
            double(a.drops[static_cast<std::size_t>(DropReason::kNoMatch)]));
  EXPECT_EQ(total(fin, "rawpipe_lcore_dropped_packets_total", "reason=filter_drop"),
            double(a.drops[static_cast<std::size_t>(DropReason::kFilterDrop)]));
  EXPECT_EQ(total(fin, "rawpipe_endpoint_delivered_packets_total", "endpoint=md"), double(a.delivered_per_endpoint[0]));
  EXPECT_EQ(total(fin, "rawpipe_port_rx_packets_total", "port=gen \"one\""), double(a.rx_packets));
  // The filter: its name and the port name went through label escaping and back.
  EXPECT_EQ(total(fin, "rawpipe_filter_packets_total", "filter=every\\fourth"), double(calls));
  EXPECT_EQ(total(fin, "rawpipe_filter_verdicts_total", "verdict=drop"),
            double(a.drops[static_cast<std::size_t>(DropReason::kFilterDrop)]));
  EXPECT_EQ(total(fin, "rawpipe_filter_verdicts_total", "verdict=recv"), double(a.delivered));
  EXPECT_GT(a.drops[static_cast<std::size_t>(DropReason::kFilterDrop)], 0u);
  EXPECT_EQ(total(fin, "rawpipe_pool_buffers_outstanding"), 0);
  EXPECT_GE(server.requests(), 6u);  // complete requests (the oversized one is cut off unread)
}

// The dashboard's feed: /metrics.json is the document /metrics renders, numbered; a numbered
// snapshot is served again byte for byte until it is evicted; the page and the chart library
// are served beside them.
TEST(MetricsServer, NumberedSnapshotsServeTheSameFiguresAsTextAndJson) {
  LoadOptions o;
  o.find_pmd = &find_pmd;
  o.cpu_count = 2;
  auto loaded = load_config_string(kRunConfig, "snapshots.toml", o);
  ASSERT_TRUE(loaded) << loaded.message();
  auto created = Pipeline::create(loaded->plan);
  ASSERT_TRUE(created) << created.message();
  Pipeline& pipe = *created.value();
  ASSERT_TRUE(pipe.start());
  MetricsServer server;
  ASSERT_TRUE(server.start(pipe, "snapshots", loaded->plan.metrics.listen));
  auto header = [](const std::string& resp, const std::string& name) {
    const std::size_t at = resp.find("\r\n" + name + ": ");
    if (at == std::string::npos) return std::string();
    const std::size_t from = at + name.size() + 4;
    return resp.substr(from, resp.find("\r\n", from) - from);
  };

  // Taken while the lcores run, so the next fresh snapshot differs from this one.
  const std::string json_resp = http_get(server.port(), "GET /metrics.json HTTP/1.0\r\n\r\n");
  ASSERT_TRUE(json_resp.starts_with("HTTP/1.0 200 OK\r\n")) << json_resp.substr(0, 200);
  EXPECT_EQ(header(json_resp, "Content-Type"), "application/json");
  const nlohmann::json doc = nlohmann::json::parse(body_of(json_resp));
  const std::uint64_t n = doc.at("snapshot").get<std::uint64_t>();
  EXPECT_EQ(header(json_resp, "X-Rawpipe-Snapshot"), std::to_string(n));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  const std::string text_resp = http_get(server.port(), fmt::format("GET /metrics?snapshot={} HTTP/1.0\r\n\r\n", n));
  ASSERT_TRUE(text_resp.starts_with("HTTP/1.0 200 OK\r\n")) << text_resp.substr(0, 200);
  const Scrape same = parse_exposition(body_of(text_resp));
  for (const auto& e : same.errors) ADD_FAILURE() << e;
  std::uint64_t rx = 0, delivered = 0;
  for (const auto& l : doc.at("lcores")) {
    rx += l.at("rx_packets").get<std::uint64_t>();
    delivered += l.at("delivered").get<std::uint64_t>();
  }
  EXPECT_EQ(total(same, "rawpipe_lcore_rx_packets_total"), double(rx));
  EXPECT_EQ(total(same, "rawpipe_lcore_delivered_packets_total"), double(delivered));
  EXPECT_EQ(total(same, "rawpipe_endpoint_delivered_packets_total"),
            double(doc.at("endpoints").at(0).at("delivered").get<std::uint64_t>()));
  EXPECT_EQ(body_of(http_get(server.port(), fmt::format("GET /metrics.json?snapshot={} HTTP/1.0\r\n\r\n", n))),
            body_of(json_resp));
  // A fresh scrape is a new snapshot with newer figures.
  const std::string fresh = http_get(server.port(), "GET /metrics HTTP/1.0\r\n\r\n");
  EXPECT_EQ(header(fresh, "X-Rawpipe-Snapshot"), std::to_string(n + 1));
  EXPECT_NE(body_of(fresh), body_of(text_resp));

  // Kept: the last 16; older ones are refused with the reason, and so are ones never taken.
  for (int i = 0; i < 16; ++i) (void)http_get(server.port(), "GET /metrics.json HTTP/1.0\r\n\r\n");
  const std::string evicted = http_get(server.port(), fmt::format("GET /metrics?snapshot={} HTTP/1.0\r\n\r\n", n));
  EXPECT_TRUE(evicted.starts_with("HTTP/1.0 404")) << evicted.substr(0, 200);
  EXPECT_NE(evicted.find("is not kept"), std::string::npos) << evicted;
  EXPECT_TRUE(http_get(server.port(), "GET /metrics?snapshot=0 HTTP/1.0\r\n\r\n").starts_with("HTTP/1.0 404"));
  EXPECT_TRUE(http_get(server.port(), "GET /metrics?snapshot=999 HTTP/1.0\r\n\r\n").starts_with("HTTP/1.0 404"));

  const std::string page = http_get(server.port(), "GET / HTTP/1.0\r\n\r\n");
  EXPECT_TRUE(page.starts_with("HTTP/1.0 200 OK\r\n"));
  EXPECT_EQ(header(page, "Content-Type"), "text/html; charset=utf-8");
  EXPECT_NE(page.find("fetch(\"/metrics.json\""), std::string::npos);
  const std::string chart = http_get(server.port(), "GET /chart.js HTTP/1.0\r\n\r\n");
  if (std::filesystem::exists(std::string(chartjs_path()))) {
    EXPECT_TRUE(chart.starts_with("HTTP/1.0 200 OK\r\n")) << chart.substr(0, 300);
    EXPECT_EQ(body_of(chart).size(), std::filesystem::file_size(std::string(chartjs_path())));
  } else {
    EXPECT_TRUE(chart.starts_with("HTTP/1.0 404")) << chart.substr(0, 300);
    EXPECT_NE(chart.find("libjs-chart.js"), std::string::npos) << chart;
  }
  server.stop();
  ASSERT_TRUE(pipe.stop());
}

// Stop under observation: /metrics scraped over HTTP and the stats segment read (what `rawpipe
// stat` does) in loops on their own threads while stop() joins the lcores, drains and closes. In
// the 'tsan' suite a plain flag or counter among what they read is a reported race; in every
// build each scrape parses, each segment read is a whole JSON document, and the scrapes after
// stop() returned say the pipeline stopped with the final totals.
TEST(MetricsServer, ScrapesAndStatReadsStaySafeAcrossStop) {
  LoadOptions o;
  o.find_pmd = &find_pmd;
  o.cpu_count = 2;
  std::string text = kRunConfig;
  text.replace(text.find("packets = 60000"), std::string("packets = 60000").size(), "packets = 0");
  auto loaded = load_config_string(text, "stop-observed.toml", o);
  ASSERT_TRUE(loaded) << loaded.message();
  auto created = Pipeline::create(loaded->plan);
  ASSERT_TRUE(created) << created.message();
  Pipeline& pipe = *created.value();
  ASSERT_TRUE(pipe.start());
  MetricsServer server;
  ASSERT_TRUE(server.start(pipe, "stop-observed", loaded->plan.metrics.listen));
  StatsPublisher publisher;
  const std::string name = "stop-observed-" + std::to_string(getpid());
  ASSERT_TRUE(publisher.start(pipe, name, std::chrono::milliseconds(5)));

  std::atomic<bool> done{false}, stopped{false};
  std::atomic<unsigned> scrapes{0}, scrapes_after_stop{0}, reads{0}, reads_after_stop{0};
  double running_after_stop = -1, rx_after_stop = -1;
  std::thread scraper([&] {
    while (!done.load(std::memory_order_acquire)) {
      const bool after = stopped.load(std::memory_order_acquire);
      const std::string resp = http_get(server.port(), "GET /metrics HTTP/1.0\r\n\r\n");
      ASSERT_TRUE(resp.starts_with("HTTP/1.0 200 OK\r\n")) << resp.substr(0, 200);
      Scrape sc = parse_exposition(body_of(resp));
      for (const auto& e : sc.errors) ADD_FAILURE() << e;
      scrapes.fetch_add(1, std::memory_order_relaxed);
      if (after) {
        running_after_stop = total(sc, "rawpipe_pipeline_running");
        rx_after_stop = total(sc, "rawpipe_port_rx_packets_total");
        scrapes_after_stop.fetch_add(1, std::memory_order_relaxed);
      }
    }
  });
  std::thread stat([&] {
    auto reader = ShmStatsReader::open(name);
    ASSERT_TRUE(reader) << reader.message();
    while (!done.load(std::memory_order_acquire)) {
      const bool after = stopped.load(std::memory_order_acquire);
      auto doc = reader->read();
      // read() gives up, saying so, when a publisher is preempted in the middle of a write for
      // longer than its patience; the next read succeeds. A reader that never does leaves
      // reads_after_stop short, checked below.
      if (!doc) continue;
      if (doc->empty()) continue;
      ASSERT_FALSE(nlohmann::json::parse(*doc, nullptr, false).is_discarded()) << doc->substr(0, 200);
      reads.fetch_add(1, std::memory_order_relaxed);
      if (after) reads_after_stop.fetch_add(1, std::memory_order_relaxed);
    }
  });

  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while ((scrapes.load() < 5 || reads.load() < 5) && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  ASSERT_TRUE(pipe.stop());
  stopped.store(true, std::memory_order_release);
  while ((scrapes_after_stop.load() < 3 || reads_after_stop.load() < 3) && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  done.store(true, std::memory_order_release);
  scraper.join();
  stat.join();
  publisher.stop();
  server.stop();

  EXPECT_GE(scrapes_after_stop.load(), 3u);
  EXPECT_GE(reads_after_stop.load(), 3u);
  EXPECT_EQ(running_after_stop, 0) << "a scrape after stop() still says running";
  const Accounting a = pipe.accounting();
  EXPECT_TRUE(a.balanced());
  EXPECT_EQ(rx_after_stop, double(a.rx_packets));
}

}  // namespace
}  // namespace rawpipe::ops
