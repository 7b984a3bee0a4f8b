#include "pipeline/extra/extra.hh"

#include <sys/epoll.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <array>
#include <atomic>
#include <filesystem>
#include <algorithm>
#include <mutex>
#include <thread>

#include "pipeline/buf/audit.hh"
#include "pipeline/buf/checked_free.hh"
#include "pipeline/buf/pool.hh"
#include "pipeline/dispatch/wake.hh"
#include "pipeline/extra/kept_pools.hh"
#include "pipeline/extra/stats_section.hh"
#include "pipeline/extra/wait.hh"
#include "pipeline/filter/filter.hh"
#include "pipeline/lcore/lcore.hh"
#include "pipeline/ops/publisher.hh"
#include "pipeline/send/frames.hh"
#include "pipeline/send/send_port.hh"
#include "pipeline/send/sendto.hh"

namespace rawpipe {
namespace {

thread_local std::string t_api_error;  // rawpipe_get_api / create failures (no handle to hold them)
// A handle's last error is kept per thread, as errno is: a sending thread, consumer threads and a
// control thread call into one handle at once, and one message shared by all of them was a data
// race on a std::string (a corrupted heap when two threads failed together).
thread_local const rawpipe_pipeline* t_error_handle = nullptr;
thread_local std::string t_handle_error;

void set_handle_error(const rawpipe_pipeline* h, const std::string& msg) {
  t_error_handle = h;
  t_handle_error = msg;
}

std::mutex g_load_mu;
LoadOptions g_load;  // guarded by g_load_mu
PoolMemoryProvider g_alloc;  // guarded by g_load_mu
std::uint32_t g_alloc_flags = 0;  // guarded by g_load_mu

constexpr const char* kActionNames[] = {"ring", "sink", "echo", "forward"};

// Refused calls (rawpipe_api_counters). Relaxed: statistics.
struct Misuse {
  std::atomic<std::uint64_t> bad_handle{0}, bad_argument{0}, free_null{0}, free_foreign{0}, free_already_free{0},
      free_payload_mapped{0}, from_callback{0};
};
Misuse g_misuse;

void count(std::atomic<std::uint64_t>& c) noexcept { c.fetch_add(1, std::memory_order_relaxed); }

// Live handles. A pointer the application passes is looked up here before it is dereferenced, so
// a NULL, destroyed or made-up handle is an error and not a crash. Lock-free: the receive calls
// check their handle too, and a scan of the few slots ever used costs a few loads.
constexpr unsigned kMaxHandles = 256;
std::array<std::atomic<rawpipe_pipeline*>, kMaxHandles> g_handles{};
std::atomic<unsigned> g_handles_high{0};
std::mutex g_handles_mu;  // serialises add/remove (control path)

bool handle_add(rawpipe_pipeline* h) {
  std::lock_guard lock(g_handles_mu);
  for (unsigned i = 0; i < kMaxHandles; ++i) {
    if (g_handles[i].load(std::memory_order_relaxed)) continue;
    g_handles[i].store(h, std::memory_order_release);
    if (g_handles_high.load(std::memory_order_relaxed) < i + 1) g_handles_high.store(i + 1, std::memory_order_release);
    return true;
  }
  return false;
}

void handle_remove(rawpipe_pipeline* h) {
  std::lock_guard lock(g_handles_mu);
  for (unsigned i = 0; i < kMaxHandles; ++i)
    if (g_handles[i].load(std::memory_order_relaxed) == h) g_handles[i].store(nullptr, std::memory_order_release);
}

bool handle_live(const rawpipe_pipeline* h) noexcept {
  if (!h) return false;
  const unsigned high = g_handles_high.load(std::memory_order_acquire);
  for (unsigned i = 0; i < high; ++i)
    if (g_handles[i].load(std::memory_order_acquire) == h) return true;
  return false;
}

// The handle check every entry point starts with; the message goes where last_error(NULL) reads.
bool check_handle(const rawpipe_pipeline* h, const char* call) {
  if (handle_live(h)) return true;
  count(g_misuse.bad_handle);
  t_api_error = h ? fmt::format("{}: {} is not a live rawpipe_pipeline handle (destroyed, or never returned by "
                                "create); nothing was done",
                                call, static_cast<const void*>(h))
                  : fmt::format("{}: the rawpipe_pipeline handle is NULL; pass the handle create() returned", call);
  return false;
}

// Calls that wait for lcores (start, stop, destroy) or load code and build pipelines (create,
// load_filter_plugin) are refused from a filter callback, at once: the lcore would wait for
// itself, or stall its queues for as long as the load takes.
bool refuse_on_lcore(rawpipe_pipeline* h, const char* call) {
  const int lcore = current_lcore();
  if (lcore < 0) return false;
  count(g_misuse.from_callback);
  const std::string msg = fmt::format(
      "{}: called from a filter callback on lcore {}; it would wait for the lcores (or stall this one), so it is "
      "refused: call it from a control thread",
      call, lcore);
  if (h && handle_live(h)) set_handle_error(h, msg);
  t_api_error = msg;
  return true;
}

int fail(rawpipe_pipeline* h, const std::string& msg) {
  if (h) set_handle_error(h, msg);
  return -1;
}

// Defined with the send calls below; stop and destroy call it first.
void wait_for_senders(Pipeline& p);

int bad_argument(rawpipe_pipeline* h, const std::string& msg) {
  count(g_misuse.bad_argument);
  return fail(h, msg);
}

bool endpoint_ok(rawpipe_pipeline* h, std::uint16_t ep) {
  if (ep < h->pipeline->endpoint_count()) return true;
  (void)bad_argument(h, fmt::format("endpoint id {} does not exist (there are {})", ep, h->pipeline->endpoint_count()));
  return false;
}

// Receive calls need an endpoint with a ring; sink, echo and forward endpoints have none, and
// "nothing waiting" from them would hide the mistake.
bool ring_endpoint_ok(rawpipe_pipeline* h, std::uint16_t ep, const char* call) {
  if (!endpoint_ok(h, ep)) {
    errno = EINVAL;
    return false;
  }
  const EndpointPlan& e = h->pipeline->plan().endpoints[ep];
  if (e.action == EndpointAction::kRing) return true;
  errno = EOPNOTSUPP;
  (void)bad_argument(h, fmt::format("{}: endpoint {} '{}' is a {} endpoint; only action = \"ring\" endpoints queue "
                                    "packets for the application",
                                    call, ep, e.name, kActionNames[static_cast<unsigned>(e.action)]));
  return false;
}

// The out-array check of the receive calls: NULL is fine only when nothing may be written.
bool array_ok(rawpipe_pipeline* h, const void* array, unsigned max, const char* call) {
  if (array || max == 0) return true;
  (void)bad_argument(h, fmt::format("{}: the array is NULL but max is {}", call, max));
  return false;
}

// Resolves an application pointer (a buffer handle, or a pointer into its data) to its buffer,
// counting and refusing what is not one; the message goes to *error.
Mbuf* resolve_checked(const void* p, std::string* error) {
  Mbuf* m = nullptr;
  switch (resolve_buffer(p, &m)) {
    case BufferCheck::kOk:
      break;
    case BufferCheck::kPayload:
      count(g_misuse.free_payload_mapped);
      break;
    case BufferCheck::kNull:
      count(g_misuse.free_null);
      *error = "the buffer handle is NULL";
      return nullptr;
    case BufferCheck::kForeign:
      count(g_misuse.free_foreign);
      *error = fmt::format("{} is no rawpipe buffer (it lies in no pool); pass rawpipe_packet.handle", p);
      return nullptr;
    case BufferCheck::kInsideHeader:
      count(g_misuse.free_foreign);
      *error = fmt::format("{} points into a buffer's header or between buffers, not at a buffer or its data; pass "
                           "rawpipe_packet.handle",
                           p);
      return nullptr;
    case BufferCheck::kBadHeader:
      count(g_misuse.free_foreign);
      *error = fmt::format("{} is where a buffer should start, but its header names another pool (overwritten?)", p);
      return nullptr;
  }
  return m;
}

// Resolves an application pointer to a buffer and drops one reference, refusing what is not a
// live buffer; the message goes to *error. kFree: the caller dropped the last reference and must
// free *out.
enum class Checked { kFree, kKept, kRefused };
Checked check_and_drop(const void* p, Mbuf** out, std::string* error) {
  Mbuf* m = resolve_checked(p, error);
  if (!m) return Checked::kRefused;
  switch (drop_reference_checked(m)) {
    case DropResult::kNotLast:
      return Checked::kKept;
    case DropResult::kLast:
      *out = m;
      return Checked::kFree;
    case DropResult::kAlreadyFree:
    case DropResult::kReleased:
      count(g_misuse.free_already_free);
      *error = fmt::format("buffer {} of pool '{}' is already free (a second free of the same packet)",
                           m->index, m->pool->name());
      return Checked::kRefused;
  }
  return Checked::kRefused;
}

rawpipe_pipeline* api_create(const char* file) {
  if (refuse_on_lcore(nullptr, "create")) return nullptr;
  kept_pools::reap_all();
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
      if (alloc_flags & (rx ? RAWPIPE_ALLOC_RX : (RAWPIPE_ALLOC_TX | RAWPIPE_ALLOC_TX_ZC))) pool.config.provider = alloc;
    }
  }
  auto p = Pipeline::create(plan);
  if (!p) {
    t_api_error = p.message();
    return nullptr;
  }
  rawpipe_pipeline* h = extra_wrap(*p.value());
  if (!h) return nullptr;
  h->owned = std::move(p).value();
  if (plan.metrics.stats_segment) {
    // The same segment rawpipe run publishes, named after the config file, so rawpipe stat
    // and /metrics readers see an embedded pipeline too. Without /dev/shm it runs without.
    h->publisher = std::make_unique<ops::StatsPublisher>();
    const std::string name = std::filesystem::path(plan.source).stem().string();
    const auto interval = std::chrono::milliseconds(std::max<long>(100, static_cast<long>(plan.stats_interval_s * 1000)));
    if (Status s = h->publisher->start(*h->owned, name, interval); !s) {
      std::fputs(fmt::format("rawpipe: live stats unavailable: {}\n", s.message()).c_str(), stderr);
      h->publisher.reset();
    }
  }
  return h;
}

int api_start(rawpipe_pipeline* h) {
  if (!check_handle(h, "start") || refuse_on_lcore(h, "start")) return -1;
  Status s = h->pipeline->start();
  return s ? 0 : fail(h, s.message());
}

int api_stop(rawpipe_pipeline* h) {
  if (!check_handle(h, "stop") || refuse_on_lcore(h, "stop")) return -1;
  wait_for_senders(*h->pipeline);
  Status s = h->pipeline->stop();
  return s ? 0 : fail(h, s.message());
}

// With buffers still held by the application, an owned pipeline is stopped and freed but its
// pools are kept until the last buffer comes back (kept_pools.hh): the handle is gone, the
// packets stay readable, and free_buff / free_packets(NULL, ...) return them.
int api_destroy(rawpipe_pipeline* h) {
  if (!check_handle(h, "destroy") || refuse_on_lcore(h, "destroy")) return -1;
  handle_remove(h);
  // Plugins' callbacks may run on lcores until they stop; their code and state go away below.
  if (h->owned || (!h->plugins.empty() && h->pipeline->running())) {
    wait_for_senders(*h->pipeline);
    (void)h->pipeline->stop();
  }
  if (h->publisher) {
    h->publisher->publish_now();  // the final figures, running = false
    h->publisher->stop();
    h->publisher.reset();
  }
  Pipeline& p = *h->pipeline;
  if (!h->plugins.empty()) {
    for (std::uint16_t e = 0; e < p.endpoint_count(); ++e) (void)p.filters().set_endpoint_filter(e, {});
    for (std::uint16_t port = 0; port < p.port_count(); ++port)
      for (std::uint16_t q = 0; q < p.plan().ports[port].rx_queues; ++q) (void)p.filters().set_queue_filter(port, q, {});
  }
  h->plugins.clear();
  if (h->owned) {
    // The config's own plugins may still hold packets: they free them when the pipeline goes,
    // so the pools are taken after that, with the ports closed first.
    std::unique_ptr<Pipeline> owned = std::move(h->owned);
    std::vector<std::unique_ptr<Pool>> pools = owned->release_pools();
    owned.reset();
    (void)kept_pools::keep(std::move(pools));
  }
  if (h->any_epoll_fd >= 0) ::close(h->any_epoll_fd);
  if (t_error_handle == h) t_error_handle = nullptr;
  delete h;
  kept_pools::reap_all();
  return 0;
}

const char* api_last_error(const rawpipe_pipeline* h) {
  if (!h || !handle_live(h)) return t_api_error.c_str();
  return t_error_handle == h ? t_handle_error.c_str() : "";
}

int api_endpoint_id(const rawpipe_pipeline* h, const char* name) {
  if (!check_handle(h, "endpoint_id")) return -1;
  auto* mh = const_cast<rawpipe_pipeline*>(h);
  if (!name) return bad_argument(mh, "endpoint_id: the name is NULL");
  auto id = h->pipeline->endpoint_id(name);
  if (!id) return fail(mh, fmt::format("endpoint_id: no endpoint named '{}'", name));
  return *id;
}

int api_endpoint_filter(rawpipe_pipeline* h, std::uint16_t ep, rawpipe_filter_fn fn, rawpipe_filter_burst_fn burst,
                        void* ctx) {
  if (!check_handle(h, "endpoint_filter")) return -1;
  if (!endpoint_ok(h, ep)) return -1;
  if (fn && burst) return bad_argument(h, "endpoint_filter: give a per-packet callback or a burst callback, not both");
  Status s = h->pipeline->filters().set_endpoint_filter(ep, {fn, burst, ctx});
  return s ? 0 : fail(h, s.message());
}

int api_queue_filter(rawpipe_pipeline* h, std::uint16_t port, std::uint16_t queue, rawpipe_filter_fn fn,
                     rawpipe_filter_burst_fn burst, void* ctx) {
  if (!check_handle(h, "queue_filter")) return -1;
  Status s = h->pipeline->filters().set_queue_filter(port, queue, {fn, burst, ctx});
  return s ? 0 : bad_argument(h, s.message());
}

int api_recvfrom_zcopy(rawpipe_pipeline* h, std::uint16_t ep, rawpipe_packet* out, unsigned max) {
  if (!check_handle(h, "recvfrom_zcopy")) return -1;
  if (!ring_endpoint_ok(h, ep, "recvfrom_zcopy") || !array_ok(h, out, max, "recvfrom_zcopy")) return -1;
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
// them where their headers are cached. Each handle is checked first (checked_free.hh): what
// reaches the lcore is a buffer whose last reference this call dropped, so a second free of it,
// before or after the lcore returned it to its pool, is refused here.
int api_free_packets(rawpipe_pipeline* h, const rawpipe_packet* pkts, unsigned n) {
  if (h && !check_handle(h, "free_packets")) return -1;
  if (!pkts && n) {
    count(g_misuse.bad_argument);
    const std::string msg = fmt::format("free_packets: the packet array is NULL but n is {}", n);
    if (h) set_handle_error(h, msg);
    t_api_error = msg;
    return -1;
  }
  Mbuf* batch[kMaxBurst];
  unsigned k = 0;
  unsigned refused = 0;
  std::string first_error;
  std::uint16_t run_endpoint = 0;
  auto flush = [&] {
    if (h) {
      h->pipeline->endpoint_release(run_endpoint, batch, k);
    } else {
      // Without a handle (after destroy) the buffers may belong to kept pools; their pools are
      // read before the buffers go back, since a reaped pool takes its headers with it.
      const Pool* pools[4];
      unsigned n_pools = 0;
      for (unsigned i = 0; i < k && n_pools < 4; ++i)
        if (n_pools == 0 || pools[n_pools - 1] != batch[i]->pool) pools[n_pools++] = batch[i]->pool;
      mbuf_free_bulk(batch, k);
      for (unsigned i = 0; i < n_pools; ++i) kept_pools::reap(pools[i]);
    }
    k = 0;
  };
  for (unsigned i = 0; i < n; ++i) {
    Mbuf* m = nullptr;
    std::string error;
    const Checked c = check_and_drop(pkts[i].handle, &m, &error);
    if (c == Checked::kRefused) {
      if (refused++ == 0) first_error = fmt::format("free_packets: packet {}: {}", i, error);
      continue;
    }
    if (c == Checked::kKept) continue;
    if (k == kMaxBurst || (k && pkts[i].endpoint != run_endpoint)) flush();
    run_endpoint = pkts[i].endpoint;
    batch[k++] = m;
  }
  if (k) flush();
  if (!refused) return 0;
  const std::string msg =
      refused == 1 ? first_error : fmt::format("{} (and {} more refused; the others were freed)", first_error, refused - 1);
  if (h) set_handle_error(h, msg);
  t_api_error = msg;
  return -1;
}

long api_recv(rawpipe_pipeline* h, std::uint16_t ep, void* buf, std::size_t len, rawpipe_addr* src) {
  if (!check_handle(h, "recv")) {
    errno = EBADF;
    return -1;
  }
  if (!ring_endpoint_ok(h, ep, "recv")) return -1;
  if (!buf && len) {
    errno = EINVAL;
    return bad_argument(h, fmt::format("recv: buf is NULL but len is {}", len));
  }
  Mbuf* m;
  if (h->pipeline->endpoint_receive(ep, &m, 1) == 0) {
    // As a non-blocking recvfrom: -1 with EAGAIN, so that 0 can mean an empty datagram.
    errno = EAGAIN;
    return -1;
  }
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
  if (!check_handle(h, "set_user_data")) return -1;
  if (!ring_endpoint_ok(h, ep, "set_user_data")) return -1;
  h->user_data[ep] = v;
  return 0;
}

int api_poll(rawpipe_pipeline* h, std::uint16_t ep, rawpipe_completion* out, unsigned max) {
  if (!check_handle(h, "poll")) return -1;
  if (!array_ok(h, out, max, "poll")) return -1;
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
    if (!ring_endpoint_ok(h, ep, "poll")) return -1;
    take(ep);
    return static_cast<int>(total);
  }
  // Whole ring set: start one endpoint further each call so no endpoint starves another.
  for (std::uint16_t i = 0; i < n_ep && total < max; ++i) take(static_cast<std::uint16_t>((h->next_endpoint + i) % n_ep));
  if (n_ep) h->next_endpoint = static_cast<std::uint16_t>((h->next_endpoint + 1) % n_ep);
  return static_cast<int>(total);
}

int api_ref_buff(void* handle) {
  std::string error;
  Mbuf* m = resolve_checked(handle, &error);
  if (!m) {
    t_api_error = "ref_buff: " + error;
    return -1;
  }
  if (add_reference_checked(m)) return 0;
  count(g_misuse.free_already_free);
  t_api_error = fmt::format("ref_buff: buffer {} of pool '{}' is free (or has {} holders already)", m->index,
                            m->pool->name(), kRefReleased - 1);
  return -1;
}

int api_free_buff(void* handle) {
  Mbuf* m = nullptr;
  std::string error;
  switch (check_and_drop(handle, &m, &error)) {
    case Checked::kFree: {
      const Pool* pool = m->pool;
      mbuf_free(m);
      kept_pools::reap(pool);
      return 0;
    }
    case Checked::kKept:
      return 0;
    case Checked::kRefused:
      break;
  }
  t_api_error = "free_buff: " + error;
  return -1;
}

long api_add_conf_rule(rawpipe_pipeline* h, const char* line) {
  if (!check_handle(h, "add_conf_rule")) return -1;
  if (!line) return bad_argument(h, "add_conf_rule: the rule line is NULL");
  auto parsed = parse_conf_rule(*h->pipeline, line);
  if (!parsed) return bad_argument(h, parsed.message());
  auto id = h->pipeline->add_rule(parsed.value().first, parsed.value().second);
  if (!id) return fail(h, id.message());
  return static_cast<long>(id.value());
}

int api_remove_rule(rawpipe_pipeline* h, std::uint32_t id) {
  if (!check_handle(h, "remove_rule")) return -1;
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


template <std::size_t N>
void copy_name(char (&dst)[N], const std::string& src) {
  const std::size_t n = std::min(N - 1, src.size());
  std::memcpy(dst, src.data(), n);
  dst[n] = '\0';
}

int api_get_stats(rawpipe_pipeline* h, rawpipe_stats* out) {
  if (!check_handle(h, "get_stats")) return -1;
  if (!out || out->size < offsetof(rawpipe_stats, endpoints))
    return bad_argument(h, "get_stats: pass a struct rawpipe_stats with size = sizeof(struct rawpipe_stats)");
  const Pipeline& p = *h->pipeline;
  const PipelineSnapshot s = p.snapshot();
  const std::uint32_t size = out->size;
  rawpipe_stats r{};
  r.size = size;
  static_assert(kDropReasonCount <= RAWPIPE_STATS_MAX_DROP_REASONS);
  r.n_drop_reasons = static_cast<std::uint32_t>(kDropReasonCount);
  r.rx_packets = s.total.rx_packets;
  r.rx_bytes = s.total.rx_bytes;
  r.delivered = s.total.delivered;
  r.transmitted = s.total.transmitted;
  for (std::size_t i = 0; i < kDropReasonCount; ++i) r.drops[i] = s.total.drops[i];
  r.dropped = s.total.dropped();
  // The caller's arrays: only fields inside the struct it has are read.
  auto has = [size](std::size_t end) { return end <= size; };
  if (has(offsetof(rawpipe_stats, n_endpoints) + sizeof r.n_endpoints)) {
    r.endpoints = out->endpoints;
    r.endpoints_max = out->endpoints ? out->endpoints_max : 0;
    r.n_endpoints = static_cast<std::uint32_t>(p.endpoint_count());
    for (std::uint16_t e = 0; e < p.endpoint_count() && e < r.endpoints_max; ++e) {
      rawpipe_endpoint_stats& d = r.endpoints[e];
      d = rawpipe_endpoint_stats{};
      const EndpointPlan& plan = p.plan().endpoints[e];
      copy_name(d.name, plan.name);
      d.id = e;
      d.action = static_cast<std::uint8_t>(plan.action);
      d.offloaded = p.endpoint_offloaded(e) ? 1 : 0;
      d.delivered = s.delivered_per_endpoint[e];
      d.queued = p.endpoint_queued(e);
      d.ring_full = s.ring_full_per_endpoint[e];
      if (const EndpointWake* w = p.endpoint_wake(e)) d.wakeups = w->wakeups.load(std::memory_order_relaxed);
    }
  }
  if (has(offsetof(rawpipe_stats, n_filters) + sizeof r.n_filters)) {
    const std::vector<FilterStats> fs = p.filters().stats();
    r.filters = out->filters;
    r.filters_max = out->filters ? out->filters_max : 0;
    r.n_filters = static_cast<std::uint32_t>(fs.size());
    for (std::size_t i = 0; i < fs.size() && i < r.filters_max; ++i) {
      rawpipe_filter_stats& d = r.filters[i];
      d = rawpipe_filter_stats{};
      copy_name(d.name, fs[i].name);
      d.on_queue = fs[i].at.on_queue;
      d.attached = fs[i].attached;
      d.endpoint = fs[i].at.endpoint;
      d.port = fs[i].at.port;
      d.queue = fs[i].at.queue;
      d.seen = fs[i].seen;
      d.recv = fs[i].recv;
      d.drop = fs[i].drop;
      d.hold = fs[i].hold;
      d.invalid = fs[i].invalid;
    }
  }
  if (has(offsetof(rawpipe_stats, n_pools) + sizeof r.n_pools)) {
    const Accounting a = p.accounting();
    r.pools = out->pools;
    r.pools_max = out->pools ? out->pools_max : 0;
    r.n_pools = static_cast<std::uint32_t>(a.pools.size());
    for (std::size_t i = 0; i < a.pools.size() && i < r.pools_max; ++i) {
      rawpipe_pool_stats& d = r.pools[i];
      d = rawpipe_pool_stats{};
      copy_name(d.name, a.pools[i].name);
      d.count = a.pools[i].count;
      d.outstanding = a.pools[i].outstanding;
    }
  }
  // Minor 1: the send counters (copied only as far as the caller's struct reaches).
  for (std::uint16_t port = 0; port < p.port_count(); ++port) {
    const SendStats ss = p.send_port(port)->stats();
    r.sent += ss.sent;
    r.sent_bytes += ss.sent_bytes;
    r.send_failed += ss.tx_failed;
    r.dummy_sends += ss.dummies;
    r.dummies_posted += ss.dummies_posted;
    r.neigh_solicits += ss.solicitations;
    r.unresolved += ss.unresolved;
    r.neigh_learned += ss.neigh_learned;
    r.send_refused += ss.ring_full;
  }
  std::memcpy(out, &r, std::min<std::size_t>(size, sizeof r));
  return 0;
}

const char* api_drop_reason_name(unsigned reason) {
  // The names are string_views over literals: NUL-terminated.
  return reason < kDropReasonCount ? kDropReasonNames[reason].data() : nullptr;
}

int api_dump_fd_stats(rawpipe_pipeline* h, std::uint16_t ep, int level) {
  if (!check_handle(h, "dump_fd_stats")) return -1;
  Pipeline& p = *h->pipeline;
  if (ep != RAWPIPE_ANY_ENDPOINT && !endpoint_ok(h, ep)) return -1;
  if (level > log_threshold()) return 0;
  PipelineSnapshot s = p.snapshot();
  std::vector<std::size_t> rules(p.endpoint_count(), 0);
  for (const RuleInfo& r : p.rules())
    if (r.endpoint < rules.size()) ++rules[r.endpoint];
  const std::vector<FilterStats> filters = level >= RAWPIPE_LOG_DEBUG ? p.filters().stats() : std::vector<FilterStats>{};
  for (std::uint16_t e = 0; e < p.endpoint_count(); ++e) {
    if (ep != RAWPIPE_ANY_ENDPOINT && e != ep) continue;
    const EndpointPlan& plan = p.plan().endpoints[e];
    std::string line = fmt::format("rawpipe: endpoint {} '{}' ({}): delivered {} queued {} ring_full {} rules {} user_data {}",
                                   e, plan.name, kActionNames[static_cast<unsigned>(plan.action)],
                                   s.delivered_per_endpoint[e], p.endpoint_queued(e), s.ring_full_per_endpoint[e],
                                   rules[e], h->user_data[e]);
    for (const FilterStats& f : filters)
      if (!f.at.on_queue && f.at.endpoint == e)
        line += fmt::format("; filter '{}'{}: seen {} recv {} drop {} hold {} invalid {}", f.name,
                            f.attached ? "" : " (removed)", f.seen, f.recv, f.drop, f.hold, f.invalid);
    line += "\n";
    std::fputs(line.c_str(), stderr);
  }
  return 0;
}

int api_load_filter_plugin(rawpipe_pipeline* h, const char* path, const char* attach, const char* const* keys,
                           const char* const* values, unsigned n);
int api_plugin_report(rawpipe_pipeline* h, int plugin, char* buf, std::size_t len);

int api_set_allocator(rawpipe_alloc_fn alloc, rawpipe_free_fn free_fn, void* ctx, std::uint32_t flags) {
  if (alloc && (!free_fn || flags == 0 || (flags & ~(RAWPIPE_ALLOC_RX | RAWPIPE_ALLOC_TX | RAWPIPE_ALLOC_TX_ZC)))) {
    count(g_misuse.bad_argument);
    t_api_error = fmt::format("set_allocator: give alloc and free and flags made of RAWPIPE_ALLOC_TX (1), "
                              "RAWPIPE_ALLOC_RX (2), RAWPIPE_ALLOC_TX_ZC (4); got alloc {} free {} flags {:#x}",
                              reinterpret_cast<void*>(alloc), reinterpret_cast<void*>(free_fn), flags);
    return -1;
  }
  std::lock_guard lock(g_load_mu);
  g_alloc = alloc ? PoolMemoryProvider{alloc, free_fn, ctx} : PoolMemoryProvider{};
  g_alloc_flags = alloc ? flags : 0;
  return 0;
}

int api_set_endpoint_offload(rawpipe_pipeline* h, std::uint16_t ep, int on) {
  if (!check_handle(h, "set_endpoint_offload")) return -1;
  if (!endpoint_ok(h, ep)) return -1;
  Status s = h->pipeline->set_endpoint_offload(ep, on != 0);
  return s ? 0 : fail(h, s.message());
}

int api_counters(rawpipe_api_counters* out) {
  constexpr std::size_t kFirst = offsetof(rawpipe_api_counters, bad_handle);
  if (!out || out->size < kFirst + sizeof(std::uint64_t)) {
    count(g_misuse.bad_argument);
    t_api_error = "api_counters: pass a struct rawpipe_api_counters with size = sizeof(struct rawpipe_api_counters)";
    return -1;
  }
  const std::uint64_t values[] = {g_misuse.bad_handle.load(), g_misuse.bad_argument.load(),
                                  g_misuse.free_null.load(), g_misuse.free_foreign.load(),
                                  g_misuse.free_already_free.load() + frees_of_free_buffers(),
                                  g_misuse.free_payload_mapped.load(),
                                  g_misuse.from_callback.load()};
  static_assert(sizeof(rawpipe_api_counters) == kFirst + sizeof values, "one value per field");
  const std::size_t fit = std::min<std::size_t>((out->size - kFirst) / sizeof(std::uint64_t), std::size(values));
  std::memcpy(reinterpret_cast<std::uint8_t*>(out) + kFirst, values, fit * sizeof(std::uint64_t));
  return 0;
}

// Every ring endpoint with its descriptor created (endpoint_fd(RAWPIPE_ANY_ENDPOINT)).
std::vector<std::uint16_t> ring_endpoints(const Pipeline& p) {
  std::vector<std::uint16_t> out;
  for (std::uint16_t e = 0; e < p.endpoint_count(); ++e)
    if (p.endpoint_wake(e)) out.push_back(e);
  return out;
}

int api_endpoint_fd(rawpipe_pipeline* h, std::uint16_t ep) {
  if (!check_handle(h, "endpoint_fd")) return -1;
  Pipeline& p = *h->pipeline;
  if (ep != RAWPIPE_ANY_ENDPOINT) {
    if (!ring_endpoint_ok(h, ep, "endpoint_fd")) return -1;
    auto fd = wake_fd(*p.endpoint_wake(ep));
    return fd ? fd.value() : fail(h, "endpoint_fd: " + fd.message());
  }
  if (h->any_epoll_fd >= 0) return h->any_epoll_fd;
  const int ep_fd = epoll_create1(EPOLL_CLOEXEC);
  if (ep_fd < 0) return fail(h, fmt::format("endpoint_fd: epoll_create1: {}", std::strerror(errno)));
  for (std::uint16_t e : ring_endpoints(p)) {
    auto fd = wake_fd(*p.endpoint_wake(e));
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u32 = e;
    if (!fd || epoll_ctl(ep_fd, EPOLL_CTL_ADD, fd.value(), &ev) != 0) {
      const std::string why = fd ? std::string(std::strerror(errno)) : fd.message();
      ::close(ep_fd);
      return fail(h, fmt::format("endpoint_fd: endpoint {}: {}", e, why));
    }
  }
  h->any_epoll_fd = ep_fd;
  return ep_fd;
}

int api_arm_fd(rawpipe_pipeline* h, std::uint16_t ep) {
  if (!check_handle(h, "arm_fd")) return -1;
  Pipeline& p = *h->pipeline;
  auto arm_one = [&](std::uint16_t e) -> int {
    EndpointWake& w = *p.endpoint_wake(e);
    if (w.fd < 0) return bad_argument(h, fmt::format("arm_fd: endpoint {} has no descriptor yet; call endpoint_fd first", e));
    return wake_arm(w, p, e) ? 1 : 0;
  };
  if (ep != RAWPIPE_ANY_ENDPOINT) {
    if (!ring_endpoint_ok(h, ep, "arm_fd")) return -1;
    return arm_one(ep);
  }
  if (h->any_epoll_fd < 0)
    return bad_argument(h, "arm_fd: call endpoint_fd(RAWPIPE_ANY_ENDPOINT) before arming it");
  int ready = 0;
  for (std::uint16_t e : ring_endpoints(p)) {
    const int r = arm_one(e);
    if (r < 0) return -1;
    ready |= r;
  }
  return ready;
}

// recvfrom_zcopy over every ring endpoint, one endpoint further each call (as poll does).
int receive_any(rawpipe_pipeline* h, rawpipe_packet* out, unsigned max) {
  Pipeline& p = *h->pipeline;
  const std::uint16_t n_ep = static_cast<std::uint16_t>(p.endpoint_count());
  unsigned total = 0;
  for (std::uint16_t i = 0; i < n_ep && total < max; ++i) {
    const auto e = static_cast<std::uint16_t>((h->next_endpoint + i) % n_ep);
    if (p.plan().endpoints[e].action != EndpointAction::kRing) continue;
    const int k = api_recvfrom_zcopy(h, e, out + total, max - total);
    if (k < 0) return -1;
    total += static_cast<unsigned>(k);
  }
  if (n_ep) h->next_endpoint = static_cast<std::uint16_t>((h->next_endpoint + 1) % n_ep);
  return static_cast<int>(total);
}

// ---- Lcores without a thread (RAWPIPE_CAP_PROGRESS) ----

int api_progress(rawpipe_pipeline* h) {
  if (!check_handle(h, "progress") || refuse_on_lcore(h, "progress")) return -1;
  return static_cast<int>(h->pipeline->progress());
}

int api_progress_fds(rawpipe_pipeline* h, int* fds, unsigned max) {
  if (!check_handle(h, "progress_fds") || !array_ok(h, fds, max, "progress_fds")) return -1;
  const Pipeline::ProgressFds& got = h->pipeline->progress_fds();
  if (!got.missing.empty()) return fail(h, "progress_fds: " + got.missing);
  const std::vector<int>& all = got.fds;
  std::copy_n(all.begin(), std::min<std::size_t>(all.size(), max), fds);
  return static_cast<int>(all.size());
}

int api_recv_wait(rawpipe_pipeline* h, std::uint16_t ep, rawpipe_packet* out, unsigned max, int timeout_ms) {
  if (!check_handle(h, "recv_wait")) return -1;
  const bool any = ep == RAWPIPE_ANY_ENDPOINT;
  if ((!any && !ring_endpoint_ok(h, ep, "recv_wait")) || !array_ok(h, out, max, "recv_wait")) return -1;
  const int fd = api_endpoint_fd(h, ep);
  if (fd < 0) return -1;
  auto receive = [&] { return any ? receive_any(h, out, max) : api_recvfrom_zcopy(h, ep, out, max); };
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms < 0 ? 0 : timeout_ms);
  // Threadless lcores: this thread runs their passes, and sleeps on their queues too. A driver
  // without a descriptor leaves a timed sleep: a pass at least every millisecond.
  Pipeline& pl = *h->pipeline;
  const bool drive = pl.has_threadless_lcores();
  const Pipeline::ProgressFds& queues = pl.progress_fds();
  const int nap_ms = drive && !queues.missing.empty() ? 1 : -1;
  for (;;) {
    int n = receive();
    if (n == 0 && drive && pl.progress() != 0) n = receive();
    if (n != 0 || max == 0) return n;
    if (any) {
      const int ready = api_arm_fd(h, ep);
      if (ready < 0) return -1;
      if (ready) continue;
    } else if (wake_arm(*h->pipeline->endpoint_wake(ep), *h->pipeline, ep)) {
      continue;
    }
    int left = -1;
    if (timeout_ms >= 0) {
      const auto now = std::chrono::steady_clock::now();
      if (now >= deadline) return 0;
      left = static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now).count()) + 1;
    }
    if (nap_ms >= 0 && (left < 0 || left > nap_ms)) left = nap_ms;
    auto woke = wake_sleep(fd, left, queues.fds);
    if (!woke) return fail(h, "recv_wait: " + woke.message());
    if (!woke.value() && timeout_ms >= 0 && std::chrono::steady_clock::now() >= deadline) {
      if (drive) (void)pl.progress();
      return receive();  // timed out: one last look
    }
  }
}


// ---- Sending (RAWPIPE_CAP_SEND): the application's side of pipeline/send/send_port.hh ----

bool port_ok(rawpipe_pipeline* h, std::uint16_t port, const char* call) {
  if (port < h->pipeline->port_count()) return true;
  errno = EINVAL;
  (void)bad_argument(h, fmt::format("{}: port id {} does not exist (there are {}; port_id gives a port's id by name)",
                                    call, port, h->pipeline->port_count()));
  return false;
}

// The sending thread's hold on a port for one call: refuses a second thread (one sender per
// port), a stopped pipeline and a port without a transmit path. api_stop waits for the flag.
class SendGuard {
 public:
  SendGuard(rawpipe_pipeline* h, std::uint16_t port, const char* call) : h_(h) {
    SendPort* sp = h->pipeline->send_port(port);
    if (sp->busy.exchange(true, std::memory_order_acquire)) {
      errno = EBUSY;
      (void)fail(h, fmt::format("{}: another thread is sending on port '{}' right now; send from one thread per port",
                                call, h->pipeline->port_name(port)));
      return;
    }
    sp_ = sp;
    // G: pairs with the fence in wait_for_senders: either stop sees busy and waits, or this sees
    // the stop request and backs off.
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (!h->pipeline->running() || h->pipeline->stop_requested()) {
      errno = ENETDOWN;
      (void)fail(h, fmt::format("{}: the pipeline is not running; start it first", call));
      release();
      return;
    }
    if (sp->lcore < 0 || !sp->tx.burst) {
      errno = EOPNOTSUPP;
      (void)fail(h, fmt::format("{}: port '{}' has no transmit path: {}", call, h->pipeline->port_name(port),
                                sp->lcore < 0 ? sp->no_path : std::string("its driver gives no transmit function")));
      release();
    }
  }
  ~SendGuard() {
    release();
    // A threadless lcore drains the hand-off ring only during a pass: run one now, so the frame
    // leaves with this call (unless another thread's pass is under way; that one takes it).
    if (h_ && h_->pipeline->has_threadless_lcores() && current_lcore() < 0) (void)h_->pipeline->progress();
  }
  SendGuard(const SendGuard&) = delete;
  SendGuard& operator=(const SendGuard&) = delete;
  SendPort* port() const noexcept { return sp_; }

 private:
  void release() noexcept {
    if (sp_) sp_->busy.store(false, std::memory_order_release);
    sp_ = nullptr;
  }
  rawpipe_pipeline* h_;
  SendPort* sp_ = nullptr;
};

// Before a stop: no send call is inside a port's path any more, and none enters after.
void wait_for_senders(Pipeline& p) {
  p.request_stop();
  std::atomic_thread_fence(std::memory_order_seq_cst);  // pairs with G
  for (std::uint16_t port = 0; port < p.port_count(); ++port)
    while (p.send_port(port)->busy.load(std::memory_order_acquire)) std::this_thread::yield();
}

int api_port_id(const rawpipe_pipeline* h, const char* name) {
  if (!check_handle(h, "port_id")) return -1;
  auto* mh = const_cast<rawpipe_pipeline*>(h);
  if (!name) return bad_argument(mh, "port_id: the name is NULL");
  auto id = h->pipeline->port_id(name);
  if (!id) return fail(mh, fmt::format("port_id: no port named '{}'", name));
  return *id;
}

int api_alloc_tx(rawpipe_pipeline* h, std::uint16_t port, rawpipe_tx_buf* bufs, unsigned n) {
  if (!check_handle(h, "alloc_tx")) {
    errno = EBADF;
    return -1;
  }
  if (!port_ok(h, port, "alloc_tx")) return -1;
  if (!bufs && n) {
    errno = EINVAL;
    return bad_argument(h, fmt::format("alloc_tx: bufs is NULL but n is {}", n));
  }
  Pool* pool = h->pipeline->send_port(port)->pool;
  Mbuf* got[kMaxBurst];
  unsigned done = 0;
  while (done < n) {
    const unsigned k = std::min<unsigned>(n - done, kMaxBurst);
    if (!pool->alloc_bulk(got, k)) {
      for (unsigned i = 0; i < done; ++i) mbuf_free(static_cast<Mbuf*>(bufs[i].handle));
      errno = ENOBUFS;
      return fail(h, fmt::format("alloc_tx: pool '{}' of port '{}' has fewer than {} free buffers ({} free of {})",
                                 pool->name(), h->pipeline->port_name(port), n, pool->available(), pool->count()));
    }
    audit_handout(got, k, AuditOwner::kApp, Mbuf::kNoEndpoint, AuditSite::kPoolAlloc);
    for (unsigned i = 0; i < k; ++i) {
      Mbuf* m = got[i];
      bufs[done + i] = rawpipe_tx_buf{m, m->data(), 0, m->buf_len - m->data_off};
    }
    done += k;
  }
  return static_cast<int>(n);
}

int api_send_burst(rawpipe_pipeline* h, std::uint16_t port, const rawpipe_tx_buf* bufs, unsigned n, std::uint32_t flags) {
  if (!check_handle(h, "send_burst")) {
    errno = EBADF;
    return -1;
  }
  if (!port_ok(h, port, "send_burst")) return -1;
  if ((!bufs && n) || n > RAWPIPE_SEND_MAX_BURST || (flags & ~(RAWPIPE_SEND_CSUM | RAWPIPE_SEND_DUMMY))) {
    errno = EINVAL;
    return bad_argument(h, fmt::format("send_burst: give up to {} buffers (bufs {}, n {}) and flags made of "
                                       "RAWPIPE_SEND_CSUM, RAWPIPE_SEND_DUMMY (got {:#x})",
                                       RAWPIPE_SEND_MAX_BURST, static_cast<const void*>(bufs), n, flags));
  }
  SendGuard guard(h, port, "send_burst");
  SendPort* sp = guard.port();
  if (!sp) return -1;
  // Every entry is checked before anything is touched: a refused call leaves the caller owning
  // every buffer, as it was.
  Mbuf* pkts[RAWPIPE_SEND_MAX_BURST];
  for (unsigned i = 0; i < n; ++i) {
    std::string error;
    Mbuf* m = resolve_checked(bufs[i].handle, &error);
    const std::uint16_t refs = m ? m->refcnt.load(std::memory_order_relaxed) : 0;
    if (m && (refs == 0 || refs == kRefReleased)) {
      count(g_misuse.free_already_free);
      error = fmt::format("buffer {} of pool '{}' is free (sent or freed already)", m->index, m->pool->name());
      m = nullptr;
    }
    if (m) {
      const std::uint8_t* start = m->buf_addr() + kMbufHeaderSize;
      const std::uint8_t* end = m->buf_addr() + m->buf_len;
      if (bufs[i].data < start || bufs[i].data > end || bufs[i].len < 14 ||
          bufs[i].len > static_cast<std::size_t>(end - bufs[i].data)) {
        count(g_misuse.bad_argument);
        error = fmt::format("data {} and len {} do not describe a frame of at least 14 bytes inside buffer {} of pool "
                            "'{}' (its data area is {}..{})",
                            static_cast<const void*>(bufs[i].data), bufs[i].len, m->index, m->pool->name(),
                            static_cast<const void*>(start), static_cast<const void*>(end));
        m = nullptr;
      }
    }
    if (!m) {
      errno = EINVAL;
      return fail(h, fmt::format("send_burst: buffer {}: {}; nothing was sent", i, error));
    }
    pkts[i] = m;
  }
  // A buffer listed k times is sent k times and needs k references.
  Mbuf* sorted[RAWPIPE_SEND_MAX_BURST];
  std::copy(pkts, pkts + n, sorted);
  std::sort(sorted, sorted + n);
  for (unsigned i = 0; i < n;) {
    unsigned j = i + 1;
    while (j < n && sorted[j] == sorted[i]) ++j;
    if (j - i > sorted[i]->refcnt.load(std::memory_order_relaxed)) {
      errno = EINVAL;
      return bad_argument(h, fmt::format("send_burst: buffer {} of pool '{}' is listed {} times but has {} holder(s); "
                                         "ref_buff it once per extra send; nothing was sent",
                                         sorted[i]->index, sorted[i]->pool->name(), j - i,
                                         sorted[i]->refcnt.load(std::memory_order_relaxed)));
    }
    i = j;
  }
  const bool dummy = flags & RAWPIPE_SEND_DUMMY;
  for (unsigned i = 0; i < n; ++i) {
    Mbuf* m = pkts[i];
    m->data_off = static_cast<std::uint32_t>(bufs[i].data - m->buf_addr());
    m->data_len = bufs[i].len;
    m->tx_flags = dummy ? tx_flag::kDummy : 0;
    if (flags & RAWPIPE_SEND_CSUM) (void)send::fill_checksums(m->data(), m->data_len);
  }
  if (dummy) {
    sp->dummies.add(n);
    if (!sp->native_dummy) {
      // Nothing to warm on this port: counted, and the buffers go back at once.
      sp->submitted.add(n);
      mbuf_free_bulk(pkts, n);
      return static_cast<int>(n);
    }
  }
  const unsigned k = sp->submit(pkts, n);
  if (dummy) sp->dummies_posted.add(k);
  return static_cast<int>(k);
}

bool read_addr(const rawpipe_addr& a, send::Address* out) {
  if (a.family == 4) out->family = L3Type::kIpv4;
  else if (a.family == 6) out->family = L3Type::kIpv6;
  else if (a.family == 0) out->family = L3Type::kNone;
  else return false;
  std::memcpy(out->ip, a.addr, a.family == 4 ? 4 : 16);
  out->port = a.port;
  return true;
}

long api_sendto(rawpipe_pipeline* h, std::uint16_t port, const void* buf, std::size_t len, const rawpipe_addr* dst,
                const rawpipe_addr* src, std::uint32_t flags) {
  if (!check_handle(h, "sendto")) {
    errno = EBADF;
    return -1;
  }
  if (!port_ok(h, port, "sendto")) return -1;
  send::Address d, s;
  if (!dst || !read_addr(*dst, &d) || d.family == L3Type::kNone || (src && !read_addr(*src, &s)) ||
      (s.family != L3Type::kNone && s.family != d.family) || (!buf && len) || (flags & ~RAWPIPE_SEND_DUMMY)) {
    errno = EINVAL;
    return bad_argument(h, "sendto: give dst with family 4 or 6, src NULL or of the same family (0: the port's "
                           "address), buf unless len is 0, and flags 0 or RAWPIPE_SEND_DUMMY");
  }
  if (!src) s.port = d.port;
  SendGuard guard(h, port, "sendto");
  SendPort* sp = guard.port();
  if (!sp) return -1;
  std::string why;
  const auto now = std::chrono::steady_clock::now().time_since_epoch();
  const long r = send::sendto(*sp, d, s, buf, len, flags & RAWPIPE_SEND_DUMMY,
                              static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(now).count()),
                              &why);
  if (r >= 0) return r;
  errno = static_cast<int>(-r);
  return fail(h, why);
}

// ---- The application's figures in the stats segment (RAWPIPE_CAP_STATS_SECTION) ----

int api_stats_section(rawpipe_pipeline* h, const char* name, CStatsSectionFn fn, void* ctx) {
  if (!check_handle(h, "stats_section")) return -1;
  if (!name || !stats_section_name_ok(name)) {
    errno = EINVAL;
    return bad_argument(h, fmt::format("stats_section: the name {} is not 1 to 63 of [A-Za-z0-9_-]",
                                       name ? fmt::format("'{}'", name) : std::string("NULL")));
  }
  if (!h->publisher) {
    errno = ENOENT;
    return fail(h, "stats_section: this pipeline publishes no stats segment ([metrics] stats_segment = false, /dev/shm "
                   "unusable, or a pipeline the caller made)");
  }
  if (!h->publisher->set_section(name, fn ? c_stats_section(fn, ctx) : ops::SectionFn{})) {
    errno = ENOSPC;
    return fail(h, fmt::format("stats_section: '{}' would be section {}; {} is the most", name,
                               ops::kMaxStatsSections + 1, ops::kMaxStatsSections));
  }
  return 0;
}

constexpr rawpipe_api_t kApi = {
    RAWPIPE_EXTRA_ABI_VERSION,
    sizeof(rawpipe_api_t),
    RAWPIPE_CAP_FILTERS | RAWPIPE_CAP_ZCOPY_RECV | RAWPIPE_CAP_COMPLETIONS | RAWPIPE_CAP_RULES | RAWPIPE_CAP_STATS |
        RAWPIPE_CAP_PLUGINS | RAWPIPE_CAP_ALLOCATOR | RAWPIPE_CAP_OFFLOAD | RAWPIPE_CAP_WAIT | RAWPIPE_CAP_SEND |
        RAWPIPE_CAP_PROGRESS | RAWPIPE_CAP_STATS_SECTION,
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
    &api_counters,
    &api_get_stats,
    &api_drop_reason_name,
    &api_endpoint_fd,
    &api_arm_fd,
    &api_recv_wait,
    &api_port_id,
    &api_alloc_tx,
    &api_send_burst,
    &api_sendto,
    &api_progress,
    &api_progress_fds,
    &api_stats_section,
};

int api_load_filter_plugin(rawpipe_pipeline* h, const char* path, const char* attach, const char* const* keys,
                           const char* const* values, unsigned n) {
  if (!check_handle(h, "load_filter_plugin") || refuse_on_lcore(h, "load_filter_plugin")) return -1;
  if (!path || !attach) return bad_argument(h, "load_filter_plugin: path and attach must not be NULL");
  if (n && (!keys || !values)) return bad_argument(h, fmt::format("load_filter_plugin: n is {} but keys or values is NULL", n));
  auto where = parse_filter_attach(*h->pipeline, attach);
  if (!where) return bad_argument(h, where.message());
  // One filter per attachment point, as the config's [[filters]] demand: a second plugin would
  // silently replace the first (which stays loaded, its report going stale).
  for (const FilterStats& f : h->pipeline->filters().stats()) {
    const FilterAttach& a = where.value();
    if (!f.attached || f.at.on_queue != a.queue) continue;
    if (a.queue ? (f.at.port == a.port && f.at.queue == a.rx_queue) : f.at.endpoint == a.endpoint)
      return bad_argument(h, fmt::format("load_filter_plugin: '{}' already has a filter ('{}'); remove it first "
                                         "(endpoint_filter/queue_filter with NULL callbacks)",
                                         attach, f.name));
  }
  std::vector<std::pair<std::string, std::string>> config;
  for (unsigned i = 0; i < n; ++i) config.emplace_back(keys[i] ? keys[i] : "", values[i] ? values[i] : "");
  // As in the config: a bare name is looked for along the plugin path, and the pipeline's
  // [run] plugin_dirs (when its config has them) say where plugins may come from.
  const Plan& plan = h->pipeline->plan();
  const std::vector<std::string>* allowed = plan.plugin_dirs_set ? &plan.plugin_dirs : nullptr;
  auto resolved = resolve_plugin_path(path, allowed);
  if (!resolved) return bad_argument(h, fmt::format("load_filter_plugin: {}", resolved.message()));
  auto plugin = FilterPlugin::load(resolved.value(), &kApi, config, nullptr, allowed);
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
  if (!check_handle(h, "plugin_report")) return -1;
  if (!buf && len) return bad_argument(h, fmt::format("plugin_report: buf is NULL but len is {}", len));
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

}  // namespace rawpipe

rawpipe_pipeline::rawpipe_pipeline() = default;
rawpipe_pipeline::~rawpipe_pipeline() = default;

namespace rawpipe {

rawpipe_pipeline* extra_wrap(Pipeline& pipeline) {
  auto* h = new rawpipe_pipeline;
  h->pipeline = &pipeline;
  h->user_data.assign(pipeline.endpoint_count(), 0);
  if (!handle_add(h)) {
    t_api_error = fmt::format("more than {} Extra API handles are alive; destroy some first", kMaxHandles);
    delete h;
    return nullptr;
  }
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
