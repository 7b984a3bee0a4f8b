// How the MANA data path rings a doorbell: a policy chosen at compile time per burst function.
//
//   MmioDoorbell   production: all WQE stores become visible to the device before the 64-bit
//                  store into the shared doorbell page.
//   ModelDoorbell  the device model: the same value is handed to a DoorbellSink synchronously, so
//                  the model sees every write, in order. The doorbell page is write-only and
//                  shared by every queue of a context, so a memory-backed fake would only keep the
//                  last value per offset.
#pragma once

#include <atomic>
#include <cstdint>

namespace rawpipe::mana {

class DoorbellSink {
 public:
  virtual ~DoorbellSink() = default;
  // `offset` is the register's offset in the page (kDoorbellSq/Rq/Cq), `value` the 64-bit entry.
  virtual void on_doorbell(std::uint32_t offset, std::uint64_t value) noexcept = 0;
};

struct MmioDoorbell {
  static void ring(void* page, std::uint32_t offset, std::uint64_t value) noexcept {
    // W-DB: WQE stores (write-back memory) must reach the device before it reads the doorbell.
    // x86 keeps stores in order, even to uncached MMIO, so a compiler barrier is enough
    // (rdma-core udma_to_device_barrier); other ISAs need the release fence's store barrier.
    std::atomic_thread_fence(std::memory_order_release);
    *reinterpret_cast<volatile std::uint64_t*>(static_cast<std::uint8_t*>(page) + offset) = value;
  }
};

struct ModelDoorbell {
  static void ring(void* sink, std::uint32_t offset, std::uint64_t value) noexcept {
    // W-DB as above; the model reads the WQEs on this thread, so program order already holds.
    std::atomic_thread_fence(std::memory_order_release);
    static_cast<DoorbellSink*>(sink)->on_doorbell(offset, value);
  }
};

}  // namespace rawpipe::mana
