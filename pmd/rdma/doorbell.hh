// Doorbell policies: how a PMD's data path tells the device about new work.
//
// Two kinds of doorbell exist on both mlx5 and MANA:
//   - doorbell records: 32-bit words in host memory that the device reads by DMA (mlx5 RQ, SQ and
//     CQ records). Everything the record publishes (WQEs, invalidated CQEs) must be written first.
//   - device registers: write-only MMIO words (the mlx5 UAR/BlueFlame register, the MANA doorbell
//     page). The record (if any) must be globally visible before the register write, and the
//     write-combining buffer is flushed after it.
//
// The data path is a template over a policy with this shape:
//   void record(std::uint32_t* rec, std::uint32_t value) const noexcept;   // value in device byte order
//   void mmio64(void* base, std::size_t offset, std::uint64_t value) const noexcept;
// HwDoorbell is what runs on a NIC: the barriers rdma-core documents (udma_to_device_barrier before
// a record, mmio_wc_start before and mmio_flush_writes after a register write) around plain stores.
// ModelDoorbell makes the same stores (the model reads records from memory with acquire loads) and
// hands each register write to the model synchronously, so the model sees every write in program
// order and can check that a record was published before the register that announces it.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

// x86-64 only. Every barrier below is the x86-64 reading of rdma-core's util/udma_barrier.h; on
// another architecture (aarch64: dmb oshst / dmb oshld / dsb st) they would be wrong, so the
// build stops here rather than run with them.
#if !defined(__x86_64__)
#error "pmd/rdma doorbells and barriers are written for x86-64 only (rdma-core util/udma_barrier.h has the other architectures); build with -Dpmd_mlx5=disabled -Dpmd_mana=disabled"
#endif

namespace rawpipe::rdma {

// udma_to_device_barrier(): orders descriptor writes before the device may read them. On x86-64
// rdma-core defines it as a compiler barrier (asm volatile("" ::: "memory")): stores are not
// reordered with stores and DMA is coherent (DPDK's rte_io_wmb is the same); kept as a real
// barrier so no compiler moves a descriptor store past the doorbell.
//
// The other direction, udma_from_device_barrier() after testing an owner/valid bit, is an
// lfence in rdma-core on x86-64. rawpipe reads the owner byte with an acquire load instead (the
// CQ polls in pmd/mlx5/cq.hh and pmd/mana/queue.hh): x86-64 does not reorder a load with later
// loads, so that orders the CQE body reads after it as the lfence does, without the lfence's
// cost; it is not the instruction rdma-core uses.
inline void dma_wmb() noexcept { std::atomic_signal_fence(std::memory_order_seq_cst); }
// mmio_wc_start() / mmio_flush_writes(): sfence, because the UAR is mapped write-combining and WC
// stores may pass earlier WB stores.
inline void wc_wmb() noexcept { __builtin_ia32_sfence(); }
inline void mmio_flush() noexcept { __builtin_ia32_sfence(); }

struct HwDoorbell {
  static constexpr bool kModel = false;

  void record(std::uint32_t* rec, std::uint32_t value) const noexcept {
    // R-DB: release store = dma_wmb + plain store on x86-64. The device's DMA read (or the
    // model's acquire load, A-DB) sees every descriptor written before it.
    std::atomic_ref<std::uint32_t>(*rec).store(value, std::memory_order_release);
  }

  void mmio64(void* base, std::size_t offset, std::uint64_t value) const noexcept {
    wc_wmb();
    // One 8-byte store, never memcpy: string moves do not guarantee the device sees one write.
    *reinterpret_cast<volatile std::uint64_t*>(static_cast<char*>(base) + offset) = value;
    mmio_flush();
  }
};

// What a device model implements to receive register writes. Plain function pointers: one call
// per doorbell (per burst), not per packet.
struct DoorbellSink {
  void* ctx = nullptr;
  void (*mmio64)(void* ctx, void* base, std::size_t offset, std::uint64_t value) noexcept = nullptr;
  // Optional: sees every record write after it is stored, for ordering checks and traces.
  void (*record)(void* ctx, std::uint32_t* rec, std::uint32_t value) noexcept = nullptr;
};

struct ModelDoorbell {
  static constexpr bool kModel = true;
  const DoorbellSink* sink = nullptr;

  void record(std::uint32_t* rec, std::uint32_t value) const noexcept {
    // R-DB: pairs with the model's acquire load of the record (A-DB).
    std::atomic_ref<std::uint32_t>(*rec).store(value, std::memory_order_release);
    if (sink->record) sink->record(sink->ctx, rec, value);
  }

  void mmio64(void* base, std::size_t offset, std::uint64_t value) const noexcept {
    // No fence: the model reads the record that announces this write with an acquire load
    // (A-DB), which orders everything the driver wrote before its release store (R-DB).
    sink->mmio64(sink->ctx, base, offset, value);
  }
};

}  // namespace rawpipe::rdma
