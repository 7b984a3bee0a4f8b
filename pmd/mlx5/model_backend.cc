// The mlx5 control path on the device model: what verbs.cc does on a NIC, done to the in-memory
// ConnectX, plus the frame source that plays the wire (synthetic UDP frames or a pcap file) on
// the model's own thread.
#include <fmt/format.h>

#include <algorithm>
#include <arpa/inet.h>
#include <net/if.h>

#include <charconv>
#include <cstdio>
#include <cstring>
#include <mutex>

#include "pipeline/wire/builder.hh"
#include "pmd/mlx5/backend.hh"
#include "pmd/mlx5/hw.hh"
#include "pmd/mlx5/model/device.hh"
#include "pmd/rdma/wire_pcap.hh"

#ifdef RAWPIPE_MLX5_MODEL_PCAP
#include <pcap/pcap.h>
#endif

namespace rawpipe::mlx5 {
namespace {

// The 40-byte Toeplitz key DPDK and the kernel use by default (Microsoft's RSS verification key).
constexpr std::uint8_t kRssKey[40] = {0x6d, 0x5a, 0x56, 0xda, 0x25, 0x5b, 0x0e, 0xc2, 0x41, 0x67, 0x25, 0x3d, 0x43, 0xa3,
                                      0x8f, 0xb0, 0xd0, 0xca, 0x2b, 0xcb, 0xae, 0x7b, 0x30, 0xb4, 0x77, 0xcb, 0x2d, 0xa3,
                                      0x80, 0x30, 0xf2, 0x0c, 0x6a, 0x42, 0xb7, 0x3b, 0xbe, 0xac, 0x01, 0xfa};

Result<std::pair<wire::Ipv4Addr, std::uint16_t>> parse_endpoint(const std::string& text, std::string_view key) {
  const auto colon = text.rfind(':');
  if (colon == std::string::npos)
    return Status::errorf("{} '{}': expected IPV4:PORT, e.g. 10.0.0.2:5000", key, text);
  in_addr a{};
  if (inet_pton(AF_INET, text.substr(0, colon).c_str(), &a) != 1)
    return Status::errorf("{} '{}': '{}' is not an IPv4 address", key, text, text.substr(0, colon));
  unsigned port = 0;
  const char* b = text.data() + colon + 1;
  auto [p, ec] = std::from_chars(b, text.data() + text.size(), port);
  if (ec != std::errc() || p != text.data() + text.size() || port > 65535)
    return Status::errorf("{} '{}': port must be 0..65535", key, text);
  wire::Ipv4Addr out;
  std::memcpy(out.data(), &a, 4);
  return std::make_pair(out, static_cast<std::uint16_t>(port));
}

class ModelBackend final : public Backend {
 public:
  explicit ModelBackend(const ModelOptions& o) : o_(o) {}

  Status load_frames() {
    if (!o_.pcap.empty()) return load_pcap();
    if (o_.count == 0) return Status::ok();
    auto dst = parse_endpoint(o_.dst, "inject_dst");
    if (!dst) return dst.status();
    auto src = parse_endpoint(o_.src, "inject_src");
    if (!src) return src.status();
    const std::uint64_t distinct = std::min<std::uint64_t>(o_.count, std::max<std::uint32_t>(o_.flows, 1));
    for (std::uint64_t i = 0; i < distinct; ++i) {
      wire::FrameSpec s;
      s.eth.dst = o_.mac;
      if ((dst->first[0] & 0xf0) == 0xe0)  // a group address travels to the group's MAC
        s.eth.dst = {0x01, 0x00, 0x5e, static_cast<std::uint8_t>(dst->first[1] & 0x7f), dst->first[2], dst->first[3]};
      s.eth.src = {0x02, 0x00, 0x00, 0x00, 0x00, 0x01};
      s.ip_version = 4;
      s.ipv4.src = src->first;
      s.ipv4.dst = dst->first;
      s.udp = {static_cast<std::uint16_t>(src->second + i), dst->second};
      const std::uint16_t headers = 14 + 20 + 8;
      s.payload_len = o_.frame_size > headers ? static_cast<std::uint16_t>(o_.frame_size - headers) : 0;
      s.min_frame_len = 60;
      std::vector<std::uint8_t> f(9216);
      f.resize(wire::write_frame(s, f.data(), f.size()));
      if (f.empty()) return Status::errorf("inject_size {} does not make a valid frame", o_.frame_size);
      frames_.push_back(std::move(f));
    }
    total_ = o_.count;
    return Status::ok();
  }

  bool is_model() const override { return true; }
  const rdma::DoorbellSink* sink() const override { return dev_.sink(); }
  std::string describe() const override {
    return fmt::format("mlx5 device model ({} frames to inject{})", total_ * o_.loops,
                       o_.pcap.empty() ? "" : " from " + o_.pcap);
  }
  LinkInfo link() const override {
    LinkInfo l;
    l.mac = o_.mac;
    l.speed_mbps = 100000;
    return l;
  }
  FlowTarget flow_target() const override { return FlowTarget{o_.mac, 1}; }
  int ifindex() const override {
    return o_.interface.empty() ? 0 : static_cast<int>(if_nametoindex(o_.interface.c_str()));
  }

  Result<std::uint32_t> register_memory(void* addr, std::size_t len, std::string_view) override {
    return dev_.reg_mr(addr, len);
  }

  Status create_rx(std::span<RxQueue* const> queues, const RxOptions& o) override {
    std::vector<std::uint16_t> ids;
    for (RxQueue* q : queues) {
      model::RqOptions ro;
      ro.wqe_cnt = o.wqe_cnt;
      ro.cqe_cnt = o.striding ? o.wqe_cnt << o.log_strides : o.wqe_cnt;
      ro.compression = o.compression;
      ro.striding = o.striding;
      ro.log_stride_size = o.log_stride_size;
      ro.log_strides = o.log_strides;
      ids.push_back(dev_.create_rq(ro, q->rq, q->cq));
    }
    rxqs_.assign(queues.begin(), queues.end());
    rq_ids_ = ids;
    first_rq_ = ids.front();
    if (ids.size() > 1) dev_.set_rss(kRssKey, ids);
    return Status::ok();
  }

  Status create_tx(TxQueue& q, std::uint16_t, const TxOptions& o) override {
    model::SqOptions so;
    so.wqe_cnt = o.wqe_cnt;
    so.cqe_cnt = std::bit_ceil(std::max<std::uint32_t>(o.wqe_cnt / o.comp_every * 2, 16));
    so.min_inline = o_.min_inline;
    dev_.create_sq(so, q.sq, q.cq);
    return Status::ok();
  }

  std::uint16_t tx_inline_bytes(const TxOptions& o) const override {
    return o.inline_bytes >= 0 ? static_cast<std::uint16_t>(o.inline_bytes) : o_.min_inline;
  }

  Result<std::uint64_t> add_flow(const FlowAttrBytes& attr) override {
    return static_cast<std::uint64_t>(dev_.create_flow(first_rq_, flow_attr(attr), rss_hash_fields(rss_type_of(attr))));
  }
  void remove_flow(std::uint64_t handle) override { dev_.destroy_flow(static_cast<int>(handle)); }
  // Before the queues leave RDY, every buffer the device could still write into must still be
  // held by the driver (its RQ slot table): a posted WQE whose buffer the driver no longer holds
  // was freed while the NIC could receive into it. Counted, as a NIC would not tell.
  void quiesce() override {
    for (std::size_t i = 0; i < rxqs_.size(); ++i) {
      const RxQueue& q = *rxqs_[i];
      if (!q.elts) continue;  // striding: the port's own regions, released after the backend
      std::vector<std::uint64_t> held;
      for (std::uint32_t s = 0; s < q.rq.wqe_cnt; ++s)
        if (q.elts[s]) held.push_back(reinterpret_cast<std::uintptr_t>(q.elts[s]->buf_addr() + q.elts[s]->data_off));
      std::sort(held.begin(), held.end());
      for (std::uint64_t a : dev_.posted_buffers(rq_ids_[i]))
        if (!std::binary_search(held.begin(), held.end(), a)) ++dma_into_freed_;
    }
    dev_.quiesce();
  }
  bool reset_rq(std::uint16_t q) override { return dev_.reset_rq(q); }
  bool reset_sq(std::uint16_t q) override { return dev_.reset_sq(q); }

  Status start() override {
    if (wire_running_) return Status::ok();
    wire_running_ = true;
    dev_.keep_sent(!o_.wire_pcap.empty());
    if (o_.rx_error_every) dev_.fail_every_rx(o_.rx_error_every, kSyndromeLocalProt);
    dev_.start_thread(frames_, total_ * o_.loops, o_.rate_pps);
    return Status::ok();
  }
  void stop() override {
    dev_.stop_thread();
    wire_running_ = false;
    if (!o_.wire_pcap.empty()) {
      for (auto& f : dev_.take_sent()) wire_.push_back(std::move(f));
      if (Status st = rdma::write_wire_pcap(o_.wire_pcap, wire_); !st)
        std::fprintf(stderr, "rawpipe: mlx5-model: %s\n", st.message().c_str());
    }
  }

  void extended_stats(std::map<std::string, std::uint64_t>& out) const override {
    const auto c = dev_.counters();
    out["model_rx_delivered"] = c.rx_delivered;
    out["model_rx_to_kernel"] = c.rx_to_kernel;
    out["model_rx_no_wqe"] = c.rx_no_wqe;
    out["model_rx_error_cqes"] = c.rx_error_cqes;
    out["model_rx_flush_cqes"] = c.rx_flush_cqes;
    out["model_rx_queue_error_drops"] = c.rx_queue_error;
    out["model_cqe_sessions"] = c.sessions;
    out["model_tx_frames"] = c.tx_frames;
    out["model_tx_nops"] = c.tx_nops;
    out["model_doorbell_order_errors"] = c.doorbell_order_errors;
    out["model_rx_not_ready_drops"] = c.rx_not_ready;
    out["model_dma_into_freed_buffer"] = dma_into_freed_;
    out["model_frames_injected"] = dev_.thread_delivered();
  }

 private:
  bool wire_running_ = false;
  std::vector<RxQueue*> rxqs_;
  std::vector<std::uint16_t> rq_ids_;
  std::uint64_t dma_into_freed_ = 0;
  std::vector<std::vector<std::uint8_t>> wire_;  // wire_pcap: every frame sent, over restarts  // control path: quiesce() writes, stats read after stop
  Status load_pcap() {
#ifdef RAWPIPE_MLX5_MODEL_PCAP
    char err[PCAP_ERRBUF_SIZE] = {};
    pcap_t* p = pcap_open_offline(o_.pcap.c_str(), err);
    if (!p) return Status::errorf("inject_pcap '{}': {}", o_.pcap, err);
    if (pcap_datalink(p) != DLT_EN10MB) {
      pcap_close(p);
      return Status::errorf("inject_pcap '{}': not an Ethernet capture (link type {})", o_.pcap, pcap_datalink(p));
    }
    pcap_pkthdr* h = nullptr;
    const u_char* data = nullptr;
    int rc;
    while ((rc = pcap_next_ex(p, &h, &data)) == 1 && frames_.size() < kMaxPcapFrames)
      frames_.emplace_back(data, data + h->caplen);
    total_ = frames_.size();
    const std::string why = rc == -1 ? pcap_geterr(p) : "";
    pcap_close(p);
    if (rc == -1) return Status::errorf("inject_pcap '{}': {} after {} frames", o_.pcap, why, frames_.size());
    return Status::ok();
#else
    return Status::errorf("inject_pcap '{}': this build has no libpcap (install libpcap-dev and rebuild)", o_.pcap);
#endif
  }

  static constexpr std::size_t kMaxPcapFrames = 1u << 22;
  ModelOptions o_;
  mutable model::Device dev_;
  std::uint16_t first_rq_ = 0;
  std::vector<std::vector<std::uint8_t>> frames_;  // distinct frames, cycled
  std::uint64_t total_ = 0;                         // frames per loop
};

}  // namespace

Result<std::unique_ptr<Backend>> open_model_backend(const ModelOptions& o) {
  if (!o.interface.empty() && if_nametoindex(o.interface.c_str()) == 0)
    return Status::errorf("mlx5-model: interface '{}' does not exist in this network namespace (the model keeps "
                          "its multicast memberships there); name an existing one or remove the key",
                          o.interface);
  auto b = std::make_unique<ModelBackend>(o);
  RAWPIPE_TRY(b->load_frames());
  return std::unique_ptr<Backend>(std::move(b));
}

}  // namespace rawpipe::mlx5
