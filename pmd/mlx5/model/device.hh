// An in-memory ConnectX: the device model the mlx5 data path runs against without hardware.
//
// It owns rings laid out as mlx5dv_init_obj describes them (CQs of 64-byte CQEs initialised to
// op_own 0xF0, RQs of data-segment or striding WQEs, SQs of 64-byte WQEBBs, doorbell records),
// and plays the NIC:
//   receive  - a frame is steered by the flow rules the driver installed (the same ibv_flow_attr
//              bytes a NIC gets; unmatched frames go "to the kernel" and are counted), spread by
//              Toeplitz RSS over an indirection table, placed in the next posted WQE (only if the
//              RQ doorbell record says it is posted; lkey, address and length are checked against
//              the registered memory and bad ones produce error CQEs), and completed with a CQE
//              written field by field in big-endian with op_own stored last (release). Options:
//              CQE compression sessions (title + mini-CQE arrays, holes left stale), striding RQ
//              (stride accounting, filler CQEs).
//   transmit - on a UAR write (or, on its own thread, when the SQ record moves) it parses WQEs
//              from its consumer index up to the record, checks the WQE index, QPN, DS count,
//              inline header size and data-segment lkeys, gathers the frame into `sent()`, and
//              writes a REQ CQE for WQEs that asked for one. NOP WQEs (dummy sends) are dropped.
//   errors   - on demand (fail_next_rx / fail_next_tx) or on a bad descriptor: an error CQE with
//              the syndrome. On the critical syndromes (LOCAL_QP_OP, LOCAL_PROT, WR_FLUSH) the
//              queue enters the error state and an RQ flushes its posted WQEs with WR_FLUSH CQEs,
//              until the driver resets the queue; any other RX syndrome (LOCAL_LENGTH) consumes
//              the one WQE and the RQ keeps receiving.
// Every counter wraps as on hardware (16-bit WQE counters, 24-bit CQ index), so tiny rings
// exercise every wrap quickly.
//
// Thread safety: every entry point takes the model's mutex, so the model may run on its own
// thread (start_thread) while a driver thread polls; the driver and the model share only ring
// memory, ordered by the doorbell records (release/acquire) and op_own (release/acquire).
#pragma once

#include <infiniband/verbs.h>

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <span>
#include <thread>
#include <vector>

#include "pmd/mlx5/flow.hh"
#include "pmd/mlx5/queue.hh"
#include "pmd/rdma/doorbell.hh"

namespace rawpipe::mlx5::model {

struct RqOptions {
  std::uint32_t wqe_cnt = 256;
  std::uint32_t cqe_cnt = 256;
  bool compression = false;
  bool striding = false;
  std::uint32_t log_stride_size = 6;
  std::uint32_t log_strides = 4;
};

struct SqOptions {
  std::uint32_t wqe_cnt = 256;
  std::uint32_t cqe_cnt = 64;
  std::uint16_t min_inline = 18;   // what the device requires in the eth segment
};

// Per-frame metadata an injector may set.
struct FrameMeta {
  std::uint32_t rx_hash_type = 0;  // reported when RSS is off
};

struct Counters {
  std::uint64_t rx_delivered = 0;      // frames completed into an RQ
  std::uint64_t rx_to_kernel = 0;      // no flow rule matched: the kernel would get it
  std::uint64_t rx_no_wqe = 0;         // the RQ had nothing posted (out-of-buffer drop)
  std::uint64_t rx_cq_full = 0;        // CQ had no room (would be a CQ overflow on a NIC)
  std::uint64_t rx_queue_error = 0;    // dropped while the RQ was in the error state
  std::uint64_t rx_error_cqes = 0;
  std::uint64_t rx_flush_cqes = 0;
  std::uint64_t sessions = 0;          // compressed sessions written
  std::uint64_t fillers = 0;
  std::uint64_t tx_wqes = 0;
  std::uint64_t tx_frames = 0;
  std::uint64_t tx_nops = 0;
  std::uint64_t tx_error_cqes = 0;
  std::uint64_t tx_cqes = 0;
  std::uint64_t uar_writes = 0;
  std::uint64_t doorbell_order_errors = 0;  // UAR written before the SQ record covered the WQE
  std::uint64_t rx_not_ready = 0;      // steered to an RQ out of the ready state (quiesced): dropped
  std::uint64_t record_errors = 0;     // an RQ or SQ doorbell record behind the consumer or past the ring
};

inline constexpr std::uint64_t kAllHashFields =
    IBV_RX_HASH_SRC_IPV4 | IBV_RX_HASH_DST_IPV4 | IBV_RX_HASH_SRC_IPV6 | IBV_RX_HASH_DST_IPV6 |
    IBV_RX_HASH_SRC_PORT_TCP | IBV_RX_HASH_DST_PORT_TCP | IBV_RX_HASH_SRC_PORT_UDP | IBV_RX_HASH_DST_PORT_UDP;

class Device {
 public:
  Device();
  ~Device();
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  // ---- control (what verbs would do) ----
  std::uint32_t reg_mr(void* addr, std::size_t len);   // returns the lkey
  void dereg_mr(std::uint32_t lkey);
  // Creates an RQ with its CQ; fills the descriptors the PMD uses. Returns the RQ id.
  std::uint16_t create_rq(const RqOptions& o, RqRing& rq, CqRing& cq);
  std::uint16_t create_sq(const SqOptions& o, SqRing& sq, CqRing& cq);
  // RSS over `rqs` with a 40-byte Toeplitz key (indirection table filled round-robin to 2^n).
  void set_rss(std::span<const std::uint8_t> key, std::span<const std::uint16_t> rqs);
  // Destination for flows: with RSS configured, the RSS group; otherwise RQ `rq`.
  // `hash_fields` (IBV_RX_HASH_*) are those of the hash QP the flow is attached to: with RSS the
  // model hashes only those, as a TIR does; a frame none of them covers gets hash 0.
  int create_flow(std::uint16_t rq, const ibv_flow_attr* attr, std::uint64_t hash_fields = kAllHashFields);   // handle >= 0
  void destroy_flow(int handle);
  // Every RQ and SQ leaves the ready state (ibv_modify_wq/qp to RESET): frames steered to them
  // are dropped without touching the posted buffers and sends are not read, until reset_rq /
  // reset_sq bring each back.
  void quiesce();
  // The buffer addresses a ready cyclic RQ has posted (WQEs the device may still write into);
  // empty once the RQ left the ready state.
  std::vector<std::uint64_t> posted_buffers(std::uint16_t rq) const;
  bool reset_rq(std::uint16_t rq);
  bool reset_sq(std::uint16_t sq);
  // One queue out of the ready state (ibv_modify_wq / ibv_modify_qp to RESET), as quiesce() does
  // for all; reset_rq / reset_sq bring it back.
  void stop_rq(std::uint16_t rq);
  void stop_sq(std::uint16_t sq);
  const rdma::DoorbellSink* sink() const noexcept { return &sink_; }

  // ---- on-demand errors ----
  void fail_next_rx(std::uint16_t rq, std::uint8_t syndrome);
  void fail_next_tx(std::uint16_t sq, std::uint8_t syndrome);
  // Fault injection for long runs: every `every`-th frame that finds a posted WQE (on any RQ)
  // completes with an error CQE of `syndrome` instead, and the RQ flushes the rest of its posted
  // WQEs, as fail_next_rx does. Compressed sessions are not formed while this is on, so each
  // frame is counted. 0 turns it off.
  void fail_every_rx(std::uint32_t every, std::uint8_t syndrome);

  // ---- receive: frames arriving from the wire ----
  enum class Rx { kDelivered, kToKernel, kNoWqe, kCqFull, kQueueError, kErrorCqe };
  Rx receive(std::span<const std::uint8_t> frame, const FrameMeta& meta = {});
  // Several frames at once: with compression on, runs of frames to the same RQ sharing the
  // title fields become one compressed session (2..64 CQEs). Returns frames that were consumed
  // (delivered, sent to the kernel, or dropped with a counter); stops early at kNoWqe/kCqFull
  // when `stop_when_full`.
  std::size_t receive_burst(std::span<const std::vector<std::uint8_t>> frames, bool stop_when_full = false);

  // ---- transmit ----
  void process_tx();                   // parse every SQ up to its doorbell record
  // Whether sent frames are kept for take_sent() (tests) or only counted (long runs).
  void keep_sent(bool keep);
  std::vector<std::vector<std::uint8_t>> take_sent();

  Counters counters() const;
  std::uint64_t rq_syndromes(std::uint16_t rq, std::uint8_t syndrome) const;

  // Runs the device on its own thread: it delivers `total` frames, cycling through `frames` in
  // order (waiting for posted WQEs and CQ room, never dropping; total 0 = frames.size()), and
  // processes transmits, until stop_thread(). With rate_pps > 0 the wire carries at most that
  // many frames per second (from the thread's start; a late thread catches up in 16-frame batches).
  void start_thread(std::vector<std::vector<std::uint8_t>> frames, std::uint64_t total = 0, double rate_pps = 0);
  void stop_thread();
  std::size_t thread_delivered() const noexcept { return thread_delivered_.load(std::memory_order_acquire); }

 private:
  struct Cq;
  struct Rq;
  struct Sq;
  struct Flow;
  struct Mr {
    std::uint8_t* addr;
    std::size_t len;
    std::uint32_t lkey;
  };

  static void on_mmio(void* ctx, void* base, std::size_t offset, std::uint64_t value) noexcept;
  bool mr_ok(std::uint32_t lkey, std::uint64_t addr, std::size_t len) const;
  Rx receive_locked(std::span<const std::uint8_t> frame, const FrameMeta& meta);
  int steer(std::span<const std::uint8_t> frame, std::uint32_t& tag, std::uint32_t& hash, std::uint8_t& hash_type) const;
  std::uint32_t cq_room(const Cq& cq) const;
  void write_error_cqe(Cq& cq, std::uint8_t opcode, std::uint8_t syndrome, std::uint16_t wqe_counter, std::uint32_t qpn,
                       std::uint32_t byte_cnt = 0);
  void error_rq(Rq& rq, std::uint8_t syndrome);
  std::size_t try_session(std::span<const std::vector<std::uint8_t>> frames);
  void process_sq(Sq& sq);

  mutable std::mutex mu_;
  std::vector<Mr> mrs_;
  std::uint32_t next_lkey_ = 0x1000;
  std::vector<std::unique_ptr<Cq>> cqs_;
  std::vector<std::unique_ptr<Rq>> rqs_;
  std::vector<std::unique_ptr<Sq>> sqs_;
  std::vector<std::unique_ptr<Flow>> flows_;
  std::vector<std::uint8_t> rss_key_;
  std::vector<std::uint16_t> rss_table_;
  std::vector<std::vector<std::uint8_t>> sent_;
  bool keep_sent_ = true;
  Counters c_;
  std::uint32_t rx_fail_every_ = 0;
  std::uint32_t rx_fail_count_ = 0;
  std::uint8_t rx_fail_syndrome_ = 0;
  rdma::DoorbellSink sink_;

  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::atomic<std::size_t> thread_delivered_{0};
  // Written from the driver's thread by UAR writes (no lock when the model has its own thread).
  std::atomic<std::uint64_t> uar_writes_{0};
  std::atomic<std::uint64_t> order_errors_{0};
};

}  // namespace rawpipe::mlx5::model
