// A DPDK mempool whose packet buffers are the slots of one rawpipe Pool.
//
// DPDK drivers allocate receive buffers from an rte_mempool and free transmitted ones back to it.
// To keep rawpipe's pool the single owner of its memory, this mempool has no free list of its own:
// its operations (registered as mempool ops "rawpipe_pool") take slots from and return slots to the
// rawpipe Pool. Each slot has one DPDK "shadow" rte_mbuf, kept in DPDK memory and bound to the slot
// for life as a pinned external buffer: buf_addr is the byte after the slot's 128-byte rawpipe
// header, so DPDK's default 128-byte headroom puts packet data exactly where rawpipe's own
// data_off (header + headroom) expects it, and buf_addr minus the header is the slot. DPDK never
// moves a pinned buffer's buf_addr, so the slots may be padded apart like any pool's (a stride of
// exactly 2048 would put every slot's header line in the same two L1 sets).
// rawpipe's Mbuf header and layout stay untouched.
//
// Transmitted shadows are freed into a second mempool, tx_mempool(), which has per-lcore caches:
// drivers that free each sent mbuf on its own (DPDK's net_null, for one) then store a pointer
// instead of calling rawpipe's operations once per packet. A cache gives its slots back to the
// pool in piles when it fills, when its thread ends (it must hold an lcore id: transmit registers
// it), when that thread stops the port, and when the bridge goes; until then up to 1.5 times the
// cache size of sent slots per transmitting thread count as in use.
//
// The rule that makes the two views agree: a shadow is in use by DPDK only while DPDK owns its
// slot (after dequeue until the slot is received, or after transmit until the driver frees it and
// its transmit cache gives it back);
// while rawpipe owns the slot the shadow is idle, and a slot with more than one holder is never
// handed to DPDK (transmit copies it instead). An idle shadow is in DPDK's raw state (refcnt 1,
// one segment, no next, as rte_mbuf_raw_alloc promises, plus the pinned-buffer flag and the default
// headroom), so the mempool hands shadows out without touching them; each place where DPDK gives a
// shadow back (receive, free, a refused transmit) makes it raw while its lines are still in that
// core's cache. That keeps a received packet's DPDK-side cost to the lines the driver wrote.
//
// The receive mempool has no per-lcore cache: its slots come back through rawpipe's own pool, never
// through DPDK, so allocation goes through the calling thread's rawpipe PoolCache alone.
//
// Thread-safety: get() and dma_map/dma_unmap are control path and MT-safe; the mempool operations
// are as safe as Pool::alloc_bulk and mbuf_free_bulk (any thread).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <rte_mbuf.h>

#include "pipeline/buf/pool.hh"
#include "rawpipe/status.hh"

struct rte_device;

namespace rawpipe::dpdk {

class MbufBridge {
 public:
  // One bridge per Pool per process; ports over the same pool share it.
  static Result<std::shared_ptr<MbufBridge>> get(Pool* pool);
  ~MbufBridge();
  MbufBridge(const MbufBridge&) = delete;
  MbufBridge& operator=(const MbufBridge&) = delete;

  rte_mempool* mempool() const noexcept { return mp_; }
  // Where drivers free the shadows of transmitted slots (transmit points each shadow's pool here).
  // It holds no objects of its own, only DPDK's per-lcore caches, which give back to rawpipe's
  // pool through the same operations in piles; nullptr when the pool is too small to spare them.
  rte_mempool* tx_mempool() const noexcept { return tx_mp_; }
  Pool* pool() const noexcept { return pool_; }

  // The slot whose data a shadow mbuf describes.
  static Mbuf* slot_of(const rte_mbuf* m) noexcept {
    return reinterpret_cast<Mbuf*>(static_cast<std::uint8_t*>(m->buf_addr) - kMbufHeaderSize);
  }
  rte_mbuf* shadow_of(const Mbuf* slot) const noexcept { return shadows_[slot->index]; }
  rte_mbuf* const* shadows() const noexcept { return shadows_.data(); }
  std::uint8_t* region() const noexcept { return region_; }

  // Makes the pool reachable by a physical device's DMA (rte_dev_dma_map over the registered
  // external memory). Virtual devices need nothing. The error says why zero-copy is impossible.
  Status dma_map(rte_device* dev);
  void dma_unmap(rte_device* dev);
  // Why DMA to this pool cannot work (empty when it can).
  const std::string& dma_problem() const noexcept { return dma_problem_; }
  bool extmem_registered() const noexcept { return extmem_registered_; }

  // Gives the transmit cache of the thread with this lcore id back to the pool.
  void flush_transmit_cache(unsigned lcore_id) noexcept;

  // Mempool operation entry points (C callbacks in bridge.cc).
  int enqueue(void* const* objs, unsigned n) noexcept;
  int dequeue(void** objs, unsigned n) noexcept;

 private:
  MbufBridge() = default;
  Status init(Pool* pool);
  Result<rte_mempool*> create_mempool(const std::string& name, unsigned cache);
  Status init_transmit_mempool(const std::string& name);

  // Each lcore's transmit cache holds up to 1.5 times its size: 128, or a sixteenth of the pool
  // when that is less, so that a few lcores' caches leave most of a small pool to receive into.
  static constexpr unsigned kTransmitCache = 128;
  static constexpr unsigned kTransmitCacheShare = 16;
  static constexpr unsigned kTransmitCacheMin = 32;

  Pool* pool_ = nullptr;
  std::uint8_t* region_ = nullptr;
  std::size_t region_len_ = 0;
  rte_mempool* mp_ = nullptr;
  rte_mempool* tx_mp_ = nullptr;
  std::vector<rte_mbuf*> shadows_;
  std::vector<std::uint64_t> page_iova_;  // per page of the region; empty when unknown
  std::size_t page_size_ = 0;
  bool populating_ = false;
  bool extmem_registered_ = false;
  std::string dma_problem_;
  std::mutex mu_;  // control path: the mapped-device list
  std::vector<rte_device*> mapped_;
};

// Gives back, into rawpipe's pool, the slots whose shadows DPDK's transmit caches hold for the
// thread with this lcore id; a thread calls it before it gives the id up.
void flush_transmit_caches(unsigned lcore_id) noexcept;

// The raw state DPDK expects of a buffer fresh from a mempool (rte_mbuf_raw_alloc's contract),
// belonging to `home`, the bridge's receive mempool, again.
inline void shadow_make_raw(rte_mbuf* m, rte_mempool* home) noexcept {
  m->pool = home;
  m->next = nullptr;
  m->nb_segs = 1;
  rte_mbuf_refcnt_set(m, 1);
  m->ol_flags = RTE_MBUF_F_EXTERNAL;
  m->data_off = RTE_PKTMBUF_HEADROOM;
}

// The same for a shadow a driver has just received into as one segment: a valid mbuf with
// nb_segs 1 has no next (rte_mbuf_check counts the chain against nb_segs) and a received one has
// refcnt 1, so only what a driver writes on receive is undone. Leaving `next` alone matters:
// it lies in the mbuf's second line, which receive drivers do not write.
inline void shadow_make_raw_after_receive(rte_mbuf* m, rte_mempool* home) noexcept {
  m->pool = home;
  m->ol_flags = RTE_MBUF_F_EXTERNAL;
  m->data_off = RTE_PKTMBUF_HEADROOM;
}

}  // namespace rawpipe::dpdk
