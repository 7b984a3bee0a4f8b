#include "pipeline/extra/extra.hh"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "pipeline/buf/audit.hh"
#include "pipeline/buf/pool.hh"
#include "pipeline/filter/filter.hh"

namespace rawpipe {
namespace {

thread_local std::string t_api_error;  // rawpipe_get_api / create failures (no handle to hold them)

std::mutex g_load_mu;
LoadOptions g_load;  // guarded by g_load_mu
PoolMemoryProvider g_alloc;  // guarded by g_load_mu
std::uint32_t g_alloc_flags = 0;  // guarded by g_load_mu

int fail(rawpipe_pipeline* h, const std::string& msg) {
  if (h) h->error = msg;
  return -1;
}

bool endpoint_ok(rawpipe_pipeline* h, std::uint16_t ep) {
  if (ep < h->pipeline->endpoint_count()) return true;
  h->error = fmt::format("endpoint id {} does not exist (there are {})", ep, h->pipeline->endpoint_count());
  return false;
}

rawpipe_pipeline* api_create(const char* file) {
  LoadOptions opts;
  PoolMemoryProvider alloc;
  std::uint32_t alloc_flags;
  {
    std::lock_guard lock(g_load_mu);
    opts = g_load;
    alloc = g_alloc;
    alloc_flags = g_alloc_flags;
  }
  auto loaded = load_config(file ? file : "", opts);
  if (!loaded) {
    t_api_error = loaded.message();
    return nullptr;
  }
  Plan& plan = loaded.value().plan;
  if (alloc.alloc) {
    for (PoolPlan& pool : plan.pools) {
      bool rx = false;
      for (const PortPlan& port : plan.ports) rx |= port.pool == pool.config.name;
      if (alloc_flags & (rx ? RAWPIPE_ALLOC_RX : RAWPIPE_ALLOC_TX)) pool.config.provider = alloc;
    }
  }
  auto p = Pipeline::create(plan);
  if (!p) {
    t_api_error = p.message();
    return nullptr;
  }
  rawpipe_pipeline* h = extra_wrap(*p.value());
  h->owned = std::move(p).value();
  return h;
}

int api_start(rawpipe_pipeline* h) {
  Status s = h->pipeline->start();
  return s ? 0 : fail(h, s.message());
}

int api_stop(rawpipe_pipeline* h) {
  Status s = h->pipeline->stop();
  return s ? 0 : fail(h, s.message());
}

void api_destroy(rawpipe_pipeline* h) {
  if (!h) return;
  // Plugins' callbacks may run on lcores until they stop; their code and state go away below.
  if (h->owned || (!h->plugins.empty() && h->pipeline->running())) (void)h->pipeline->stop();
  Pipeline& p = *h->pipeline;
  if (!h->plugins.empty()) {
    for (std::uint16_t e = 0; e < p.endpoint_count(); ++e) (void)p.filters().set_endpoint_filter(e, {});
    for (std::uint16_t port = 0; port < p.port_count(); ++port)
      for (std::uint16_t q = 0; q < p.plan().ports[port].rx_queues; ++q) (void)p.filters().set_queue_filter(port, q, {});
  }
  h->plugins.clear();
  delete h;
}

const char* api_last_error(const rawpipe_pipeline* h) { return h ? h->error.c_str() : t_api_error.c_str(); }

int api_endpoint_id(const rawpipe_pipeline* h, const char* name) {
  auto id = h->pipeline->endpoint_id(name ? name : "");
  return id ? *id : -1;
}

int api_endpoint_filter(rawpipe_pipeline* h, std::uint16_t ep, rawpipe_filter_fn fn, rawpipe_filter_burst_fn burst,
                        void* ctx) {
  Status s = h->pipeline->filters().set_endpoint_filter(ep, {fn, burst, ctx});
  return s ? 0 : fail(h, s.message());
}

int api_queue_filter(rawpipe_pipeline* h, std::uint16_t port, std::uint16_t queue, rawpipe_filter_fn fn,
                     rawpipe_filter_burst_fn burst, void* ctx) {
  Status s = h->pipeline->filters().set_queue_filter(port, queue, {fn, burst, ctx});
  return s ? 0 : fail(h, s.message());
}

int api_recvfrom_zcopy(rawpipe_pipeline* h, std::uint16_t ep, rawpipe_packet* out, unsigned max) {
  if (!endpoint_ok(h, ep)) return -1;
  Mbuf* got[kMaxBurst];
  unsigned total = 0;
  while (total < max) {
    const unsigned want = std::min<unsigned>(max - total, kMaxBurst);
    const unsigned k = h->pipeline->endpoint_receive(ep, got, want);
    audit_handout(got, k, AuditOwner::kApp, ep, AuditSite::kRecvfromZcopy);
    for (unsigned i = 0; i < k; ++i) describe_packet(got[i], &out[total + i]);
    total += k;
    if (k < want) break;
  }
  return static_cast<int>(total);
}

// Like XLIO's free_packets, the buffers go back through the ring they came from: runs of one
// endpoint are released to the lcores that queued them (Pipeline::endpoint_release), which free
// them where their headers are cached.
void api_free_packets(rawpipe_pipeline* h, const rawpipe_packet* pkts, unsigned n) {
  Mbuf* batch[kMaxBurst];
  unsigned k = 0;
  std::uint16_t run_endpoint = 0;
  auto flush = [&] {
    if (h)
      h->pipeline->endpoint_release(run_endpoint, batch, k);
    else
      mbuf_free_bulk(batch, k);
    k = 0;
  };
  for (unsigned i = 0; i < n; ++i) {
    if (k == kMaxBurst || (k && pkts[i].endpoint != run_endpoint)) flush();
    run_endpoint = pkts[i].endpoint;
    batch[k++] = static_cast<Mbuf*>(pkts[i].handle);
  }
  if (k) flush();
}

long api_recv(rawpipe_pipeline* h, std::uint16_t ep, void* buf, std::size_t len, rawpipe_addr* src) {
  if (!endpoint_ok(h, ep)) return -1;
  Mbuf* m;
  if (h->pipeline->endpoint_receive(ep, &m, 1) == 0) return 0;
  audit_handout(&m, 1, AuditOwner::kApp, ep, AuditSite::kRecv);
  rawpipe_packet d;
  describe_packet(m, &d);
  const std::size_t n = std::min(len, d.payload.iov_len);
  std::memcpy(buf, d.payload.iov_base, n);
  if (src) *src = d.src;
  mbuf_free(m);
  return static_cast<long>(n);
}

int api_set_user_data(rawpipe_pipeline* h, std::uint16_t ep, std::uint64_t v) {
  if (!endpoint_ok(h, ep)) return -1;
  h->user_data[ep] = v;
  return 0;
}

int api_poll(rawpipe_pipeline* h, std::uint16_t ep, rawpipe_completion* out, unsigned max) {
  Pipeline& p = *h->pipeline;
  const std::uint16_t n_ep = static_cast<std::uint16_t>(p.endpoint_count());
  Mbuf* got[kMaxBurst];
  unsigned total = 0;
  auto take = [&](std::uint16_t e) {
    while (total < max) {
      const unsigned want = std::min<unsigned>(max - total, kMaxBurst);
      const unsigned k = p.endpoint_receive(e, got, want);
      audit_handout(got, k, AuditOwner::kApp, e, AuditSite::kPoll);
      for (unsigned i = 0; i < k; ++i) {
        describe_packet(got[i], &out[total + i].packet);
        out[total + i].user_data = h->user_data[e];
      }
      total += k;
      if (k < want) break;
    }
  };
  if (ep != RAWPIPE_ANY_ENDPOINT) {
    if (!endpoint_ok(h, ep)) return -1;
    take(ep);
    return static_cast<int>(total);
  }
  // Whole ring set: start one endpoint further each call so no endpoint starves another.
  for (std::uint16_t i = 0; i < n_ep && total < max; ++i) take(static_cast<std::uint16_t>((h->next_endpoint + i) % n_ep));
  if (n_ep) h->next_endpoint = static_cast<std::uint16_t>((h->next_endpoint + 1) % n_ep);
  return static_cast<int>(total);
}

void api_ref_buff(void* handle) { mbuf_ref(static_cast<Mbuf*>(handle)); }
void api_free_buff(void* handle) { mbuf_free(static_cast<Mbuf*>(handle)); }

long api_add_conf_rule(rawpipe_pipeline* h, const char* line) {
  auto parsed = parse_conf_rule(*h->pipeline, line ? line : "");
  if (!parsed) return fail(h, parsed.message());
  auto id = h->pipeline->add_rule(parsed.value().first, parsed.value().second);
  if (!id) return fail(h, id.message());
  return static_cast<long>(id.value());
}

int api_remove_rule(rawpipe_pipeline* h, std::uint32_t id) {
  Status s = h->pipeline->remove_rule(id);
  return s ? 0 : fail(h, s.message());
}

int log_threshold() {
  const char* v = std::getenv("RAWPIPE_LOG_LEVEL");
  if (!v || !*v) return RAWPIPE_LOG_INFO;
  if (!std::strcmp(v, "error")) return RAWPIPE_LOG_ERROR;
  if (!std::strcmp(v, "warn")) return RAWPIPE_LOG_WARN;
  if (!std::strcmp(v, "info")) return RAWPIPE_LOG_INFO;
  if (!std::strcmp(v, "debug")) return RAWPIPE_LOG_DEBUG;
  return std::atoi(v);
}

constexpr const char* kActionNames[] = {"ring", "sink", "echo", "forward"};

int api_dump_fd_stats(rawpipe_pipeline* h, std::uint16_t ep, int level) {
  Pipeline& p = *h->pipeline;
  if (ep != RAWPIPE_ANY_ENDPOINT && !endpoint_ok(h, ep)) return -1;
  if (level > log_threshold()) return 0;
  PipelineSnapshot s = p.snapshot();
  std::vector<std::size_t> rules(p.endpoint_count(), 0);
  for (const RuleInfo& r : p.rules())
    if (r.endpoint < rules.size()) ++rules[r.endpoint];
  for (std::uint16_t e = 0; e < p.endpoint_count(); ++e) {
    if (ep != RAWPIPE_ANY_ENDPOINT && e != ep) continue;
    const EndpointPlan& plan = p.plan().endpoints[e];
    std::fputs(fmt::format("rawpipe: endpoint {} '{}' ({}): delivered {} rules {} user_data {}\n", e, plan.name,
                           kActionNames[static_cast<unsigned>(plan.action)], s.delivered_per_endpoint[e], rules[e],
                           h->user_data[e])
                   .c_str(),
               stderr);
  }
  return 0;
}

int api_load_filter_plugin(rawpipe_pipeline* h, const char* path, const char* attach, const char* const* keys,
                           const char* const* values, unsigned n);
int api_plugin_report(rawpipe_pipeline* h, int plugin, char* buf, std::size_t len);

int api_set_allocator(rawpipe_alloc_fn alloc, rawpipe_free_fn free_fn, void* ctx, std::uint32_t flags) {
  if (alloc && (!free_fn || flags == 0 || (flags & ~(RAWPIPE_ALLOC_RX | RAWPIPE_ALLOC_TX)))) {
    t_api_error = "set_allocator: give alloc and free and flags made of RAWPIPE_ALLOC_RX / RAWPIPE_ALLOC_TX";
    return -1;
  }
  std::lock_guard lock(g_load_mu);
  g_alloc = alloc ? PoolMemoryProvider{alloc, free_fn, ctx} : PoolMemoryProvider{};
  g_alloc_flags = alloc ? flags : 0;
  return 0;
}

int api_set_endpoint_offload(rawpipe_pipeline* h, std::uint16_t ep, int on) {
  Status s = h->pipeline->set_endpoint_offload(ep, on != 0);
  return s ? 0 : fail(h, s.message());
}

constexpr rawpipe_api_t kApi = {
    RAWPIPE_EXTRA_ABI_VERSION,
    sizeof(rawpipe_api_t),
    RAWPIPE_CAP_FILTERS | RAWPIPE_CAP_ZCOPY_RECV | RAWPIPE_CAP_COMPLETIONS | RAWPIPE_CAP_RULES | RAWPIPE_CAP_STATS |
        RAWPIPE_CAP_PLUGINS | RAWPIPE_CAP_ALLOCATOR | RAWPIPE_CAP_OFFLOAD,
    &api_create,
    &api_start,
    &api_stop,
    &api_destroy,
    &api_last_error,
    &api_endpoint_id,
    &api_endpoint_filter,
    &api_queue_filter,
    &api_recvfrom_zcopy,
    &api_free_packets,
    &api_recv,
    &api_set_user_data,
    &api_poll,
    &api_ref_buff,
    &api_free_buff,
    &api_add_conf_rule,
    &api_remove_rule,
    &api_dump_fd_stats,
    &api_load_filter_plugin,
    &api_plugin_report,
    &api_set_allocator,
    &api_set_endpoint_offload,
};

int api_load_filter_plugin(rawpipe_pipeline* h, const char* path, const char* attach, const char* const* keys,
                           const char* const* values, unsigned n) {
  auto where = parse_filter_attach(*h->pipeline, attach ? attach : "");
  if (!where) return fail(h, where.message());
  std::vector<std::pair<std::string, std::string>> config;
  for (unsigned i = 0; i < n; ++i) config.emplace_back(keys[i] ? keys[i] : "", values[i] ? values[i] : "");
  auto plugin = FilterPlugin::load(path ? path : "", &kApi, config);
  if (!plugin) return fail(h, plugin.message());
  const FilterAttach& a = where.value();
  FilterFn f = plugin.value()->filter();
  Status s = a.queue ? h->pipeline->filters().set_queue_filter(a.port, a.rx_queue, f)
                     : h->pipeline->filters().set_endpoint_filter(a.endpoint, f);
  if (!s) return fail(h, s.message());
  h->plugins.push_back(std::move(plugin).value());
  return static_cast<int>(h->plugins.size() - 1);
}

int api_plugin_report(rawpipe_pipeline* h, int plugin, char* buf, std::size_t len) {
  if (plugin < 0 || static_cast<std::size_t>(plugin) >= h->plugins.size())
    return fail(h, fmt::format("plugin {} was not loaded (there are {})", plugin, h->plugins.size()));
  std::string r = h->plugins[static_cast<std::size_t>(plugin)]->report();
  if (len) {
    const std::size_t n = std::min(len - 1, r.size());
    std::memcpy(buf, r.data(), n);
    buf[n] = '\0';
  }
  return static_cast<int>(r.size());
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\n')) s.remove_suffix(1);
  return s;
}

}  // namespace

rawpipe_pipeline* extra_wrap(Pipeline& pipeline) {
  auto* h = new rawpipe_pipeline;
  h->pipeline = &pipeline;
  h->user_data.assign(pipeline.endpoint_count(), 0);
  return h;
}

void extra_set_load_options(const LoadOptions& options) {
  std::lock_guard lock(g_load_mu);
  g_load = options;
}

Result<std::pair<std::uint16_t, std::string>> parse_conf_rule(const Pipeline& p, std::string_view line) {
  const std::size_t colon = line.find(':');
  if (colon == std::string_view::npos)
    return Status::errorf("rule line '{}': expected 'ENDPOINT: RULE', e.g. 'md: udp dst 239.1.1.1:5000'", line);
  const std::string_view name = trim(line.substr(0, colon));
  const std::string_view rule = trim(line.substr(colon + 1));
  auto id = p.endpoint_id(name);
  if (!id) return Status::errorf("rule line '{}': no endpoint named '{}'", line, name);
  if (rule.empty()) return Status::errorf("rule line '{}': the rule after ':' is empty", line);
  return std::make_pair(*id, std::string(rule));
}

Result<FilterAttach> parse_filter_attach(const Pipeline& p, std::string_view text) {
  text = trim(text);
  FilterAttach a;
  if (text.starts_with("endpoint ")) {
    const std::string_view name = trim(text.substr(9));
    auto id = p.endpoint_id(name);
    if (!id) return Status::errorf("filter attachment '{}': no endpoint named '{}'", text, name);
    a.endpoint = *id;
    return a;
  }
  if (text.starts_with("queue ")) {
    const std::string_view pq = trim(text.substr(6));
    const std::size_t colon = pq.rfind(':');
    if (colon == std::string_view::npos)
      return Status::errorf("filter attachment '{}': expected 'queue PORT:QUEUE'", text);
    const std::string port_name(pq.substr(0, colon));
    auto port = p.port_id(port_name);
    if (!port) return Status::errorf("filter attachment '{}': no port named '{}'", text, port_name);
    const std::string q(pq.substr(colon + 1));
    char* end = nullptr;
    const unsigned long qn = std::strtoul(q.c_str(), &end, 10);
    if (q.empty() || *end != '\0' || qn >= p.plan().ports[*port].rx_queues)
      return Status::errorf("filter attachment '{}': port '{}' has {} rx queue(s); '{}' is not one of them", text,
                            port_name, p.plan().ports[*port].rx_queues, q);
    a.queue = true;
    a.port = *port;
    a.rx_queue = static_cast<std::uint16_t>(qn);
    return a;
  }
  return Status::errorf("filter attachment '{}': expected 'endpoint NAME' or 'queue PORT:QUEUE'", text);
}

}  // namespace rawpipe

extern "C" const rawpipe_api_t* rawpipe_get_api(std::uint32_t abi_version) {
  if (abi_version != RAWPIPE_EXTRA_ABI_VERSION) {
    rawpipe::t_api_error = fmt::format("the caller asks for Extra API ABI version {}, this rawpipe provides version {}",
                                       abi_version, RAWPIPE_EXTRA_ABI_VERSION);
    return nullptr;
  }
  return &rawpipe::kApi;
}

extern "C" const char* rawpipe_api_error(void) { return rawpipe::t_api_error.c_str(); }
