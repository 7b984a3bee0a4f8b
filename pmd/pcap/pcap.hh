// pcap poll-mode driver: internal types shared by device.cc, rx.cc and tx.cc.
//
// Receive replays a capture file (pcap or pcapng, read by libpcap with nanosecond timestamps)
// into pool buffers, one copy per frame: as fast as possible, at the file's recorded timing, or at
// a fixed packet rate, `loop` times (0: forever). Each pass reopens the file, once per pass and
// never per packet. A file that ends in the middle of a record (a capture cut short) ends the pass
// with one counted error, never a crash; the first such record is remembered (file, byte offset,
// libpcap's reason) for Port::notices(). The frames keep their recorded timestamps.
//
// Transmit appends each frame to a pcap or pcapng file (nanosecond timestamps) through
// pipeline/capture/writer.hh; buffered stdio, no system call per frame.
#pragma once

#include <pcap/pcap.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "pipeline/buf/pool.hh"
#include "pipeline/capture/writer.hh"
#include "pipeline/stats/counter.hh"
#include "pipeline/port/driver.hh"

namespace rawpipe::pcap_pmd {

enum class Timing : std::uint8_t { kFast, kRecorded, kRate };

struct RxQueue {
  pcap_t* handle = nullptr;
  std::string file;
  Timing timing = Timing::kFast;
  double rate_pps = 0;
  std::uint64_t loops = 1;            // 0: forever
  Pool* pool = nullptr;
  std::uint16_t port = 0;
  // Replay state (lcore only).
  const pcap_pkthdr* pending_hdr = nullptr;  // read but not yet delivered (not yet due)
  const std::uint8_t* pending_data = nullptr;
  std::uint64_t pass = 0;             // passes completed
  bool pass_started = false;
  std::uint64_t wall0_ns = 0;         // monotonic time of the pass's (or the rate's) first frame
  std::uint64_t file0_ns = 0;         // recorded time of the pass's first frame
  std::uint64_t released = 0;         // frames released since wall0 (rate timing)
  std::uint64_t reopen_failures = 0;
  QueueCounters counters;
  std::uint64_t file_errors = 0;      // truncated or unreadable records (each ends a pass)
  std::uint64_t snapped = 0;          // frames recorded shorter than on the wire (delivered cut)
  std::uint64_t oversize = 0;         // frames larger than a pool buffer (dropped)
  std::atomic<bool> finished{false};  // every pass done; rx_burst returns 0 from now on
  // Where the next record starts, for the damage report: tracked for classic pcap files (24-byte
  // file header, 16-byte record headers); pcapng block sizes are not visible through libpcap, so
  // there the report gives the byte at which reading stopped instead.
  bool classic = false;
  std::uint64_t record_off = 0;
  std::uint64_t pass_records = 0;     // records read in the current pass
  // The first damaged record, written once by the lcore before `damaged` is set (release), read
  // by the control thread after an acquire load of `damaged`.
  std::atomic<bool> damaged{false};
  std::uint64_t damage_offset = 0;
  std::uint64_t damage_record = 0;    // 1-based record number within the pass
  bool damage_at_record_start = false;
  char damage_reason[PCAP_ERRBUF_SIZE] = {};
};

struct TxQueue {
  std::unique_ptr<CaptureWriter> writer;
  QueueCounters counters;
};

std::uint16_t rx_burst(void* queue, Mbuf** pkts, std::uint16_t n) noexcept;
std::uint16_t rx_none(void* queue, Mbuf** pkts, std::uint16_t n) noexcept;
std::uint16_t tx_burst(void* queue, Mbuf** pkts, std::uint16_t n) noexcept;
std::uint16_t tx_none(void* queue, Mbuf** pkts, std::uint16_t n) noexcept;

// Opens a capture for reading with nanosecond timestamps; checks the link type is Ethernet.
Result<pcap_t*> open_capture(const std::string& file);
// True when the file starts with a classic pcap magic number (not pcapng).
bool is_classic_pcap(const std::string& file);
inline constexpr std::uint64_t kClassicFileHeader = 24;
inline constexpr std::uint64_t kClassicRecordHeader = 16;

}  // namespace rawpipe::pcap_pmd
