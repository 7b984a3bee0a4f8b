// The mlx5 control path on a NIC: rdma-core's sequence, every call through the run-time loaded
// tables (pmd/rdma/loader.hh).
//
//   open:    preflight (driver, libraries, kernel RDMA, device, CAP_NET_RAW), mlx5dv_is_supported,
//            mlx5dv_open_device(DEVX) else ibv_open_device, ibv_query_device_ex + mlx5dv_query_device
//            (caps checked against the config), ibv_alloc_pd, the minimum inline mode through
//            mlx5dv_devx_general_cmd (devx.hh).
//   memory:  one ibv_reg_mr(IBV_ACCESS_LOCAL_WRITE) per region (the pool, striding buffers).
//   receive: per queue a CQ from mlx5dv_create_cq (compressed CQEs in HASH format when
//            configured). One cyclic queue: a raw-packet QP taken RESET->INIT->RTR. Several
//            queues or a striding RQ: a WQ per queue (mlx5dv_create_wq with striding attributes),
//            moved to RDY, an indirection table of 2^n entries and a receive-only Toeplitz RSS QP
//            per traffic type (flow.hh RssType).
//            mlx5dv_init_obj(CQ | QP or RWQ) gives the rings and doorbell records.
//   transmit: per queue a CQ and a raw-packet QP, RESET->INIT->RTR->RTS, mlx5dv_init_obj(QP | CQ)
//            for the SQ ring, its doorbell record and the UAR/BlueFlame register.
//   steering: ibv_create_flow on the receive QP (with RSS, the hash QP of the flow's type).
#include <arpa/inet.h>

#include <bit>
#include <cerrno>
#include <cstring>
#include <optional>
#include <vector>

#include "pmd/mlx5/backend.hh"
#include "pmd/mlx5/devx.hh"
#include "pmd/mlx5/hw.hh"
#include "pmd/mlx5/verbs_cq.hh"
#include "pmd/rdma/loader.hh"
#include "pmd/rdma/preflight.hh"

namespace rawpipe::mlx5 {
namespace {

constexpr std::uint8_t kRssKey[40] = {0x6d, 0x5a, 0x56, 0xda, 0x25, 0x5b, 0x0e, 0xc2, 0x41, 0x67, 0x25, 0x3d, 0x43, 0xa3,
                                      0x8f, 0xb0, 0xd0, 0xca, 0x2b, 0xcb, 0xae, 0x7b, 0x30, 0xb4, 0x77, 0xcb, 0x2d, 0xa3,
                                      0x80, 0x30, 0xf2, 0x0c, 0x6a, 0x42, 0xb7, 0x3b, 0xbe, 0xac, 0x01, 0xfa};

Status errno_status(std::string_view what, int err) {
  if (err == EPERM || err == EACCES)
    return Status::errorf("{}: {} (raw-packet queues need CAP_NET_RAW; run as root or setcap cap_net_raw,cap_ipc_lock=ep)",
                          what, std::strerror(err));
  if (err == ENOMEM)
    return Status::errorf("{}: {} (pinning memory failed? raise 'ulimit -l' or grant cap_ipc_lock)", what, std::strerror(err));
  return Status::errorf("{}: {}", what, std::strerror(err ? err : EINVAL));
}

class VerbsBackend final : public Backend {
 public:
  ~VerbsBackend() override { close(); }

  Status open(const VerbsOptions& o) {
    rdma::PreflightOptions po;
    po.pmd = "mlx5";
    po.expected_driver = "mlx5_core";
    po.load_provider = [this] {
      auto t = rdma::load_mlx5();
      if (t) dv_ = t.value();
      return t.status();
    };
    auto pre = rdma::rdma_preflight(o.interface, po);
    if (!pre) return pre.status();
    return attach(std::move(pre).value(), dv_, o.interface);
  }

  // Everything after the preflight, on its result and the provider table.
  Status attach(rdma::PreflightResult pre, const rdma::Mlx5Table* dv, std::string_view interface) {
    pre_ = std::move(pre);
    dv_ = dv;
    v_ = pre_.verbs;
    const std::string dev_name = v_->get_device_name(pre_.device);
    if (!dv_->is_supported(pre_.device))
      return Status::errorf("pmd mlx5 on {}: RDMA device {} is not handled by the mlx5 provider", interface, dev_name);
    // A DevX context first, as DPDK's mlx5_open_device (drivers/common/mlx5/linux/mlx5_common_os.c)
    // does: only on one does the firmware answer QUERY_NIC_VPORT_CONTEXT (the inline mode). A
    // kernel or device without DevX (or without CAP_NET_RAW for its user context) refuses it; the
    // plain verbs context then serves everything else.
    if (dv_->open_device) {
      mlx5dv_context_attr ca{};
      ca.flags = MLX5DV_CONTEXT_FLAGS_DEVX;
      ctx_ = dv_->open_device(pre_.device, &ca);
      devx_ = ctx_ != nullptr;
    }
    if (!ctx_) ctx_ = v_->open_device(pre_.device);
    if (!ctx_) return errno_status(fmt::format("pmd mlx5 on {}: ibv_open_device({})", interface, dev_name), errno);
    std::memset(&attr_, 0, sizeof(attr_));
    if (int rc = v_->query_device_ex(ctx_, &attr_); rc != 0)
      return errno_status(fmt::format("pmd mlx5 on {}: ibv_query_device_ex", interface), rc);
    std::memset(&dv_attr_, 0, sizeof(dv_attr_));
    dv_attr_.comp_mask = MLX5DV_CONTEXT_MASK_CQE_COMPRESION | MLX5DV_CONTEXT_MASK_STRIDING_RQ;
    if (int rc = dv_->query_device(ctx_, &dv_attr_); rc != 0)
      return errno_status(fmt::format("pmd mlx5 on {}: mlx5dv_query_device", interface), rc);
    port_attr_ = {};
    if (int rc = v_->query_port(ctx_, pre_.netdev.rdma_port, &port_attr_); rc != 0)
      return errno_status(fmt::format("pmd mlx5 on {}: ibv_query_port({})", interface, pre_.netdev.rdma_port), rc);
    if (port_attr_.link_layer != IBV_LINK_LAYER_ETHERNET)
      return Status::errorf("pmd mlx5 on {}: port {} of {} is InfiniBand, not Ethernet; raw-packet queues need an "
                            "Ethernet port (set the port type with mlxconfig LINK_TYPE_P1=2)",
                            interface, pre_.netdev.rdma_port, dev_name);
    pd_ = v_->alloc_pd(ctx_);
    if (!pd_) return errno_status(fmt::format("pmd mlx5 on {}: ibv_alloc_pd", interface), errno);
    inline_ = query_min_inline();
    name_ = fmt::format("{} ({} port {}, part {}, fw {}, minimum inline {})", interface, dev_name, pre_.netdev.rdma_port,
                        attr_.orig_attr.vendor_part_id, attr_.orig_attr.fw_ver,
                        inline_.error.empty() ? fmt::format("{} B from {}", *inline_.bytes, inline_.source) : "unsupported");
    return Status::ok();
  }

  bool is_model() const override { return false; }
  std::string describe() const override { return name_; }
  int ifindex() const override { return pre_.netdev.ifindex; }
  LinkInfo link() const override {
    LinkInfo l;
    l.up = pre_.netdev.oper_up;
    l.mtu = pre_.netdev.mtu;
    l.mac = pre_.netdev.mac;
    return l;
  }
  FlowTarget flow_target() const override { return FlowTarget{pre_.netdev.mac, pre_.netdev.rdma_port}; }

  Result<std::uint32_t> register_memory(void* addr, std::size_t len, std::string_view what) override {
    ibv_mr* mr = v_->reg_mr(pd_, addr, len, IBV_ACCESS_LOCAL_WRITE);
    if (!mr) return errno_status(fmt::format("pmd mlx5: ibv_reg_mr of {} ({} bytes)", what, len), errno);
    mrs_.push_back(mr);
    return mr->lkey;
  }

  Status create_rx(std::span<RxQueue* const> queues, const RxOptions& o) override {
    if (o.compression && !(dv_attr_.comp_mask & MLX5DV_CONTEXT_MASK_CQE_COMPRESION &&
                           dv_attr_.cqe_comp_caps.supported_format & MLX5DV_CQE_RES_FORMAT_HASH))
      return Status::error("pmd mlx5: cqe_compression = true but the device does not offer compressed CQEs in hash format");
    // max_num is the longest session the device may write; 0 means compression is off on this
    // device or port (mlx5dv_query_device(3)), whatever the formats say.
    if (o.compression && dv_attr_.cqe_comp_caps.max_num == 0)
      return Status::error("pmd mlx5: cqe_compression = true but the device reports a maximum compressed session of 0 "
                           "CQEs (compression disabled in firmware?); set cqe_compression = false");
    if (o.striding) {
      const auto& c = dv_attr_.striding_rq_caps;
      if (!(dv_attr_.comp_mask & MLX5DV_CONTEXT_MASK_STRIDING_RQ) || !c.max_single_wqe_log_num_of_strides)
        return Status::error("pmd mlx5: striding_rq = true but the device has no striding RQ");
      // supported_qpts is a bit mask of QP types (1 << IBV_QPT_*) striding WQs may serve.
      if (!(c.supported_qpts & (1u << IBV_QPT_RAW_PACKET)))
        return Status::error("pmd mlx5: striding_rq = true but the device offers striding RQs only for other QP types "
                             "than raw packet; set striding_rq = false");
      if (o.log_stride_size < c.min_single_stride_log_num_of_bytes || o.log_stride_size > c.max_single_stride_log_num_of_bytes)
        return Status::errorf("pmd mlx5: log_stride_size {} is outside the device's range {}..{}", o.log_stride_size,
                              c.min_single_stride_log_num_of_bytes, c.max_single_stride_log_num_of_bytes);
      if (o.log_strides < c.min_single_wqe_log_num_of_strides || o.log_strides > c.max_single_wqe_log_num_of_strides)
        return Status::errorf("pmd mlx5: log_strides {} is outside the device's range {}..{}", o.log_strides,
                              c.min_single_wqe_log_num_of_strides, c.max_single_wqe_log_num_of_strides);
    }
    const bool use_qp = queues.size() == 1 && !o.striding;
    for (std::size_t i = 0; i < queues.size(); ++i) {
      RxQueue& q = *queues[i];
      const std::uint32_t cqe = o.striding ? o.wqe_cnt << o.log_strides : o.wqe_cnt;
      auto made = create_cq64(*dv_, ctx_, cqe, o.compression, fmt::format("receive queue {}", i));
      if (!made) return made.status();
      ibv_cq* cq = made.value();
      rx_cqs_.push_back(cq);
      mlx5dv_obj obj{};
      mlx5dv_cq dcq{};
      obj.cq.in = cq;
      obj.cq.out = &dcq;
      if (use_qp) {
        ibv_qp_init_attr qa{};
        qa.qp_type = IBV_QPT_RAW_PACKET;
        qa.send_cq = cq;
        qa.recv_cq = cq;
        qa.cap.max_send_wr = 1;   // receive-only; transmit has its own QPs
        qa.cap.max_send_sge = 1;
        qa.cap.max_recv_wr = o.wqe_cnt;
        qa.cap.max_recv_sge = 1;
        ibv_qp* qp = v_->create_qp(pd_, &qa);
        if (!qp) return errno_status("pmd mlx5: ibv_create_qp (raw packet, receive)", errno);
        rx_qp_ = qp;
        RAWPIPE_TRY(to_rtr(qp, false));
        mlx5dv_qp dqp{};
        obj.qp.in = qp;
        obj.qp.out = &dqp;
        if (int rc = dv_->init_obj(&obj, MLX5DV_OBJ_QP | MLX5DV_OBJ_CQ); rc != 0)
          return errno_status("pmd mlx5: mlx5dv_init_obj(QP | CQ) for receive", rc);
        q.rq = RqRing{static_cast<std::uint8_t*>(dqp.rq.buf), dqp.rq.wqe_cnt, dqp.rq.stride, &dqp.dbrec[kRcvDbr]};
      } else {
        ibv_wq_init_attr wa{};
        wa.wq_type = IBV_WQT_RQ;
        wa.max_wr = o.wqe_cnt;
        wa.max_sge = 1;
        wa.pd = pd_;
        wa.cq = cq;
        ibv_wq* wq;
        if (o.striding) {
          mlx5dv_wq_init_attr dwa{};
          dwa.comp_mask = MLX5DV_WQ_INIT_ATTR_MASK_STRIDING_RQ;
          dwa.striding_rq_attrs.single_stride_log_num_of_bytes = o.log_stride_size;
          dwa.striding_rq_attrs.single_wqe_log_num_of_strides = o.log_strides;
          dwa.striding_rq_attrs.two_byte_shift_en = 0;
          wq = dv_->create_wq(ctx_, &wa, &dwa);
        } else {
          wq = v_->create_wq(ctx_, &wa);
        }
        if (!wq) return errno_status(fmt::format("pmd mlx5: create_wq for receive queue {}", i), errno);
        wqs_.push_back(wq);
        ibv_wq_attr mod{};
        mod.attr_mask = IBV_WQ_ATTR_STATE;
        mod.wq_state = IBV_WQS_RDY;
        if (int rc = v_->modify_wq(wq, &mod); rc != 0) return errno_status("pmd mlx5: ibv_modify_wq(RDY)", rc);
        mlx5dv_rwq drwq{};
        obj.rwq.in = wq;
        obj.rwq.out = &drwq;
        if (int rc = dv_->init_obj(&obj, MLX5DV_OBJ_RWQ | MLX5DV_OBJ_CQ); rc != 0)
          return errno_status("pmd mlx5: mlx5dv_init_obj(RWQ | CQ)", rc);
        q.rq = RqRing{static_cast<std::uint8_t*>(drwq.buf), drwq.wqe_cnt, drwq.stride, drwq.dbrec};
      }
      const std::uint32_t want_stride = o.striding ? sizeof(MprqWqe) : sizeof(WqeDataSeg);
      if (q.rq.stride != want_stride)
        return Status::errorf("pmd mlx5: receive WQE stride is {} bytes, the data path writes {}-byte WQEs", q.rq.stride,
                              want_stride);
      RAWPIPE_TRY(check_cqe_size(dcq, fmt::format("receive queue {}", i)));
      q.cq = CqRing{static_cast<std::uint8_t*>(dcq.buf), dcq.cqe_cnt, dcq.dbrec};
      rq_dbrecs_.push_back(q.rq.dbrec);
    }
    if (!use_qp) {
      ibv_rwq_ind_table_init_attr ia{};
      const std::uint32_t size = std::bit_ceil(static_cast<std::uint32_t>(wqs_.size()));
      ind_wqs_.resize(size);
      for (std::uint32_t i = 0; i < size; ++i) ind_wqs_[i] = wqs_[i % wqs_.size()];
      ia.log_ind_tbl_size = static_cast<std::uint32_t>(std::countr_zero(size));
      ia.ind_tbl = ind_wqs_.data();
      ind_ = v_->create_rwq_ind_table(ctx_, &ia);
      if (!ind_) return errno_status("pmd mlx5: ibv_create_rwq_ind_table", errno);
      // One receive-only hash QP (a TIR) per traffic type, each hashing that type's fields over
      // the same indirection table (flow.hh RssType); add_flow attaches a flow to the QP of its
      // type. One QP with IPv4 and UDP fields alone left IPv6 and TCP traffic unhashed.
      for (std::size_t t = 0; t < kRssTypes; ++t) {
        ibv_qp_init_attr_ex qa{};
        qa.qp_type = IBV_QPT_RAW_PACKET;
        qa.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_IND_TABLE | IBV_QP_INIT_ATTR_RX_HASH;
        qa.pd = pd_;
        qa.rwq_ind_tbl = ind_;
        qa.rx_hash_conf.rx_hash_function = IBV_RX_HASH_FUNC_TOEPLITZ;
        qa.rx_hash_conf.rx_hash_key_len = sizeof(kRssKey);
        qa.rx_hash_conf.rx_hash_key = const_cast<std::uint8_t*>(kRssKey);
        qa.rx_hash_conf.rx_hash_fields_mask = rss_hash_fields(static_cast<RssType>(t));
        ibv_qp* qp = v_->create_qp_ex(ctx_, &qa);
        if (!qp)
          return errno_status(fmt::format("pmd mlx5: ibv_create_qp_ex (Toeplitz RSS QP {} of {} over the receive WQs)",
                                          t + 1, kRssTypes),
                              errno);
        hash_qps_.push_back(qp);
      }
    }
    return Status::ok();
  }

  Status create_tx(TxQueue& q, std::uint16_t index, const TxOptions& o) override {
    if (o.inline_bytes < 0 && !inline_.error.empty()) return Status::errorf("pmd mlx5 on {}: {}", name_, inline_.error);
    const std::uint32_t cqe = std::max<std::uint32_t>(o.wqe_cnt / o.comp_every * 2, 16);
    // mlx5dv_create_cq rather than ibv_create_cq: only it can pin the CQE size against
    // MLX5_CQE_SIZE in the environment (verbs_cq.hh).
    auto made = create_cq64(*dv_, ctx_, cqe, false, fmt::format("transmit queue {}", index));
    if (!made) return made.status();
    ibv_cq* cq = made.value();
    tx_cqs_.push_back(cq);
    ibv_qp_init_attr qa{};
    qa.qp_type = IBV_QPT_RAW_PACKET;
    qa.send_cq = cq;
    qa.recv_cq = cq;
    qa.sq_sig_all = 0;
    qa.cap.max_send_wr = o.wqe_cnt;
    qa.cap.max_send_sge = 1;
    qa.cap.max_recv_wr = 0;
    qa.cap.max_recv_sge = 0;
    ibv_qp* qp = v_->create_qp(pd_, &qa);
    if (!qp) return errno_status(fmt::format("pmd mlx5: ibv_create_qp (raw packet, transmit queue {})", index), errno);
    tx_qps_.push_back(qp);
    RAWPIPE_TRY(to_rtr(qp, true));
    mlx5dv_obj obj{};
    mlx5dv_qp dqp{};
    mlx5dv_cq dcq{};
    obj.qp.in = qp;
    obj.qp.out = &dqp;
    obj.cq.in = cq;
    obj.cq.out = &dcq;
    if (int rc = dv_->init_obj(&obj, MLX5DV_OBJ_QP | MLX5DV_OBJ_CQ); rc != 0)
      return errno_status("pmd mlx5: mlx5dv_init_obj(QP | CQ) for transmit", rc);
    if (dqp.sq.stride != kWqeBb) return Status::errorf("pmd mlx5: SQ stride {} is not a 64-byte WQEBB", dqp.sq.stride);
    RAWPIPE_TRY(check_cqe_size(dcq, fmt::format("transmit queue {}", index)));
    q.sq = SqRing{static_cast<std::uint8_t*>(dqp.sq.buf), dqp.sq.wqe_cnt, &dqp.dbrec[kSndDbr], dqp.bf.reg, dqp.bf.size,
                  qp->qp_num};
    q.cq = CqRing{static_cast<std::uint8_t*>(dcq.buf), dcq.cqe_cnt, dcq.dbrec};
    return Status::ok();
  }

  std::uint16_t tx_inline_bytes(const TxOptions& o) const override {
    if (o.inline_bytes >= 0) return static_cast<std::uint16_t>(o.inline_bytes);
    return inline_.bytes.value_or(0);
  }

  // DPDK's order (devx.hh): the HCA's Ethernet-offload capability, the NIC vport context when
  // the capability defers to it, the PCI id when neither answers.
  devx::InlineDecision query_min_inline() {
    std::optional<devx::CapInlineMode> cap;
    std::optional<std::uint8_t> vport;
    if (dv_->devx_general_cmd) {
      std::uint8_t in[devx::kInSize];
      std::vector<std::uint8_t> out(devx::kHcaCapOutSize);
      devx::query_eth_offload_caps_in(in);
      if (dv_->devx_general_cmd(ctx_, in, sizeof(in), out.data(), out.size()) == 0 && devx::out_status(out.data()) == 0)
        cap = devx::wqe_inline_mode(out.data());
      if (cap == devx::CapInlineMode::kVportContext && devx_) {
        out.assign(devx::kNicVportOutSize, 0);
        devx::query_nic_vport_context_in(in);
        if (dv_->devx_general_cmd(ctx_, in, sizeof(in), out.data(), out.size()) == 0 && devx::out_status(out.data()) == 0)
          vport = devx::min_wqe_inline_mode(out.data());
      }
    }
    devx::InlineDecision d = devx::decide_min_inline(cap, vport);
    if (!d.bytes && d.error.empty()) {
      d.bytes = devx::min_inline_by_pci_id(attr_.orig_attr.vendor_part_id);
      d.source = fmt::format("PCI id {} (the device did not report its inline mode)", attr_.orig_attr.vendor_part_id);
    }
    return d;
  }

  Result<std::uint64_t> add_flow(const FlowAttrBytes& attr) override {
    auto copy = attr;  // ibv_create_flow takes a non-const attr
    ibv_qp* target = hash_qps_.empty() ? rx_qp_ : hash_qps_[static_cast<std::size_t>(rss_type_of(attr))];
    ibv_flow* f = v_->create_flow(target, reinterpret_cast<ibv_flow_attr*>(copy.data()));
    if (!f)
      return errno_status("pmd mlx5: ibv_create_flow (does the device allow managed flow steering? mlxconfig "
                          "FLOW_STEERING_MODE / firmware)", errno);
    flows_.push_back(f);
    return reinterpret_cast<std::uint64_t>(f);
  }
  void remove_flow(std::uint64_t handle) override {
    auto* f = reinterpret_cast<ibv_flow*>(handle);
    std::erase(flows_, f);
    v_->destroy_flow(f);
  }

  void quiesce() override {
    // Receive first out of RDY, then transmit; failures are ignored on this path (the device
    // is going away or was reset already): nothing is left to try.
    if (!wqs_.empty()) {
      for (ibv_wq* wq : wqs_) {
        ibv_wq_attr a{};
        a.attr_mask = IBV_WQ_ATTR_STATE;
        a.wq_state = IBV_WQS_RESET;
        v_->modify_wq(wq, &a);
      }
    } else if (rx_qp_) {
      ibv_qp_attr a{};
      a.qp_state = IBV_QPS_RESET;
      v_->modify_qp(rx_qp_, &a, IBV_QP_STATE);
    }
    for (ibv_qp* qp : tx_qps_) {
      ibv_qp_attr a{};
      a.qp_state = IBV_QPS_RESET;
      v_->modify_qp(qp, &a, IBV_QP_STATE);
    }
  }

  bool reset_rq(std::uint16_t queue) override {
    if (!wqs_.empty()) {
      ibv_wq_attr a{};
      a.attr_mask = IBV_WQ_ATTR_STATE;
      a.wq_state = IBV_WQS_RESET;
      if (v_->modify_wq(wqs_[queue], &a) != 0) return false;
      std::atomic_ref<std::uint32_t>(*rq_dbrecs_[queue]).store(0, std::memory_order_release);
      a.wq_state = IBV_WQS_RDY;
      return v_->modify_wq(wqs_[queue], &a) == 0;
    }
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_RESET;
    if (v_->modify_qp(rx_qp_, &a, IBV_QP_STATE) != 0) return false;
    std::atomic_ref<std::uint32_t>(*rq_dbrecs_[queue]).store(0, std::memory_order_release);
    return to_rtr(rx_qp_, false).is_ok();
  }

  bool reset_sq(std::uint16_t queue) override {
    ibv_qp* qp = tx_qps_[queue];
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_RESET;
    if (v_->modify_qp(qp, &a, IBV_QP_STATE) != 0) return false;
    return to_rtr(qp, true).is_ok();
  }

 private:
  // RESET -> INIT (port) -> RTR [-> RTS], the raw-packet QP state machine.
  Status to_rtr(ibv_qp* qp, bool rts) {
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_INIT;
    a.port_num = pre_.netdev.rdma_port;
    if (int rc = v_->modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PORT); rc != 0)
      return errno_status("pmd mlx5: ibv_modify_qp(INIT)", rc);
    a = {};
    a.qp_state = IBV_QPS_RTR;
    if (int rc = v_->modify_qp(qp, &a, IBV_QP_STATE); rc != 0) return errno_status("pmd mlx5: ibv_modify_qp(RTR)", rc);
    if (rts) {
      a = {};
      a.qp_state = IBV_QPS_RTS;
      if (int rc = v_->modify_qp(qp, &a, IBV_QP_STATE); rc != 0) return errno_status("pmd mlx5: ibv_modify_qp(RTS)", rc);
    }
    return Status::ok();
  }

  void close() {
    if (!v_) return;
    for (ibv_flow* f : flows_) v_->destroy_flow(f);
    if (rx_qp_) v_->destroy_qp(rx_qp_);
    for (ibv_qp* q : hash_qps_) v_->destroy_qp(q);
    if (ind_) v_->destroy_rwq_ind_table(ind_);
    for (ibv_wq* w : wqs_) v_->destroy_wq(w);
    for (ibv_qp* q : tx_qps_) v_->destroy_qp(q);
    for (ibv_cq* c : rx_cqs_) v_->destroy_cq(c);
    for (ibv_cq* c : tx_cqs_) v_->destroy_cq(c);
    for (ibv_mr* m : mrs_) v_->dereg_mr(m);
    if (pd_) v_->dealloc_pd(pd_);
    if (ctx_) v_->close_device(ctx_);
  }

  rdma::PreflightResult pre_;
  const rdma::IbverbsTable* v_ = nullptr;
  const rdma::Mlx5Table* dv_ = nullptr;
  ibv_context* ctx_ = nullptr;
  ibv_device_attr_ex attr_{};
  mlx5dv_context dv_attr_{};
  bool devx_ = false;                   // ctx_ is a DevX context
  devx::InlineDecision inline_;
  ibv_port_attr port_attr_{};
  ibv_pd* pd_ = nullptr;
  std::vector<ibv_mr*> mrs_;
  std::vector<ibv_cq*> rx_cqs_, tx_cqs_;
  std::vector<ibv_wq*> wqs_, ind_wqs_;
  std::vector<std::uint32_t*> rq_dbrecs_;
  ibv_rwq_ind_table* ind_ = nullptr;
  ibv_qp* rx_qp_ = nullptr;             // the one cyclic queue's QP (no RSS)
  std::vector<ibv_qp*> hash_qps_;         // with RSS: one per RssType
  std::vector<ibv_qp*> tx_qps_;
  std::vector<ibv_flow*> flows_;
  std::string name_;
};

}  // namespace

Result<std::unique_ptr<Backend>> open_verbs_backend(const VerbsOptions& o) {
  auto b = std::make_unique<VerbsBackend>();
  RAWPIPE_TRY(b->open(o));
  return std::unique_ptr<Backend>(std::move(b));
}

Result<std::unique_ptr<Backend>> open_verbs_backend_on(rdma::PreflightResult pre, const rdma::Mlx5Table& dv,
                                                       std::string_view interface) {
  auto b = std::make_unique<VerbsBackend>();
  RAWPIPE_TRY(b->attach(std::move(pre), &dv, interface));
  return std::unique_ptr<Backend>(std::move(b));
}

}  // namespace rawpipe::mlx5
