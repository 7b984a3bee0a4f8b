// pcap receive: replay a capture file into pool buffers.
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "pmd/pcap/pcap.hh"

namespace rawpipe::pcap_pmd {
namespace {

std::uint64_t monotonic_ns() noexcept {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return std::uint64_t(ts.tv_sec) * 1000000000ull + std::uint64_t(ts.tv_nsec);
}

inline std::uint64_t record_ns(const pcap_pkthdr* h) noexcept {
  // The handle was opened with nanosecond precision: tv_usec holds nanoseconds.
  return std::uint64_t(h->ts.tv_sec) * 1000000000ull + std::uint64_t(h->ts.tv_usec);
}

// Ends the current pass; starts the next one if any remain. Returns false when replay is over.
bool next_pass(RxQueue& q) noexcept {
  count_add(q.pass, 1);
  q.pass_started = false;
  if (q.loops != 0 && q.pass >= q.loops) {
    q.finished.store(true, std::memory_order_release);
    return false;
  }
  // Once per pass, not per packet: reopen the file from the start.
  pcap_close(q.handle);
  char err[PCAP_ERRBUF_SIZE];
  q.handle = pcap_open_offline_with_tstamp_precision(q.file.c_str(), PCAP_TSTAMP_PRECISION_NANO, err);
  if (!q.handle) {
    count_add(q.reopen_failures, 1);
    q.finished.store(true, std::memory_order_release);
    return false;
  }
  q.record_off = kClassicFileHeader;
  q.pass_records = 0;
  return true;
}

// Remembers the first damaged record (once per port, on its first pass: later passes meet the
// same record). Not per packet: at most once per pass.
void note_damage(RxQueue& q) noexcept {
  if (q.damaged.load(std::memory_order_relaxed)) return;
  if (q.classic) {
    q.damage_offset = q.record_off;
    q.damage_at_record_start = true;
  } else {
    FILE* f = pcap_file(q.handle);
    const long at = f ? std::ftell(f) : -1;
    q.damage_offset = at < 0 ? 0 : static_cast<std::uint64_t>(at);
    q.damage_at_record_start = false;
  }
  q.damage_record = q.pass_records + 1;
  std::snprintf(q.damage_reason, sizeof q.damage_reason, "%s", pcap_geterr(q.handle));
  // Release pairs with the acquire in PcapPort::notices(): the fields above are complete.
  q.damaged.store(true, std::memory_order_release);
}

// Reads the next record into q.pending_*; false when the replay is over.
bool fetch(RxQueue& q) noexcept {
  for (;;) {
    pcap_pkthdr* h = nullptr;
    const u_char* data = nullptr;
    int rc = pcap_next_ex(q.handle, &h, &data);
    if (rc == 1) {
      q.pending_hdr = h;
      q.pending_data = data;
      q.record_off += kClassicRecordHeader + h->caplen;
      ++q.pass_records;
      return true;
    }
    if (rc != PCAP_ERROR_BREAK) {  // e.g. truncated dump file
      count_add(q.file_errors, 1);
      note_damage(q);
    }
    if (!next_pass(q)) return false;
  }
}

}  // namespace

std::uint16_t rx_none(void*, Mbuf**, std::uint16_t) noexcept { return 0; }

std::uint16_t rx_burst(void* queue, Mbuf** pkts, std::uint16_t n) noexcept {
  RxQueue& q = *static_cast<RxQueue*>(queue);
  if (q.finished.load(std::memory_order_relaxed)) return 0;  // own flag, set on this thread
  n = std::min<std::uint16_t>(n, kMaxBurst);
  Mbuf* bufs[kMaxBurst];
  if (!q.pool->alloc_bulk(bufs, n)) {
    count_add(q.counters.rx_nombuf, 1);
    return 0;
  }
  const std::uint64_t now = q.timing == Timing::kFast ? 0 : monotonic_ns();
  unsigned got = 0, used = 0;
  std::uint64_t bytes = 0;
  while (got < n) {
    if (!q.pending_hdr && !fetch(q)) break;
    const pcap_pkthdr* h = q.pending_hdr;
    const std::uint64_t ts = record_ns(h);
    if (q.timing != Timing::kFast) {
      if (!q.pass_started && (q.timing == Timing::kRecorded || q.pass == 0)) {
        q.wall0_ns = now;
        q.file0_ns = ts;
        q.released = 0;
      }
      q.pass_started = true;
      if (q.timing == Timing::kRecorded) {
        // Out-of-order records (ts before the first) are due at once.
        if (ts > q.file0_ns && now - q.wall0_ns < ts - q.file0_ns) break;
      } else if (double(q.released) >= double(now - q.wall0_ns) * q.rate_pps * 1e-9) {
        break;
      }
      ++q.released;
    }
    q.pending_hdr = nullptr;
    Mbuf* m = bufs[used];
    if (h->caplen > m->buf_len - m->data_off) [[unlikely]] {
      count_add(q.oversize, 1);
      continue;
    }
    const bool cut = h->caplen < h->len;
    if (cut) [[unlikely]]
      count_add(q.snapped, 1);
    std::memcpy(m->data(), q.pending_data, h->caplen);
    m->data_len = h->caplen;
    m->port = q.port;
    m->queue = 0;
    m->timestamp_ns = ts;
    // Parse tells a frame the capture cut (drop reason cut_by_capture) from a malformed one.
    m->flags = pkt_flag::kTimestamp | (cut ? pkt_flag::kCutByCapture : 0);
    bytes += h->caplen;
    pkts[got++] = m;
    ++used;
  }
  if (used < n) mbuf_free_bulk(bufs + used, n - used);
  if (got) {
    count_add(q.counters.rx_packets, got);
    count_add(q.counters.rx_bytes, bytes);
  }
  return static_cast<std::uint16_t>(got);
}

}  // namespace rawpipe::pcap_pmd
