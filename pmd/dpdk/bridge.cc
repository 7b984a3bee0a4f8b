#include "pmd/dpdk/bridge.hh"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <map>

#include <rte_bus.h>
#include <rte_dev.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_mempool.h>
#include <rte_memory.h>

namespace rawpipe::dpdk {
namespace {

constexpr char kOpsName[] = "rawpipe_pool";

MbufBridge* bridge_of(const rte_mempool* mp) { return static_cast<MbufBridge*>(mp->pool_data); }

int ops_alloc(rte_mempool* mp) {
  // pool_config is what rte_mempool_set_ops_byname got: the bridge.
  mp->pool_data = mp->pool_config;
  return 0;
}
void ops_free(rte_mempool*) {}
int ops_enqueue(rte_mempool* mp, void* const* objs, unsigned n) { return bridge_of(mp)->enqueue(objs, n); }
int ops_dequeue(rte_mempool* mp, void** objs, unsigned n) { return bridge_of(mp)->dequeue(objs, n); }
unsigned ops_get_count(const rte_mempool* mp) { return bridge_of(mp)->pool()->available(); }

// Pinned buffers are never detached, so DPDK never calls this; it must exist because the shared
// info of an external buffer names a free callback.
void pinned_free_cb(void*, void*) {}

struct IterCtx {
  MbufBridge* bridge;
  Pool* pool;
  std::vector<rte_mbuf*>* shadows;
  const std::vector<std::uint64_t>* page_iova;
  std::size_t page_size;
};

void init_shadow(rte_mempool* mp, void* arg, void* obj, unsigned idx) {
  auto* ctx = static_cast<IterCtx*>(arg);
  auto* m = static_cast<rte_mbuf*>(obj);
  std::memset(static_cast<void*>(m), 0, sizeof(rte_mbuf));
  Mbuf* slot = ctx->pool->at(idx);
  std::uint8_t* data = slot->buf_addr() + kMbufHeaderSize;
  m->buf_addr = data;
  rte_iova_t iova = RTE_BAD_IOVA;
  if (rte_eal_iova_mode() == RTE_IOVA_VA) {
    iova = reinterpret_cast<rte_iova_t>(data);
  } else if (!ctx->page_iova->empty()) {
    std::size_t off = data - ctx->pool->region();
    iova = (*ctx->page_iova)[off / ctx->page_size] + off % ctx->page_size;
  }
  m->buf_iova = iova;
  m->buf_len = static_cast<std::uint16_t>(ctx->pool->buf_size() - kMbufHeaderSize);
  m->priv_size = 0;
  m->port = RTE_MBUF_PORT_INVALID;
  shadow_make_raw(m, mp);
  auto* shinfo = reinterpret_cast<rte_mbuf_ext_shared_info*>(reinterpret_cast<std::uint8_t*>(m) + sizeof(rte_mbuf));
  m->shinfo = shinfo;
  shinfo->free_cb = pinned_free_cb;
  shinfo->fcb_opaque = m;
  rte_mbuf_ext_refcnt_set(shinfo, 1);
  (*ctx->shadows)[idx] = m;
}

void register_ops_once() {
  static std::once_flag once;
  std::call_once(once, [] {
    static rte_mempool_ops ops{};
    std::strncpy(ops.name, kOpsName, sizeof(ops.name) - 1);
    ops.alloc = ops_alloc;
    ops.free = ops_free;
    ops.enqueue = ops_enqueue;
    ops.dequeue = ops_dequeue;
    ops.get_count = ops_get_count;
    (void)rte_mempool_register_ops(&ops);  // a failure shows up as set_ops_byname failing below
  });
}

std::mutex g_bridges_mu;
std::map<std::pair<const Pool*, const std::uint8_t*>, std::weak_ptr<MbufBridge>> g_bridges;
std::atomic<unsigned> g_seq{0};

bool is_virtual(rte_device* dev) {
  const rte_bus* bus = rte_dev_bus(dev);
  return bus && std::strcmp(rte_bus_name(bus), "vdev") == 0;
}

}  // namespace

Result<std::shared_ptr<MbufBridge>> MbufBridge::get(Pool* pool) {
  std::lock_guard lock(g_bridges_mu);
  auto key = std::make_pair(static_cast<const Pool*>(pool), static_cast<const std::uint8_t*>(pool->region()));
  if (auto it = g_bridges.find(key); it != g_bridges.end())
    if (auto existing = it->second.lock()) return existing;
  std::shared_ptr<MbufBridge> bridge(new MbufBridge());
  RAWPIPE_TRY(bridge->init(pool));
  g_bridges[key] = bridge;
  return bridge;
}

Status MbufBridge::init(Pool* pool) {
  pool_ = pool;
  region_ = pool->region();
  if (pool->buf_size() - kMbufHeaderSize > UINT16_MAX)
    return Status::errorf("pool '{}': buf_size {} is too large for a DPDK buffer (at most 65536)", pool->name(),
                          pool->buf_size());

  // Register the region as external memory so DPDK's address lookups and device DMA mapping know
  // it. The IOVA of each page: the virtual address in IOVA-as-VA mode, the physical address of each
  // hugepage in PA mode; 4 KiB anonymous pages in PA mode can move, so no device may DMA to them.
  page_size_ = pool->on_hugepages() ? (2u << 20) : static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  region_len_ = std::size_t(pool->count()) * pool->stride();
  region_len_ = (region_len_ + page_size_ - 1) / page_size_ * page_size_;
  if (region_len_ > pool->region_bytes()) {
    dma_problem_ = fmt::format("pool '{}' does not end on a page boundary, so it cannot be registered with DPDK",
                               pool->name());
  } else {
    std::size_t pages = region_len_ / page_size_;
    bool va = rte_eal_iova_mode() == RTE_IOVA_VA;
    if (va || pool->on_hugepages()) {
      page_iova_.resize(pages);
      for (std::size_t i = 0; i < pages; ++i) {
        void* page = region_ + i * page_size_;
        page_iova_[i] = va ? reinterpret_cast<std::uint64_t>(page) : rte_mem_virt2phy(page);
        if (page_iova_[i] == RTE_BAD_IOVA) {
          dma_problem_ = "the physical addresses of the pool's hugepages are not readable (run as root)";
          page_iova_.clear();
          break;
        }
      }
    } else {
      dma_problem_ = fmt::format(
          "the EAL runs with IOVA as physical addresses and pool '{}' is not on hugepages; reserve hugepages or "
          "start the EAL with --iova-mode=va",
          pool->name());
    }
    if (!page_iova_.empty()) {
      if (rte_extmem_register(region_, region_len_, page_iova_.data(), static_cast<unsigned>(pages),
                              page_size_) == 0) {
        extmem_registered_ = true;
      } else {
        dma_problem_ = fmt::format("rte_extmem_register of pool '{}' failed: {}", pool->name(),
                                   rte_strerror(rte_errno));
      }
    }
  }

  register_ops_once();
  const std::string name = fmt::format("rp{}_{}", pool->id(), g_seq.fetch_add(1, std::memory_order_relaxed));
  auto receive = create_mempool(name, 0);
  if (!receive) return receive.status();
  mp_ = receive.value();

  // Populating enqueues every new object once; the slots are already free in the rawpipe pool.
  populating_ = true;
  int rc = rte_mempool_populate_default(mp_);
  populating_ = false;
  if (rc < 0 || static_cast<unsigned>(rc) != pool->count())
    return Status::errorf("cannot populate the DPDK mempool over pool '{}' ({} of {} buffers): {} (give the EAL more "
                          "memory with -m)",
                          pool->name(), rc < 0 ? 0 : rc, pool->count(), rte_strerror(rc < 0 ? -rc : ENOMEM));
  shadows_.assign(pool->count(), nullptr);
  IterCtx ctx{this, pool, &shadows_, &page_iova_, page_size_};
  rte_mempool_obj_iter(mp_, init_shadow, &ctx);
  for (rte_mbuf* m : shadows_)
    if (!m) return Status::errorf("internal error: a DPDK shadow buffer of pool '{}' was not initialised", pool->name());
  return init_transmit_mempool(name);
}

// An empty mempool of shadows over this pool, with rawpipe's operations, set up as a pktmbuf
// pool of pinned external buffers (the flag rte_pktmbuf_free reads before it frees a shadow).
Result<rte_mempool*> MbufBridge::create_mempool(const std::string& name, unsigned cache) {
  const unsigned elt = sizeof(rte_mbuf) + sizeof(rte_mbuf_ext_shared_info);
  rte_mempool* mp = rte_mempool_create_empty(name.c_str(), pool_->count(), elt, cache,
                                             sizeof(rte_pktmbuf_pool_private), SOCKET_ID_ANY, 0);
  if (!mp)
    return Status::errorf("cannot create the DPDK mempool '{}' over pool '{}': {} (give the EAL more memory with -m)",
                          name, pool_->name(), rte_strerror(rte_errno));
  if (rte_mempool_set_ops_byname(mp, kOpsName, this) != 0) {
    Status s = Status::errorf("cannot attach rawpipe's mempool operations to '{}': {}", name, rte_strerror(rte_errno));
    rte_mempool_free(mp);
    return s;
  }
  // The alloc operation sets this when a mempool is populated; the transmit one never is.
  mp->pool_data = this;
  rte_pktmbuf_pool_private priv{};
  priv.mbuf_data_room_size = static_cast<std::uint16_t>(pool_->buf_size() - kMbufHeaderSize);
  priv.mbuf_priv_size = 0;
  priv.flags = RTE_PKTMBUF_POOL_F_PINNED_EXT_BUF;
  rte_pktmbuf_pool_init(mp, &priv);
  return mp;
}

// Some drivers free transmitted mbufs one at a time (DPDK's net_null calls rte_pktmbuf_free per
// packet). Into a mempool without a cache each of those is a call through the mempool operations;
// into a per-lcore cache it is a store, and the cache gives its pile back when full. The receive
// mempool keeps no cache: its slots come back through rawpipe's own pool, never through DPDK, so
// a cache there would only copy each pointer once more.
Status MbufBridge::init_transmit_mempool(const std::string& name) {
  const unsigned cache = std::min(kTransmitCache, pool_->count() / kTransmitCacheShare);
  if (cache < kTransmitCacheMin) return Status::ok();  // a small pool keeps every slot where lcores can get it
  auto transmit = create_mempool(name + "t", cache);
  if (!transmit) return transmit.status();
  tx_mp_ = transmit.value();
  return Status::ok();
}

void MbufBridge::flush_transmit_cache(unsigned lcore_id) noexcept {
  if (!tx_mp_) return;
  if (rte_mempool_cache* c = rte_mempool_default_cache(tx_mp_, lcore_id)) rte_mempool_cache_flush(c, tx_mp_);
}

void flush_transmit_caches(unsigned lcore_id) noexcept {
  std::lock_guard lock(g_bridges_mu);
  for (auto& [key, weak] : g_bridges)
    if (auto bridge = weak.lock()) bridge->flush_transmit_cache(lcore_id);
}

MbufBridge::~MbufBridge() {
  {
    std::lock_guard lock(mu_);
    for (rte_device* dev : mapped_)
      if (!page_iova_.empty()) (void)rte_dev_dma_unmap(dev, region_, page_iova_[0], region_len_);
    mapped_.clear();
  }
  if (tx_mp_) {
    // Threads that ended gave their caches back; any left belong to threads that never will.
    for (unsigned l = 0; l < RTE_MAX_LCORE; ++l) flush_transmit_cache(l);
    rte_mempool_free(tx_mp_);
  }
  if (mp_) rte_mempool_free(mp_);
  if (extmem_registered_) (void)rte_extmem_unregister(region_, region_len_);
}

Status MbufBridge::dma_map(rte_device* dev) {
  if (is_virtual(dev)) return Status::ok();
  if (!dma_problem_.empty()) return Status::error(dma_problem_);
  std::lock_guard lock(mu_);
  if (std::find(mapped_.begin(), mapped_.end(), dev) != mapped_.end()) return Status::ok();
  bool va = rte_eal_iova_mode() == RTE_IOVA_VA;
  // In VA mode the whole region is one IOVA range; in PA mode each hugepage is its own.
  int rc = 0;
  if (va) {
    rc = rte_dev_dma_map(dev, region_, page_iova_[0], region_len_);
  } else {
    for (std::size_t i = 0; i < page_iova_.size() && rc == 0; ++i)
      rc = rte_dev_dma_map(dev, region_ + i * page_size_, page_iova_[i], page_size_);
  }
  if (rc != 0) {
    int err = rte_errno;
    // Without an IOMMU (PA mode, UIO) devices reach physical memory directly and there is nothing to map.
    if (err == ENOTSUP && !va) return Status::ok();
    return Status::errorf("cannot map pool '{}' for DMA by device {}: {}", pool_->name(), rte_dev_name(dev),
                          rte_strerror(err));
  }
  mapped_.push_back(dev);
  return Status::ok();
}

void MbufBridge::dma_unmap(rte_device* dev) {
  std::lock_guard lock(mu_);
  auto it = std::find(mapped_.begin(), mapped_.end(), dev);
  if (it == mapped_.end()) return;
  if (rte_eal_iova_mode() == RTE_IOVA_VA) {
    (void)rte_dev_dma_unmap(dev, region_, page_iova_[0], region_len_);
  } else {
    for (std::size_t i = 0; i < page_iova_.size(); ++i)
      (void)rte_dev_dma_unmap(dev, region_ + i * page_size_, page_iova_[i], page_size_);
  }
  mapped_.erase(it);
}

int MbufBridge::enqueue(void* const* objs, unsigned n) noexcept {
  if (populating_) return 0;
  Mbuf* slots[kMaxBurst];
  while (n) {
    unsigned c = std::min(n, kMaxBurst);
    for (unsigned i = 0; i < c; ++i) {
      auto* m = static_cast<rte_mbuf*>(objs[i]);
      // Raw again before the slot is free: from then on any thread may hand the shadow out.
      shadow_make_raw(m, mp_);
      slots[i] = slot_of(m);
    }
    // DPDK held one reference (the one rawpipe handed over on transmit, or the one of a receive
    // buffer it never delivered); dropping it returns the slot when it was the last.
    mbuf_free_bulk(slots, c);
    objs += c;
    n -= c;
  }
  return 0;
}

int MbufBridge::dequeue(void** objs, unsigned n) noexcept {
  // All or nothing, as DPDK's mempool contract requires; larger requests (queue setup) go in chunks
  // that are rolled back if a later chunk cannot be filled.
  Mbuf* slots[kMaxBurst];
  unsigned done = 0;
  while (done < n) {
    unsigned c = std::min(n - done, kMaxBurst);
    if (!pool_->alloc_bulk(slots, c)) {
      if (done) (void)enqueue(objs, done);
      return -ENOBUFS;
    }
    // The shadows of free slots are raw already (see bridge.hh): handing them out touches none.
    rte_mbuf* const* shadows = shadows_.data();  // read once: objs could alias the vector
    for (unsigned i = 0; i < c; ++i) objs[done + i] = shadows[slots[i]->index];
    done += c;
  }
  return 0;
}

}  // namespace rawpipe::dpdk
