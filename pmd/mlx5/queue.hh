// Plain ring descriptors and per-queue state of the mlx5 data path.
//
// The data path (rx.cc, tx.cc) sees only these: buffer pointers, counts, strides and doorbell
// records. On a NIC they are filled from mlx5dv_init_obj (verbs.cc); on the device model from the
// model's own rings (model/device.hh). Nothing else differs: the burst functions are the same
// code, instantiated once per doorbell policy (pmd/rdma/doorbell.hh).
//
// Each queue is owned by one lcore; its counters are written by that lcore only and read relaxed
// (as plain 64-bit loads, like every QueueCounters) by the stats thread.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>

#include "rawpipe/mbuf.hh"
#include "rawpipe/compiler.hh"
#include "pipeline/stats/counter.hh"
#include "pipeline/port/driver.hh"
#include "pmd/rdma/doorbell.hh"

namespace rawpipe {
class Pool;
}

namespace rawpipe::mlx5 {

struct CqRing {
  std::uint8_t* buf = nullptr;
  std::uint32_t cqe_cnt = 0;        // power of two
  std::uint32_t* dbrec = nullptr;   // [0] = set_ci (24 bits), [1] = arm (unused when polling)
};

struct RqRing {
  std::uint8_t* buf = nullptr;
  std::uint32_t wqe_cnt = 0;        // power of two
  std::uint32_t stride = 0;         // bytes per WQE (16 cyclic, 32 striding)
  std::uint32_t* dbrec = nullptr;   // RQ doorbell record (QP dbrec[MLX5_RCV_DBR] or RWQ dbrec)
};

struct SqRing {
  std::uint8_t* buf = nullptr;
  std::uint32_t wqe_cnt = 0;        // WQEBBs, power of two
  std::uint32_t* dbrec = nullptr;   // QP dbrec[MLX5_SND_DBR]
  void* bf_reg = nullptr;           // UAR / BlueFlame register
  std::uint32_t bf_size = 0;        // 0: no BlueFlame, the offset never toggles
  std::uint32_t qpn = 0;
};

// Error-CQE counts by syndrome (byte 55 of the error CQE). Cold; indexed by the raw byte.
struct SyndromeCounters {
  std::array<std::uint64_t, 256> count{};
};

enum class RxMode : std::uint8_t { kCyclic, kStriding };

// Control operations a queue needs in the rare error path: put the hardware queue back to a
// working state (ibv_modify_wq/qp through RESET, or the model's reset). Called from the lcore
// that owns the queue, outside any per-packet loop.
struct QueueControl {
  void* ctx = nullptr;
  bool (*reset)(void* ctx, std::uint16_t queue) = nullptr;
};

struct alignas(kCacheLine) RxQueue {
  // ---- hot: every burst ----
  CqRing cq;
  RqRing rq;
  std::uint32_t cq_ci = 0;          // free-running consumer index
  std::uint32_t rq_ci = 0;          // WQEs (cyclic) or striding WQEs consumed; posted = rq_ci + wqe_cnt
  std::uint32_t lkey = 0;
  std::uint32_t data_room = 0;      // bytes the NIC may write into a pool buffer
  std::uint32_t cq_log = 0;         // log2(cq.cqe_cnt)
  std::uint16_t port_id = 0;
  std::uint16_t queue_id = 0;
  Mbuf** elts = nullptr;            // cyclic: buffer posted in each RQ slot
  Pool* pool = nullptr;
  const rdma::DoorbellSink* sink = nullptr;  // model only

  // Replacement buffers allocated ahead, at most one burst of them, so a burst needs one pool
  // call while the pool has a burst free.
  std::uint32_t stash_len = 0;
  Mbuf* stash[kMaxBurst];

  // Compressed session in progress (it may span bursts).
  struct Zip {
    std::uint32_t left = 0;         // minis not yet handed out; 0 = no session
    std::uint32_t total = 0;
    std::uint32_t next = 0;         // index of the next mini
    std::uint32_t title_ci = 0;     // CQ index of the title
    std::uint16_t flags = 0;        // Mbuf flags from the title
    std::uint16_t vlan = 0;         // the title's stripped VLAN TCI
    std::uint32_t flow_tag = 0;
  } zip;

  // Striding RQ.
  std::uint8_t* mprq_buf = nullptr; // wqe_cnt * strides * stride_size bytes, registered
  std::uint32_t stride_size = 0;
  std::uint32_t strides_per_wqe = 0;
  std::uint32_t strides_consumed = 0;

  bool needs_reset = false;
  QueueControl control;

  QueueCounters stats;
  std::uint64_t compressed_sessions = 0;
  std::uint64_t filler_cqes = 0;
  std::uint64_t hw_drops = 0;       // sop_drop_qpn top byte, summed
  std::uint64_t resets = 0;
  std::uint64_t skipped_error_cqes = 0;  // non-critical error CQEs: WQE retired, no reset
  std::uint64_t wqe_id_mismatch = 0;
  SyndromeCounters syndromes;
};

struct alignas(kCacheLine) TxQueue {
  SqRing sq;
  CqRing cq;
  std::uint32_t sq_pi = 0;          // WQEBBs posted (free-running; the WQE index is its low 16 bits)
  std::uint32_t sq_ci = 0;          // WQEBBs completed
  std::uint32_t cq_ci = 0;
  std::uint32_t cq_log = 0;
  std::uint32_t lkey = 0;
  std::uint32_t bf_offset = 0;
  std::uint16_t inline_bytes = 0;   // the device's minimum inline header: 0, 18 (L2), 58 (L3), 78 (L4)
  std::uint16_t comp_every = 32;    // request a completion every N WQEs
  std::uint16_t since_comp = 0;
  std::uint16_t queue_id = 0;
  Mbuf** elts = nullptr;            // buffer of each posted WQEBB
  Pool* pool = nullptr;             // buffers from other pools are copied into this one
  const rdma::DoorbellSink* sink = nullptr;

  bool needs_reset = false;
  QueueControl control;

  QueueCounters stats;
  std::uint64_t dummy_sends = 0;
  std::uint64_t runts = 0;
  std::uint64_t foreign_copies = 0;
  std::uint64_t ring_pads = 0;      // NOPs that kept a multi-WQEBB WQE from crossing the ring end
  std::uint64_t resets = 0;
  SyndromeCounters syndromes;
};

}  // namespace rawpipe::mlx5
