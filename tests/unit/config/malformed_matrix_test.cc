// The malformed-config matrix: for every key the loader and the drivers' parse() accept, a value
// of the wrong type and (where the key has a range) a value outside it are rejected with a message
// naming the file, the line of the key and the key. Plus: an unknown key in each section,
// duplicate names, dangling references, an lcore CPU beyond the machine. A last test makes sure
// every key used in configs/*.toml has a row here, so a new key cannot skip the matrix.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "rawpipe/config.hh"
#include "pipeline/port/registry.hh"
#include "tests/support/build_tree.hh"
#include "pipeline/port/driver.hh"

namespace rawpipe {
namespace {

namespace fs = std::filesystem;

// The sections the matrix knows; optional ones are emitted only when a row puts a key in them.
enum class Sec { kRun, kPool, kPort, kEndpoint, kLcore, kMetrics, kTap, kFilter };

struct Row {
  Sec sec;
  const char* pmd;        // for port keys: the driver whose parse() reads it ("" = generic port key)
  const char* key;
  const char* wrong_type; // a TOML value of the wrong type
  const char* out_of_range;  // nullptr when the key has no range
  const char* also = nullptr;  // "key = value" the key needs beside it in its section, or "-key" it must not have
};

// Driver base keys that make an otherwise empty port table valid for that driver.
const std::map<std::string, std::vector<std::string>> kDriverBase = {
    {"synth", {}},
    {"pcap", {"rx_file = \"/tmp/rawpipe-matrix-missing.pcap\""}},
    {"af_packet", {"interface = \"veth-matrix\""}},
    // The matrix's [run] has a default endpoint, which a port in steer mode never feeds.
    {"af_xdp", {"interface = \"veth-matrix\"", "mode = \"all\""}},
    {"socket", {"interface = \"veth-matrix\"", "listen = [\"udp dst *:5000\"]"}},
    {"auto", {"interface = \"veth-matrix\""}},
    {"mlx5", {"interface = \"mlx5-matrix\""}},
    {"mlx5-model", {}},
    {"mana", {"interface = \"mana-matrix\""}},
    {"mana-model", {}},
    {"dpdk", {"device = \"net_null0\""}},
};

const Row kRows[] = {
    // [run]
    {Sec::kRun, "", "duration", "\"long\"", "-1"},
    {Sec::kRun, "", "stats_interval", "true", "0.001"},
    {Sec::kRun, "", "default_action", "1", "\"forward\""},
    {Sec::kRun, "", "default_endpoint", "5", "\"missing\""},
    {Sec::kRun, "", "consumer_cpu", "\"0\"", "4096"},
    {Sec::kRun, "", "drop_privileges", "\"yes\"", nullptr},
    {Sec::kRun, "", "user", "0", "\"\""},
    {Sec::kRun, "", "group", "0", "\"\""},
    {Sec::kRun, "", "plugin_dirs", "7", "[\"relative/dir\"]"},
    {Sec::kRun, "", "on_loss", "1", "\"abort\""},
    // [[pools]]
    {Sec::kPool, "", "name", "1", "\"\""},
    {Sec::kPool, "", "count", "\"many\"", "63"},
    {Sec::kPool, "", "buf_size", "2048.5", "1000"},
    {Sec::kPool, "", "headroom", "\"128\"", "1025"},
    {Sec::kPool, "", "cache_size", "[]", "257"},
    {Sec::kPool, "", "huge_pages", "true", "\"always\""},
    // [[ports]], every driver
    {Sec::kPort, "", "name", "1", "\"\""},
    {Sec::kPort, "", "pmd", "1", "\"nosuchpmd\""},
    {Sec::kPort, "", "pool", "1", "\"missing\""},
    {Sec::kPort, "", "rx_queues", "\"1\"", "0"},
    {Sec::kPort, "", "tx_queues", "\"1\"", "257"},
    {Sec::kPort, "", "rx_ring_size", "\"1024\"", "1000"},
    {Sec::kPort, "", "tx_ring_size", "1.5", "0"},
    {Sec::kPort, "", "addresses", "1", "[\"10.0.0.300\"]"},
    {Sec::kPort, "", "mac", "1", "\"02:00\"", "addresses = [\"10.0.0.1\"]"},
    {Sec::kPort, "", "next_hop_mac", "1", "\"01:00:5e:00:00:01\""},
    // synth
    {Sec::kPort, "synth", "rate_pps", "\"fast\"", "-1"},
    {Sec::kPort, "synth", "packets", "\"10\"", "-1"},
    {Sec::kPort, "synth", "frame_size", "\"64\"", "59"},
    {Sec::kPort, "synth", "imix", "64", "[[64, 1], [20000, 1]]"},
    {Sec::kPort, "synth", "src_mac", "1", "\"02:00\""},
    {Sec::kPort, "synth", "dst_mac", "1", "\"zz:00:00:00:00:01\""},
    {Sec::kPort, "synth", "ipv4_src", "1", "\"10.0.0.300\""},
    {Sec::kPort, "synth", "ipv4_dst", "1", "\"not-an-ip\""},
    {Sec::kPort, "synth", "ipv6_src", "1", "\"fe80::zz\""},
    {Sec::kPort, "synth", "ipv6_dst", "1", "\"10.0.0.1\""},
    {Sec::kPort, "synth", "src_port", "\"1\"", "65536"},
    {Sec::kPort, "synth", "src_ports", "\"1\"", "0"},
    {Sec::kPort, "synth", "dst_port", "\"1\"", "-1"},
    {Sec::kPort, "synth", "dst_ports", "\"1\"", "65537"},
    {Sec::kPort, "synth", "src_addrs", "\"1\"", "0"},
    {Sec::kPort, "synth", "dst_addrs", "\"1\"", "0"},
    {Sec::kPort, "synth", "ipv6_fraction", "\"half\"", "1.5"},
    {Sec::kPort, "synth", "protocol", "6", "\"sctp\""},
    {Sec::kPort, "synth", "vlans", "\"100\"", "[4096]"},
    {Sec::kPort, "synth", "malformed_fraction", "\"some\"", "2"},
    {Sec::kPort, "synth", "malformed_kinds", "1", "[\"no_such_kind\"]"},
    {Sec::kPort, "synth", "seed", "\"1\"", "-1"},
    // pcap
    {Sec::kPort, "pcap", "rx_file", "1", nullptr},
    {Sec::kPort, "pcap", "tx_file", "1", nullptr},
    {Sec::kPort, "pcap", "timing", "1", "\"slow\""},
    {Sec::kPort, "pcap", "loop", "\"2\"", "-1"},
    {Sec::kPort, "pcap", "tx_format", "1", "\"erf\""},
    {Sec::kPort, "pcap", "tx_snaplen", "\"1\"", "15"},
    // af_packet
    {Sec::kPort, "af_packet", "interface", "1", nullptr},
    {Sec::kPort, "af_packet", "promiscuous", "\"yes\"", nullptr},
    {Sec::kPort, "af_packet", "block_size", "\"4k\"", "1000"},
    {Sec::kPort, "af_packet", "block_count", "\"1\"", "65537"},
    {Sec::kPort, "af_packet", "block_timeout_ms", "\"1\"", "10001"},
    {Sec::kPort, "af_packet", "fanout", "1", "\"rr\""},
    {Sec::kPort, "af_packet", "qdisc_bypass", "1", nullptr},
    {Sec::kPort, "af_packet", "tpacket_version", "\"3\"", "4"},
    // af_xdp
    {Sec::kPort, "af_xdp", "interface", "1", nullptr},
    {Sec::kPort, "af_xdp", "queue_offset", "\"0\"", "-1"},
    {Sec::kPort, "af_xdp", "mode", "1", "\"some\""},
    {Sec::kPort, "af_xdp", "zero_copy", "true", "\"maybe\""},
    {Sec::kPort, "af_xdp", "attach", "1", "\"offload\""},
    {Sec::kPort, "af_xdp", "need_wakeup", "\"on\"", nullptr},
    {Sec::kPort, "af_xdp", "busy_poll_budget", "\"64\"", "65536"},
    {Sec::kPort, "af_xdp", "busy_poll_us", "\"20\"", "0", "busy_poll_budget = 64"},
    // socket
    {Sec::kPort, "socket", "interface", "1", nullptr},
    {Sec::kPort, "socket", "listen", "5000", "[\"tcp dst *:5000\"]"},
    {Sec::kPort, "socket", "rcvbuf", "\"1M\"", "-1"},
    // auto
    {Sec::kPort, "auto", "interface", "1", nullptr},
    {Sec::kPort, "auto", "ladder", "1", "[\"dpdk\"]"},
    // mlx5 and its model
    {Sec::kPort, "mlx5", "interface", "1", nullptr},
    {Sec::kPort, "mlx5", "cqe_compression", "1", nullptr},
    {Sec::kPort, "mlx5", "striding_rq", "1", nullptr},
    {Sec::kPort, "mlx5", "log_stride_size", "\"6\"", "14"},
    {Sec::kPort, "mlx5", "log_strides", "\"9\"", "2"},
    {Sec::kPort, "mlx5", "tx_completion_every", "\"32\"", "0"},
    {Sec::kPort, "mlx5", "tx_inline", "18", "\"64\""},
    {Sec::kPort, "mlx5", "steering", "1", "\"some\""},
    {Sec::kPort, "mlx5-model", "inject_pcap", "1", nullptr},
    {Sec::kPort, "mlx5-model", "wire_pcap", "1", nullptr},
    {Sec::kPort, "mlx5-model", "inject_count", "\"1\"", "-1"},
    {Sec::kPort, "mlx5-model", "inject_size", "\"64\"", "59"},
    {Sec::kPort, "mlx5-model", "inject_dst", "1", nullptr},
    {Sec::kPort, "mlx5-model", "inject_src", "1", nullptr},
    {Sec::kPort, "mlx5-model", "inject_flows", "\"1\"", "0"},
    {Sec::kPort, "mlx5-model", "inject_loops", "\"1\"", "0"},
    {Sec::kPort, "mlx5-model", "model_min_inline", "18", "\"9\""},
    {Sec::kPort, "mlx5-model", "inject_rx_error_every", "\"1\"", "-1"},
    {Sec::kPort, "mlx5-model", "inject_rate_pps", "\"fast\"", "-1"},
    // mana and its model
    {Sec::kPort, "mana", "interface", "1", nullptr},
    {Sec::kPort, "mana", "rss", "1", "\"l2\""},
    {Sec::kPort, "mana", "rss_key", "1", "\"00ff\""},
    {Sec::kPort, "mana-model", "source", "1", "\"file\""},
    {Sec::kPort, "mana-model", "frames", "\"1\"", "-1"},
    {Sec::kPort, "mana-model", "frame_size", "\"64\"", "9001"},
    {Sec::kPort, "mana-model", "flows", "\"1\"", "0"},
    {Sec::kPort, "mana-model", "coalesce", "\"4\"", "5"},
    {Sec::kPort, "mana-model", "wire_pcap", "1", nullptr},
    {Sec::kPort, "mana-model", "inject_rx_error_every", "\"1\"", "-1"},
    {Sec::kPort, "mana-model", "inject_rx_error_run", "\"1\"", "0"},
    // [metrics]
    {Sec::kMetrics, "", "listen", "9464", "\"127.0.0.1:70000\""},
    {Sec::kMetrics, "", "latency_sample", "\"64\"", "-1"},
    {Sec::kMetrics, "", "stats_segment", "\"yes\"", nullptr},
    // dpdk (rows run only in builds with the driver)
    {Sec::kPort, "dpdk", "device", "1", "\"\""},
    {Sec::kPort, "dpdk", "eal_args", "1", "[\"\"]"},
    {Sec::kPort, "dpdk", "buffers", "1", "\"some\""},
    {Sec::kPort, "dpdk", "promiscuous", "\"yes\"", nullptr},
    // [[endpoints]]
    {Sec::kEndpoint, "", "name", "1", "\"\""},
    {Sec::kEndpoint, "", "action", "1", "\"mirror\""},
    {Sec::kEndpoint, "", "match", "5000", "[\"udp dst *:99999\"]"},
    {Sec::kEndpoint, "", "ring_size", "\"4096\"", "1000"},
    {Sec::kEndpoint, "", "port", "1", "\"missing\""},
    {Sec::kEndpoint, "", "echo_format", "1", "\"json\"", "action = \"echo\""},
    // [[taps]]
    {Sec::kTap, "", "name", "1", "\"\""},
    {Sec::kTap, "", "stage", "1", "\"tx\""},
    {Sec::kTap, "", "path", "1", nullptr},
    {Sec::kTap, "", "format", "1", "\"erf\""},
    {Sec::kTap, "", "snaplen", "\"64\"", "15"},
    {Sec::kTap, "", "rotate_bytes", "\"1M\"", "100"},
    {Sec::kTap, "", "rotate_seconds", "\"1\"", "-1"},
    {Sec::kTap, "", "max_files", "\"1\"", "-1", "rotate_seconds = 10"},
    {Sec::kTap, "", "lane_bytes", "\"4M\"", "1000000"},
    {Sec::kTap, "", "drop_reasons", "1", "[\"no_such_reason\"]", "stage = \"drops\""},
    {Sec::kTap, "", "port", "1", "\"missing\""},
    {Sec::kTap, "", "endpoint", "1", "\"missing\"", "stage = \"filtered\""},
    // [[filters]] (the example plugins of this build); a plugin outside the plugin dirs is refused
    {Sec::kFilter, "", "path", "1", "\"/etc/hostname\""},
    {Sec::kFilter, "", "endpoint", "1", "\"missing\""},
    {Sec::kFilter, "", "queue", "1", "\"p:7\"", "-endpoint"},
    {Sec::kFilter, "", "config", "1", nullptr},
    // [[lcores]]
    {Sec::kLcore, "", "cpu", "\"0\"", "-2"},
    {Sec::kLcore, "", "burst", "\"32\"", "0"},
    {Sec::kLcore, "", "idle_sleep_us", "\"1\"", "1000001"},
    {Sec::kLcore, "", "rx", "1", "[\"p:7\"]"},
    {Sec::kLcore, "", "thread", "\"no\"", nullptr},
};

// A config with one of each section; set() replaces or adds a key in one section.
class Doc {
 public:
  explicit Doc(std::string pmd = "synth") {
    run_ = {"default_action = \"endpoint\"", "default_endpoint = \"rest\""};
    pool_ = {"name = \"rx\""};
    port_ = {"name = \"p\"", "pmd = \"" + pmd + "\""};
    for (const auto& l : kDriverBase.at(pmd)) port_.push_back(l);
    endpoint_ = {"name = \"rest\"", "action = \"sink\""};
    lcore_ = {"rx = [\"p:0\"]"};
  }
  std::vector<std::string>& lines(Sec s) {
    switch (s) {
      case Sec::kRun: return run_;
      case Sec::kPool: return pool_;
      case Sec::kPort: return port_;
      case Sec::kEndpoint: return endpoint_;
      case Sec::kMetrics: return metrics_;
      case Sec::kTap: return tap_;
      case Sec::kFilter: return filter_;
      default: return lcore_;
    }
  }
  void set(Sec s, const std::string& key, const std::string& value) {
    auto& v = lines(s);
    if (s == Sec::kTap && v.empty()) v.push_back("path = \"/tmp/rawpipe-matrix-tap.pcap\"");
    if (s == Sec::kFilter && v.empty()) v = {"path = \"rawpipe_seq_gap\"", "endpoint = \"rest\""};
    for (auto& l : v)
      if (l.rfind(key + " = ", 0) == 0) {
        l = key + " = " + value;
        return;
      }
    v.push_back(key + " = " + value);
  }
  void unset(Sec s, const std::string& key) {
    if (s == Sec::kFilter) set(s, "path", "\"rawpipe_seq_gap\"");  // the section's base first
    auto& v = lines(s);
    std::erase_if(v, [&](const std::string& l) { return l.rfind(key + " = ", 0) == 0; });
  }
  // The text and the line where `key` of section `s` ended up.
  std::string text(Sec s = Sec::kRun, const std::string& key = "", int* line = nullptr) const {
    std::string out;
    int n = 0;
    auto emit = [&](Sec sec, const char* header, const std::vector<std::string>& v) {
      out += header;
      out += "\n";
      ++n;
      for (const auto& l : v) {
        out += l + "\n";
        ++n;
        if (line && sec == s && !key.empty() && l.rfind(key + " = ", 0) == 0) *line = n;
      }
    };
    emit(Sec::kRun, "[run]", run_);
    emit(Sec::kPool, "[[pools]]", pool_);
    emit(Sec::kPort, "[[ports]]", port_);
    emit(Sec::kEndpoint, "[[endpoints]]", endpoint_);
    emit(Sec::kLcore, "[[lcores]]", lcore_);
    if (!metrics_.empty()) emit(Sec::kMetrics, "[metrics]", metrics_);
    if (!tap_.empty()) emit(Sec::kTap, "[[taps]]", tap_);
    if (!filter_.empty()) emit(Sec::kFilter, "[[filters]]", filter_);
    return out;
  }

 private:
  std::vector<std::string> run_, pool_, port_, endpoint_, lcore_, metrics_, tap_, filter_;
};

LoadOptions options() {
  LoadOptions o;
  o.find_pmd = &find_pmd;
  for (const PmdDriver* d : all_pmds()) o.known_pmds.push_back(d->name);
  o.cpu_count = 4;
  return o;
}

const char* kFile = "matrix.toml";

Result<LoadedConfig> load(const std::string& text) { return load_config_string(text, kFile, options()); }

std::string label(Sec s) {
  switch (s) {
    case Sec::kRun: return "[run]";
    case Sec::kPool: return "pools[0]";
    case Sec::kPort: return "ports[0]";
    case Sec::kEndpoint: return "endpoints[0]";
    case Sec::kMetrics: return "metrics";
    case Sec::kTap: return "taps[0]";
    case Sec::kFilter: return "filters[0]";
    default: return "lcores[0]";
  }
}

// The message names the file, the key's line, and the key.
void expect_names(const Status& s, int line, const std::string& key, const std::string& context) {
  ASSERT_FALSE(s.is_ok()) << context << ": accepted";
  const std::string want = fmt::format("{}:{}:", kFile, line);
  EXPECT_EQ(s.message().rfind(want, 0), 0u) << context << "\n  message: " << s.message() << "\n  wanted it to start with " << want;
  EXPECT_NE(s.message().find("key '" + key + "'"), std::string::npos) << context << "\n  message: " << s.message();
}

bool driver_built(const std::string& pmd) { return pmd.empty() || find_pmd(pmd) != nullptr; }

TEST(MalformedMatrix, EveryDriverBaseIsValid) {
  // Without this the rows below could fail for a reason other than their key.
  for (const auto& [pmd, lines] : kDriverBase) {
    if (!driver_built(pmd)) continue;
    auto r = load(Doc(pmd).text());
    EXPECT_TRUE(r) << pmd << ": " << r.message();
  }
}

TEST(MalformedMatrix, WrongTypeAndOutOfRangeNameFileLineAndKey) {
  unsigned checked = 0;
  for (const Row& row : kRows) {
    const std::string pmd = *row.pmd ? row.pmd : "synth";
    if (!driver_built(pmd)) continue;
    for (const char* value : {row.wrong_type, row.out_of_range}) {
      if (!value) continue;
      Doc d(pmd);
      if (row.also && row.also[0] == '-') {
        d.unset(row.sec, row.also + 1);
      } else if (row.also) {
        const std::string also = row.also;
        const auto eq = also.find(" = ");
        d.set(row.sec, also.substr(0, eq), also.substr(eq + 3));
      }
      d.set(row.sec, row.key, value);
      int line = 0;
      const std::string text = d.text(row.sec, row.key, &line);
      ASSERT_GT(line, 0);
      auto r = load(text);
      expect_names(r.status(), line, row.key,
                   fmt::format("{} {} ({}) = {}\n{}", label(row.sec), row.key, pmd, value, text));
      ++checked;
    }
  }
  EXPECT_GT(checked, 150u);
}

TEST(MalformedMatrix, UnknownKeyInEachSection) {
  for (Sec s : {Sec::kRun, Sec::kPool, Sec::kPort, Sec::kEndpoint, Sec::kLcore, Sec::kMetrics, Sec::kTap, Sec::kFilter}) {
    for (const auto& [pmd, base] : kDriverBase) {
      if (!driver_built(pmd) || (s != Sec::kPort && pmd != "synth")) continue;
      Doc d(pmd);
      d.set(s, "no_such_key", "1");
      int line = 0;
      const std::string text = d.text(s, "no_such_key", &line);
      auto r = load(text);
      ASSERT_FALSE(r) << label(s) << " " << pmd;
      EXPECT_EQ(r.message().rfind(fmt::format("{}:{}:", kFile, line), 0), 0u) << r.message();
      EXPECT_NE(r.message().find("unknown key 'no_such_key'"), std::string::npos) << r.message();
      EXPECT_NE(r.message().find(label(s)), std::string::npos) << r.message();
    }
  }
  // And at the top level.
  auto r = load(Doc().text() + "no_such_table = 1\n");
  ASSERT_FALSE(r);
  EXPECT_NE(r.message().find("unknown key 'no_such_table'"), std::string::npos) << r.message();
}

// A second table of a kind, appended after the document; returns the line of its `name`.
int append(std::string& text, const std::string& table) {
  const int base = static_cast<int>(std::count(text.begin(), text.end(), '\n'));
  text += table;
  return base + 2;  // header, then name
}

TEST(MalformedMatrix, DuplicateNames) {
  {
    // The port names its pool: with two pools it must, and the duplicate is then the only problem.
    Doc d;
    d.set(Sec::kPort, "pool", "\"rx\"");
    std::string t = d.text();
    int line = append(t, "[[pools]]\nname = \"rx\"\n");
    auto r = load(t);
    expect_names(r.status(), line, "name", "duplicate pool");
    EXPECT_NE(r.message().find("pool name \"rx\" is already used by pools[0]"), std::string::npos) << r.message();
  }
  {
    std::string t = Doc().text();
    int line = append(t, "[[ports]]\nname = \"p\"\npmd = \"synth\"\n");
    auto r = load(t);
    expect_names(r.status(), line, "name", "duplicate port");
    EXPECT_NE(r.message().find("port name \"p\" is already used"), std::string::npos) << r.message();
  }
  {
    std::string t = Doc().text();
    int line = append(t, "[[endpoints]]\nname = \"rest\"\naction = \"sink\"\nmatch = [\"udp\"]\n");
    auto r = load(t);
    expect_names(r.status(), line, "name", "duplicate endpoint");
    EXPECT_NE(r.message().find("endpoint name \"rest\" is already used"), std::string::npos) << r.message();
  }
  {
    // Lcores have no names: two on one CPU, or two polling one queue, are their duplicates.
    Doc d;
    d.set(Sec::kLcore, "cpu", "1");
    std::string t = d.text();
    const int base = static_cast<int>(std::count(t.begin(), t.end(), '\n'));
    t += "[[lcores]]\ncpu = 1\nrx = [\"p:0\"]\n";
    auto r = load(t);
    expect_names(r.status(), base + 2, "cpu", "two lcores on one cpu");
    EXPECT_NE(r.message().find("cpu 1 is already polled by lcores[0]"), std::string::npos) << r.message();
    std::string t2 = Doc().text();
    const int base2 = static_cast<int>(std::count(t2.begin(), t2.end(), '\n'));
    t2 += "[[lcores]]\nrx = [\"p:0\"]\n";
    auto r2 = load(t2);
    expect_names(r2.status(), base2 + 2, "rx", "one queue, two lcores");
    EXPECT_NE(r2.message().find("is already polled by lcores[0]"), std::string::npos) << r2.message();
  }
}

TEST(MalformedMatrix, DanglingReferences) {
  struct Case {
    Sec sec;
    const char* key;
    const char* value;
    const char* says;
  } cases[] = {
      {Sec::kEndpoint, "match", "[\"udp port nope\"]", "no [[ports]] table is named \"nope\""},
      {Sec::kLcore, "rx", "[\"nope:0\"]", "no [[ports]] table is named \"nope\""},
      {Sec::kLcore, "rx", "[\"p:3\"]", "port \"p\" has 1 rx queue"},
      {Sec::kRun, "default_endpoint", "\"nope\"", "no [[endpoints]] table is named \"nope\""},
      {Sec::kPort, "pool", "\"nope\"", "no [[pools]] table is named \"nope\""},
  };
  for (const Case& c : cases) {
    Doc d;
    d.set(c.sec, c.key, c.value);
    int line = 0;
    std::string t = d.text(c.sec, c.key, &line);
    auto r = load(t);
    expect_names(r.status(), line, c.key, fmt::format("{} {} = {}", label(c.sec), c.key, c.value));
    EXPECT_NE(r.message().find(c.says), std::string::npos) << r.message();
  }
  // A forward endpoint naming a missing port.
  Doc d;
  d.set(Sec::kEndpoint, "action", "\"forward\"");
  d.set(Sec::kEndpoint, "port", "\"nope\"");
  int line = 0;
  auto r = load(d.text(Sec::kEndpoint, "port", &line));
  expect_names(r.status(), line, "port", "forward to a missing port");
  EXPECT_NE(r.message().find("no [[ports]] table is named \"nope\""), std::string::npos) << r.message();
}

TEST(MalformedMatrix, LcoreCpuBeyondTheMachine) {
  Doc d;
  d.set(Sec::kLcore, "cpu", "4");  // options() says the machine has 4 CPUs: 0..3
  int line = 0;
  auto r = load(d.text(Sec::kLcore, "cpu", &line));
  expect_names(r.status(), line, "cpu", "cpu 4 of 4");
  EXPECT_NE(r.message().find("cpu 4 is beyond this machine's 4 CPUs (0 to 3)"), std::string::npos) << r.message();
  d.set(Sec::kLcore, "cpu", "3");
  EXPECT_TRUE(load(d.text())) << "cpu 3 exists";
}

// Every key a sample config uses has a row above (so a new key has to bring its own).
TEST(MalformedMatrix, EverySampleConfigKeyHasARow) {
  const fs::path root = rawpipe::test::source_dir();
  ASSERT_FALSE(root.empty());
  std::map<std::string, Sec> sections = {{"run", Sec::kRun},
                                         {"pools", Sec::kPool},
                                         {"ports", Sec::kPort},
                                         {"endpoints", Sec::kEndpoint},
                                         {"lcores", Sec::kLcore},
                                         {"metrics", Sec::kMetrics},
                                         {"taps", Sec::kTap},
                                         {"filters", Sec::kFilter}};
  std::set<std::pair<int, std::string>> rows;
  for (const Row& r : kRows) rows.insert({static_cast<int>(r.sec), r.key});
  const std::regex header(R"(^\s*\[\[?\s*([A-Za-z0-9_.]+)\s*\]\]?)");
  const std::regex assignment(R"(^\s*([A-Za-z0-9_]+)\s*=)");
  unsigned keys = 0;
  for (const auto& e : fs::directory_iterator(root / "configs")) {
    if (e.path().extension() != ".toml") continue;
    std::ifstream in(e.path());
    std::string line, section;
    int n = 0;
    while (std::getline(in, line)) {
      ++n;
      std::smatch m;
      if (std::regex_search(line, m, header)) {
        section = m[1];
        continue;
      }
      if (!std::regex_search(line, m, assignment)) continue;
      // A plugin's own config sub-table belongs to the plugin, not to the loader.
      if (section.ends_with(".config")) continue;
      ++keys;
      auto it = sections.find(section);
      EXPECT_TRUE(it != sections.end()) << e.path().filename().string() << ":" << n << ": section [" << section
                                    << "] has no rows in tests/unit/config/malformed_matrix_test.cc; add the section to Doc and its keys to kRows";
      if (it == sections.end()) continue;
      EXPECT_TRUE(rows.count({static_cast<int>(it->second), m[1]}))
          << e.path().filename().string() << ":" << n << ": key '" << m[1].str() << "' of [" << section
          << "] has no row in tests/unit/config/malformed_matrix_test.cc";
    }
  }
  EXPECT_GT(keys, 20u);
}

}  // namespace
}  // namespace rawpipe
