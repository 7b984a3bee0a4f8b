#include "pmd/mana/device.hh"

#include <sys/mman.h>

#include <bit>
#include <cerrno>
#include <cstring>
#include <map>

#include "pipeline/buf/pool.hh"
#include "pipeline/config/section.hh"
#include "pmd/drivers.hh"
#include "pmd/host/netdev.hh"
#include "pmd/mana/probe.hh"
#include "pmd/mana/setup.hh"
#include "pmd/rdma/preflight.hh"

namespace rawpipe {
namespace mana {
namespace {

// vendor_part_id across kernel eras (DPDK drivers/net/mana/mana.h GDMA_DEVICE_*, and
// mana_pci_probe_mac in mana.c, DPDK 38f72e50): kernels before the 2025 mana_ib split report 0 for
// their only IB device; newer ones expose two IB devices on the same PCI function, the Ethernet one
// (2, raw-packet QPs) and the RC one (3, no raw QPs).
constexpr std::uint32_t kVendorPartUnset = 0;   // older mana_ib: the only device, Ethernet included
constexpr std::uint32_t kVendorPartMana = 2;    // GDMA_DEVICE_MANA: the Ethernet function
constexpr std::uint32_t kVendorPartManaIb = 3;  // GDMA_DEVICE_MANA_IB: the RDMA (RC) function

bool is_ethernet_part(std::uint32_t part) { return part == kVendorPartUnset || part == kVendorPartMana; }

std::string errno_text(int err) { return fmt::format("{} ({})", std::strerror(err), err); }

// Queue buffers for libmana (manadv_set_context_attr): page-aligned, zeroed memory. Zeroed
// matters: CQ owner bits start at 0, which the driver reads as "previous pass, empty".
struct QueueAllocator {
  std::map<void*, std::size_t> live;

  static void* alloc(std::size_t size, void* self) {
    const std::size_t bytes = align_up(size, 4096);
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    if (p == MAP_FAILED) return nullptr;
    static_cast<QueueAllocator*>(self)->live[p] = bytes;
    return p;
  }
  static void free(void* p, void* self) {
    auto& live = static_cast<QueueAllocator*>(self)->live;
    auto it = live.find(p);
    if (it == live.end()) return;
    munmap(p, it->second);
    live.erase(it);
  }
};

class ManaPort final : public ManaPortBase {
 public:
  ManaPort(const PortEnv& env, const ManaSpec& spec, const ManaApi& api, std::string ifname)
      : env_(env), spec_(spec), api_(api), ifname_(std::move(ifname)) {
    rss_ = spec.rss;
  }
  ~ManaPort() override { teardown(); }

  Status bring_up(ibv_device* device, std::uint8_t port_num);

  std::string_view pmd_name() const noexcept override { return "mana"; }
  std::string path_report() const override {
    return queue_report("mana", fmt::format("{} ({} port {})", ifname_, device_name_, port_num_));
  }
  Status start() override;
  void stop() override;
  RxQueueHandle rx_queue(std::uint16_t q) override {
    return {&rx_burst<rdma::HwDoorbell>, rxq_.at(q)};
  }
  PortStats stats() const override {
    PortStats s = ManaPortBase::stats();
    add_nic_losses(s);
    return s;
  }
  TxQueueHandle tx_queue(std::uint16_t q) override {
    return {&tx_burst<rdma::HwDoorbell>, txq_.at(q)};
  }

 private:
  Status fail(std::string_view step, int err) const {
    return Status::errorf("pmd mana on {} ({} port {}): {} failed: {}", ifname_, device_name_, port_num_, step,
                          errno_text(err));
  }
  void teardown() noexcept;
  // The NIC's own drop counters, which only the kernel's mana driver can query from the device
  // (MANA_QUERY_GF_STAT, `ethtool -S`): hc_rx_discards_no_wqe counts frames that found no posted
  // receive WQE, hc_rx_err_vport_disabled frames that reached a disabled vPort. They count for the
  // whole PCI function since the driver loaded, so the port reports the increase since start.
  // A kernel without them (before 6.4) or a failed query leaves the loss unknown, never 0.
  void add_nic_losses(PortStats& s) const;
  static constexpr std::pair<const char*, const char*> kNicLosses[] = {
      {"hc_rx_discards_no_wqe", "nic_out_of_buffer"}, {"hc_rx_err_vport_disabled", "nic_vport_disabled"}};
  std::map<std::string, std::uint64_t> nic_baseline_;
  std::string nic_stats_error_;

  PortEnv env_;
  ManaSpec spec_;
  ManaApi api_;
  std::string ifname_;
  std::string device_name_;
  std::uint8_t port_num_ = 1;
  bool started_ = false;
  bool stopped_ = false;

  QueueAllocator allocator_;
  std::vector<std::unique_ptr<RxQueue>> rx_owned_;
  std::vector<std::unique_ptr<TxQueue>> tx_owned_;
  ibv_context* ctx_ = nullptr;
  ibv_pd* pd_ = nullptr;
  ibv_pd* parent_ = nullptr;
  ibv_mr* mr_ = nullptr;
  std::vector<ibv_cq*> tx_cqs_;
  std::vector<ibv_qp*> tx_qps_;
  std::vector<ibv_cq*> rx_cqs_;
  std::vector<ibv_wq*> wqs_;
  ibv_rwq_ind_table* ind_ = nullptr;
  ibv_qp* rss_qp_ = nullptr;
};

Status ManaPort::bring_up(ibv_device* device, std::uint8_t port_num) {
  const rdma::IbverbsTable& v = *api_.verbs;
  const ManaTable& m = *api_.mana;
  port_num_ = port_num;
  const char* name = v.get_device_name(device);
  device_name_ = name ? name : "?";

  if (env_.rx_queues == 0 || !is_power_of_two(env_.rx_queues) || env_.rx_queues > 64)
    return Status::errorf("pmd mana on {}: rx_queues = {}: the RSS indirection table needs a power of two from 1 to 64",
                          ifname_, env_.rx_queues);
  if (env_.tx_queues == 0)
    return Status::errorf("pmd mana on {}: tx_queues must be at least 1 (a raw send QP configures the vPort)", ifname_);
  if (!env_.pool) return Status::errorf("pmd mana on {}: no pool", ifname_);
  if (env_.rx_ring_size < kMinRingSize || env_.tx_ring_size < kMinRingSize)
    return Status::errorf("pmd mana on {}: ring sizes {}/{}: MANA queues take at least {} descriptors (DPDK's "
                          "MIN_BUFFERS_PER_QUEUE); raise rx_ring_size/tx_ring_size",
                          ifname_, env_.rx_ring_size, env_.tx_ring_size, kMinRingSize);

  errno = 0;
  ctx_ = v.open_device(device);
  if (!ctx_) return fail("ibv_open_device", errno ? errno : ENODEV);

  ibv_device_attr attr{};
  if (int rc = v.query_device(ctx_, &attr); rc != 0) return fail("ibv_query_device", rc);
  if (attr.vendor_part_id == kVendorPartManaIb)
    return Status::errorf("pmd mana on {}: RDMA device {} is MANA's RC (InfiniBand) function, not the Ethernet one; "
                          "pick the interface whose device reports vendor_part_id 2 (ibv_devinfo -v)",
                          ifname_, device_name_);
  if (!is_ethernet_part(attr.vendor_part_id))
    return Status::errorf("pmd mana on {}: RDMA device {} reports vendor_part_id {:#x}, not a MANA Ethernet function "
                          "(2, or 0 on kernels before the mana_ib split)",
                          ifname_, device_name_, attr.vendor_part_id);
  const std::uint32_t rx_ring = static_cast<std::uint32_t>(std::bit_ceil(env_.rx_ring_size));
  const std::uint32_t tx_ring = static_cast<std::uint32_t>(std::bit_ceil(env_.tx_ring_size));
  if (attr.max_qp_wr > 0 && (rx_ring > std::uint32_t(attr.max_qp_wr) || tx_ring > std::uint32_t(attr.max_qp_wr)))
    return Status::errorf("pmd mana on {}: ring sizes {}/{} exceed the device's {} work requests per queue; lower "
                          "rx_ring_size/tx_ring_size",
                          ifname_, rx_ring, tx_ring, attr.max_qp_wr);

  pd_ = v.alloc_pd(ctx_);
  if (!pd_) return fail("ibv_alloc_pd", errno);
  // Raw QPs and WQs must live on a parent domain whose context is the port number.
  ibv_parent_domain_init_attr pattr{};
  pattr.pd = pd_;
  pattr.comp_mask = IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT;
  pattr.pd_context = reinterpret_cast<void*>(static_cast<std::uintptr_t>(port_num));
  parent_ = v.alloc_parent_domain(ctx_, &pattr);
  if (!parent_) return fail("ibv_alloc_parent_domain (pd_context = port)", errno);

  // Without allocators libmana refuses raw QPs and WQs (EINVAL).
  manadv_ctx_allocators allocators{};
  allocators.alloc = &QueueAllocator::alloc;
  allocators.free = &QueueAllocator::free;
  allocators.data = &allocator_;
  if (int rc = m.set_context_attr(ctx_, MANADV_CTX_ATTR_BUF_ALLOCATORS, &allocators); rc != 0)
    return fail("manadv_set_context_attr(BUF_ALLOCATORS)", rc);

  mr_ = v.reg_mr(pd_, env_.pool->region(), env_.pool->region_bytes(), IBV_ACCESS_LOCAL_WRITE);
  if (!mr_) {
    const int err = errno;
    if (err == ENOMEM || err == EPERM || err == EFAULT)
      return Status::errorf("pmd mana on {}: ibv_reg_mr of pool '{}' ({} bytes) failed: {}; the pool must be pinned: "
                            "raise the locked-memory limit (ulimit -l unlimited, or LimitMEMLOCK=infinity) or grant "
                            "cap_ipc_lock",
                            ifname_, env_.pool->name(), env_.pool->region_bytes(), errno_text(err));
    return fail("ibv_reg_mr over the pool", err);
  }

  // TX first: a raw QP configures the vPort; the RSS QP needs it.
  for (std::uint16_t i = 0; i < env_.tx_queues; ++i) {
    ibv_cq* cq = v.create_cq(ctx_, static_cast<int>(tx_ring), nullptr, nullptr, 0);
    if (!cq) return fail(fmt::format("ibv_create_cq for tx queue {}", i), errno);
    tx_cqs_.push_back(cq);
    ibv_qp_init_attr qattr{};
    qattr.send_cq = cq;
    qattr.recv_cq = cq;
    qattr.cap.max_send_wr = tx_ring;
    qattr.cap.max_send_sge = 1;
    qattr.qp_type = IBV_QPT_RAW_PACKET;
    qattr.sq_sig_all = 0;
    errno = 0;
    ibv_qp* qp = v.create_qp(parent_, &qattr);
    if (!qp) {
      const int err = errno;
      if (err == EBUSY || err == ENODEV) return Status::error(port_in_use_message(ifname_, err));
      if (err == EPERM || err == EACCES)
        return Status::errorf("pmd mana on {}: creating a raw-packet QP needs CAP_NET_RAW ({}); run as root or "
                              "setcap cap_net_raw,cap_ipc_lock=ep on the binary",
                              ifname_, errno_text(err));
      return fail(fmt::format("ibv_create_qp (raw packet) for tx queue {}", i), err);
    }
    tx_qps_.push_back(qp);
  }

  // RX: CQs and WQs, the indirection table over them, then the RSS QP.
  std::vector<ibv_wq*> table;
  for (std::uint16_t i = 0; i < env_.rx_queues; ++i) {
    ibv_cq* cq = v.create_cq(ctx_, static_cast<int>(rx_ring), nullptr, nullptr, 0);
    if (!cq) return fail(fmt::format("ibv_create_cq for rx queue {}", i), errno);
    rx_cqs_.push_back(cq);
    ibv_wq_init_attr wattr{};
    wattr.wq_type = IBV_WQT_RQ;
    wattr.max_wr = rx_ring;
    wattr.max_sge = 1;
    wattr.pd = parent_;
    wattr.cq = cq;
    ibv_wq* wq = v.create_wq(ctx_, &wattr);
    if (!wq) return fail(fmt::format("ibv_create_wq for rx queue {}", i), errno);
    wqs_.push_back(wq);
  }
  ibv_rwq_ind_table_init_attr iattr{};
  iattr.log_ind_tbl_size = static_cast<std::uint32_t>(std::countr_zero(unsigned(env_.rx_queues)));
  iattr.ind_tbl = wqs_.data();
  ind_ = v.create_rwq_ind_table(ctx_, &iattr);
  if (!ind_) return fail("ibv_create_rwq_ind_table", errno);

  std::array<std::uint8_t, 40> key = spec_.rss_key;
  ibv_qp_init_attr_ex rattr{};
  rattr.qp_type = IBV_QPT_RAW_PACKET;
  rattr.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_IND_TABLE | IBV_QP_INIT_ATTR_RX_HASH;
  rattr.pd = parent_;
  rattr.rwq_ind_tbl = ind_;
  rattr.rx_hash_conf.rx_hash_function = IBV_RX_HASH_FUNC_TOEPLITZ;
  rattr.rx_hash_conf.rx_hash_key_len = static_cast<std::uint8_t>(key.size());  // MANA accepts only 40
  rattr.rx_hash_conf.rx_hash_key = key.data();
  rattr.rx_hash_conf.rx_hash_fields_mask =
      IBV_RX_HASH_SRC_IPV4 | IBV_RX_HASH_DST_IPV4 | IBV_RX_HASH_SRC_IPV6 | IBV_RX_HASH_DST_IPV6;
  if (spec_.rss == RssFields::kL4)
    rattr.rx_hash_conf.rx_hash_fields_mask |= IBV_RX_HASH_SRC_PORT_TCP | IBV_RX_HASH_DST_PORT_TCP |
                                              IBV_RX_HASH_SRC_PORT_UDP | IBV_RX_HASH_DST_PORT_UDP;
  errno = 0;
  rss_qp_ = v.create_qp_ex(ctx_, &rattr);
  if (!rss_qp_) {
    const int err = errno;
    if (err == EBUSY || err == ENODEV) return Status::error(port_in_use_message(ifname_, err));
    return fail("ibv_create_qp_ex (RSS hash QP, Toeplitz, 40-byte key)", err);
  }

  // Queue ids exist only now: manadv_init_obj after the QPs.
  for (std::uint16_t i = 0; i < env_.tx_queues; ++i) {
    manadv_obj obj{};
    manadv_qp dqp{};
    manadv_cq dcq{};
    obj.qp.in = tx_qps_[i];
    obj.qp.out = &dqp;
    obj.cq.in = tx_cqs_[i];
    obj.cq.out = &dcq;
    if (int rc = m.init_obj(&obj, MANADV_OBJ_QP | MANADV_OBJ_CQ); rc != 0)
      return fail(fmt::format("manadv_init_obj for tx queue {}", i), rc);
    QueueSetup s;
    s.wq.buf = static_cast<std::uint8_t*>(dqp.sq_buf);
    s.wq.size = dqp.sq_size;
    s.wq.count = dqp.sq_count;
    s.wq.id = dqp.sq_id;
    s.cq.init(static_cast<Cqe*>(dcq.buf), dcq.count, dcq.cq_id);
    s.db_page = dqp.db_page;
    s.lkey = mr_->lkey;
    s.mr_begin = env_.pool->region();
    s.mr_end = env_.pool->region() + env_.pool->region_bytes();
    s.vp_offset = dqp.tx_vp_offset;
    auto q = std::make_unique<TxQueue>();
    RAWPIPE_TRY(setup_tx_queue(*q, s).context(fmt::format("pmd mana on {} tx queue {}", ifname_, i)));
    txq_.push_back(q.get());
    tx_owned_.push_back(std::move(q));
  }
  for (std::uint16_t i = 0; i < env_.rx_queues; ++i) {
    manadv_obj obj{};
    manadv_rwq dwq{};
    manadv_cq dcq{};
    obj.rwq.in = wqs_[i];
    obj.rwq.out = &dwq;
    obj.cq.in = rx_cqs_[i];
    obj.cq.out = &dcq;
    if (int rc = m.init_obj(&obj, MANADV_OBJ_RWQ | MANADV_OBJ_CQ); rc != 0)
      return fail(fmt::format("manadv_init_obj for rx queue {}", i), rc);
    QueueSetup s;
    s.wq.buf = static_cast<std::uint8_t*>(dwq.buf);
    s.wq.size = dwq.size;
    s.wq.count = dwq.count;
    s.wq.id = dwq.wq_id;
    s.cq.init(static_cast<Cqe*>(dcq.buf), dcq.count, dcq.cq_id);
    s.db_page = dwq.db_page;
    s.lkey = mr_->lkey;
    s.pool = env_.pool;
    s.port_id = env_.port_id;
    s.queue_id = i;
    auto q = std::make_unique<RxQueue>();
    RAWPIPE_TRY(setup_rx_queue(*q, s).context(fmt::format("pmd mana on {} rx queue {}", ifname_, i)));
    rxq_.push_back(q.get());
    rx_owned_.push_back(std::move(q));
  }
  return Status::ok();
}

Status ManaPort::start() {
  if (stopped_) return Status::errorf("pmd mana on {}: a stopped port cannot restart; open it again", ifname_);
  if (started_) return Status::ok();
  for (auto& q : rxq_) {
    rx_refill<rdma::HwDoorbell>(*q);
    if (q->posted() == 0)
      return Status::errorf("pmd mana on {}: pool '{}' has no free buffers for rx queue {}", ifname_,
                            env_.pool->name(), q->queue_id);
  }
  if (auto hc = host::ethtool_stats(ifname_)) {
    nic_baseline_ = std::move(hc).value();
  } else {
    nic_stats_error_ = hc.message();
  }
  started_ = true;
  return Status::ok();
}

void ManaPort::add_nic_losses(PortStats& s) const {
  auto now = nic_stats_error_.empty() ? host::ethtool_stats(ifname_)
                                      : Result<std::map<std::string, std::uint64_t>>(Status::error(nic_stats_error_));
  for (const auto& [counter, loss] : kNicLosses) {
    const auto base = nic_baseline_.find(counter);
    if (!now || base == nic_baseline_.end() || !now->count(counter)) {
      s.losses[loss] = std::nullopt;
      continue;
    }
    const std::uint64_t v = now->at(counter);
    s.losses[loss] = v >= base->second ? v - base->second : v;  // a device reset restarts the count
    s.extended[counter] = v;
  }
}

void ManaPort::stop() {
  if (stopped_) return;
  stopped_ = true;
  teardown();
}

void ManaPort::teardown() noexcept {
  if (!api_.verbs) return;
  const rdma::IbverbsTable& v = *api_.verbs;
  // The NIC stops using the queues (and the buffers they point at) before buffers go back.
  if (rss_qp_) v.destroy_qp(rss_qp_);
  rss_qp_ = nullptr;
  if (ind_) v.destroy_rwq_ind_table(ind_);
  ind_ = nullptr;
  for (ibv_wq* wq : wqs_) v.destroy_wq(wq);
  wqs_.clear();
  for (ibv_cq* cq : rx_cqs_) v.destroy_cq(cq);
  rx_cqs_.clear();
  for (ibv_qp* qp : tx_qps_) v.destroy_qp(qp);
  tx_qps_.clear();
  for (ibv_cq* cq : tx_cqs_) v.destroy_cq(cq);
  tx_cqs_.clear();
  release_buffers();
  if (mr_) v.dereg_mr(mr_);
  mr_ = nullptr;
  if (parent_) v.dealloc_pd(parent_);
  parent_ = nullptr;
  if (pd_) v.dealloc_pd(pd_);
  pd_ = nullptr;
  if (ctx_) v.close_device(ctx_);
  ctx_ = nullptr;
}

class ManaPortSpec final : public PortSpec {
 public:
  explicit ManaPortSpec(ManaSpec spec) : spec_(std::move(spec)) {}
  Result<std::unique_ptr<Port>> open(const PortEnv& env) const override;
  std::uint16_t max_rx_queues() const override { return 64; }
  // The interface's vPort serves one owner at a time.
  ClaimedQueues claimed_queues() const override { return {spec_.interface, 0}; }

 private:
  ManaSpec spec_;
};

Status load_provider() {
  auto t = load_mana();
  return t ? Status::ok() : t.status();
}

Result<std::unique_ptr<Port>> ManaPortSpec::open(const PortEnv& env) const {
  rdma::PreflightOptions o;
  o.pmd = "mana";
  o.expected_driver = "mana";
  o.load_provider = load_provider;
  auto pre = rdma::rdma_preflight(spec_.interface, o);
  if (!pre) return pre.status();
  ManaApi api{pre->verbs, load_mana().value()};
  auto device = select_mana_device(*api.verbs, pre->candidates, spec_.interface);
  if (!device) return device.status();
  return open_mana_on_device(env, spec_, api, device.value(), pre->netdev.rdma_port, spec_.interface);
}

Result<std::unique_ptr<PortSpec>> parse_mana(ConfigSection& section) {
  ManaSpec spec;
  spec.interface = section.string("interface");
  parse_common_keys(section, spec);
  // mana_ib passes only the Toeplitz key to the vPort (mana_ib_create_qp_rss ->
  // mana_ib_cfg_vport_steering in the kernel's drivers/infiniband/hw/mana/qp.c): the hash field
  // mask is never sent, so "l3" would change nothing on an Azure VM.
  if (spec.rss == RssFields::kL3)
    section.fail("rss", "rss = \"l3\" has no effect on MANA hardware: mana_ib ignores the hash field mask and the "
                        "vPort hashes with its own fields; remove the key (\"l3\" exists only in mana-model)");
  RAWPIPE_TRY(section.status());
  return std::unique_ptr<PortSpec>(new ManaPortSpec(std::move(spec)));
}

}  // namespace

std::string port_in_use_message(std::string_view ifname, int err) {
  return fmt::format(
      "pmd mana on {}: the vPort is in use (raw QP creation failed with {}): MANA gives a vPort either to the kernel "
      "netdev or to raw-packet queues, never both, and {} still holds it (or another rawpipe/DPDK process does). Take the kernel "
      "interface down ('ip link set {} down'), on a secondary NIC, never the one your SSH session uses, and start "
      "again; keep the mana, mana_ib and ib_uverbs modules loaded (kernels that map the error report ENODEV, newer "
      "ones EBUSY)",
      ifname, errno_text(err), ifname, ifname);
}

Result<ibv_device*> select_mana_device(const rdma::IbverbsTable& v, std::span<ibv_device* const> candidates,
                                       std::string_view ifname) {
  std::string skipped;
  for (ibv_device* device : candidates) {
    const char* raw_name = v.get_device_name(device);
    const std::string name = raw_name ? raw_name : "?";
    errno = 0;
    ibv_context* ctx = v.open_device(device);
    if (!ctx) {
      skipped += fmt::format("; {}: ibv_open_device failed: {}", name, errno_text(errno ? errno : ENODEV));
      continue;
    }
    ibv_device_attr_ex attr{};
    const int rc = v.query_device_ex(ctx, &attr);
    v.close_device(ctx);
    if (rc != 0) {
      skipped += fmt::format("; {}: ibv_query_device_ex failed: {}", name, errno_text(rc));
      continue;
    }
    const std::uint32_t part = attr.orig_attr.vendor_part_id;
    if (!is_ethernet_part(part)) {
      skipped += fmt::format("; {}: vendor_part_id {}{}", name, part,
                             part == kVendorPartManaIb ? " (the RC function, no raw-packet QPs)" : "");
      continue;
    }
    // An unset part id (older kernels) comes with no capability report to trust; DPDK checks the
    // raw-packet capability only where the part id says which function this is.
    if (part == kVendorPartMana && attr.raw_packet_caps == 0) {
      skipped += fmt::format("; {}: no raw-packet capability", name);
      continue;
    }
    return device;
  }
  return Status::errorf("pmd mana on {}: none of the {} RDMA device(s) of its PCI function is MANA's Ethernet "
                        "function (vendor_part_id 2 with raw-packet capability, or 0 on kernels before the "
                        "mana_ib split){}; check 'ibv_devinfo -v' and that mana_ib is loaded",
                        ifname, candidates.size(), skipped);
}

Result<std::unique_ptr<Port>> open_mana_on_device(const PortEnv& env, const ManaSpec& spec, const ManaApi& api,
                                                  ibv_device* device, std::uint8_t port_num, std::string_view ifname) {
  auto port = std::make_unique<ManaPort>(env, spec, api, std::string(ifname));
  RAWPIPE_TRY(port->bring_up(device, port_num));
  return std::unique_ptr<Port>(std::move(port));
}

}  // namespace mana

Status probe_mana(std::string_view ifname) {
  rdma::PreflightOptions o;
  o.pmd = "mana";
  o.expected_driver = "mana";
  o.load_provider = mana::load_provider;
  auto pre = rdma::rdma_preflight(ifname, o);
  return pre ? Status::ok() : pre.status();
}

namespace {
const KeyDoc kManaDocs[] = {
    {"interface", "string", "a MANA interface name", "required", "the vPort's network interface"},
};
}  // namespace
const KeyTable kManaKeys{"mana", "[[ports]] pmd = \"mana\"", "Azure MANA through rdma-core manadv", kManaDocs,
                         &mana::kManaCommonKeys};

const PmdDriver kManaDriver{
    "mana",
    "Azure MANA raw-packet queues through rdma-core manadv (exclusive use of the vPort; no flow rules)",
    &mana::parse_mana, &kManaKeys};

}  // namespace rawpipe
