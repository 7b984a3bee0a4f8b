#include "pipeline/buf/audit.hh"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdio>
#include <map>
#include <mutex>
#include <tuple>

#include "pipeline/buf/pool.hh"

namespace rawpipe {
namespace {

// Mbuf::audit_state. Zero is what Pool::create leaves in every header, and every slot starts free.
constexpr std::uint32_t kStateFree = 0;
constexpr std::uint32_t kStateOut = 0x0a110c8d;
constexpr std::size_t kMaxErrors = 256;
constexpr std::size_t kSlotsShown = 8;

// Pools by id, for telling which pool (if any) a freed pointer belongs to. Release/acquire pair
// the registration with frees on other threads (the pool is fully built before it is published).
std::array<std::atomic<const Pool*>, Pool::kMaxPools> g_pools{};

std::atomic<std::uint64_t> g_double_frees{0};
std::atomic<std::uint64_t> g_foreign_frees{0};

std::mutex g_mu;  // the error log and the endpoint names; taken only on control paths and refusals
std::vector<std::string> g_errors;
std::map<const Pool*, std::vector<std::string>> g_endpoint_names;

// Relaxed throughout: one holder at a time, and the hand-off that passes a buffer (a ring, the
// free list) already orders the holder's marks before the next holder's.
std::uint32_t state_of(Mbuf* m) noexcept { return std::atomic_ref(m->audit_state).load(std::memory_order_relaxed); }

struct Mark {
  AuditOwner owner;
  std::uint16_t endpoint;
  AuditSite site;
};

Mark mark_of(Mbuf* m) noexcept {
  const std::uint32_t o = std::atomic_ref(m->audit_owner).load(std::memory_order_relaxed);
  const std::uint64_t s = std::atomic_ref(m->audit_site).load(std::memory_order_relaxed);
  return {static_cast<AuditOwner>(o >> 16), static_cast<std::uint16_t>(o & 0xffff), static_cast<AuditSite>(s)};
}

void set_mark(Mbuf* m, AuditOwner owner, std::uint16_t endpoint, AuditSite site) noexcept {
  std::atomic_ref(m->audit_owner).store((std::uint32_t(owner) << 16) | endpoint, std::memory_order_relaxed);
  std::atomic_ref(m->audit_site).store(std::uint64_t(site), std::memory_order_relaxed);
}

std::string endpoint_text(const Pool* pool, std::uint16_t ep) {
  // g_mu held by the caller.
  auto it = g_endpoint_names.find(pool);
  if (it != g_endpoint_names.end() && ep < it->second.size()) return fmt::format("endpoint '{}'", it->second[ep]);
  return fmt::format("endpoint {}", ep);
}

std::string holder_text(const Pool* pool, const Mark& k) {
  switch (k.owner) {
    case AuditOwner::kApp:
      return fmt::format("the application of {}", endpoint_text(pool, k.endpoint));
    case AuditOwner::kHold:
      return fmt::format("a filter's owner after a HOLD on {}", endpoint_text(pool, k.endpoint));
    case AuditOwner::kPipeline:
      return "the pipeline";
    case AuditOwner::kFree:
    default:
      return "its pool";
  }
}

void refuse(std::atomic<std::uint64_t>& counter, std::string message) {
  counter.fetch_add(1, std::memory_order_relaxed);
  std::fprintf(stderr, "rawpipe: mbuf audit: %s\n", message.c_str());
  std::lock_guard lock(g_mu);
  if (g_errors.size() < kMaxErrors) g_errors.push_back(std::move(message));
}

void refuse_double_free(const Pool* pool, Mbuf* m) {
  const Mark k = mark_of(m);
  std::string holder;
  {
    std::lock_guard lock(g_mu);
    holder = holder_text(pool, k);
  }
  refuse(g_double_frees,
         fmt::format("double free of buffer {} of pool '{}' (it was already back in its pool; last held by {}, "
                     "handed out by {}); the second free was ignored",
                     m->index, pool->name(), holder, audit_site_name(k.site)));
}

const Pool* pool_containing(const void* p) noexcept {
  for (const auto& slot : g_pools) {
    const Pool* pool = slot.load(std::memory_order_acquire);
    if (pool && pool->contains(p)) return pool;
  }
  return nullptr;
}

}  // namespace

std::string_view audit_owner_name(AuditOwner o) noexcept {
  switch (o) {
    case AuditOwner::kFree: return "free";
    case AuditOwner::kPipeline: return "pipeline";
    case AuditOwner::kApp: return "application";
    case AuditOwner::kHold: return "hold";
  }
  return "?";
}

std::string_view audit_site_name(AuditSite s) noexcept {
  switch (s) {
    case AuditSite::kNone: return "nothing";
    case AuditSite::kPoolAlloc: return "pool alloc";
    case AuditSite::kEndpointReceive: return "endpoint_receive";
    case AuditSite::kRecvfromZcopy: return "recvfrom_zcopy";
    case AuditSite::kPoll: return "poll";
    case AuditSite::kRecv: return "recv";
    case AuditSite::kHoldVerdict: return "hold verdict";
  }
  return "?";
}

namespace audit_detail {

void register_pool(const Pool* pool) noexcept { g_pools[pool->id()].store(pool, std::memory_order_release); }

void unregister_pool(const Pool* pool) noexcept {
  g_pools[pool->id()].store(nullptr, std::memory_order_release);
  std::lock_guard lock(g_mu);
  g_endpoint_names.erase(pool);
}

void on_alloc(Mbuf* const* bufs, unsigned n) noexcept {
  for (unsigned i = 0; i < n; ++i) {
    std::atomic_ref(bufs[i]->audit_state).store(kStateOut, std::memory_order_relaxed);
    set_mark(bufs[i], AuditOwner::kPipeline, Mbuf::kNoEndpoint, AuditSite::kPoolAlloc);
  }
}

bool check_free(Mbuf* m) noexcept {
  // Nothing is read through `m` before it is known to be a buffer header.
  const Pool* pool = pool_containing(m);
  if (!pool) {
    refuse(g_foreign_frees, fmt::format("free of {}, which is no buffer of any pool; ignored", static_cast<void*>(m)));
    return false;
  }
  Mbuf* start = pool->slot_of(m);
  if (start != m) {
    refuse(g_foreign_frees,
           fmt::format("free of {}, which points {} bytes into buffer {} of pool '{}' instead of at its start; ignored",
                       static_cast<void*>(m), reinterpret_cast<std::uint8_t*>(m) - start->buf_addr(), start->index,
                       pool->name()));
    return false;
  }
  if (m->pool != pool) {
    refuse(g_foreign_frees,
           fmt::format("free of buffer {} of pool '{}' whose header names another pool ({}); the header was "
                       "overwritten or the buffer was built elsewhere; ignored",
                       m->index, pool->name(), static_cast<void*>(m->pool)));
    return false;
  }
  if (state_of(m) == kStateFree) {
    refuse_double_free(pool, m);
    return false;
  }
  return true;
}

bool on_release(Mbuf* m) noexcept {
  if (std::atomic_ref(m->audit_state).exchange(kStateFree, std::memory_order_relaxed) == kStateFree) {
    refuse_double_free(m->pool, m);
    return false;
  }
  return true;
}

void handout(Mbuf* m, AuditOwner owner, std::uint16_t endpoint, AuditSite site) noexcept {
  set_mark(m, owner, endpoint, site);
}

}  // namespace audit_detail

AuditCounts audit_counts() noexcept {
  return {g_double_frees.load(std::memory_order_relaxed), g_foreign_frees.load(std::memory_order_relaxed)};
}

void audit_reset_counts() noexcept {
  g_double_frees.store(0, std::memory_order_relaxed);
  g_foreign_frees.store(0, std::memory_order_relaxed);
  std::lock_guard lock(g_mu);
  g_errors.clear();
}

std::vector<std::string> audit_errors() {
  std::lock_guard lock(g_mu);
  return g_errors;
}

void audit_set_endpoint_names(const Pool& pool, std::vector<std::string> names) {
  if constexpr (!kMbufAudit) return;
  std::lock_guard lock(g_mu);
  g_endpoint_names[&pool] = std::move(names);
}

std::vector<AuditConsumer> audit_outstanding(const Pool& pool) {
  std::vector<AuditConsumer> out;
  if constexpr (!kMbufAudit) return out;
  std::map<std::tuple<AuditOwner, std::uint16_t, AuditSite>, AuditConsumer> by;
  for (std::uint32_t i = 0; i < pool.count(); ++i) {
    Mbuf* m = pool.at(i);
    if (state_of(m) == kStateFree) continue;
    const Mark k = mark_of(m);
    AuditConsumer& c = by[{k.owner, k.endpoint, k.site}];
    c.owner = k.owner;
    c.endpoint = k.endpoint;
    c.site = k.site;
    ++c.count;
    if (c.slots.size() < kSlotsShown) c.slots.push_back(i);
  }
  for (auto& [key, c] : by) out.push_back(std::move(c));
  std::stable_sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.count > b.count; });
  return out;
}

std::string audit_report(const Pool& pool) {
  const std::vector<AuditConsumer> held = audit_outstanding(pool);
  if (held.empty()) return "";
  std::uint64_t total = 0;
  for (const AuditConsumer& c : held) total += c.count;
  std::string out = fmt::format("pool '{}': {} buffer{} outstanding:", pool.name(), total, total == 1 ? "" : "s");
  std::lock_guard lock(g_mu);
  for (const AuditConsumer& c : held) {
    std::string slots;
    for (std::uint32_t s : c.slots) slots += fmt::format("{}{}", slots.empty() ? "" : ", ", s);
    if (c.slots.size() < c.count) slots += ", ...";
    out += fmt::format(" {} held by {} (last handed out by {}; slot{} {});", c.count,
                       holder_text(&pool, {c.owner, c.endpoint, c.site}), audit_site_name(c.site),
                       c.count == 1 ? "" : "s", slots);
  }
  out.pop_back();
  return out;
}

}  // namespace rawpipe
