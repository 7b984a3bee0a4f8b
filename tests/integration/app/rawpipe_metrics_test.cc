// The rawpipe binary's operations surface end to end, while a synth pipeline with a filter plugin
// runs: GET /metrics from [metrics] listen passes `promtool check metrics` (when installed) and
// carries the filter's and the stages' series; `rawpipe stat NAME --json` and `--once` show the
// filter counters and the per-stage latency; the last scrape never exceeds the final summary.
// Needs no privileges.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "tests/support/process.hh"

namespace {

namespace fs = std::filesystem;
using namespace rawpipe::test;

std::string http_get(std::uint16_t port, const std::string& path) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  sa.sin_port = htons(port);
  std::string out;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0) {
    const std::string req = "GET " + path + " HTTP/1.0\r\n\r\n";
    (void)!::write(fd, req.data(), req.size());
    char buf[65536];
    ssize_t n;
    while ((n = ::read(fd, buf, sizeof buf)) > 0) out.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fd);
  return out;
}

// Sum of the samples of `name` whose line contains `filter`.
double sum_of(const std::string& text, const std::string& name, const std::string& filter = "") {
  double s = 0;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(name + "{", 0) == 0 && line.find(filter) != std::string::npos)
      s += std::stod(line.substr(line.rfind(' ') + 1));
  return s;
}

TEST(RawpipeOps, MetricsAndStatOfARunningPipelineWithAFilterPlugin) {
  const fs::path build = build_dir();
  ASSERT_FALSE(build.empty());
  const fs::path bin = rawpipe_binary();
  const fs::path plugin = build / "plugins" / "rawpipe_prefix_drop.so";
  ASSERT_TRUE(fs::exists(bin)) << bin;
  ASSERT_TRUE(fs::exists(plugin)) << plugin;
  const std::string name = "opsapp" + std::to_string(getpid());
  const fs::path tmp = fs::temp_directory_path() / ("rawpipe-ops-app-" + std::to_string(getpid()));
  fs::create_directories(tmp);
  const fs::path config = tmp / (name + ".toml");
  std::ofstream(config) << R"(
[run]
stats_interval = 0.1

[metrics]
listen = "127.0.0.1:0"
latency_sample = 8

[[pools]]
name = "rx"
count = 4096

[[ports]]
name = "gen"
pmd = "synth"
rate_pps = 100000
ipv4_dst = "239.1.1.1"

[[endpoints]]
name = "md"
match = ["udp dst 239.1.1.1:*"]

[[filters]]
path = ")" + plugin.string() + R"("
endpoint = "md"
[filters.config]
prefix = "this prefix never occurs"

[[lcores]]
rx = ["gen:0"]
)";
  const fs::path summary = tmp / "summary.json";
  // No duration: the scrapes below take as long as they take (seconds under the sanitizers on a
  // loaded machine), and the run is stopped with SIGINT once they are done.
  const pid_t pid = start_process({bin.string(), "run", config.string(), "--json", summary.string()}, tmp / "out",
                                  tmp / "err");
  ASSERT_GT(pid, 0);
  // A failed assertion returns early: the run still gets its SIGINT (and the test's wait).
  struct StopRun {
    pid_t pid;
    bool waited = false;
    ~StopRun() {
      if (!waited && ::kill(pid, SIGINT) == 0) wait_process(pid);
    }
  } run{pid};

  // The bound port is printed at start.
  std::uint16_t port = 0;
  const std::regex url("metrics: http://127\\.0\\.0\\.1:([0-9]+)/metrics");
  for (int i = 0; i < 500 && !port; ++i) {
    std::smatch m;
    const std::string out = slurp(tmp / "out");
    if (std::regex_search(out, m, url)) port = static_cast<std::uint16_t>(std::stoi(m[1]));
    else std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_NE(port, 0) << slurp(tmp / "out") << slurp(tmp / "err");
  std::this_thread::sleep_for(std::chrono::milliseconds(700));

  const std::string resp = http_get(port, "/metrics");
  ASSERT_EQ(resp.rfind("HTTP/1.0 200 OK\r\n", 0), 0u) << resp.substr(0, 300);
  const std::string metrics = resp.substr(resp.find("\r\n\r\n") + 4);
  EXPECT_GT(sum_of(metrics, "rawpipe_filter_packets_total", "filter=\"prefix_drop\",endpoint=\"md\""), 0);
  EXPECT_GT(sum_of(metrics, "rawpipe_stage_latency_seconds_count", "stage=\"burst\""), 0);
  EXPECT_EQ(http_get(port, "/").rfind("HTTP/1.0 200 OK\r\nContent-Type: text/html", 0), 0u);  // the dashboard
  EXPECT_EQ(http_get(port, "/nope").rfind("HTTP/1.0 404", 0), 0u);
  if (std::system("promtool --version > /dev/null 2>&1") == 0) {
    std::ofstream(tmp / "metrics.txt") << metrics;
    const int rc = std::system(("promtool check metrics < " + (tmp / "metrics.txt").string() + " > " +
                                (tmp / "promtool.out").string() + " 2>&1").c_str());
    EXPECT_EQ(rc, 0) << slurp(tmp / "promtool.out");
  } else {
    std::printf("promtool not installed (Debian package prometheus): not run\n");
  }

  // rawpipe stat by name: the JSON document and the text view.
  ASSERT_EQ(wait_process(start_process({bin.string(), "stat", name, "--json"}, tmp / "stat.json", tmp / "stat.err"),
                         {.timeout = std::chrono::seconds(20)}), 0)
      << slurp(tmp / "stat.err");
  const auto doc = nlohmann::json::parse(slurp(tmp / "stat.json"), nullptr, false);
  ASSERT_FALSE(doc.is_discarded()) << slurp(tmp / "stat.json");
  ASSERT_EQ(doc["filters"].size(), 1u);
  EXPECT_EQ(doc["filters"][0]["name"], "prefix_drop");
  EXPECT_EQ(doc["filters"][0]["attach"], "endpoint md");
  EXPECT_GT(doc["filters"][0]["seen"].get<std::uint64_t>(), 0u);
  EXPECT_EQ(doc["filters"][0]["seen"], doc["filters"][0]["recv"]);
  EXPECT_EQ(doc["latency"]["sample_every"], 8);
  EXPECT_GT(doc["latency"]["stages"]["burst"]["samples"].get<std::uint64_t>(), 0u);
  EXPECT_GE(doc["latency"]["stages"]["burst"]["p99_ns"].get<std::uint64_t>(),
            doc["latency"]["stages"]["burst"]["p50_ns"].get<std::uint64_t>());
  ASSERT_EQ(wait_process(start_process({bin.string(), "stat", name, "--once"}, tmp / "stat.txt", tmp / "stat.err"),
                         {.timeout = std::chrono::seconds(20)}), 0)
      << slurp(tmp / "stat.err");
  const std::string view = slurp(tmp / "stat.txt");
  EXPECT_NE(view.find("latency per packet (one poll in 8 timed)"), std::string::npos) << view;
  EXPECT_NE(view.find("prefix_drop"), std::string::npos) << view;

  ASSERT_EQ(::kill(pid, SIGINT), 0);
  run.waited = true;
  ASSERT_EQ(wait_process(pid), 0) << slurp(tmp / "out") << slurp(tmp / "err");
  const auto fin = nlohmann::json::parse(slurp(summary), nullptr, false);
  ASSERT_FALSE(fin.is_discarded());
  EXPECT_LE(sum_of(metrics, "rawpipe_lcore_rx_packets_total"), fin["rx_packets"].get<double>());
  EXPECT_LE(sum_of(metrics, "rawpipe_filter_packets_total"), fin["delivered"].get<double>());
  fs::remove_all(tmp);
}

// The socket port stamps each datagram with the kernel's receive time (CLOCK_REALTIME); the app's
// consumer turns that into port-to-consumer latency, shown in the document and in /metrics.
TEST(RawpipeOps, EndToEndLatencyFromKernelTimestamps) {
  const fs::path build = build_dir();
  const fs::path bin = rawpipe_binary();
  ASSERT_TRUE(fs::exists(bin)) << bin;
  // A free UDP port on loopback (released again for the pipeline's socket).
  const int probe = ::socket(AF_INET, SOCK_DGRAM, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(probe, reinterpret_cast<sockaddr*>(&sa), sizeof sa), 0);
  socklen_t len = sizeof sa;
  ASSERT_EQ(getsockname(probe, reinterpret_cast<sockaddr*>(&sa), &len), 0);
  ::close(probe);
  const int udp_port = ntohs(sa.sin_port);

  const std::string name = "opse2e" + std::to_string(getpid());
  const fs::path tmp = fs::temp_directory_path() / ("rawpipe-ops-e2e-" + std::to_string(getpid()));
  fs::create_directories(tmp);
  const fs::path config = tmp / (name + ".toml");
  std::ofstream(config) << R"(
[run]
stats_interval = 0.1

[metrics]
listen = "127.0.0.1:0"
latency_sample = 1

[[pools]]
name = "rx"
count = 1024

[[ports]]
name = "sock"
pmd = "socket"

[[endpoints]]
name = "md"
match = ["udp dst 127.0.0.1:)" + std::to_string(udp_port) + R"("]

[[lcores]]
rx = ["sock:0"]
idle_sleep_us = 50
)";
  const pid_t pid = start_process({bin.string(), "run", config.string(), "--duration", "3"}, tmp / "out", tmp / "err");
  ASSERT_GT(pid, 0);
  std::uint16_t port = 0;
  const std::regex url("metrics: http://127\\.0\\.0\\.1:([0-9]+)/metrics");
  for (int i = 0; i < 500 && !port; ++i) {
    std::smatch m;
    const std::string out = slurp(tmp / "out");
    if (std::regex_search(out, m, url)) port = static_cast<std::uint16_t>(std::stoi(m[1]));
    else std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_NE(port, 0) << slurp(tmp / "out") << slurp(tmp / "err");

  const int tx = ::socket(AF_INET, SOCK_DGRAM, 0);
  sa.sin_port = htons(static_cast<std::uint16_t>(udp_port));
  for (int i = 0; i < 500; ++i) {
    (void)!::sendto(tx, "hello", 5, 0, reinterpret_cast<sockaddr*>(&sa), sizeof sa);
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ::close(tx);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));

  ASSERT_EQ(wait_process(start_process({bin.string(), "stat", name, "--json"}, tmp / "stat.json", tmp / "stat.err"),
                         {.timeout = std::chrono::seconds(20)}), 0)
      << slurp(tmp / "stat.err");
  const auto doc = nlohmann::json::parse(slurp(tmp / "stat.json"), nullptr, false);
  ASSERT_FALSE(doc.is_discarded());
  ASSERT_EQ(doc["end_to_end"].size(), 1u) << doc.dump(2);
  const auto& e = doc["end_to_end"][0];
  EXPECT_EQ(e["endpoint"], "md");
  EXPECT_EQ(e["unusable"], 0);
  EXPECT_GT(e["latency"]["samples"].get<std::uint64_t>(), 0u);
  EXPECT_LE(e["latency"]["samples"].get<std::uint64_t>(), doc["endpoints"][0]["delivered"].get<std::uint64_t>());
  // Kernel receive to consumer on one machine: well under a second, and never negative.
  EXPECT_LT(e["latency"]["p50_ns"].get<std::uint64_t>(), 1000000000u);
  const std::string resp = http_get(port, "/metrics");
  EXPECT_GT(sum_of(resp, "rawpipe_endpoint_latency_seconds_count", "endpoint=\"md\""), 0) << resp;
  EXPECT_EQ(wait_process(pid), 0) << slurp(tmp / "err");
  fs::remove_all(tmp);
}

}  // namespace
