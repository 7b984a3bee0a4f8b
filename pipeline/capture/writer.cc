#include "pipeline/capture/writer.hh"

#include <fcntl.h>
#include <pcap/pcap.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace rawpipe {
namespace {

// pcapng block types and options (draft-ietf-opsawg-pcapng).
constexpr std::uint32_t kShbType = 0x0A0D0D0A;
constexpr std::uint32_t kIdbType = 0x00000001;
constexpr std::uint32_t kEpbType = 0x00000006;
constexpr std::uint32_t kByteOrderMagic = 0x1A2B3C4D;
constexpr std::uint16_t kOptEnd = 0;
constexpr std::uint16_t kOptComment = 1;
constexpr std::uint16_t kIfTsresol = 9;
constexpr std::uint16_t kLinkEthernet = 1;
constexpr std::size_t kFileBuffer = 1u << 20;

constexpr std::uint32_t pad4(std::uint32_t n) { return (n + 3u) & ~3u; }

}  // namespace

CaptureFormat capture_format_for_path(std::string_view path) {
  return path.ends_with(".pcapng") ? CaptureFormat::kPcapng : CaptureFormat::kPcap;
}

std::string_view capture_format_name(CaptureFormat f) { return f == CaptureFormat::kPcapng ? "pcapng" : "pcap"; }

Result<std::unique_ptr<CaptureWriter>> CaptureWriter::create(const std::string& path, CaptureFormat format,
                                                             std::uint32_t snaplen) {
  if (snaplen < 16 || snaplen > kMaxSnaplen)
    return Status::errorf("capture file '{}': snap length {} is outside 16..{}", path, snaplen, kMaxSnaplen);
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return Status::errorf("capture file '{}': cannot create it: {}", path, std::strerror(errno));
  // O_CREAT's mode does not apply to a file that already existed.
  if (fchmod(fd, 0600) < 0) {
    int err = errno;
    ::close(fd);
    return Status::errorf("capture file '{}': cannot make it private (0600): {}", path, std::strerror(err));
  }
  std::FILE* f = fdopen(fd, "wb");
  if (!f) {
    int err = errno;
    ::close(fd);
    return Status::errorf("capture file '{}': {}", path, std::strerror(err));
  }
  std::setvbuf(f, nullptr, _IOFBF, kFileBuffer);
  std::unique_ptr<CaptureWriter> w(new CaptureWriter());
  w->path_ = path;
  w->format_ = format;
  w->snaplen_ = snaplen;
  w->file_ = f;
  if (format == CaptureFormat::kPcap) {
    pcap_t* dead = pcap_open_dead_with_tstamp_precision(DLT_EN10MB, static_cast<int>(snaplen),
                                                        PCAP_TSTAMP_PRECISION_NANO);
    if (!dead) return Status::errorf("capture file '{}': libpcap could not make a handle", path);
    w->pcap_ = dead;
    pcap_dumper_t* d = pcap_dump_fopen(dead, f);
    if (!d) return Status::errorf("capture file '{}': libpcap: {}", path, pcap_geterr(dead));
    w->dumper_ = d;
    w->bytes_ = 24;  // the pcap file header
  } else {
    // Section header: no options, section length unknown (-1).
    std::uint32_t shb[7] = {kShbType, 28, kByteOrderMagic, 1 /* major 1, minor 0 */, 0xffffffffu, 0xffffffffu, 28};
    // Interface description: Ethernet, our snap length, if_tsresol = 9 (nanoseconds).
    std::uint32_t idb_opts[3] = {std::uint32_t(kIfTsresol) | (1u << 16), 9u, std::uint32_t(kOptEnd)};
    std::uint32_t idb_head[4] = {kIdbType, 32, std::uint32_t(kLinkEthernet), snaplen};
    std::uint32_t idb_tail = 32;
    if (!w->put(shb, sizeof shb) || !w->put(idb_head, sizeof idb_head) || !w->put(idb_opts, sizeof idb_opts) ||
        !w->put(&idb_tail, sizeof idb_tail))
      return Status::errorf("capture file '{}': cannot write the header: {}", path, std::strerror(w->error_));
  }
  return w;
}

CaptureWriter::~CaptureWriter() { (void)close(); }

bool CaptureWriter::put(const void* p, std::size_t n) noexcept {
  if (std::fwrite(p, 1, n, file_) != n) {
    if (!error_) error_ = errno ? errno : EIO;
    return false;
  }
  bytes_ += n;
  return true;
}

bool CaptureWriter::write(std::uint64_t ts_ns, const std::uint8_t* data, std::uint32_t caplen,
                          std::uint32_t orig_len, std::string_view comment) noexcept {
  if (error_ || !file_) return false;
  if (caplen > snaplen_) caplen = snaplen_;
  if (format_ == CaptureFormat::kPcap) {
    pcap_pkthdr h{};
    h.ts.tv_sec = static_cast<time_t>(ts_ns / 1000000000ull);
    h.ts.tv_usec = static_cast<suseconds_t>(ts_ns % 1000000000ull);  // nanoseconds: the handle is nano
    h.caplen = caplen;
    h.len = orig_len;
    pcap_dump(static_cast<u_char*>(dumper_), &h, data);
    if (std::ferror(file_)) {
      error_ = errno ? errno : EIO;
      return false;
    }
    bytes_ += 16 + caplen;
    ++records_;
    return true;
  }
  const std::uint32_t data_pad = pad4(caplen) - caplen;
  const std::uint32_t comment_len = static_cast<std::uint32_t>(std::min<std::size_t>(comment.size(), 65535));
  const std::uint32_t opts_len = comment_len ? 4 + pad4(comment_len) + 4 : 0;
  const std::uint32_t total = 28 + pad4(caplen) + opts_len + 4;
  std::uint32_t head[7] = {kEpbType, total, 0, std::uint32_t(ts_ns >> 32), std::uint32_t(ts_ns), caplen, orig_len};
  static constexpr std::uint8_t kZeros[4] = {};
  bool ok = put(head, sizeof head) && put(data, caplen) && put(kZeros, data_pad);
  if (ok && comment_len) {
    std::uint32_t opt = std::uint32_t(kOptComment) | (comment_len << 16);
    std::uint32_t end = kOptEnd;
    ok = put(&opt, 4) && put(comment.data(), comment_len) && put(kZeros, pad4(comment_len) - comment_len) &&
         put(&end, 4);
  }
  ok = ok && put(&total, 4);
  if (ok) ++records_;
  return ok;
}

Status CaptureWriter::flush() {
  if (file_ && std::fflush(file_) != 0 && !error_) error_ = errno;
  return status();
}

Status CaptureWriter::close() {
  if (!file_) return status();
  if (std::fflush(file_) != 0 && !error_) error_ = errno;
  if (dumper_) {
    // pcap_dump_close fcloses the FILE it was given.
    pcap_dump_close(static_cast<pcap_dumper_t*>(dumper_));
    dumper_ = nullptr;
  } else if (std::fclose(file_) != 0 && !error_) {
    error_ = errno;
  }
  file_ = nullptr;
  if (pcap_) pcap_close(static_cast<pcap_t*>(pcap_));
  pcap_ = nullptr;
  return status();
}

Status CaptureWriter::status() const {
  if (!error_) return Status::ok();
  return Status::errorf("capture file '{}': write failed: {} (disk full or file system read-only?)", path_,
                        std::strerror(error_));
}

}  // namespace rawpipe
