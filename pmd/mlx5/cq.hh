// Completion-queue access shared by the receive and transmit data paths: slot addressing, the
// ownership test, and the doorbell policy object for a queue.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "pmd/mlx5/hw.hh"
#include "pmd/mlx5/queue.hh"
#include "pmd/rdma/doorbell.hh"

namespace rawpipe::mlx5 {

// The policy object a burst writes doorbells through: plain stores on hardware, the model's
// in-order sink on the model.
template <class Db, class Queue>
RAWPIPE_ALWAYS_INLINE Db doorbell(const Queue& q) noexcept {
  if constexpr (Db::kModel)
    return Db{q.sink};
  else
    return Db{};
}

RAWPIPE_ALWAYS_INLINE Cqe64* cqe_at(const CqRing& cq, std::uint32_t ci) noexcept {
  return reinterpret_cast<Cqe64*>(cq.buf + std::size_t(ci & (cq.cqe_cnt - 1)) * kCqeSize);
}

// op_own of the CQE at `ci` when software owns it, else -1: the opcode is not INVALID and the
// owner bit equals the pass parity of ci.
RAWPIPE_ALWAYS_INLINE int owned(Cqe64* cqe, std::uint32_t ci, std::uint32_t log) noexcept {
  // A-CQE: pairs with the device's release store of op_own (R-CQE in model/device.cc; DMA order on
  // a NIC). Every other CQE field is read after this load. rdma-core puts an lfence
  // (udma_from_device_barrier on x86-64) here; the acquire load is a plain load on x86-64, which
  // already keeps later loads after it (see pmd/rdma/doorbell.hh).
  const std::uint8_t op = std::atomic_ref<std::uint8_t>(cqe->op_own).load(std::memory_order_acquire);
  if (cqe_opcode(op) == kCqeInvalid || (op & 1u) != ((ci >> log) & 1u)) return -1;
  return op;
}

}  // namespace rawpipe::mlx5
