// The dpdk port: control path (config keys, device attach, queue setup, start/stop, stats, link).
//
// Config keys of a port with pmd = "dpdk":
//   device    required  a DPDK device: a vdev with its arguments ("net_null0,size=64",
//                       "net_pcap0,rx_pcap=in.pcap", "net_ring0", "net_tap0,iface=t0",
//                       "net_af_xdp0,iface=eth1") or a PCI address ("0000:03:00.0"). Devices the EAL
//                       did not probe at start are hot-plugged (rte_dev_probe).
//   eal_args  optional  EAL arguments, e.g. ["--no-huge", "-m", "256"]; the first dpdk port to open
//                       starts the EAL with them, later ports must give the same or none (eal.hh).
//   buffers   optional  "auto" (default): zero-copy into the rawpipe pool when DPDK can reach it,
//                       else one copy per packet; "zero_copy": fail instead of copying; "copy".
//   promiscuous optional  default true.
#include <algorithm>
#include <mutex>
#include <set>

#include <fmt/format.h>
#include <rte_bus.h>
#include <rte_dev.h>
#include <rte_devargs.h>
#include <rte_errno.h>
#include <rte_ethdev.h>

#include "pipeline/config/section.hh"
#include "pmd/dpdk/bridge.hh"
#include "pmd/dpdk/eal.hh"
#include "pmd/dpdk/queue.hh"
#include "pmd/drivers.hh"

namespace rawpipe {
namespace dpdk {
namespace {

enum class BufferMode { kAuto, kZeroCopy, kCopy };

// Ethdev ports held by rawpipe ports in this process: two rawpipe ports on one device would race
// on its queues.
std::mutex g_in_use_mu;
std::set<std::uint16_t> g_in_use;

// Frames drained from receive queues at stop; bounded because a generator (net_null) never runs dry.
constexpr unsigned kDrainLimit = 1u << 16;

std::string errno_text(int rc) { return rte_strerror(rc < 0 ? -rc : rc); }

class DpdkSpec final : public PortSpec {
 public:
  std::vector<std::string> eal_args;
  std::string device;
  BufferMode buffers = BufferMode::kAuto;
  bool promiscuous = true;
  std::string where;  // "file:line" for messages after parsing

  Result<std::unique_ptr<Port>> open(const PortEnv& env) const override;
  std::uint16_t max_rx_queues() const override { return RTE_MAX_QUEUES_PER_PORT; }
  // The ethdev's name (devargs before the first ','). A vdev ("net_...") is created by this
  // process's EAL, so two processes each have their own; a bus device (PCI) is the host's.
  ClaimedQueues claimed_queues() const override {
    const std::string name = device.substr(0, device.find(','));
    if (name.empty()) return {};
    return {"", 0, "dpdk " + name, name.starts_with("net_") || name.starts_with("eth_")};
  }
};

class DpdkPort final : public Port {
 public:
  DpdkPort(const DpdkSpec& spec, const PortEnv& env) : spec_(spec), env_(env) {}
  ~DpdkPort() override {
    stop();
    // After close no device refers to the copy-mode mempool any more.
    if (copy_mp_) rte_mempool_free(copy_mp_);
  }

  Status open();

  std::string_view pmd_name() const noexcept override { return "dpdk"; }
  std::string path_report() const override;
  PortCaps caps() const override { return caps_; }
  LinkInfo link() const override;
  Status start() override;
  void stop() override;
  RxQueueHandle rx_queue(std::uint16_t q) override {
    return {zero_copy_ ? rx_burst_zero_copy : rx_burst_copy, rxq_.at(q).get()};
  }
  TxQueueHandle tx_queue(std::uint16_t q) override {
    return {zero_copy_ ? tx_burst_zero_copy : tx_burst_copy, txq_.at(q).get()};
  }
  PortStats stats() const override;

 private:
  Status attach();
  Status choose_buffers();
  Status configure();
  void close_device();
  void snapshot_device_stats(std::map<std::string, std::uint64_t>& out) const;

  const DpdkSpec spec_;
  const PortEnv env_;
  mutable std::mutex mu_;  // control path: start/stop/stats
  std::string devargs_;    // what re-attaches the device after a close
  std::uint16_t eth_port_ = 0;
  bool have_port_ = false;  // eth_port_ is attached and open
  bool started_ = false;
  rte_device* dev_ = nullptr;
  std::string driver_;
  bool zero_copy_ = false;
  std::string buffer_reason_;
  std::shared_ptr<MbufBridge> bridge_;
  rte_mempool* copy_mp_ = nullptr;
  PortCaps caps_;
  std::string rss_note_;
  std::vector<std::unique_ptr<DpdkRxQueue>> rxq_;
  std::vector<std::unique_ptr<DpdkTxQueue>> txq_;
  std::map<std::string, std::uint64_t> last_device_stats_;  // kept across close
};

Result<std::unique_ptr<Port>> DpdkSpec::open(const PortEnv& env) const {
  auto port = std::make_unique<DpdkPort>(*this, env);
  Status st = port->open();
  if (!st) return st.context(fmt::format("port '{}' (dpdk, {}, device {})", env.name, where, device));
  return std::unique_ptr<Port>(std::move(port));
}

Status DpdkPort::open() {
  if (env_.pool == nullptr) return Status::error("no buffer pool was given to the port");
  RAWPIPE_TRY(eal_acquire(spec_.eal_args, spec_.device, looks_like_pci(spec_.device)));
  devargs_ = spec_.device;
  RAWPIPE_TRY(attach());
  RAWPIPE_TRY(choose_buffers());
  rxq_.clear();
  txq_.clear();
  for (std::uint16_t q = 0; q < env_.rx_queues; ++q) rxq_.push_back(std::make_unique<DpdkRxQueue>());
  for (std::uint16_t q = 0; q < env_.tx_queues; ++q) txq_.push_back(std::make_unique<DpdkTxQueue>());
  return configure();
}

// Finds the ethdev port of spec_.device, probing the device when the EAL does not know it yet.
Status DpdkPort::attach() {
  rte_devargs da{};
  if (int rc = rte_devargs_parse(&da, devargs_.c_str()); rc != 0)
    return Status::errorf(
        "cannot parse device '{}' ({}): expected a vdev such as \"net_null0\" or \"net_pcap0,rx_pcap=in.pcap\", or a "
        "PCI address such as \"0000:03:00.0\"",
        devargs_, errno_text(rc));
  std::string name = da.name;
  rte_devargs_reset(&da);

  std::uint16_t pid = 0;
  if (rte_eth_dev_get_port_by_name(name.c_str(), &pid) != 0) {
    if (int rc = rte_dev_probe(devargs_.c_str()); rc != 0)
      return Status::errorf(
          "DPDK cannot probe device '{}': {}. Check the driver name and its arguments (DPDK's messages above say "
          "which), that the driver's plugin is installed (librte_net_*.so), and for a PCI device that it is bound to "
          "vfio-pci or is a bifurcated NIC (mlx5)",
          devargs_, errno_text(rc));
    if (rte_eth_dev_get_port_by_name(name.c_str(), &pid) != 0)
      return Status::errorf("device '{}' was probed but has no ethdev port named '{}' (a multi-port device names "
                            "its ports differently; see dpdk-testpmd's port list)",
                            devargs_, name);
  }
  {
    std::lock_guard lock(g_in_use_mu);
    if (!g_in_use.insert(pid).second)
      return Status::errorf("DPDK device '{}' is already used by another rawpipe port in this process", name);
  }
  eth_port_ = pid;
  have_port_ = true;

  rte_eth_dev_info info{};
  if (int rc = rte_eth_dev_info_get(pid, &info); rc != 0)
    return Status::errorf("rte_eth_dev_info_get on '{}' failed: {}", name, errno_text(rc));
  dev_ = info.device;
  driver_ = info.driver_name ? info.driver_name : "?";
  // Remember the full device string so a stopped port can bring the device back (an EAL --vdev keeps
  // its arguments in the devargs).
  if (const rte_devargs* d = rte_dev_devargs(dev_); d && d->args && *d->args)
    devargs_ = fmt::format("{},{}", d->name, d->args);
  else if (const rte_devargs* d2 = rte_dev_devargs(dev_))
    devargs_ = d2->name;
  return Status::ok();
}

Status DpdkPort::choose_buffers() {
  if (spec_.buffers == BufferMode::kCopy) {
    zero_copy_ = false;
    buffer_reason_ = "buffers = \"copy\" in the config";
  } else {
    auto bridge = MbufBridge::get(env_.pool);
    Status why = bridge ? bridge.value()->dma_map(dev_) : bridge.status();
    if (why) {
      bridge_ = std::move(bridge).value();
      zero_copy_ = true;
    } else if (spec_.buffers == BufferMode::kZeroCopy) {
      return why.context("buffers = \"zero_copy\" cannot be honoured");
    } else {
      zero_copy_ = false;
      buffer_reason_ = why.message();
    }
  }
  if (zero_copy_ || copy_mp_) return Status::ok();
  // Copy mode: the device gets its own mempool in DPDK memory, sized for full rings plus bursts in
  // flight, with buffers as large as the rawpipe pool's data room.
  unsigned n = env_.rx_queues * env_.rx_ring_size + env_.tx_queues * env_.tx_ring_size + 4 * kMaxBurst + 1024;
  std::string name = fmt::format("rpc{}_{}", env_.port_id, eth_port_);
  std::uint32_t room = std::min<std::uint32_t>(env_.pool->data_room() + RTE_PKTMBUF_HEADROOM, UINT16_MAX);
  copy_mp_ = rte_pktmbuf_pool_create(name.c_str(), n, 256, 0, static_cast<std::uint16_t>(room), SOCKET_ID_ANY);
  if (!copy_mp_)
    return Status::errorf("cannot create a DPDK mempool of {} buffers for copy mode: {} (give the EAL more memory with "
                          "-m, or fix what prevents zero-copy: {})",
                          n, rte_strerror(rte_errno), buffer_reason_);
  return Status::ok();
}

Status DpdkPort::configure() {
  const std::uint16_t pid = eth_port_;
  rte_eth_dev_info info{};
  if (int rc = rte_eth_dev_info_get(pid, &info); rc != 0)
    return Status::errorf("rte_eth_dev_info_get failed: {}", errno_text(rc));
  if (env_.rx_queues > info.max_rx_queues)
    return Status::errorf("rx_queues = {} but device '{}' ({}) has at most {} receive queues", env_.rx_queues,
                          spec_.device, driver_, info.max_rx_queues);
  if (env_.tx_queues > info.max_tx_queues)
    return Status::errorf("tx_queues = {} but device '{}' ({}) has at most {} transmit queues", env_.tx_queues,
                          spec_.device, driver_, info.max_tx_queues);

  rte_eth_conf conf{};
  const std::uint64_t rss_hf = (RTE_ETH_RSS_IP | RTE_ETH_RSS_UDP | RTE_ETH_RSS_TCP) & info.flow_type_rss_offloads;
  bool rss = false;
  if (env_.rx_queues > 1) {
    if (rss_hf) {
      conf.rxmode.mq_mode = RTE_ETH_MQ_RX_RSS;
      conf.rx_adv_conf.rss_conf.rss_hf = rss_hf;
      rss = true;
      rss_note_ = fmt::format("RSS over {} queues (hash functions 0x{:x})", env_.rx_queues, rss_hf);
    } else {
      rss_note_ = fmt::format("{} queues without RSS: {} spreads nothing by flow", env_.rx_queues, driver_);
    }
  }
  std::uint64_t rx_off = RTE_ETH_RX_OFFLOAD_CHECKSUM & info.rx_offload_capa;
  if (rss) rx_off |= RTE_ETH_RX_OFFLOAD_RSS_HASH & info.rx_offload_capa;
  conf.rxmode.offloads = rx_off;
  if (int rc = rte_eth_dev_configure(pid, env_.rx_queues, env_.tx_queues, &conf); rc != 0)
    return Status::errorf("rte_eth_dev_configure ({} rx, {} tx queues) failed: {}", env_.rx_queues, env_.tx_queues,
                          errno_text(rc));

  std::uint16_t nb_rxd = static_cast<std::uint16_t>(std::min<std::uint32_t>(env_.rx_ring_size, UINT16_MAX));
  std::uint16_t nb_txd = static_cast<std::uint16_t>(std::min<std::uint32_t>(env_.tx_ring_size, UINT16_MAX));
  if (int rc = rte_eth_dev_adjust_nb_rx_tx_desc(pid, &nb_rxd, &nb_txd); rc != 0)
    return Status::errorf("cannot fit ring sizes {}/{} to the device: {}", env_.rx_ring_size, env_.tx_ring_size,
                          errno_text(rc));
  rte_mempool* mp = zero_copy_ ? bridge_->mempool() : copy_mp_;
  const int socket = rte_eth_dev_socket_id(pid);
  for (std::uint16_t q = 0; q < env_.rx_queues; ++q) {
    if (int rc = rte_eth_rx_queue_setup(pid, q, nb_rxd, socket, nullptr, mp); rc != 0)
      return Status::errorf("receive queue {} setup ({} descriptors) failed: {}; a pool buffer of {} bytes may be "
                            "too small for the device's MTU",
                            q, nb_rxd, errno_text(rc), env_.pool->buf_size());
    DpdkRxQueue& rq = *rxq_[q];
    rq.eth_port = pid;
    rq.eth_queue = q;
    rq.rp_port = env_.port_id;
    rq.mp = mp;
    rq.tx_mp = zero_copy_ ? bridge_->tx_mempool() : nullptr;
    rq.pool = env_.pool;
  }
  for (std::uint16_t q = 0; q < env_.tx_queues; ++q) {
    if (int rc = rte_eth_tx_queue_setup(pid, q, nb_txd, socket, nullptr); rc != 0)
      return Status::errorf("transmit queue {} setup ({} descriptors) failed: {}", q, nb_txd, errno_text(rc));
    DpdkTxQueue& tq = *txq_[q];
    tq.eth_port = pid;
    tq.eth_queue = q;
    tq.mp = mp;
    tq.pool = zero_copy_ ? env_.pool : nullptr;
    tq.shadows = zero_copy_ ? bridge_->shadows() : nullptr;
    tq.tx_mp = zero_copy_ && bridge_->tx_mempool() ? bridge_->tx_mempool() : mp;
  }

  caps_ = {};
  caps_.rx_checksum = (rx_off & RTE_ETH_RX_OFFLOAD_CHECKSUM) != 0;
  caps_.rss = rss;
  caps_.tx = true;
  caps_.max_rx_queues = info.max_rx_queues;
  caps_.max_tx_queues = info.max_tx_queues;
  return Status::ok();
}

Status DpdkPort::start() {
  std::lock_guard lock(mu_);
  if (started_) return Status::ok();
  if (!have_port_) {
    // A stopped port closed its device; bring it back with the same settings.
    RAWPIPE_TRY(attach().context("re-attaching after stop"));
    if (zero_copy_) RAWPIPE_TRY(bridge_->dma_map(dev_));
    RAWPIPE_TRY(configure());
  }
  if (int rc = rte_eth_dev_start(eth_port_); rc != 0)
    return Status::errorf("rte_eth_dev_start on '{}' failed: {}", spec_.device, errno_text(rc));
  if (spec_.promiscuous) {
    int rc = rte_eth_promiscuous_enable(eth_port_);
    if (rc != 0 && rc != -ENOTSUP)
      return Status::errorf("cannot enable promiscuous mode on '{}': {} (set promiscuous = false to run without)",
                            spec_.device, errno_text(rc));
  }
  started_ = true;
  return Status::ok();
}

void DpdkPort::stop() {
  std::lock_guard lock(mu_);
  if (!have_port_) return;
  // Device counters as the lcores left them, before draining adds what nobody received.
  snapshot_device_stats(last_device_stats_);
  if (started_) {
    // Frames the device received but nobody asked for: they hold pool buffers (or DPDK buffers in
    // copy mode) and were never counted as received, so freeing them keeps the accounting exact.
    rte_mbuf* ms[kMaxBurst];
    for (std::uint16_t q = 0; q < env_.rx_queues; ++q) {
      unsigned drained = 0;
      while (drained < kDrainLimit) {
        std::uint16_t k = rte_eth_rx_burst(eth_port_, q, ms, kMaxBurst);
        if (k == 0) break;
        rte_pktmbuf_free_bulk(ms, k);
        drained += k;
      }
      last_device_stats_["drained_at_stop"] += drained;
    }
    // Completed transmissions still parked in the device's ring go back now.
    for (std::uint16_t q = 0; q < env_.tx_queues; ++q) (void)rte_eth_tx_done_cleanup(eth_port_, q, 0);
    (void)rte_eth_dev_stop(eth_port_);
    started_ = false;
  }
  // So do the transmits this thread's transmit cache holds (bridge.hh); other threads give theirs
  // back when they end, and the bridge takes what is left when it goes.
  if (zero_copy_ && bridge_ && rte_lcore_id() != LCORE_ID_ANY) bridge_->flush_transmit_cache(rte_lcore_id());
  close_device();
}

// Closing releases the queues, which frees every buffer still in the device's rings back through
// the mempool (and so to the rawpipe pool). Then a device nobody else uses is detached, so that a
// later start() or another port can probe it afresh.
void DpdkPort::close_device() {
  (void)rte_eth_dev_close(eth_port_);
  {
    std::lock_guard lock(g_in_use_mu);
    g_in_use.erase(eth_port_);
  }
  have_port_ = false;
  if (bridge_) bridge_->dma_unmap(dev_);
  bool shared = false;
  std::uint16_t other;
  RTE_ETH_FOREACH_DEV_OF(other, dev_) shared = true;
  if (!shared) (void)rte_dev_remove(dev_);
  dev_ = nullptr;
}

LinkInfo DpdkPort::link() const {
  std::lock_guard lock(mu_);
  LinkInfo li;
  if (!have_port_) {
    li.up = false;
    return li;
  }
  rte_eth_link l{};
  if (rte_eth_link_get_nowait(eth_port_, &l) == 0) {
    li.up = l.link_status == RTE_ETH_LINK_UP;
    li.speed_mbps = l.link_speed == RTE_ETH_SPEED_NUM_UNKNOWN ? 0 : l.link_speed;
  }
  std::uint16_t mtu = 0;
  if (rte_eth_dev_get_mtu(eth_port_, &mtu) == 0) li.mtu = mtu;
  rte_ether_addr mac{};
  if (rte_eth_macaddr_get(eth_port_, &mac) == 0) std::copy(std::begin(mac.addr_bytes), std::end(mac.addr_bytes), li.mac.begin());
  return li;
}

void DpdkPort::snapshot_device_stats(std::map<std::string, std::uint64_t>& out) const {
  rte_eth_stats s{};
  if (rte_eth_stats_get(eth_port_, &s) == 0) {
    out["ethdev.ipackets"] = s.ipackets;
    out["ethdev.opackets"] = s.opackets;
    out["ethdev.ibytes"] = s.ibytes;
    out["ethdev.obytes"] = s.obytes;
    out["ethdev.imissed"] = s.imissed;
    out["ethdev.ierrors"] = s.ierrors;
    out["ethdev.oerrors"] = s.oerrors;
    out["ethdev.rx_nombuf"] = s.rx_nombuf;
  }
  int n = rte_eth_xstats_get_names(eth_port_, nullptr, 0);
  if (n <= 0) return;
  std::vector<rte_eth_xstat_name> names(n);
  std::vector<rte_eth_xstat> values(n);
  if (rte_eth_xstats_get_names(eth_port_, names.data(), n) != n) return;
  int got = rte_eth_xstats_get(eth_port_, values.data(), n);
  for (int i = 0; i < got && i < n; ++i)
    if (values[i].id < static_cast<std::uint64_t>(n)) out[fmt::format("xstat.{}", names[values[i].id].name)] = values[i].value;
}

PortStats DpdkPort::stats() const {
  PortStats st;
  std::uint64_t rx_copied = 0, tx_copied = 0, tx_refused = 0, rx_too_long = 0, tx_too_long = 0;
  for (const auto& q : rxq_) {
    QueueCounters c;
    c.rx_packets = q->packets.load(std::memory_order_relaxed);
    c.rx_bytes = q->bytes.load(std::memory_order_relaxed);
    c.rx_nombuf = q->nombuf.load(std::memory_order_relaxed);
    c.rx_errors = q->too_long.load(std::memory_order_relaxed);
    rx_copied += q->copied.load(std::memory_order_relaxed);
    rx_too_long += c.rx_errors;
    st.rx_queues.push_back(c);
  }
  for (const auto& q : txq_) {
    QueueCounters c;
    c.tx_packets = q->packets.load(std::memory_order_relaxed);
    c.tx_bytes = q->bytes.load(std::memory_order_relaxed);
    c.tx_errors = q->too_long.load(std::memory_order_relaxed) + q->nombuf.load(std::memory_order_relaxed);
    tx_copied += q->copied.load(std::memory_order_relaxed);
    tx_refused += q->refused.load(std::memory_order_relaxed);
    tx_too_long += q->too_long.load(std::memory_order_relaxed);
    st.tx_queues.push_back(c);
  }
  st.extended["zero_copy"] = zero_copy_ ? 1 : 0;
  // Whether the pool is registered with DPDK as external memory (what a physical device's DMA
  // mapping needs; virtual devices work either way).
  st.extended["pool_extmem_registered"] = bridge_ && bridge_->extmem_registered() ? 1 : 0;
  st.extended["rx_copied"] = rx_copied;
  st.extended["tx_copied"] = tx_copied;
  st.extended["tx_refused"] = tx_refused;
  st.extended["rx_too_long"] = rx_too_long;
  st.extended["tx_too_long"] = tx_too_long;
  std::lock_guard lock(mu_);
  if (have_port_) {
    std::map<std::string, std::uint64_t> dev;
    snapshot_device_stats(dev);
    st.extended.insert(dev.begin(), dev.end());
  } else {
    st.extended.insert(last_device_stats_.begin(), last_device_stats_.end());
  }
  // imissed: frames the device had no descriptor for; rx_nombuf: frames the PMD could not take
  // for lack of DPDK mbufs (its own mempool, apart from the pool counted in rx_nombuf above).
  // Absent when rte_eth_stats_get failed: unknown, not 0.
  for (const auto& [key, reason] : {std::pair{"ethdev.imissed", "device_missed"}, {"ethdev.rx_nombuf", "device_nombuf"}}) {
    auto it = st.extended.find(key);
    st.losses[reason] = it == st.extended.end() ? std::nullopt : std::optional<std::uint64_t>(it->second);
  }
  return st;
}

std::string DpdkPort::path_report() const {
  std::string mode = zero_copy_
                         ? fmt::format("zero-copy: DPDK receives into and transmits from pool '{}' through a mempool "
                                       "of pinned external buffers (buffers of other mempools are copied, counted "
                                       "in rx_copied/tx_copied)",
                                       env_.pool->name())
                         : fmt::format("copy: one memcpy per packet between DPDK's own mempool and pool '{}' on rx "
                                       "and tx, because {}",
                                       env_.pool->name(), buffer_reason_);
  std::string out;
  for (std::uint16_t q = 0; q < env_.rx_queues; ++q)
    out += fmt::format("port {} rx queue {}: dpdk ethdev {} ({}, driver {}), {}{}\n", env_.name, q, eth_port_,
                       spec_.device, driver_, mode, rss_note_.empty() ? "" : "; " + rss_note_);
  for (std::uint16_t q = 0; q < env_.tx_queues; ++q)
    out += fmt::format("port {} tx queue {}: dpdk ethdev {} ({}, driver {}), {}\n", env_.name, q, eth_port_,
                       spec_.device, driver_, zero_copy_ ? "zero-copy" : "copy");
  return out;
}

Result<std::unique_ptr<PortSpec>> parse(ConfigSection& section) {
  auto spec = std::make_unique<DpdkSpec>();
  spec->where = fmt::format("{}:{}", section.file(), section.line());
  spec->eal_args = section.string_list("eal_args");
  spec->device = section.string("device");
  std::string buffers = section.choice("buffers", {"auto", "zero_copy", "copy"}, "auto");
  spec->buffers = buffers == "copy" ? BufferMode::kCopy : buffers == "zero_copy" ? BufferMode::kZeroCopy : BufferMode::kAuto;
  spec->promiscuous = section.boolean("promiscuous", true);
  if (section.has("device") && spec->device.empty())
    section.fail("device", "expected a DPDK device: a vdev such as \"net_null0\" or \"net_pcap0,rx_pcap=in.pcap\", "
                           "or a PCI address such as \"0000:03:00.0\"");
  for (const std::string& a : spec->eal_args)
    if (a.empty()) section.fail("eal_args", "expected non-empty EAL arguments");
  RAWPIPE_TRY(section.status());
  return std::unique_ptr<PortSpec>(std::move(spec));
}

}  // namespace
}  // namespace dpdk

namespace {
const KeyDoc kDpdkDocs[] = {
    {"device", "string", "a vdev (\"net_null0\", \"net_pcap0,rx_pcap=in.pcap\") or a PCI address", "required",
     "the DPDK ethdev to open"},
    {"eal_args", "string list", "EAL arguments", "[] (rawpipe's own: --in-memory, no PCI scan for vdevs)",
     "extra arguments for rte_eal_init"},
    {"buffers", "string", "\"auto\", \"zero_copy\", \"copy\"", "\"auto\"",
     "receive into the rawpipe pool when DPDK can reach it, always, or copy from a DPDK mempool"},
    {"promiscuous", "boolean", "", "true", "put the ethdev in promiscuous mode"},
};
}  // namespace
const KeyTable kDpdkKeys{"dpdk", "[[ports]] pmd = \"dpdk\"", "any DPDK ethdev", kDpdkDocs};

const PmdDriver kDpdkDriver = {
    "dpdk",
    "any DPDK ethdev (vdevs such as net_null, net_pcap, net_ring, net_tap, net_af_xdp, or a PCI NIC); zero-copy "
    "into the rawpipe pool where DPDK can reach it",
    dpdk::parse, &kDpdkKeys};

}  // namespace rawpipe
