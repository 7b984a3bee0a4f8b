// pcap poll-mode driver: config keys, files, statistics.
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "pipeline/config/section.hh"
#include "pmd/drivers.hh"
#include "pmd/pcap/pcap.hh"

namespace rawpipe {
namespace pcap_pmd {

Result<pcap_t*> open_capture(const std::string& file) {
  char err[PCAP_ERRBUF_SIZE];
  pcap_t* p = pcap_open_offline_with_tstamp_precision(file.c_str(), PCAP_TSTAMP_PRECISION_NANO, err);
  if (!p) return Status::errorf("cannot read capture file '{}': {}", file, err);
  if (pcap_datalink(p) != DLT_EN10MB) {
    int dlt = pcap_datalink(p);
    pcap_close(p);
    const char* name = pcap_datalink_val_to_name(dlt);
    return Status::errorf("capture file '{}' has link type {} ({}); only Ethernet (EN10MB) frames can be replayed",
                          file, dlt, name ? name : "unknown");
  }
  return p;
}

bool is_classic_pcap(const std::string& file) {
  std::FILE* f = std::fopen(file.c_str(), "rb");
  if (!f) return false;
  std::uint8_t m[4] = {};
  const bool got = std::fread(m, 1, 4, f) == 4;
  std::fclose(f);
  if (!got) return false;
  const std::uint32_t le = std::uint32_t(m[0]) | std::uint32_t(m[1]) << 8 | std::uint32_t(m[2]) << 16 | std::uint32_t(m[3]) << 24;
  // Microsecond and nanosecond magics, in either byte order.
  return le == 0xa1b2c3d4u || le == 0xd4c3b2a1u || le == 0xa1b23c4du || le == 0x4d3cb2a1u;
}

namespace {

struct Spec final : PortSpec {
  std::string rx_file;
  std::string tx_file;
  Timing timing = Timing::kFast;
  std::string timing_name = "fast";
  double rate_pps = 0;
  std::uint64_t loops = 1;
  CaptureFormat tx_format = CaptureFormat::kPcap;
  std::uint32_t tx_snaplen = 65535;

  Result<std::unique_ptr<Port>> open(const PortEnv& env) const override;
  std::uint16_t max_rx_queues() const override { return 1; }
  // One capture file behind every tx queue handle: a second queue would be a
  // second writer on it.
  std::uint16_t max_tx_queues() const override { return 1; }
};

class PcapPort final : public Port {
 public:
  PcapPort(const Spec& spec, const PortEnv& env) : spec_(spec), env_(env) {}
  ~PcapPort() override {
    if (rxq_.handle) pcap_close(rxq_.handle);
  }

  Status open_files();
  std::string_view pmd_name() const noexcept override { return "pcap"; }
  std::string path_report() const override;
  PortCaps caps() const override;
  Status start() override { return Status::ok(); }
  void stop() override {
    // Holds no pool buffers between bursts; make the written file complete on disk.
    if (txq_.writer) (void)txq_.writer->flush();
  }
  RxQueueHandle rx_queue(std::uint16_t) override {
    return {spec_.rx_file.empty() ? &rx_none : &rx_burst, &rxq_};
  }
  TxQueueHandle tx_queue(std::uint16_t) override {
    return {spec_.tx_file.empty() ? &tx_none : &tx_burst, &txq_};
  }
  PortStats stats() const override;
  std::vector<std::string> notices() const override;

 private:
  Spec spec_;
  PortEnv env_;
  RxQueue rxq_;
  TxQueue txq_;
};

Status PcapPort::open_files() {
  if (!spec_.rx_file.empty()) {
    auto p = open_capture(spec_.rx_file);
    if (!p) return p.status();
    rxq_.handle = p.value();
    rxq_.file = spec_.rx_file;
    rxq_.timing = spec_.timing;
    rxq_.rate_pps = spec_.rate_pps;
    rxq_.loops = spec_.loops;
    rxq_.pool = env_.pool;
    rxq_.port = env_.port_id;
    rxq_.classic = is_classic_pcap(spec_.rx_file);
    rxq_.record_off = kClassicFileHeader;
  }
  if (!spec_.tx_file.empty()) {
    auto w = CaptureWriter::create(spec_.tx_file, spec_.tx_format, spec_.tx_snaplen);
    if (!w) return w.status();
    txq_.writer = std::move(w).value();
  }
  return Status::ok();
}

std::string PcapPort::path_report() const {
  std::string out;
  if (!spec_.rx_file.empty()) {
    std::string timing = spec_.timing == Timing::kRate ? fmt::format("at {} packets/s", spec_.rate_pps)
                         : spec_.timing == Timing::kRecorded ? std::string("at the recorded timing")
                                                             : std::string("as fast as possible");
    out += fmt::format("pcap rxq0: replay of '{}' {}, {}, one copy per frame into pool buffers\n", spec_.rx_file,
                       timing, spec_.loops == 0 ? std::string("looping forever") : fmt::format("{} pass(es)", spec_.loops));
  } else {
    out += "pcap rxq0: no rx_file, receives nothing\n";
  }
  if (!spec_.tx_file.empty())
    out += fmt::format("pcap txq0: writes {} file '{}' with nanosecond timestamps, snap length {}\n",
                       capture_format_name(spec_.tx_format), spec_.tx_file, spec_.tx_snaplen);
  else
    out += "pcap txq0: no tx_file, transmit refuses every frame\n";
  return out;
}

PortCaps PcapPort::caps() const {
  PortCaps c;
  c.timestamps = !spec_.rx_file.empty();
  c.tx = !spec_.tx_file.empty();
  return c;
}

PortStats PcapPort::stats() const {
  PortStats s;
  QueueCounters rx = load_counters(rxq_.counters);
  std::uint64_t oversize = count_load(rxq_.oversize), file_errors = count_load(rxq_.file_errors);
  rx.rx_errors = oversize + file_errors;
  s.rx_queues.push_back(rx);
  QueueCounters tx = load_counters(txq_.counters);
  s.tx_queues.push_back(tx);
  s.extended["rx_file_errors"] = file_errors;
  s.extended["rx_oversize"] = oversize;
  s.extended["rx_snapped"] = count_load(rxq_.snapped);
  s.extended["rx_passes"] = count_load(rxq_.pass);
  s.extended["rx_reopen_failures"] = count_load(rxq_.reopen_failures);
  s.extended["rx_finished"] = rxq_.finished.load(std::memory_order_acquire) ? 1 : 0;
  // Acquire pairs with the release in note_damage().
  if (rxq_.damaged.load(std::memory_order_acquire)) s.extended["rx_file_damage_offset"] = rxq_.damage_offset;
  return s;
}

std::vector<std::string> PcapPort::notices() const {
  // Acquire pairs with the release in note_damage(): the damage fields are complete.
  if (!rxq_.damaged.load(std::memory_order_acquire)) return {};
  const std::uint64_t passes = count_load(rxq_.file_errors);
  return {fmt::format("capture file '{}' is damaged: record {} {} byte offset {}: {}; in each pass the {} "
                      "record(s) before it were read and the pass ended there{}",
                      rxq_.file, rxq_.damage_record, rxq_.damage_at_record_start ? "starting at" : "cut short, reading stopped at",
                      rxq_.damage_offset, rxq_.damage_reason, rxq_.damage_record - 1,
                      passes > 1 ? fmt::format(" ({} passes)", passes) : std::string())};
}

Result<std::unique_ptr<Port>> Spec::open(const PortEnv& env) const {
  if (env.rx_queues != 1 || env.tx_queues != 1)
    return Status::errorf("pcap port '{}': a capture file has one receive and one transmit queue (got rx_queues = {}, "
                          "tx_queues = {})", env.name, env.rx_queues, env.tx_queues);
  if (!rx_file.empty() && env.pool == nullptr) return Status::errorf("pcap port '{}': no receive pool", env.name);
  auto port = std::make_unique<PcapPort>(*this, env);
  Status st = port->open_files();
  if (!st) return st.context(fmt::format("pcap port '{}'", env.name));
  return std::unique_ptr<Port>(std::move(port));
}

Result<std::unique_ptr<PortSpec>> parse(ConfigSection& section) {
  auto spec = std::make_unique<Spec>();
  spec->rx_file = section.string("rx_file", "");
  spec->tx_file = section.string("tx_file", "");
  if (spec->rx_file.empty() && spec->tx_file.empty())
    section.fail("", "a pcap port needs rx_file (replay), tx_file (write) or both");
  spec->timing_name = section.choice("timing", {"fast", "recorded", "rate"}, "fast");
  spec->timing = spec->timing_name == "recorded" ? Timing::kRecorded
                 : spec->timing_name == "rate"   ? Timing::kRate
                                                 : Timing::kFast;
  if (spec->timing == Timing::kRate)
    spec->rate_pps = section.number("rate_pps", 1e-3, 1e9);
  else if (section.has("rate_pps"))
    section.fail("rate_pps", "only used with timing = \"rate\"");
  spec->loops = static_cast<std::uint64_t>(section.integer("loop", 0, std::int64_t(1) << 40, 1));
  std::string format = section.choice("tx_format", {"auto", "pcap", "pcapng"}, "auto");
  spec->tx_format = format == "auto" ? capture_format_for_path(spec->tx_file)
                    : format == "pcapng" ? CaptureFormat::kPcapng
                                         : CaptureFormat::kPcap;
  spec->tx_snaplen = static_cast<std::uint32_t>(section.integer("tx_snaplen", 16, CaptureWriter::kMaxSnaplen, 65535));
  if (spec->rx_file.empty()) {
    for (std::string_view k : {"timing", "loop"})
      if (section.has(k)) section.fail(k, "only used with rx_file");
  }
  if (spec->tx_file.empty()) {
    for (std::string_view k : {"tx_format", "tx_snaplen"})
      if (section.has(k)) section.fail(k, "only used with tx_file");
  }
  RAWPIPE_TRY(section.status());
  return std::unique_ptr<PortSpec>(std::move(spec));
}

}  // namespace
}  // namespace pcap_pmd

namespace {
const KeyDoc kPcapDocs[] = {
    {"rx_file", "string", "a pcap or pcapng file", "none (rx_file or tx_file required)", "capture to replay as received frames"},
    {"tx_file", "string", "a writable path", "none (rx_file or tx_file required)", "capture file transmitted frames are written to"},
    {"timing", "string", "\"fast\", \"recorded\", \"rate\"", "\"fast\"",
     "replay as fast as polled, at the recorded timestamps, or at rate_pps"},
    {"rate_pps", "number", "0.001 to 1e9 (timing \"rate\" only)", "required with timing \"rate\"", "replay rate"},
    {"loop", "integer", "0 to 2^40", "1", "times the file is replayed; 0: forever"},
    {"tx_format", "string", "\"auto\", \"pcap\", \"pcapng\"", "\"auto\" (by the extension)", "format of tx_file"},
    {"tx_snaplen", "integer", "16 to 262144", "65535", "bytes kept of each transmitted frame"},
};
}  // namespace
const KeyTable kPcapKeys{"pcap", "[[ports]] pmd = \"pcap\"", "replay and write capture files", kPcapDocs};

const PmdDriver kPcapDriver{
    .name = "pcap",
    .summary = "capture files: replay a pcap/pcapng file (recorded timing, fixed rate or fast, looping) and write one",
    .parse = &pcap_pmd::parse,
    .keys = &kPcapKeys,
};

}  // namespace rawpipe
