// Plain ring descriptors for MANA work and completion queues, and the owner-bit CQ poll.
//
// The data path (rx.cc, tx.cc) runs on these and nothing else: production fills them from
// manadv_init_obj, the device model (pmd/mana/model) from its own memory. Neither side knows
// which one it talks to.
#pragma once

#include <atomic>
#include <bit>
#include <cstdint>

#include "rawpipe/compiler.hh"
#include "pmd/mana/hw.hh"

namespace rawpipe::mana {

// A send or receive work queue. `head` (driver writes) and `tail` (driver retires) count 32-byte
// basic units and run free; the byte position of unit u is (u * 32) & (size - 1).
struct WorkQueue {
  std::uint8_t* buf = nullptr;
  std::uint32_t size = 0;   // bytes, a power of two
  std::uint32_t count = 0;  // WQEs the queue was created for (max_wr / max_send_wr)
  std::uint32_t id = 0;
  std::uint32_t head = 0;
  std::uint32_t tail = 0;

  std::uint8_t* at(std::uint32_t bu) const noexcept { return buf + ((bu * kWqeBu) & (size - 1)); }
  std::uint32_t capacity_bu() const noexcept { return size / kWqeBu; }
};

// A completion queue. `head` starts at `count` (rdma-core INITIALIZED_OWNER_BIT): the entry at
// head % count belongs to software when its owner bits equal (head / count) & 7.
struct CompletionQueue {
  Cqe* buf = nullptr;
  std::uint32_t count = 0;  // entries, a power of two
  std::uint32_t shift = 0;  // log2(count)
  std::uint32_t id = 0;
  std::uint32_t head = 0;

  void init(Cqe* b, std::uint32_t n, std::uint32_t cq_id) noexcept {
    buf = b;
    count = n;
    shift = static_cast<std::uint32_t>(std::countr_zero(n));
    id = cq_id;
    head = n;
  }
};

enum class CqPoll : std::uint8_t { kEmpty, kReady, kOverflow };

// Looks at the entry at cq.head without consuming it. kOverflow: the NIC wrote this slot more than
// once since we last read it (owner bits neither the previous pass nor the current one), so
// completions were lost. The caller stops its burst there, as DPDK and the kernel do.
RAWPIPE_ALWAYS_INLINE CqPoll cq_peek(const CompletionQueue& cq, const Cqe*& out) noexcept {
  const Cqe* e = &cq.buf[cq.head & (cq.count - 1)];
  // A-CQE: acquire pairs with the device's owner-last store (model: R-CQE in model/device.cc;
  // hardware: DMA writes of one CQE land before its final dword). No field of the entry is read
  // before this load. On x86 loads are not reordered with loads, so this costs nothing.
  const std::uint32_t word = __atomic_load_n(&e->wq_owner, __ATOMIC_ACQUIRE);
  const std::uint32_t owner = cqe_owner(word);
  const std::uint32_t now = (cq.head >> cq.shift) & kOwnerMask;
  const std::uint32_t previous = (now - 1) & kOwnerMask;
  if (owner == previous) return CqPoll::kEmpty;
  if (owner != now) [[unlikely]] return CqPoll::kOverflow;
  out = e;
  return CqPoll::kReady;
}

// The doorbell policy instance for a queue: rdma::HwDoorbell on a NIC, rdma::ModelDoorbell (which
// hands each register write to the model) in tests and the mana-model PMD.
template <class Db, class Queue>
RAWPIPE_ALWAYS_INLINE Db doorbell_of(const Queue& q) noexcept {
  if constexpr (Db::kModel) return Db{q.db_sink};
  else return Db{};
}

}  // namespace rawpipe::mana
