#include "services/doctor/needs.hh"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "pipeline/config/section.hh"

namespace rawpipe::doctor {
namespace {

std::string where(const SourceLocation& w) { return fmt::format("{}:{}", w.file, w.line); }

std::uint64_t region_bytes(const PoolConfig& c) {
  const std::uint64_t raw = std::uint64_t(c.count) * (c.buf_size + (c.exact_stride ? 0u : kCacheLine));
  return (raw + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes;
}

}  // namespace

bool pmd_uses_interface(std::string_view pmd) {
  return pmd == "af_xdp" || pmd == "af_packet" || pmd == "mlx5" || pmd == "mana" || pmd == "auto" || pmd == "socket";
}

Result<Needs> needs_from_text(std::string_view text, const std::string& file, const LoadOptions& options) {
  auto loaded = load_config_string(text, file, options);
  if (!loaded) return loaded.status();
  const Plan& plan = loaded->plan;
  Needs n;
  n.config = file;
  n.pools.reserve(plan.pools.size());
  for (const PoolPlan& p : plan.pools)
    n.pools.push_back({p.config.name, region_bytes(p.config), p.config.buf_size, p.config.huge_pages, where(p.where)});

  // The driver keys again, by position: the loader kept [[ports]] order in plan.ports (a table
  // without a known driver fails the load above, so positions match).
  auto doc = ConfigSection::parse_string(text, file);
  if (!doc) return doc.status();
  std::vector<ConfigSection> tables = doc->table_array("ports");
  for (std::size_t i = 0; i < plan.ports.size(); ++i) {
    const PortPlan& p = plan.ports[i];
    PortNeed need;
    need.name = p.name;
    need.pmd = p.pmd;
    need.rx_queues = p.rx_queues;
    need.tx_queues = p.tx_queues;
    need.where = where(p.where);
    for (const PoolNeed& pool : n.pools)
      if (pool.name == p.pool) need.pool = &pool;
    if (i < tables.size()) {
      ConfigSection& t = tables[i];
      if (t.has("interface")) need.interface = t.string("interface", "");
      if (t.has("queue_offset")) need.queue_offset = static_cast<std::uint32_t>(t.integer("queue_offset", 0, 1 << 20, 0));
      if (t.has("attach")) need.attach = t.string("attach", "auto");
      if (t.has("zero_copy")) need.zero_copy = t.string("zero_copy", "auto");
      if (t.has("rx_checksum")) need.rx_checksum = t.string("rx_checksum", "verify");
    }
    for (const LcorePlan& l : plan.lcores)
      if (std::any_of(l.rx.begin(), l.rx.end(), [&](const LcorePlan::RxQueue& q) { return q.port == p.id; }))
        need.lcores.push_back({l.id, l.cpu});
    n.ports.push_back(std::move(need));
  }
  for (const TapConfig& t : plan.taps) {
    std::filesystem::path path(t.path);
    std::filesystem::path dir = path.parent_path();
    n.taps.push_back({t.name, t.path, dir.empty() ? std::string(".") : dir.string(), t.rotate_bytes, t.max_files});
  }
  n.metrics_listen = plan.metrics.listen;
  n.run_user = loaded->app.privilege.user;
  n.run_group = loaded->app.privilege.group;
  return n;
}

Result<Needs> needs_from_config(const std::string& file, const LoadOptions& options) {
  std::ifstream in(file);
  if (!in) return Status::errorf("cannot read config {}", file);
  std::stringstream ss;
  ss << in.rdbuf();
  return needs_from_text(ss.str(), file, options);
}

}  // namespace rawpipe::doctor
