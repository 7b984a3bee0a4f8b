#include "pipeline/capture/tap.hh"

#include <time.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>

#include "pipeline/config/section.hh"
#include "pipeline/config/tables.hh"

namespace rawpipe {
namespace {

// A record in a lane: this header, then `caplen` bytes, padded to 8. A header with
// caplen == kWrapMark tells the reader the producer skipped to the start of the ring.
struct RecordHeader {
  std::uint64_t ts_ns;
  std::uint32_t caplen;
  std::uint32_t orig_len;
  std::uint16_t port;
  std::uint8_t drop_reason;
  std::uint8_t pad[5];
};
static_assert(sizeof(RecordHeader) == 24);
constexpr std::uint32_t kWrapMark = 0xffffffffu;

constexpr std::uint64_t record_size(std::uint32_t caplen) { return (sizeof(RecordHeader) + caplen + 7) & ~7ull; }

std::uint64_t realtime_ns() noexcept {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return std::uint64_t(ts.tv_sec) * 1000000000ull + std::uint64_t(ts.tv_nsec);
}

std::uint64_t monotonic_ns() noexcept {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return std::uint64_t(ts.tv_sec) * 1000000000ull + std::uint64_t(ts.tv_nsec);
}

const KeyDoc kTapDocs[] = {
    {"name", "string", "non-empty, unique", "\"taps[N]\"", "name in stats and metrics"},
    {"stage", "string", "\"rx\", \"filtered\", \"drops\"", "\"rx\"",
     "every received frame, frames going to an endpoint or a transmit, or dropped frames with their reason"},
    {"path", "string", "a writable file path", "required", "capture file; a rotation appends a number"},
    {"format", "string", "\"auto\", \"pcap\", \"pcapng\"", "\"auto\" (by the path's extension)",
     "capture file format; pcapng records carry the drop reason as a comment"},
    {"snaplen", "integer", "16 to 262144", "65535", "bytes kept of each frame"},
    {"rotate_bytes", "integer", "0, or 4096 and more", "0", "start a new file past this size; 0: never"},
    {"rotate_seconds", "number", "0 to 1e9", "0", "start a new file after this many seconds; 0: never"},
    {"max_files", "integer", "0 to 1000000 (with a rotation)", "0", "keep only the newest N files; 0: keep all"},
    {"lane_bytes", "integer", "power of two, 65536 to 1073741824", "4194304",
     "bytes of each lcore's lane to the writer thread; a full lane counts the frame as lost"},
    {"drop_reasons", "string list", "drop reason names (stage \"drops\" only)", "every reason",
     "capture only these drop reasons"},
    {"port", "string", "a [[ports]] name", "every port", "capture only this port's frames"},
    {"endpoint", "string", "an [[endpoints]] name (not with stage \"rx\")", "every endpoint",
     "capture only this endpoint's frames"},
};

}  // namespace

const KeyTable kTapKeys{"taps", "[[taps]]", "capture taps written to pcap/pcapng by a writer thread", kTapDocs};

Result<TapConfig> parse_tap_config(ConfigSection& s, std::string name) {
  TapConfig c;
  c.name = std::move(name);
  std::string stage = s.choice("stage", {"rx", "filtered", "drops"}, "rx");
  c.stage = stage == "rx" ? TapStage::kRx : stage == "filtered" ? TapStage::kFiltered : TapStage::kDrops;
  c.path = s.string("path");
  std::string format = s.choice("format", {"auto", "pcap", "pcapng"}, "auto");
  c.format = format == "auto" ? capture_format_for_path(c.path)
             : format == "pcapng" ? CaptureFormat::kPcapng
                                  : CaptureFormat::kPcap;
  c.snaplen = static_cast<std::uint32_t>(s.integer("snaplen", 16, CaptureWriter::kMaxSnaplen, 65535));
  c.rotate_bytes = static_cast<std::uint64_t>(s.integer("rotate_bytes", 0, std::int64_t(1) << 50, 0));
  if (c.rotate_bytes != 0 && c.rotate_bytes < 4096)
    s.fail("rotate_bytes", "expected 0 (no rotation) or at least 4096 bytes");
  c.rotate_seconds = s.number("rotate_seconds", 0, 1e9, 0);
  c.max_files = static_cast<std::uint32_t>(s.integer("max_files", 0, 1000000, 0));
  std::int64_t lane = s.integer("lane_bytes", 1 << 16, 1 << 30, 4 << 20);
  if (!is_power_of_two(static_cast<std::uint64_t>(lane))) s.fail("lane_bytes", "expected a power of two");
  c.lane_bytes = static_cast<std::uint32_t>(lane);
  if (lane < std::int64_t(4 * record_size(c.snaplen)))
    s.fail("lane_bytes", fmt::format("expected at least four records of snaplen {} ({} bytes)", c.snaplen,
                                     4 * record_size(c.snaplen)));
  std::vector<std::string> reasons = s.string_list("drop_reasons");
  if (!reasons.empty()) {
    if (c.stage != TapStage::kDrops) s.fail("drop_reasons", "only meaningful with stage = \"drops\"");
    c.drop_reason_mask = 0;
    for (const std::string& r : reasons) {
      bool found = false;
      for (std::size_t i = 1; i < kDropReasonCount; ++i) {
        if (kDropReasonNames[i] == r) {
          c.drop_reason_mask |= 1ull << i;
          found = true;
        }
      }
      if (!found) {
        std::string all;
        for (std::size_t i = 1; i < kDropReasonCount; ++i) all += fmt::format("{}{}", i > 1 ? ", " : "", kDropReasonNames[i]);
        std::vector<std::string_view> names(kDropReasonNames.begin() + 1, kDropReasonNames.begin() + kDropReasonCount);
        s.fail("drop_reasons", fmt::format("unknown drop reason '{}'{}; known: {}", r, did_you_mean(r, names), all));
      }
    }
  }
  c.port = s.string("port", "");
  c.endpoint = s.string("endpoint", "");
  if (!c.endpoint.empty() && c.stage == TapStage::kRx)
    s.fail("endpoint", "packets have no endpoint before classify; use stage = \"filtered\" or \"drops\"");
  if (c.max_files && !c.rotate_bytes && c.rotate_seconds == 0)
    s.fail("max_files", "needs rotate_bytes or rotate_seconds");
  RAWPIPE_TRY(s.status());
  return c;
}

Tap::Tap(TapWriter* writer, std::uint32_t bytes)
    : writer_(writer),
      ring_(static_cast<std::uint8_t*>(::operator new[](bytes, std::align_val_t{kCacheLine}))),
      mask_(bytes - 1),
      snaplen_(writer->config().snaplen),
      reason_mask_(writer->config().drop_reason_mask),
      port_filter_(writer->config().port_id),
      endpoint_filter_(writer->config().endpoint_id),
      drops_only_(writer->config().stage == TapStage::kDrops) {}

Tap::~Tap() { ::operator delete[](ring_, std::align_val_t{kCacheLine}); }

void tap_burst(Tap& tap, Mbuf* const* pkts, unsigned n) noexcept {
  const std::uint64_t cap = std::uint64_t(tap.mask_) + 1;
  std::uint64_t head = tap.head_.load(std::memory_order_relaxed);  // own index
  std::uint64_t now = 0;
  unsigned taken = 0, lost = 0;
  for (unsigned i = 0; i < n; ++i) {
    const Mbuf* m = pkts[i];
    if (tap.drops_only_ && !((tap.reason_mask_ >> (m->drop_reason & 63)) & 1)) continue;
    if (tap.port_filter_ >= 0 && m->port != tap.port_filter_) continue;
    if (tap.endpoint_filter_ >= 0 && m->endpoint != tap.endpoint_filter_) continue;
    std::uint32_t caplen = m->data_len < tap.snaplen_ ? m->data_len : tap.snaplen_;
    std::uint64_t need = record_size(caplen);
    std::uint64_t pos = head & tap.mask_;
    std::uint64_t wrap = (cap - pos < need) ? cap - pos : 0;  // a record never straddles the end
    if (head + wrap + need - tap.cached_tail_ > cap) {
      // A1: acquire pairs with R2 (writer's release of tail_): it has finished reading those bytes.
      tap.cached_tail_ = tap.tail_.load(std::memory_order_acquire);
      if (head + wrap + need - tap.cached_tail_ > cap) {
        ++lost;
        continue;
      }
    }
    if (wrap) {
      if (wrap >= sizeof(RecordHeader)) {
        RecordHeader mark{};
        mark.caplen = kWrapMark;
        std::memcpy(tap.ring_ + pos, &mark, sizeof mark);
      }
      head += wrap;
      pos = 0;
    }
    RecordHeader h{};
    if (m->flags & pkt_flag::kTimestamp) {
      h.ts_ns = m->timestamp_ns;
    } else {
      if (!now) now = realtime_ns();  // vDSO, once per burst
      h.ts_ns = now;
    }
    h.caplen = caplen;
    h.orig_len = m->data_len;
    h.port = m->port;
    h.drop_reason = m->drop_reason;
    std::memcpy(tap.ring_ + pos, &h, sizeof h);
    std::memcpy(tap.ring_ + pos + sizeof h, m->data(), caplen);
    head += need;
    ++taken;
  }
  // R1: release pairs with A2 (writer's acquire of head_): the record bytes are visible first.
  tap.head_.store(head, std::memory_order_release);
  if (taken) tap.captured_.store(tap.captured_.load(std::memory_order_relaxed) + taken, std::memory_order_relaxed);
  if (lost) tap.dropped_.store(tap.dropped_.load(std::memory_order_relaxed) + lost, std::memory_order_relaxed);
}

Result<std::unique_ptr<TapWriter>> TapWriter::create(const TapConfig& config) {
  if (config.path.empty()) return Status::errorf("tap '{}': no path", config.name);
  if (!is_power_of_two(config.lane_bytes) || config.lane_bytes < 4 * record_size(config.snaplen))
    return Status::errorf("tap '{}': lane_bytes {} must be a power of two holding at least four records",
                          config.name, config.lane_bytes);
  if (!config.port.empty() && config.port_id < 0)
    return Status::errorf("tap '{}': port '{}' was not resolved to a port id", config.name, config.port);
  if (!config.endpoint.empty() && config.endpoint_id < 0)
    return Status::errorf("tap '{}': endpoint '{}' was not resolved to an endpoint id", config.name, config.endpoint);
  std::unique_ptr<TapWriter> w(new TapWriter(config));
  RAWPIPE_TRY(w->open_next_file().context(fmt::format("tap '{}'", config.name)));
  return w;
}

TapWriter::~TapWriter() { (void)stop(); }

Tap& TapWriter::add_lane() {
  lanes_.push_back(std::unique_ptr<Tap>(new Tap(this, config_.lane_bytes)));
  return *lanes_.back();
}

std::string TapWriter::file_name(std::uint64_t index) const {
  if (!config_.rotate_bytes && config_.rotate_seconds == 0) return config_.path;
  std::filesystem::path p(config_.path);
  std::string ext = p.extension().string();
  std::filesystem::path stem = p;
  stem.replace_extension();
  return fmt::format("{}-{:05}{}", stem.string(), index, ext);
}

Status TapWriter::open_next_file() {
  if (out_) {
    Status st = out_->close();
    bytes_done_.fetch_add(out_->bytes(), std::memory_order_relaxed);
    bytes_now_.store(0, std::memory_order_relaxed);
    out_.reset();
    RAWPIPE_TRY(st);
  }
  std::string name = file_name(file_index_++);
  auto w = CaptureWriter::create(name, config_.format, config_.snaplen);
  if (!w) return w.status();
  out_ = std::move(w).value();
  file_opened_ns_ = monotonic_ns();
  files_.fetch_add(1, std::memory_order_relaxed);
  std::lock_guard lock(files_mu_);
  kept_.push_back(name);
  if (config_.max_files) {
    while (kept_.size() > config_.max_files) {
      ::unlink(kept_.front().c_str());
      kept_.pop_front();
    }
  }
  return Status::ok();
}

unsigned TapWriter::drain(Tap& lane) {
  // A2: acquire pairs with R1 (producer's release of head_).
  std::uint64_t head = lane.head_.load(std::memory_order_acquire);
  std::uint64_t tail = lane.tail_.load(std::memory_order_relaxed);  // own index
  const std::uint64_t cap = std::uint64_t(lane.mask_) + 1;
  unsigned n = 0;
  while (tail != head) {
    std::uint64_t pos = tail & lane.mask_;
    if (cap - pos < sizeof(RecordHeader)) {
      tail += cap - pos;
      continue;
    }
    RecordHeader h;
    std::memcpy(&h, lane.ring_ + pos, sizeof h);
    if (h.caplen == kWrapMark) {
      tail += cap - pos;
      continue;
    }
    if (error_.is_ok()) {
      const std::uint64_t rec = 16 + h.caplen + 64;  // upper bound of the record in either format
      bool rotate = false;
      if (out_->records() > 0) {
        if (config_.rotate_bytes && out_->bytes() + rec > config_.rotate_bytes) rotate = true;
        if (config_.rotate_seconds > 0 &&
            double(monotonic_ns() - file_opened_ns_) >= config_.rotate_seconds * 1e9)
          rotate = true;
      }
      if (rotate) {
        Status st = open_next_file();
        if (!st) error_ = st;
      }
      if (error_.is_ok()) {
        std::string_view comment;
        if (h.drop_reason && h.drop_reason < kDropReasonCount && config_.format == CaptureFormat::kPcapng) {
          comment = kDropReasonNames[h.drop_reason];
        }
        if (out_->write(h.ts_ns, lane.ring_ + pos + sizeof h, h.caplen, h.orig_len, comment)) {
          ++n;
        } else {
          error_ = out_->status();
        }
        bytes_now_.store(out_->bytes(), std::memory_order_relaxed);
      }
    }
    tail += record_size(h.caplen);
  }
  // R2: release pairs with A1 (producer's acquire of tail_): we are done reading these bytes.
  lane.tail_.store(tail, std::memory_order_release);
  if (n) written_.fetch_add(n, std::memory_order_relaxed);
  return n;
}

void TapWriter::run() {
  while (!stop_.load(std::memory_order_acquire)) {
    unsigned n = 0;
    for (auto& lane : lanes_) n += drain(*lane);
    if (n == 0) {
      if (out_) (void)out_->flush();
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  // The producers have stopped (stop() is called after the lcores joined): drain what is left.
  for (auto& lane : lanes_) drain(*lane);
}

Status TapWriter::start() {
  if (running_.exchange(true)) return Status::ok();
  stop_.store(false, std::memory_order_relaxed);
  thread_ = std::thread([this] { run(); });
  return Status::ok();
}

Status TapWriter::stop() {
  if (running_.exchange(false)) {
    stop_.store(true, std::memory_order_release);
    thread_.join();
  } else {
    for (auto& lane : lanes_) drain(*lane);
  }
  if (out_) {
    Status st = out_->close();
    bytes_done_.fetch_add(out_->bytes(), std::memory_order_relaxed);
    bytes_now_.store(0, std::memory_order_relaxed);
    out_.reset();
    if (!st && error_.is_ok()) error_ = st;
  }
  return error_.context(fmt::format("tap '{}'", config_.name));
}

TapStats TapWriter::stats() const {
  TapStats s;
  for (const auto& lane : lanes_) {
    s.captured += lane->captured_.load(std::memory_order_relaxed);
    s.dropped += lane->dropped_.load(std::memory_order_relaxed);
  }
  s.written = written_.load(std::memory_order_relaxed);
  s.files = files_.load(std::memory_order_relaxed);
  s.bytes = bytes_done_.load(std::memory_order_relaxed) + bytes_now_.load(std::memory_order_relaxed);
  return s;
}

std::vector<std::string> TapWriter::files() const {
  std::lock_guard lock(files_mu_);
  return {kept_.begin(), kept_.end()};
}

}  // namespace rawpipe
