#include "services/doctor/host_text.hh"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdlib>

#include <fmt/format.h>

namespace rawpipe::doctor {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\n')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\n' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  while (true) {
    const std::size_t at = s.find(sep);
    out.push_back(s.substr(0, at));
    if (at == std::string_view::npos) break;
    s.remove_prefix(at + 1);
  }
  return out;
}

// Mount fields escape space, tab, newline and backslash as \ooo.
std::string unescape(std::string_view s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 3 < s.size() &&
        std::all_of(s.begin() + i + 1, s.begin() + i + 4, [](char c) { return c >= '0' && c <= '7'; })) {
      out += static_cast<char>((s[i + 1] - '0') * 64 + (s[i + 2] - '0') * 8 + (s[i + 3] - '0'));
      i += 3;
    } else {
      out += s[i];
    }
  }
  return out;
}

bool to_int(std::string_view s, std::int64_t& v) {
  s = trim(s);
  if (s.empty()) return false;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  return ec == std::errc() && p == s.data() + s.size();
}

}  // namespace

std::vector<MountEntry> parse_mounts(std::string_view text) {
  std::vector<MountEntry> out;
  for (std::string_view line : split(text, '\n')) {
    std::vector<std::string_view> f;
    for (std::string_view w : split(trim(line), ' '))
      if (!w.empty()) f.push_back(w);
    if (f.size() < 4) continue;
    out.push_back({unescape(f[0]), unescape(f[1]), std::string(f[2]), std::string(f[3])});
  }
  return out;
}

const MountEntry* find_mount(const std::vector<MountEntry>& mounts, std::string_view type, std::string_view point) {
  for (const MountEntry& m : mounts)
    if (m.type == type && (point.empty() || m.point == point)) return &m;
  return nullptr;
}

Result<std::vector<int>> parse_cpu_list(std::string_view text) {
  std::vector<int> cpus;
  text = trim(text);
  if (text.empty()) return cpus;
  for (std::string_view part : split(text, ',')) {
    const std::size_t dash = part.find('-');
    std::int64_t lo = 0, hi = 0;
    if (dash == std::string_view::npos) {
      if (!to_int(part, lo)) return Status::errorf("bad CPU list '{}'", text);
      hi = lo;
    } else if (!to_int(part.substr(0, dash), lo) || !to_int(part.substr(dash + 1), hi)) {
      return Status::errorf("bad CPU list '{}'", text);
    }
    if (lo < 0 || hi < lo || hi > 65535) return Status::errorf("bad CPU range '{}' in '{}'", part, text);
    for (std::int64_t c = lo; c <= hi; ++c) cpus.push_back(static_cast<int>(c));
  }
  std::sort(cpus.begin(), cpus.end());
  cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
  return cpus;
}

std::string format_cpu_list(const std::vector<int>& cpus) {
  std::string out;
  for (std::size_t i = 0; i < cpus.size();) {
    std::size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += j == i ? std::to_string(cpus[i]) : std::to_string(cpus[i]) + "-" + std::to_string(cpus[j]);
    i = j + 1;
  }
  return out;
}

std::map<std::string, std::uint64_t, std::less<>> parse_meminfo(std::string_view text) {
  std::map<std::string, std::uint64_t, std::less<>> out;
  for (std::string_view line : split(text, '\n')) {
    const std::size_t colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    std::string_view value = trim(line.substr(colon + 1));
    if (value.ends_with(" kB")) value.remove_suffix(3);
    std::int64_t v = 0;
    if (to_int(value, v) && v >= 0) out[std::string(trim(line.substr(0, colon)))] = static_cast<std::uint64_t>(v);
  }
  return out;
}

std::vector<TcpSocketEntry> parse_proc_net_tcp(std::string_view text) {
  std::vector<TcpSocketEntry> out;
  for (std::string_view line : split(text, '\n')) {
    // "  0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000  0  0 12345 ..."
    std::vector<std::string_view> f;
    for (std::string_view w : split(trim(line), ' '))
      if (!w.empty()) f.push_back(w);
    if (f.size() < 10 || !f[0].ends_with(':')) continue;  // the header line
    const std::size_t colon = f[1].find(':');
    if (colon == std::string_view::npos) continue;
    TcpSocketEntry e;
    e.local_hex = std::string(f[1].substr(0, colon));
    unsigned long port = 0, state = 0;
    unsigned long long inode = 0;
    const std::string port_text(f[1].substr(colon + 1)), state_text(f[3]), inode_text(f[9]);
    char* end = nullptr;
    port = std::strtoul(port_text.c_str(), &end, 16);
    if (*end || port > 65535) continue;
    state = std::strtoul(state_text.c_str(), &end, 16);
    if (*end || state > 255) continue;
    inode = std::strtoull(inode_text.c_str(), &end, 10);
    if (*end) continue;
    e.port = static_cast<std::uint16_t>(port);
    e.state = static_cast<std::uint8_t>(state);
    e.inode = inode;
    out.push_back(std::move(e));
  }
  return out;
}

bool tcp_listener_blocks(const TcpSocketEntry& e, std::uint32_t addr_be, std::uint16_t port) {
  if (e.port != port) return false;
  // The kernel prints each 32-bit word of the address as a host-order integer.
  const std::string want = fmt::format("{:08X}", addr_be);
  auto v4_blocks = [&](std::string_view hex) { return addr_be == 0 || hex == "00000000" || hex == want; };
  if (e.local_hex.size() == 8) return v4_blocks(e.local_hex);
  // An IPv6 listener on :: (not v6only) also holds the IPv4 port; ::ffff:a.b.c.d is an IPv4 one.
  if (e.local_hex == std::string(32, '0')) return true;
  constexpr std::string_view kMapped = "0000000000000000FFFF0000";
  return e.local_hex.size() == 32 && std::string_view(e.local_hex).starts_with(kMapped) &&
         v4_blocks(std::string_view(e.local_hex).substr(kMapped.size()));
}

Result<std::int64_t> parse_sysfs_int(std::string_view text) {
  std::int64_t v = 0;
  if (!to_int(text, v)) return Status::errorf("expected a number, got '{}'", trim(text));
  return v;
}

std::vector<int> cmdline_cpus(std::string_view cmdline, std::string_view param, const std::vector<int>& online) {
  std::vector<int> last;  // the kernel takes the last occurrence of a parameter
  std::size_t i = 0;
  while (i < cmdline.size()) {
    while (i < cmdline.size() && (cmdline[i] == ' ' || cmdline[i] == '\n' || cmdline[i] == '\t')) ++i;
    std::size_t end = i;
    while (end < cmdline.size() && cmdline[end] != ' ' && cmdline[end] != '\n' && cmdline[end] != '\t') ++end;
    std::string_view word = cmdline.substr(i, end - i);
    i = end;
    if (!word.starts_with(param) || word.size() <= param.size() || word[param.size()] != '=') continue;
    std::string_view value = word.substr(param.size() + 1);
    // isolcpus=[flag,...,]cpu-list: flags are words ("nohz", "domain", "managed_irq").
    while (!value.empty() && !std::isdigit(static_cast<unsigned char>(value.front())) && !value.starts_with("all")) {
      const std::size_t comma = value.find(',');
      value = comma == std::string_view::npos ? std::string_view() : value.substr(comma + 1);
    }
    if (value == "all") {
      last = online;
      continue;
    }
    auto cpus = parse_cpu_list(value);
    last = cpus ? cpus.value() : std::vector<int>();
  }
  return last;
}

}  // namespace rawpipe::doctor
