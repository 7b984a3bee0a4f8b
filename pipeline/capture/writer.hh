// Capture file writer: pcap (through libpcap, nanosecond magic) or pcapng (written here: libpcap
// reads pcapng but cannot write it), one record at a time.
//
// Used by the capture taps' writer thread and by the pcap PMD's transmit queue; never by an lcore
// directly when a tap is in between. Files are created with mode 0600 (captures hold traffic).
// Single-owner: one thread writes to a CaptureWriter at a time.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>

#include "rawpipe/status.hh"
#include "rawpipe/tap_config.hh"

namespace rawpipe {


// "pcapng" for names ending in .pcapng, "pcap" otherwise.
CaptureFormat capture_format_for_path(std::string_view path);
std::string_view capture_format_name(CaptureFormat f);

class CaptureWriter {
 public:
  static constexpr std::uint32_t kMaxSnaplen = 262144;

  // Creates (truncates) `path` with mode 0600 and writes the file header. Link type Ethernet.
  static Result<std::unique_ptr<CaptureWriter>> create(const std::string& path, CaptureFormat format,
                                                       std::uint32_t snaplen);
  ~CaptureWriter();
  CaptureWriter(const CaptureWriter&) = delete;
  CaptureWriter& operator=(const CaptureWriter&) = delete;

  // Writes one frame: `caplen` bytes of `data` (cut to the snap length here), `orig_len` the
  // length on the wire. `comment` (pcapng only, may be empty) goes into the record's opt_comment.
  // Buffered; returns false once the file has had a write error (the error stays in status()).
  bool write(std::uint64_t ts_ns, const std::uint8_t* data, std::uint32_t caplen, std::uint32_t orig_len,
             std::string_view comment = {}) noexcept;

  // Bytes in the file so far, headers included (what size rotation compares against).
  std::uint64_t bytes() const noexcept { return bytes_; }
  std::uint64_t records() const noexcept { return records_; }
  std::uint32_t snaplen() const noexcept { return snaplen_; }
  const std::string& path() const noexcept { return path_; }

  Status flush();
  // Flushes and closes; the file is complete afterwards. Called by the destructor too.
  Status close();
  Status status() const;

 private:
  CaptureWriter() = default;
  bool put(const void* p, std::size_t n) noexcept;

  std::string path_;
  CaptureFormat format_ = CaptureFormat::kPcap;
  std::uint32_t snaplen_ = 65535;
  std::FILE* file_ = nullptr;
  void* pcap_ = nullptr;         // pcap_t* (dead handle) for the pcap format
  void* dumper_ = nullptr;       // pcap_dumper_t*
  std::uint64_t bytes_ = 0;
  std::uint64_t records_ = 0;
  int error_ = 0;                // errno of the first write error
};

}  // namespace rawpipe
