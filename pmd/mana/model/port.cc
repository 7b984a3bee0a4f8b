// `pmd = "mana-model"`: the whole MANA port, data path included, running on the in-memory device
// model instead of a NIC. Frames come from a synthetic generator or a pcap file; RSS (the model's
// Toeplitz hash and a 64-entry indirection table over the queues) decides which queue gets each.
// The simulated wire is paced by the consumer: a queue's frames arrive as its posted buffers allow,
// so nothing is dropped for lack of a WQE and runs are reproducible. With wire_burst = K it is
// not: each poll the wire brings K frames whatever is posted, and the device drops those that
// find no WQE, as the NIC does (the model's rx_no_wqe, the hardware's hc_rx_discards_no_wqe),
// which the port reports as the loss "nic_out_of_buffer".
//
// Fault injection: with inject_rx_error_every = N, every N-th frame a queue's wire carries
// arrives as a CQE_RX_TRUNCATED completion instead (the NIC retires the WQE, no packet), and
// inject_rx_error_run = K makes each such event a run of K consecutive error completions (a storm
// of bad CQEs, as after a fault on the device). Each injected frame is counted in
// model_rx_errors_injected; the driver counts what it saw in rx_errors / rx_truncated.
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <memory>

#include "pipeline/buf/pool.hh"
#include "pipeline/config/section.hh"
#include "pmd/drivers.hh"
#include "pmd/mana/model/device.hh"
#include "pmd/mana/model/source.hh"
#include "pmd/mana/port.hh"
#include "pmd/mana/setup.hh"
#include "pmd/rdma/wire_pcap.hh"

namespace rawpipe {
namespace mana {
namespace {

struct ModelSpec : ManaCommonSpec {
  SourceSpec source;
  unsigned coalesce = 4;
  std::uint64_t error_every = 0;  // 0: no injected errors
  std::uint64_t error_run = 1;
  std::uint32_t wire_burst = 0;  // 0: paced by the posted WQEs
  std::string wire_pcap;  // frames sent, written here when the port stops (rdma/wire_pcap.hh)
};

struct ModelRxQueue {
  RxQueue q;
  ManaModel* model = nullptr;
  const FrameSource* source = nullptr;
  std::vector<std::uint32_t> mine;  // distinct frames RSS sends to this queue
  std::uint64_t pass = 0;           // walks frame index pass * distinct + mine[next]
  std::size_t next = 0;
  std::uint64_t error_every = 0;
  std::uint64_t error_run = 1;
  std::uint32_t wire_burst = 0;
  std::uint64_t since_error = 0;    // wire frames since the last injected run started
  std::uint64_t run_left = 0;       // frames of the current run still to turn into errors
  std::atomic<std::uint64_t> errors_injected{0};  // single writer (the lcore), relaxed readers
};

std::uint16_t model_rx_burst(void* queue, Mbuf** pkts, std::uint16_t n) noexcept {
  auto& m = *static_cast<ModelRxQueue*>(queue);
  // The wire side of the model: this queue's next frames land in its posted WQEs.
  std::span<const std::uint8_t> frames[kMaxBurst];
  std::uint32_t room = m.wire_burst ? m.wire_burst : std::min<std::uint32_t>({n, m.model->rq_available(m.q.rq.id), kMaxBurst});
  unsigned k = 0, used = 0;
  const std::uint64_t distinct = m.source->distinct();
  while (used < room && !m.mine.empty()) {
    const std::uint64_t i = m.pass * distinct + m.mine[m.next];
    if (i >= m.source->total()) break;
    const auto& f = m.source->frame(i);
    if (++m.next == m.mine.size()) {
      m.next = 0;
      ++m.pass;
    }
    ++used;
    if (m.error_every) [[unlikely]] {
      if (++m.since_error == m.error_every) {
        m.since_error = 0;
        m.run_left = m.error_run;
      }
      if (m.run_left) {
        --m.run_left;
        // Completions keep the wire's order: the frames gathered so far complete first.
        if (k) m.model->receive(m.q.rq.id, std::span<const std::span<const std::uint8_t>>(frames, k));
        k = 0;
        m.model->inject_rx_cqe(m.q.rq.id, kCqeRxTruncated);
        m.errors_injected.store(m.errors_injected.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
        continue;
      }
    }
    frames[k++] = std::span<const std::uint8_t>(f.data(), f.size());
  }
  if (k) m.model->receive(m.q.rq.id, std::span<const std::span<const std::uint8_t>>(frames, k));
  return rx_burst<rdma::ModelDoorbell>(&m.q, pkts, n);
}

class ManaModelPort final : public ManaPortBase {
 public:
  ManaModelPort(const PortEnv& env, const ModelSpec& spec) : env_(env), spec_(spec) { rss_ = spec.rss; }
  ~ManaModelPort() override { release_buffers(); }

  Status open();
  std::string_view pmd_name() const noexcept override { return "mana-model"; }
  std::string path_report() const override {
    return queue_report("mana-model", fmt::format("'{}' (device model; wire: {}; {} packets per CQE at most)",
                                                  env_.name, source_->describe(), model_->options().coalesce));
  }
  Status start() override {
    if (stopped_) return Status::errorf("pmd mana-model '{}': a stopped port cannot restart; open it again", env_.name);
    for (auto* q : rxq_) rx_refill<rdma::ModelDoorbell>(*q);
    return Status::ok();
  }
  void stop() override {
    stopped_ = true;
    release_buffers();
    if (!spec_.wire_pcap.empty()) {
      std::vector<std::vector<std::uint8_t>> wire;
      for (std::uint16_t i = 0; i < env_.tx_queues; ++i)
        for (const auto& f : model_->sent(queue_ids_[i])) wire.push_back(f);
      if (Status st = rdma::write_wire_pcap(spec_.wire_pcap, wire); !st)
        std::fprintf(stderr, "rawpipe: mana-model: %s\n", st.message().c_str());
    }
  }
  RxQueueHandle rx_queue(std::uint16_t q) override { return {&model_rx_burst, rx_owned_.at(q).get()}; }
  TxQueueHandle tx_queue(std::uint16_t q) override { return {&tx_burst<rdma::ModelDoorbell>, txq_.at(q)}; }
  PortStats stats() const override {
    PortStats s = ManaPortBase::stats();
    std::uint64_t violations = 0, no_wqe = 0, tx_frames = 0, suppressed = 0;
    for (std::uint32_t id : queue_ids_) {
      const ModelQueueStats m = model_->stats(id);
      violations += m.violations;
      no_wqe += m.rx_no_wqe;
      tx_frames += m.tx_frames;
      suppressed += m.tx_suppressed;
    }
    s.extended["model_violations"] = violations + model_->unknown_doorbells();
    s.extended["model_rx_no_wqe"] = no_wqe;
    // The model plays the NIC's counter of frames that found no posted WQE.
    s.losses["nic_out_of_buffer"] = no_wqe;
    s.extended["model_tx_frames"] = tx_frames;
    s.extended["model_tx_cqes_suppressed"] = suppressed;
    std::uint64_t injected = 0;
    for (const auto& q : rx_owned_) injected += q->errors_injected.load(std::memory_order_relaxed);
    s.extended["model_rx_errors_injected"] = injected;
    return s;
  }

 private:
  PortEnv env_;
  ModelSpec spec_;
  bool stopped_ = false;
  std::unique_ptr<ManaModel> model_;
  std::unique_ptr<FrameSource> source_;
  std::vector<std::unique_ptr<ModelRxQueue>> rx_owned_;
  std::vector<std::unique_ptr<TxQueue>> tx_owned_;
  std::vector<std::uint32_t> queue_ids_;
};

Status ManaModelPort::open() {
  if (!env_.pool) return Status::errorf("pmd mana-model '{}': no pool", env_.name);
  if (env_.rx_queues == 0 || !is_power_of_two(env_.rx_queues) || env_.rx_queues > 64)
    return Status::errorf("pmd mana-model '{}': rx_queues = {}: the RSS indirection table needs a power of two from 1 "
                          "to 64",
                          env_.name, env_.rx_queues);
  auto src = FrameSource::create(spec_.source);
  if (!src) return src.status().context(fmt::format("pmd mana-model '{}'", env_.name));
  source_ = std::move(src).value();

  ModelOptions o;
  o.coalesce = spec_.coalesce;
  o.rss_key = spec_.rss_key;
  o.rss_l4 = spec_.rss == RssFields::kL4;
  o.capture_tx = !spec_.wire_pcap.empty();
  model_ = std::make_unique<ManaModel>(o);
  const std::uint32_t lkey = model_->register_mr(env_.pool->region(), env_.pool->region_bytes());
  const std::uint32_t rx_ring = static_cast<std::uint32_t>(std::bit_ceil(env_.rx_ring_size));
  const std::uint32_t tx_ring = static_cast<std::uint32_t>(std::bit_ceil(env_.tx_ring_size));

  for (std::uint16_t i = 0; i < env_.tx_queues; ++i) {
    const std::uint32_t cq = model_->create_cq(tx_ring);
    const std::uint32_t sq = model_->create_sq(tx_ring, cq);
    queue_ids_.push_back(sq);
    QueueSetup s;
    model_->describe_wq(sq, s.wq);
    model_->describe_cq(cq, s.cq);
    s.db_page = model_->db_page();
    s.db_sink = model_->doorbell_sink();
    s.lkey = lkey;
    s.mr_begin = env_.pool->region();
    s.mr_end = env_.pool->region() + env_.pool->region_bytes();
    s.vp_offset = model_->vp_offset();
    auto q = std::make_unique<TxQueue>();
    RAWPIPE_TRY(setup_tx_queue(*q, s).context(fmt::format("pmd mana-model '{}' tx queue {}", env_.name, i)));
    txq_.push_back(q.get());
    tx_owned_.push_back(std::move(q));
  }
  for (std::uint16_t i = 0; i < env_.rx_queues; ++i) {
    const std::uint32_t cq = model_->create_cq(rx_ring);
    const std::uint32_t rq = model_->create_rq(rx_ring, cq);
    queue_ids_.push_back(rq);
    QueueSetup s;
    model_->describe_wq(rq, s.wq);
    model_->describe_cq(cq, s.cq);
    s.db_page = model_->db_page();
    s.db_sink = model_->doorbell_sink();
    s.lkey = lkey;
    s.pool = env_.pool;
    s.port_id = env_.port_id;
    s.queue_id = i;
    auto q = std::make_unique<ModelRxQueue>();
    RAWPIPE_TRY(setup_rx_queue(q->q, s).context(fmt::format("pmd mana-model '{}' rx queue {}", env_.name, i)));
    q->model = model_.get();
    q->source = source_.get();
    q->error_every = spec_.error_every;
    q->error_run = spec_.error_run;
    q->wire_burst = spec_.wire_burst;
    rxq_.push_back(&q->q);
    rx_owned_.push_back(std::move(q));
  }
  // RSS: hash & (queues - 1) is the 64-entry indirection table filled round robin.
  for (std::size_t f = 0; f < source_->distinct(); ++f) {
    const auto& frame = source_->frame(f);
    const RssResult r = rss_of(o.rss_key.data(), frame.data(), static_cast<std::uint32_t>(frame.size()), o.rss_l4);
    rx_owned_[r.hash & (env_.rx_queues - 1u)]->mine.push_back(static_cast<std::uint32_t>(f));
  }
  return Status::ok();
}

class ManaModelSpec final : public PortSpec {
 public:
  explicit ManaModelSpec(ModelSpec spec) : spec_(std::move(spec)) {}
  Result<std::unique_ptr<Port>> open(const PortEnv& env) const override {
    auto port = std::make_unique<ManaModelPort>(env, spec_);
    RAWPIPE_TRY(port->open());
    return std::unique_ptr<Port>(std::move(port));
  }

 private:
  ModelSpec spec_;
};

Result<std::unique_ptr<PortSpec>> parse_mana_model(ConfigSection& section) {
  ModelSpec spec;
  parse_common_keys(section, spec);
  const std::string kind = section.choice("source", {"synth", "pcap"}, "synth");
  spec.source.kind = kind == "pcap" ? SourceSpec::Kind::kPcap : SourceSpec::Kind::kSynth;
  if (spec.source.kind == SourceSpec::Kind::kPcap) {
    spec.source.pcap = section.string("pcap");
  } else if (section.has("pcap")) {
    section.fail("pcap", "only read with source = \"pcap\"");
  }
  spec.source.frames = static_cast<std::uint64_t>(section.integer("frames", 0, std::int64_t(1) << 62, 0));
  spec.source.frame_size = static_cast<std::uint32_t>(section.integer("frame_size", 60, 9000, 64));
  spec.source.flows = static_cast<std::uint32_t>(section.integer("flows", 1, 65536, 256));
  spec.coalesce = static_cast<unsigned>(section.integer("coalesce", 1, 4, 4));
  spec.wire_pcap = section.string("wire_pcap", "");
  spec.error_every = static_cast<std::uint64_t>(section.integer("inject_rx_error_every", 0, std::int64_t(1) << 40, 0));
  spec.error_run = static_cast<std::uint64_t>(section.integer("inject_rx_error_run", 1, 1 << 20, 1));
  spec.wire_burst = static_cast<std::uint32_t>(section.integer("wire_burst", 0, kMaxBurst, 0));
  if (section.has("inject_rx_error_run") && spec.error_every == 0)
    section.fail("inject_rx_error_run", "only used with inject_rx_error_every");
  else if (spec.error_every && spec.error_run > spec.error_every)
    section.fail("inject_rx_error_run", fmt::format("a run of {} errors cannot start every {} frames; keep "
                                                    "inject_rx_error_run <= inject_rx_error_every",
                                                    spec.error_run, spec.error_every));
  RAWPIPE_TRY(section.status());
  return std::unique_ptr<PortSpec>(new ManaModelSpec(std::move(spec)));
}

}  // namespace
}  // namespace mana

namespace {
const KeyDoc kManaModelDocs[] = {
    {"source", "string", "\"synth\", \"pcap\"", "\"synth\"", "where the model's wire frames come from"},
    {"pcap", "string", "a pcap file (source \"pcap\" only)", "required with source \"pcap\"", "frames to put on the wire"},
    {"frames", "integer", "0 to 2^62", "0", "frames the wire carries; 0: no limit"},
    {"frame_size", "integer", "60 to 9000", "64", "size of generated frames"},
    {"flows", "integer", "1 to 65536", "256", "generated flows (RSS spreads them over the queues)"},
    {"coalesce", "integer", "1 to 4", "4", "packets per coalesced CQE, as the NIC reports them"},
    {"wire_pcap", "string", "a writable path", "none", "write the frames the model transmits to this capture"},
    {"inject_rx_error_every", "integer", "0 to 2^40", "0", "every N-th frame arrives as a CQE_RX_TRUNCATED error; 0: never"},
    {"inject_rx_error_run", "integer", "1 to 1048576", "1", "consecutive error completions per injected event"},
    {"wire_burst", "integer", "0 to the burst size", "0",
     "frames the wire brings per poll whatever is posted (the device drops what finds no WQE); 0: paced by the WQEs"},
};
}  // namespace
const KeyTable kManaModelKeys{"mana-model", "[[ports]] pmd = \"mana-model\"", "the MANA data path on a device model",
                              kManaModelDocs, &mana::kManaCommonKeys};

const PmdDriver kManaModelDriver{
    "mana-model",
    "the MANA data path on an in-memory MANA device model (frames from a generator or a pcap file)",
    &mana::parse_mana_model, &kManaModelKeys};

}  // namespace rawpipe
