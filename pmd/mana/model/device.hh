// An in-memory MANA: plays the NIC behind the data path in tests, benchmarks and the `mana-model`
// PMD.
//
// It owns queue memory laid out exactly as manadv_init_obj describes it (zeroed, power-of-two
// sizes), takes doorbell writes in order through the DoorbellSink interface (ModelDoorbell), reads
// the driver's WQEs, and writes CQEs field by field with the owner dword stored last (release),
// the way DMA makes the final dword visible last. What a real NIC would reject (unknown lkeys,
// addresses outside a region, wrong CQ number, VSQ frame or vPort offset in a send OOB, a receive
// doorbell with wqe_cnt set, a doorbell past the ring) is counted per queue as a violation.
//
// Receive: frames handed to receive() land in the RQ's next posted WQEs; consecutive frames with
// the same checksum/hash/VLAN flags share one CQE (CQE_RX_COALESCED_4) up to `coalesce` packets.
// The outer 802.1Q tag is stripped and reported, as MANA does. Frames longer than the buffer get
// CQE_RX_TRUNCATED. Like the NIC, the model never learns the driver's CQ consumer index, so a CQ
// smaller than its RQ can be overrun; tests use that to prove overflow detection.
//
// Send: on an SQ doorbell every new WQE is parsed, its frame gathered, the requested IPv4 header
// and TCP/UDP checksums computed from the pre-filled pseudo-header sum, and a CQE written unless
// suppressed. fail_next_tx() turns the next WQEs into error CQEs of a chosen type, written
// whether suppressed or not.
//
// Threads: queues are independent; each queue's receive()/doorbells may run on its own thread.
// Creating queues and registering memory is control path, before traffic starts.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "pmd/mana/queue.hh"
#include "pmd/rdma/doorbell.hh"

namespace rawpipe::mana {

// The well-known Microsoft RSS key (also DPDK mana's default).
inline constexpr std::array<std::uint8_t, 40> kDefaultRssKey = {
    0x6d, 0x5a, 0x56, 0xda, 0x25, 0x5b, 0x0e, 0xc2, 0x41, 0x67, 0x25, 0x3d, 0x43, 0xa3,
    0x8f, 0xb0, 0xd0, 0xca, 0x2b, 0xcb, 0xae, 0x7b, 0x30, 0xb4, 0x77, 0xcb, 0x2d, 0xa3,
    0x80, 0x30, 0xf2, 0x0c, 0x6a, 0x42, 0xb7, 0x3b, 0xbe, 0xac, 0x01, 0xfa};

// Toeplitz hash of `len` input bytes with a 40-byte key.
std::uint32_t toeplitz_hash(const std::uint8_t* key, const std::uint8_t* in, unsigned len) noexcept;

struct RssResult {
  std::uint32_t hash = 0;
  std::uint32_t ndis_type = 0;  // ndis_hash bits; 0: not hashed
};
// What MANA's RSS computes for a frame (IPv4/IPv6, with ports for UDP/TCP when l4 is set).
RssResult rss_of(const std::uint8_t* key, const std::uint8_t* frame, std::uint32_t len, bool l4) noexcept;

struct ModelOptions {
  unsigned coalesce = 4;  // packets per receive CQE, 1..4
  std::array<std::uint8_t, 40> rss_key = kDefaultRssKey;
  bool rss_l4 = true;
  std::uint32_t vp_offset = 3;  // what manadv_qp.tx_vp_offset reports
  bool capture_tx = false;      // keep a copy of every sent frame (tests)
};

struct ModelQueueStats {
  std::uint64_t rx_frames = 0;       // frames placed in a WQE
  std::uint64_t rx_no_wqe = 0;       // frames dropped: nothing posted
  std::uint64_t rx_truncated = 0;
  std::uint64_t cqes = 0;
  std::uint64_t tx_frames = 0;       // sent (no error)
  std::uint64_t tx_bytes = 0;
  std::uint64_t tx_errors = 0;       // error CQEs written
  std::uint64_t tx_suppressed = 0;   // WQEs completed without a CQE
  std::uint64_t doorbells = 0;
  std::uint64_t violations = 0;
  std::uint64_t pseudo_csum_missing = 0;  // checksum requested without the pseudo-header sum
};

class ManaModel {
 public:
  explicit ManaModel(ModelOptions options = {});
  ~ManaModel();
  ManaModel(const ManaModel&) = delete;
  ManaModel& operator=(const ManaModel&) = delete;

  const ModelOptions& options() const noexcept { return options_; }
  // What the queues' db_page and db_sink are set to (manadv_qp.db_page's stand-in).
  void* db_page() noexcept { return db_page_.data(); }
  const rdma::DoorbellSink* doorbell_sink() const noexcept { return &sink_; }

  // ---- control path (as rdma-core's provider would) ----
  std::uint32_t register_mr(const void* addr, std::size_t len);  // returns the lkey
  // Queue memory is the model's own unless `external` is given: then the model reads and writes
  // that zeroed buffer of `bytes` (what libmana's queue-buffer allocator handed out, as the NIC
  // DMAs into the application's memory) and never frees it.
  std::uint32_t create_cq(std::uint32_t entries, std::uint8_t* external = nullptr, std::uint32_t bytes = 0);  // rounded up to a power of two
  std::uint32_t create_rq(std::uint32_t max_wr, std::uint32_t cq_id, std::uint8_t* external = nullptr,
                          std::uint32_t bytes = 0);
  std::uint32_t create_sq(std::uint32_t max_wr, std::uint32_t cq_id, std::uint8_t* external = nullptr,
                          std::uint32_t bytes = 0);
  // manadv_init_obj's view of a queue.
  void describe_cq(std::uint32_t cq_id, CompletionQueue& out) const;
  void describe_wq(std::uint32_t wq_id, WorkQueue& out) const;
  std::uint32_t vp_offset() const noexcept { return options_.vp_offset; }

  // ---- device side ----
  // A 64-bit write at `offset` of the doorbell page (what ModelDoorbell forwards).
  void on_doorbell(std::uint32_t offset, std::uint64_t value) noexcept;
  // Places frames in RQ `rq_id`; returns how many found a posted WQE (the rest are dropped).
  unsigned receive(std::uint32_t rq_id, std::span<const std::span<const std::uint8_t>> frames) noexcept;
  unsigned receive_one(std::uint32_t rq_id, const std::uint8_t* frame, std::uint32_t len) noexcept;
  // Posted WQEs the RQ has not consumed yet.
  std::uint32_t rq_available(std::uint32_t rq_id) const noexcept;
  // After `skip` more good WQEs, the next `n` WQEs of the SQ complete with error CQE `type` (33..41).
  void fail_next_tx(std::uint32_t sq_id, unsigned n, std::uint32_t type, unsigned skip = 0);
  // A slow NIC: the SQ takes at most `wqes` more WQEs (those already rung included) and leaves the
  // rest posted, untouched, until release_tx(); lets a test see what the driver frees while the
  // NIC still owns WQEs.
  void hold_tx(std::uint32_t sq_id, std::uint32_t wqes);
  void release_tx(std::uint32_t sq_id);
  // Writes one CQE of `type` for the RQ's next WQE (e.g. kCqeRxObjectFence consumes none).
  void inject_rx_cqe(std::uint32_t rq_id, std::uint32_t type);

  ModelQueueStats stats(std::uint32_t queue_id) const;
  // What the queue did that a NIC would reject (first 64). Call while the queue is idle.
  std::vector<std::string> violations(std::uint32_t queue_id) const;
  std::uint64_t unknown_doorbells() const noexcept { return unknown_doorbells_.load(std::memory_order_relaxed); }
  // Frames sent on an SQ (capture_tx only).
  const std::vector<std::vector<std::uint8_t>>& sent(std::uint32_t sq_id) const;

  struct Cq;
  struct Wq;

 private:
  Cq* cq(std::uint32_t id) const noexcept;
  Wq* wq(std::uint32_t id) const noexcept;
  bool check_range(Wq& q, std::uint32_t lkey, std::uint64_t addr, std::uint32_t len) noexcept;
  void write_cqe(Cq& c, std::uint32_t wq_id, bool is_sq, const void* client) noexcept;
  void flush_rx_group(Wq& q) noexcept;
  void process_sq(Wq& q) noexcept;
  void violation(Wq& q, std::string what) noexcept;

  ModelOptions options_;
  struct Mr {
    std::uintptr_t begin, end;
    std::uint32_t lkey;
  };
  std::vector<Mr> mrs_;
  std::vector<std::unique_ptr<Cq>> cqs_;
  std::vector<std::unique_ptr<Wq>> wqs_;
  std::atomic<std::uint64_t> unknown_doorbells_{0};
  std::array<std::uint8_t, kDoorbellPageSize> db_page_{};
  rdma::DoorbellSink sink_{};
};

}  // namespace rawpipe::mana
