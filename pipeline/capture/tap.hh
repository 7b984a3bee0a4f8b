// Capture taps: copies of packets at a pipeline stage, written to pcap/pcapng files by a writer
// thread so that the lcore never does file I/O.
//
// Where a tap plugs in (the engine calls tap_burst at these points, once per burst):
//   TapStage::kRx       right after a port's rx_burst, before parse (what the wire delivered)
//   TapStage::kFiltered after filters, on the packets going to an endpoint or a transmit
//   TapStage::kDrops    on the packets about to be freed as drops (drop_reason != 0), before the
//                       free; TapConfig::drop_reasons narrows it to some reasons
// tap_burst only reads the packets: the caller keeps ownership and the packets go on unchanged.
//
// Shape: a TapWriter owns the file(s), the rotation and one thread. Each producer (an lcore)
// takes its own Tap lane from TapWriter::add_lane() at setup; a lane is a single-producer,
// single-consumer byte ring of records (timestamp, lengths, port, drop reason, first `snaplen`
// bytes). When a lane is full the record is counted in `dropped` and the lcore moves on.
//
// Rotation: with rotate_bytes or rotate_seconds set, files are named <stem>-<NNNNN><ext>
// (cap.pcap -> cap-00000.pcap, cap-00001.pcap, ...); a new file starts before a record that
// would take the current one over rotate_bytes, or on the first record after rotate_seconds.
// max_files keeps only the newest files. Without rotation the file is exactly `path`.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "rawpipe/mbuf.hh"
#include "rawpipe/tap_config.hh"
#include "pipeline/capture/writer.hh"
#include "rawpipe/compiler.hh"
#include "rawpipe/status.hh"
#include "rawpipe/drop_reason.hh"

namespace rawpipe {

class ConfigSection;

// Reads a tap's keys (path, stage, format, snaplen, rotate_bytes, rotate_seconds, max_files,
// lane_bytes, drop_reasons, port, endpoint) from its config table; `port` and `endpoint` stay
// names (ids -1).
// The caller calls finish().
Result<TapConfig> parse_tap_config(ConfigSection& section, std::string name);

struct TapStats {
  std::uint64_t captured = 0;   // records taken by lanes
  std::uint64_t dropped = 0;    // records lost because a lane was full
  std::uint64_t written = 0;    // records in files
  std::uint64_t files = 0;      // files opened so far
  std::uint64_t bytes = 0;      // bytes written over all files
};

class TapWriter;

// One producer lane. Written by one lcore (tap_burst), read by the writer thread.
class Tap {
 public:
  Tap(const Tap&) = delete;
  Tap& operator=(const Tap&) = delete;
  ~Tap();

 private:
  friend class TapWriter;
  friend void tap_burst(Tap& tap, Mbuf* const* pkts, unsigned n) noexcept;
  Tap(TapWriter* writer, std::uint32_t bytes);

  TapWriter* writer_;
  std::uint8_t* ring_;
  std::uint32_t mask_;
  std::uint32_t snaplen_;
  std::uint64_t reason_mask_;
  std::int32_t port_filter_;      // -1: every port
  std::int32_t endpoint_filter_;  // -1: every endpoint
  bool drops_only_;
  // Producer line: head (own), cached tail, counters (single writer, read relaxed by stats).
  alignas(kFalseSharingRange) std::atomic<std::uint64_t> head_{0};
  std::uint64_t cached_tail_ = 0;
  std::atomic<std::uint64_t> captured_{0};
  std::atomic<std::uint64_t> dropped_{0};
  // Consumer line.
  alignas(kFalseSharingRange) std::atomic<std::uint64_t> tail_{0};
};

// Copies up to snaplen bytes of each packet into the lane (no allocation, no system call, no
// lock). Packets stay owned by the caller and unchanged.
void tap_burst(Tap& tap, Mbuf* const* pkts, unsigned n) noexcept;

class TapWriter {
 public:
  // Validates the config and opens the first file (so a bad path fails at setup, not later).
  static Result<std::unique_ptr<TapWriter>> create(const TapConfig& config);
  ~TapWriter();  // stop() if still running

  const TapConfig& config() const { return config_; }
  // Control path, before start(): one lane per producing thread. The writer keeps ownership.
  Tap& add_lane();
  Status start();
  // Writes everything already in the lanes, closes the file and joins the thread.
  Status stop();
  TapStats stats() const;
  // Every file this writer has created, oldest first (the ones max_files removed excluded).
  std::vector<std::string> files() const;

 private:
  explicit TapWriter(TapConfig config) : config_(std::move(config)) {}
  Status open_next_file();
  std::string file_name(std::uint64_t index) const;
  unsigned drain(Tap& lane);
  void run();

  TapConfig config_;
  std::vector<std::unique_ptr<Tap>> lanes_;
  std::unique_ptr<CaptureWriter> out_;
  std::uint64_t file_index_ = 0;
  std::uint64_t file_opened_ns_ = 0;
  std::deque<std::string> kept_;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> running_{false};
  std::atomic<std::uint64_t> written_{0};
  std::atomic<std::uint64_t> bytes_done_{0};  // bytes of closed files
  std::atomic<std::uint64_t> bytes_now_{0};   // bytes of the open file
  std::atomic<std::uint64_t> files_{0};
  Status error_;
  mutable std::mutex files_mu_;  // control path: files() vs the writer thread's rotation
};

}  // namespace rawpipe
