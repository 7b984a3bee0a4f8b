#include "pipeline/extra/kept_pools.hh"

#include <algorithm>
#include <atomic>
#include <mutex>

#include "pipeline/buf/pool.hh"

namespace rawpipe::kept_pools {
namespace {

std::mutex g_mu;
std::vector<std::unique_ptr<Pool>> g_kept;  // guarded by g_mu
// How many pools are kept: the checked frees look at this before taking the mutex. Relaxed: a
// free that misses a pool kept at this instant leaves it to reap_all() (see the header).
std::atomic<std::size_t> g_count{0};

bool complete(const Pool& p) {
  const bool done = p.in_use() == 0;
  // The free-list tails were read relaxed; whatever the last freeing thread wrote before its
  // enqueue happens before the pool goes.
  std::atomic_thread_fence(std::memory_order_acquire);
  return done;
}

}  // namespace

std::size_t keep(std::vector<std::unique_ptr<Pool>> pools) {
  std::size_t out = 0;
  std::lock_guard lock(g_mu);
  for (auto& p : pools) {
    if (!p || complete(*p)) continue;  // deleted at the end of this function
    out += p->in_use();
    g_kept.push_back(std::move(p));
  }
  g_count.store(g_kept.size(), std::memory_order_relaxed);
  return out;
}

void reap(const Pool* pool) noexcept {
  if (g_count.load(std::memory_order_relaxed) == 0) return;
  std::lock_guard lock(g_mu);
  auto it = std::find_if(g_kept.begin(), g_kept.end(), [pool](const auto& k) { return k.get() == pool; });
  if (it == g_kept.end() || !complete(**it)) return;
  g_kept.erase(it);
  g_count.store(g_kept.size(), std::memory_order_relaxed);
}

void reap_all() noexcept {
  if (g_count.load(std::memory_order_relaxed) == 0) return;
  std::lock_guard lock(g_mu);
  std::erase_if(g_kept, [](const auto& k) { return complete(*k); });
  g_count.store(g_kept.size(), std::memory_order_relaxed);
}

std::size_t outstanding() {
  std::lock_guard lock(g_mu);
  std::size_t n = 0;
  for (const auto& k : g_kept) n += k->in_use();
  return n;
}

}  // namespace rawpipe::kept_pools
