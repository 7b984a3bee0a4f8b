// The mlx5 port: configuration keys, queue setup over a Backend (verbs.cc on a NIC,
// model_backend.cc on the device model), steering from the endpoints' rules, statistics.
// Drivers "mlx5" and "mlx5-model" share all of it; only the backend differs.
#include <netinet/in.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <bit>
#include <cstring>
#include <mutex>

#include "pipeline/buf/pool.hh"
#include "pipeline/classify/rule.hh"
#include "pipeline/config/section.hh"
#include "pmd/drivers.hh"
#include "pmd/mlx5/backend.hh"
#include "pmd/mlx5/hw.hh"
#include "pmd/mlx5/rx.hh"
#include "pmd/mlx5/tx.hh"

namespace rawpipe {
namespace mlx5 {
namespace {

struct Spec final : PortSpec {
  bool model = false;
  VerbsOptions verbs;
  ModelOptions model_opts;
  bool compression = false;
  bool striding = false;
  std::uint32_t log_stride_size = 6;
  std::uint32_t log_strides = 9;
  std::uint16_t tx_comp_every = 32;
  int tx_inline = -1;
  bool steer_all = false;

  Result<std::unique_ptr<Port>> open(const PortEnv& env) const override;
  // A cyclic receive queue posts one pool buffer per WQE at setup (rx_setup refuses fewer) and
  // keeps it posted, as DPDK's mlx5 PMD keeps its elts. A striding one receives into regions of
  // its own and takes pool buffers only as it copies out, as many as the pool gives.
  std::uint64_t buffers_kept(std::uint16_t rx_queues, std::uint16_t, std::uint32_t rx_ring_size) const override {
    return striding ? 0 : std::uint64_t(rx_queues) * rx_ring_size;
  }
  // A second pipeline's raw QPs on the same NIC would race this one's flow rules for the same
  // traffic. The model is an in-memory device of this port alone.
  ClaimedQueues claimed_queues() const override {
    return model ? ClaimedQueues{} : ClaimedQueues{verbs.interface, 0};
  }
};

struct Region {
  void* addr = nullptr;
  std::size_t len = 0;
  ~Region() {
    if (addr) munmap(addr, len);
  }
};

class Mlx5Port final : public Port {
 public:
  Mlx5Port(const Spec& spec, const PortEnv& env, std::unique_ptr<Backend> backend)
      : spec_(spec), env_(env), backend_(std::move(backend)) {}

  ~Mlx5Port() override {
    stop();
    for (std::uint64_t h : flows_) backend_->remove_flow(h);
    for (int fd : group_sockets_) ::close(fd);
    backend_->stop();
    // The WQs, QPs and MRs go before the striding regions they point at (regions_ would
    // otherwise be unmapped first, being declared after backend_).
    backend_.reset();
    regions_.clear();
  }

  Status init() {
    Pool& pool = *env_.pool;
    auto lkey = backend_->register_memory(pool.region(), pool.region_bytes(), fmt::format("pool '{}'", pool.name()));
    if (!lkey) return lkey.status();
    if (!is_power_of_two(env_.rx_ring_size) || env_.rx_ring_size < 16)
      return Status::errorf("port '{}': rx_ring_size {} must be a power of two of at least 16", env_.name, env_.rx_ring_size);
    if (!is_power_of_two(env_.tx_ring_size) || env_.tx_ring_size < 16)
      return Status::errorf("port '{}': tx_ring_size {} must be a power of two of at least 16", env_.name, env_.tx_ring_size);

    RxOptions ro;
    ro.compression = spec_.compression;
    ro.striding = spec_.striding;
    ro.log_stride_size = spec_.log_stride_size;
    ro.log_strides = spec_.log_strides;
    ro.wqe_cnt = spec_.striding ? std::max<std::uint32_t>(4, env_.rx_ring_size >> spec_.log_strides) : env_.rx_ring_size;
    std::vector<RxQueue*> raw;
    for (std::uint16_t i = 0; i < env_.rx_queues; ++i) {
      rxq_.push_back(std::make_unique<RxQueue>());
      raw.push_back(rxq_.back().get());
    }
    RAWPIPE_TRY(backend_->create_rx(raw, ro).context(fmt::format("port '{}'", env_.name)));
    for (std::uint16_t i = 0; i < env_.rx_queues; ++i) {
      RxQueue& q = *rxq_[i];
      q.pool = &pool;
      q.lkey = lkey.value();
      q.data_room = pool.data_room();
      q.port_id = env_.port_id;
      q.queue_id = i;
      q.sink = backend_->sink();
      q.control = {this, [](void* ctx, std::uint16_t queue) { return static_cast<Mlx5Port*>(ctx)->backend_->reset_rq(queue); }};
      if (spec_.striding) {
        auto& r = regions_.emplace_back(std::make_unique<Region>());
        r->len = std::size_t(q.rq.wqe_cnt) << (spec_.log_strides + spec_.log_stride_size);
        r->addr = mmap(nullptr, r->len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
        if (r->addr == MAP_FAILED) {
          r->addr = nullptr;
          return Status::errorf("port '{}': cannot map {} bytes of stride buffers: {}", env_.name, r->len, std::strerror(errno));
        }
        auto mk = backend_->register_memory(r->addr, r->len, fmt::format("stride buffers of queue {}", i));
        if (!mk) return mk.status();
        q.mprq_buf = static_cast<std::uint8_t*>(r->addr);
        q.lkey = mk.value();
        q.stride_size = 1u << spec_.log_stride_size;
        q.strides_per_wqe = 1u << spec_.log_strides;
      } else {
        rx_elts_.emplace_back(q.rq.wqe_cnt, nullptr);
        q.elts = rx_elts_.back().data();
      }
    }
    TxOptions to;
    to.wqe_cnt = env_.tx_ring_size;
    to.comp_every = spec_.tx_comp_every;
    to.inline_bytes = spec_.tx_inline;
    for (std::uint16_t i = 0; i < env_.tx_queues; ++i) {
      auto q = std::make_unique<TxQueue>();
      RAWPIPE_TRY(backend_->create_tx(*q, i, to).context(fmt::format("port '{}'", env_.name)));
      q->pool = &pool;
      q->lkey = lkey.value();
      q->inline_bytes = backend_->tx_inline_bytes(to);
      q->comp_every = spec_.tx_comp_every;
      q->queue_id = i;
      q->sink = backend_->sink();
      q->control = {this, [](void* ctx, std::uint16_t queue) { return static_cast<Mlx5Port*>(ctx)->backend_->reset_sq(queue); }};
      tx_elts_.emplace_back(q->sq.wqe_cnt, nullptr);
      q->elts = tx_elts_.back().data();
      RAWPIPE_TRY(tx_setup(*q).context(fmt::format("port '{}'", env_.name)));
      txq_.push_back(std::move(q));
    }
    rx_fn_ = rx_burst_function(spec_.striding ? RxMode::kStriding : RxMode::kCyclic, spec_.compression, backend_->is_model());
    tx_fn_ = tx_burst_function(backend_->is_model());
    return Status::ok();
  }

  std::string_view pmd_name() const noexcept override { return spec_.model ? "mlx5-model" : "mlx5"; }

  std::string path_report() const override {
    std::string out;
    for (std::size_t i = 0; i < rxq_.size(); ++i)
      out += fmt::format("{} rx queue {}: {} RQ of {} WQEs{}, CQ of {} CQEs{}{} on {}\n", pmd_name(), i,
                         spec_.striding ? "striding" : "cyclic", rxq_[i]->rq.wqe_cnt,
                         spec_.striding ? fmt::format(" x {} strides of {} B", 1u << spec_.log_strides, 1u << spec_.log_stride_size) : "",
                         rxq_[i]->cq.cqe_cnt, spec_.compression ? ", compressed CQEs" : "",
                         rxq_.size() > 1 ? ", Toeplitz RSS" : "", backend_->describe());
    for (std::size_t i = 0; i < txq_.size(); ++i)
      out += fmt::format("{} tx queue {}: SQ of {} WQEBBs, {} inline header bytes, completion every {} WQEs\n", pmd_name(), i,
                         txq_[i]->sq.wqe_cnt, txq_[i]->inline_bytes, txq_[i]->comp_every);
    return out;
  }

  PortCaps caps() const override {
    PortCaps c;
    c.rx_checksum = true;
    c.rss = rxq_.size() > 1;
    c.flow_rules = true;
    c.kernel_pass = !backend_->is_model();
    c.tx = true;
    // A tx_flag::kDummy buffer becomes a NOP WQE (tx.cc): MLX5_OPCODE_NOP with the send's DS
    // count, as libvma posts for VMA_TX_PACKET_DUMMY; the NIC completes it and sends nothing.
    c.dummy_send = true;
    c.max_rx_queues = 64;
    c.max_tx_queues = 64;
    return c;
  }

  // The catch-all flow of steering = "all" takes every frame; the endpoints' rules then only mark
  // flows and join groups.
  bool steered_only() const override { return !spec_.steer_all; }

  LinkInfo link() const override { return backend_->link(); }

  Status start() override {
    if (started_) return Status::ok();
    // The queues left RDY at stop() and their CQs may hold completions for buffers already
    // returned: a stopped port is not started again (the pipeline never restarts either).
    if (quiesced_) return Status::errorf("port '{}': a stopped mlx5 port cannot restart; open it again", env_.name);
    for (auto& q : rxq_) RAWPIPE_TRY(rx_setup(*q, backend_->is_model()).context(fmt::format("port '{}'", env_.name)));
    if (spec_.steer_all) {
      auto h = backend_->add_flow(build_catch_all_attr(backend_->flow_target()));
      if (!h) return h.status().context(fmt::format("port '{}': steering = \"all\"", env_.name));
      std::lock_guard lock(steer_mu_);
      flows_.push_back(h.value());
    }
    RAWPIPE_TRY(backend_->start());
    started_ = true;
    return Status::ok();
  }

  // DPDK's mlx5_dev_stop order (drivers/net/mlx5/mlx5_trigger.c): flow rules go first, then the
  // queues leave the ready state, and only then do posted buffers return to the pool; a NIC
  // still steering into a ready RQ would write into buffers someone else now owns.
  void stop() override {
    if (!started_) return;
    std::vector<std::uint64_t> flows;
    {
      std::lock_guard lock(steer_mu_);
      flows = std::exchange(flows_, {});
    }
    for (std::uint64_t h : flows) backend_->remove_flow(h);
    backend_->quiesce();
    quiesced_ = true;
    for (auto& q : rxq_) rx_release(*q);
    for (auto& q : txq_) tx_release(*q);
    started_ = false;
  }

  RxQueueHandle rx_queue(std::uint16_t queue) override { return {rx_fn_, rxq_.at(queue).get()}; }
  TxQueueHandle tx_queue(std::uint16_t queue) override { return {tx_fn_, txq_.at(queue).get()}; }

  PortStats stats() const override {
    PortStats s;
    std::uint64_t sessions = 0, fillers = 0, rx_resets = 0, hw_drops = 0, mismatch = 0, rx_skipped = 0;
    std::array<std::uint64_t, 256> rx_synd{}, tx_synd{};
    for (const auto& q : rxq_) {
      QueueCounters c;
      c.rx_packets = count_load(q->stats.rx_packets);
      c.rx_bytes = count_load(q->stats.rx_bytes);
      c.rx_nombuf = count_load(q->stats.rx_nombuf);
      c.rx_errors = count_load(q->stats.rx_errors);
      s.rx_queues.push_back(c);
      sessions += count_load(q->compressed_sessions);
      fillers += count_load(q->filler_cqes);
      rx_resets += count_load(q->resets);
      rx_skipped += count_load(q->skipped_error_cqes);
      hw_drops += count_load(q->hw_drops);
      mismatch += count_load(q->wqe_id_mismatch);
      for (int i = 0; i < 256; ++i) rx_synd[i] += count_load(q->syndromes.count[i]);
    }
    std::uint64_t dummies = 0, runts = 0, copies = 0, tx_resets = 0, pads = 0;
    for (const auto& q : txq_) {
      QueueCounters c;
      c.tx_packets = count_load(q->stats.tx_packets);
      c.tx_bytes = count_load(q->stats.tx_bytes);
      c.tx_errors = count_load(q->stats.tx_errors);
      s.tx_queues.push_back(c);
      dummies += count_load(q->dummy_sends);
      runts += count_load(q->runts);
      copies += count_load(q->foreign_copies);
      pads += count_load(q->ring_pads);
      tx_resets += count_load(q->resets);
      for (int i = 0; i < 256; ++i) tx_synd[i] += count_load(q->syndromes.count[i]);
    }
    s.extended["rx_cqe_sessions"] = sessions;
    s.extended["rx_filler_cqes"] = fillers;
    s.extended["rx_queue_resets"] = rx_resets;
    s.extended["rx_error_cqes_skipped"] = rx_skipped;
    s.extended["rx_hw_drops"] = hw_drops;
    // The CQE's drop counter: frames the NIC dropped because the RQ had no posted WQE.
    s.losses["nic_out_of_buffer"] = hw_drops;
    // Between an error CQE and the end of the queue's reset the RQ is in the error state, and the
    // NIC drops what arrives for it; no CQE counts those frames and this driver reads no counter
    // that does, so after a reset the loss is reported as unknown rather than as nothing.
    if (rx_resets) s.losses["rx_queue_error_state"] = std::nullopt;
    s.extended["rx_wqe_id_mismatch"] = mismatch;
    s.extended["tx_dummy_sends"] = dummies;
    s.extended["tx_runts"] = runts;
    s.extended["tx_foreign_pool_copies"] = copies;
    s.extended["tx_ring_pads"] = pads;
    s.extended["tx_queue_resets"] = tx_resets;
    for (int i = 0; i < 256; ++i) {
      if (rx_synd[i]) s.extended[fmt::format("rx_error_syndrome_0x{:02x}", i)] = rx_synd[i];
      if (tx_synd[i]) s.extended[fmt::format("tx_error_syndrome_0x{:02x}", i)] = tx_synd[i];
    }
    {
      std::lock_guard lock(steer_mu_);
      s.extended["flow_rules"] = flows_.size();
      s.extended["multicast_groups_joined"] = group_sockets_.size();
    }
    backend_->extended_stats(s.extended);
    return s;
  }

  // Make before break: the new rules are installed before the old ones go, so traffic that both
  // steer never falls back to the kernel in between.
  Status update_steering(const SteeringRules& rules) override {
    const FlowTarget target = backend_->flow_target();
    std::vector<std::uint64_t> fresh;
    std::vector<int> sockets;
    auto undo = [&] {
      for (std::uint64_t h : fresh) backend_->remove_flow(h);
      for (int fd : sockets) ::close(fd);
    };
    for (const SteeringRule& r : rules.rules) {
      if (r.match.ingress_port && *r.match.ingress_port != env_.port_id) continue;
      for (const FlowAttrBytes& a : build_flow_attrs(r.match, r.flow_tag, target)) {
        auto h = backend_->add_flow(a);
        if (!h) {
          undo();
          return h.status().context(fmt::format("port '{}': rule '{}'", env_.name, r.match.text));
        }
        fresh.push_back(h.value());
      }
      if (r.match.dst_ip && multicast_mac(*r.match.dst_ip) && backend_->ifindex() > 0) {
        auto fd = join_group(*r.match.dst_ip);
        if (!fd) {
          undo();
          return fd.status().context(fmt::format("port '{}': rule '{}'", env_.name, r.match.text));
        }
        sockets.push_back(fd.value());
      }
    }
    std::vector<std::uint64_t> old_flows;
    std::vector<int> old_sockets;
    {
      std::lock_guard lock(steer_mu_);
      old_flows = std::exchange(flows_, std::move(fresh));
      old_sockets = std::exchange(group_sockets_, std::move(sockets));
    }
    for (std::uint64_t h : old_flows) backend_->remove_flow(h);
    for (int fd : old_sockets) ::close(fd);
    return Status::ok();
  }

 private:
  // A kernel membership so the host answers IGMP/MLD queries and switches keep forwarding the
  // group; the frames themselves are steered to the raw queue by the flow rule.
  Result<int> join_group(const IpPrefix& group) {
    const bool v4 = group.family == L3Type::kIpv4;
    int fd = ::socket(v4 ? AF_INET : AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return Status::errorf("socket for the multicast membership: {}", std::strerror(errno));
    int rc;
    if (v4) {
      ip_mreqn m{};
      std::memcpy(&m.imr_multiaddr, group.addr.data(), 4);
      m.imr_ifindex = backend_->ifindex();
      rc = setsockopt(fd, IPPROTO_IP, IP_ADD_MEMBERSHIP, &m, sizeof(m));
    } else {
      ipv6_mreq m{};
      std::memcpy(&m.ipv6mr_multiaddr, group.addr.data(), 16);
      m.ipv6mr_interface = static_cast<unsigned>(backend_->ifindex());
      rc = setsockopt(fd, IPPROTO_IPV6, IPV6_JOIN_GROUP, &m, sizeof(m));
    }
    if (rc != 0) {
      const int err = errno;
      ::close(fd);
      return Status::errorf("joining group {} on {}: {}", format_prefix(group), spec_.verbs.interface, std::strerror(err));
    }
    return fd;
  }

  const Spec& spec_;
  PortEnv env_;
  std::unique_ptr<Backend> backend_;
  std::vector<std::unique_ptr<RxQueue>> rxq_;
  std::vector<std::unique_ptr<TxQueue>> txq_;
  std::vector<std::vector<Mbuf*>> rx_elts_, tx_elts_;
  std::vector<std::unique_ptr<Region>> regions_;
  RxBurstFn rx_fn_ = nullptr;
  TxBurstFn tx_fn_ = nullptr;
  bool started_ = false;
  bool quiesced_ = false;
  mutable std::mutex steer_mu_;  // control path: update_steering vs. stats
  std::vector<std::uint64_t> flows_;
  std::vector<int> group_sockets_;
};

Result<std::unique_ptr<Port>> Spec::open(const PortEnv& env) const {
  if (!env.pool) return Status::errorf("port '{}': no pool", env.name);
  Result<std::unique_ptr<Backend>> b = model ? open_model_backend(model_opts) : open_verbs_backend(verbs);
  if (!b) return b.status();  // the caller names the port
  auto port = std::make_unique<Mlx5Port>(*this, env, std::move(b).value());
  RAWPIPE_TRY(port->init());
  return std::unique_ptr<Port>(std::move(port));
}

void parse_common(ConfigSection& s, Spec& spec) {
  spec.compression = s.boolean("cqe_compression", false);
  spec.striding = s.boolean("striding_rq", false);
  spec.log_stride_size = static_cast<std::uint32_t>(s.integer("log_stride_size", 6, 13, 6));
  spec.log_strides = static_cast<std::uint32_t>(s.integer("log_strides", 3, 16, 9));
  spec.tx_comp_every = static_cast<std::uint16_t>(s.integer("tx_completion_every", 1, 4096, 32));
  // The device inline modes by name (none, L2, IP, TCP/UDP) or by their header sizes.
  const std::string inl = s.choice("tx_inline", {"auto", "none", "l2", "l3", "l4", "0", "18", "58", "78"}, "auto");
  spec.tx_inline = inl == "auto"                  ? -1
                   : inl == "none" || inl == "0"  ? 0
                   : inl == "l2" || inl == "18"   ? kEthL2InlineHeader
                   : inl == "l3" || inl == "58"   ? kInlineL3
                                                  : kInlineL4;
  spec.steer_all = s.choice("steering", {"rules", "all"}, "rules") == "all";
  if (spec.compression && spec.striding)
    s.fail("striding_rq", "cqe_compression and striding_rq together are not supported; enable one of them");
}

Result<std::unique_ptr<PortSpec>> parse_mlx5(ConfigSection& s) {
  auto spec = std::make_unique<Spec>();
  spec->verbs.interface = s.string("interface");
  parse_common(s, *spec);
  RAWPIPE_TRY(s.status());
  return std::unique_ptr<PortSpec>(std::move(spec));
}

Result<std::unique_ptr<PortSpec>> parse_mlx5_model(ConfigSection& s) {
  auto spec = std::make_unique<Spec>();
  spec->model = true;
  spec->verbs.interface = "mlx5-model";
  parse_common(s, *spec);
  ModelOptions& m = spec->model_opts;
  m.pcap = s.string("inject_pcap", "");
  m.count = static_cast<std::uint64_t>(s.integer("inject_count", 0, 1LL << 32, m.pcap.empty() ? 1000000 : 0));
  m.frame_size = static_cast<std::uint16_t>(s.integer("inject_size", 60, 9000, 64));
  m.dst = s.string("inject_dst", "10.0.0.2:5000");
  m.src = s.string("inject_src", "10.0.0.1:1024");
  m.flows = static_cast<std::uint32_t>(s.integer("inject_flows", 1, 65535, 1));
  m.loops = static_cast<std::uint32_t>(s.integer("inject_loops", 1, 1 << 20, 1));
  m.min_inline = static_cast<std::uint16_t>(std::stoi(s.choice("model_min_inline", {"0", "18", "58", "78"}, "18")));
  m.rx_error_every = static_cast<std::uint32_t>(s.integer("inject_rx_error_every", 0, (1LL << 32) - 1, 0));
  m.rate_pps = s.number("inject_rate_pps", 0, 1e9, 0);
  m.interface = s.string("interface", "");
  if (!m.interface.empty()) spec->verbs.interface = m.interface;
  m.wire_pcap = s.string("wire_pcap", "");
  if (!m.pcap.empty() && s.has("inject_count"))
    s.fail("inject_count", "inject_count and inject_pcap exclude each other (a pcap injects its own frames)");
  RAWPIPE_TRY(s.status());
  return std::unique_ptr<PortSpec>(std::move(spec));
}

}  // namespace
}  // namespace mlx5

namespace {
const KeyDoc kMlx5CommonDocs[] = {
    {"cqe_compression", "boolean", "", "false", "ask for compressed CQEs (not with striding_rq)"},
    {"striding_rq", "boolean", "", "false", "multi-packet (striding) receive queues"},
    {"log_stride_size", "integer", "6 to 13", "6", "log2 of the stride size in bytes (striding_rq)"},
    {"log_strides", "integer", "3 to 16", "9", "log2 of the strides per WQE (striding_rq)"},
    {"tx_completion_every", "integer", "1 to 4096", "32", "request a send completion every N WQEs"},
    {"tx_inline", "string", "\"auto\", \"none\", \"l2\", \"l3\", \"l4\", \"0\", \"18\", \"58\", \"78\"", "\"auto\" (from the device)",
     "headers inlined in each send WQE"},
    {"steering", "string", "\"rules\", \"all\"", "\"rules\"", "flow rules for the endpoints' traffic only, or every frame"},
};
const KeyDoc kMlx5Docs[] = {
    {"interface", "string", "a ConnectX interface name", "required", "the netdev whose RDMA device is opened"},
};
const KeyDoc kMlx5ModelDocs[] = {
    {"inject_pcap", "string", "a pcap file", "none", "frames the model receives (instead of generated ones)"},
    {"inject_count", "integer", "0 to 2^32 (not with inject_pcap)", "1000000", "generated frames"},
    {"inject_size", "integer", "60 to 9000", "64", "size of generated frames"},
    {"inject_dst", "string", "\"ADDRESS:PORT\"", "\"10.0.0.2:5000\"", "destination of generated frames"},
    {"inject_src", "string", "\"ADDRESS:PORT\"", "\"10.0.0.1:1024\"", "first source of generated frames"},
    {"inject_flows", "integer", "1 to 65535", "1", "generated flows (consecutive source ports)"},
    {"inject_loops", "integer", "1 to 1048576", "1", "times the frames are injected"},
    {"inject_rate_pps", "number", "0 to 1e9", "0", "injection rate; 0: as fast as the queue takes them"},
    {"inject_rx_error_every", "integer", "0 to 4294967295", "0", "every N-th frame completes with an error CQE; 0: never"},
    {"model_min_inline", "string", "\"0\", \"18\", \"58\", \"78\"", "\"18\"", "the minimum inline header size the model demands"},
    {"interface", "string", "an existing interface", "none", "interface whose namespace holds the model's multicast memberships"},
    {"wire_pcap", "string", "a writable path", "none", "write the frames the model transmits to this capture"},
};
}  // namespace
const KeyTable kMlx5CommonKeys{"mlx5-common", "[[ports]] pmd = \"mlx5\" or \"mlx5-model\"", "mlx5 queue keys",
                               kMlx5CommonDocs};
const KeyTable kMlx5Keys{"mlx5", "[[ports]] pmd = \"mlx5\"", "ConnectX through rdma-core direct verbs", kMlx5Docs,
                         &kMlx5CommonKeys};
const KeyTable kMlx5ModelKeys{"mlx5-model", "[[ports]] pmd = \"mlx5-model\"", "the mlx5 data path on a ConnectX model",
                              kMlx5ModelDocs, &kMlx5CommonKeys};

const PmdDriver kMlx5Driver{"mlx5", "NVIDIA ConnectX raw-packet queues through rdma-core direct verbs", mlx5::parse_mlx5, &kMlx5Keys};
const PmdDriver kMlx5ModelDriver{"mlx5-model",
                                 "the mlx5 data path on an in-memory ConnectX model fed by synthetic frames or a pcap",
                                 mlx5::parse_mlx5_model, &kMlx5ModelKeys};

}  // namespace rawpipe
