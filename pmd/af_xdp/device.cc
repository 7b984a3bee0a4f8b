// AF_XDP control path: config keys, open (attach the XDP program), start (UMEM over the pool's
// region, one XSK per queue), stop (return every buffer), stats and the path report.
//
// open() must run in the network namespace of the interface: the socket binds by name and the
// program attaches by index there. start(), stop(), link() and the destructor switch to that
// namespace themselves when called from elsewhere. The burst functions run anywhere.
#include <linux/ethtool.h>
#include <linux/sockios.h>
#include <net/if.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>
#include <xdp/libxdp.h>

#include <bit>
#include <chrono>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <optional>
#include <thread>

#include "pipeline/classify/rule.hh"
#include "pipeline/config/section.hh"
#include "pmd/af_xdp/af_xdp.hh"
#include "pmd/af_xdp/netns_guard.hh"
#include "pmd/af_xdp/program.hh"
#include "pmd/af_xdp/xdp_steer_abi.h"
#include "pmd/drivers.hh"
#include "pmd/host/link_stats.hh"
#include "pmd/host/multicast.hh"

namespace rawpipe {
namespace af_xdp {
namespace {

// XDP_PACKET_HEADROOM: the kernel keeps this much in front of the packet for XDP programs.
constexpr std::uint32_t kXdpPacketHeadroom = 256;
// The kernel stores SO_BUSY_POLL_BUDGET in 16 bits; a busy poll of more than a second is a mistake.
constexpr std::int64_t kMaxBusyPollBudget = 65535;
constexpr std::int64_t kMaxBusyPollUs = 1000000;
// Ethernet header plus two VLAN tags on top of the MTU.
constexpr std::uint32_t kL2Overhead = 14 + 8;

// Buffers the kernel holds while the port runs: every socket's fill ring full, and one burst on
// its way back to it.
constexpr std::uint64_t fill_ring_buffers(unsigned sockets, std::uint32_t rx_ring_size) {
  return std::uint64_t(sockets) * rx_ring_size + kMaxBurst;
}

struct IfInfo {
  int index = 0;
  std::uint32_t mtu = 1500;
  bool up = false;
  std::array<std::uint8_t, 6> mac{};
  std::uint32_t max_queues = 0;  // 0: unknown
};

Result<IfInfo> query_interface(const std::string& name) {
  IfInfo info;
  info.index = static_cast<int>(if_nametoindex(name.c_str()));
  if (info.index == 0)
    return Status::errorf("interface '{}' does not exist in this network namespace ({}); check `ip link`", name,
                          std::strerror(errno));
  int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Status::errorf("socket: {}", std::strerror(errno));
  ifreq ifr{};
  std::strncpy(ifr.ifr_name, name.c_str(), IFNAMSIZ - 1);
  if (ioctl(fd, SIOCGIFMTU, &ifr) == 0) info.mtu = static_cast<std::uint32_t>(ifr.ifr_mtu);
  if (ioctl(fd, SIOCGIFFLAGS, &ifr) == 0) info.up = (ifr.ifr_flags & IFF_UP) != 0;
  if (ioctl(fd, SIOCGIFHWADDR, &ifr) == 0) std::memcpy(info.mac.data(), ifr.ifr_hwaddr.sa_data, 6);
  ethtool_channels ch{};
  ch.cmd = ETHTOOL_GCHANNELS;
  ifr.ifr_data = reinterpret_cast<char*>(&ch);
  if (ioctl(fd, SIOCETHTOOL, &ifr) == 0) info.max_queues = std::max(ch.rx_count, ch.combined_count);
  close(fd);
  return info;
}

class AfXdpPort final : public Port {
 public:
  AfXdpPort(const Config& cfg, const PortEnv& env) : cfg_(cfg), env_(env) {}
  ~AfXdpPort() override {
    EnterNetns in(home_);
    stop();
    program_.reset();  // detaches by interface index: must happen in home_
  }

  Status open() {
    Pool* pool = env_.pool;
    if (!pool) return Status::error("af_xdp: the port has no pool");
    if (pool->stride() != pool->buf_size())
      return Status::errorf("af_xdp port '{}': pool '{}' pads its slots to {} bytes, but AF_XDP frames must be "
                            "exactly buf_size ({}) apart; create the pool with exact_stride (the config loader "
                            "does this for pools of af_xdp ports)",
                            env_.name, pool->name(), pool->stride(), pool->buf_size());
    if (pool->buf_size() < 2048)
      return Status::errorf("af_xdp port '{}': pool '{}' has buf_size {}, AF_XDP frames need at least 2048 bytes",
                            env_.name, pool->name(), pool->buf_size());
    if (!is_power_of_two(env_.rx_ring_size) || !is_power_of_two(env_.tx_ring_size))
      return Status::errorf("af_xdp port '{}': rx_ring_size {} and tx_ring_size {} must be powers of two", env_.name,
                            env_.rx_ring_size, env_.tx_ring_size);
    auto info = query_interface(cfg_.interface);
    if (!info) return info.status().context(fmt::format("af_xdp port '{}'", env_.name));
    if_ = info.value();
    // The interface's own drop counters, read later from this (the port's) namespace.
    if (auto d = host::LinkDrops::open(if_.index)) link_drops_ = std::move(d).value();
    const std::uint32_t room = pool->buf_size() - kMbufHeaderSize - kXdpPacketHeadroom;
    if (if_.mtu + kL2Overhead > room)
      return Status::errorf("af_xdp port '{}': {} has MTU {}, but a {}-byte pool buffer leaves {} bytes for a frame "
                            "after the buffer header and the kernel's XDP headroom; use a pool with buf_size {} or "
                            "lower the MTU",
                            env_.name, cfg_.interface, if_.mtu, pool->buf_size(), room,
                            std::bit_ceil(if_.mtu + kL2Overhead + kMbufHeaderSize + kXdpPacketHeadroom));
    nq_ = std::max(env_.rx_queues, env_.tx_queues);
    if (if_.max_queues && cfg_.queue_offset + nq_ > if_.max_queues)
      return Status::errorf("af_xdp port '{}': queues {}..{} requested but {} has {} queue(s); lower rx_queues/"
                            "tx_queues or queue_offset, or raise the channels with `ethtool -L {}`",
                            env_.name, cfg_.queue_offset, cfg_.queue_offset + nq_ - 1, cfg_.interface, if_.max_queues,
                            cfg_.interface);
    if (cfg_.queue_offset + nq_ > RAWPIPE_XDP_MAX_QUEUES)
      return Status::errorf("af_xdp port '{}': device queue {} is beyond the XDP program's {} queues", env_.name,
                            cfg_.queue_offset + nq_ - 1, RAWPIPE_XDP_MAX_QUEUES);
    auto prog = SteerProgram::attach(cfg_.interface, if_.index, cfg_.attach, cfg_.mode);
    if (!prog) return prog.status().context(fmt::format("af_xdp port '{}'", env_.name));
    program_ = std::move(prog).value();
    queues_.clear();
    for (unsigned q = 0; q < nq_; ++q) queues_.push_back(std::make_unique<XskQueue>());
    return Status::ok();
  }

  std::string_view pmd_name() const noexcept override { return "af_xdp"; }

  std::string path_report() const override {
    std::string out;
    for (const std::string& g : groups_.joined())
      out += fmt::format("af_xdp {}: multicast group {} joined on the interface (IGMP/MLD reports sent)\n",
                         cfg_.interface, g);
    for (const auto& q : queues_) {
      if (!out.empty()) out += '\n';
      out += fmt::format("af_xdp {} queue {}: XDP {} (bpf_link, detached when the process ends), {}, need_wakeup {}, {}, {}, {}",
                         cfg_.interface, cfg_.queue_offset + q->queue_id, program_->attach_mode(),
                         !started_ ? "not started" : q->zero_copy ? "zero-copy" : zc_failure_.empty() ? "copy mode" : "copy mode (the driver refused zero-copy)",
                         cfg_.need_wakeup ? "on" : "off",
                         cfg_.busy_poll_budget == 0
                             ? "busy polling off (the interface's softirq fills the rx ring)"
                             : fmt::format("preferred busy polling (budget {}, {} us: an empty receive runs the "
                                           "interface's NAPI poll on the lcore)",
                                           cfg_.busy_poll_budget, cfg_.busy_poll_us),
                         cfg_.verify_checksums ? "UDP/TCP checksums verified in software (those a sender left to "
                                                 "offload completed)"
                                               : "checksums not verified",
                         cfg_.mode == SteerMode::kAll ? "whole queue redirected"
                                                      : fmt::format("steering {} map entries, rest to the kernel",
                                                                    steer_entries_));
    }
    return out;
  }

  PortCaps caps() const override {
    PortCaps c;
    c.rx_checksum = cfg_.verify_checksums;
    c.flow_rules = cfg_.mode == SteerMode::kSteer;
    c.kernel_pass = cfg_.mode == SteerMode::kSteer;
    c.tx = true;
    c.max_rx_queues = nq_;
    c.max_tx_queues = nq_;
    return c;
  }

  struct InterfaceState {
    bool present = false;  // the interface the port opened (same index) still exists
    bool up = false;
  };
  // Control path: looks the interface up again in the port's namespace.
  InterfaceState interface_state() const {
    EnterNetns in(home_);
    InterfaceState st;
    auto info = query_interface(cfg_.interface);
    if (!info || info.value().index != if_.index) return st;
    st.present = true;
    st.up = info.value().up;
    return st;
  }

  LinkInfo link() const override {
    LinkInfo l;
    EnterNetns in(home_);
    auto info = query_interface(cfg_.interface);
    const IfInfo& i = info ? info.value() : if_;
    l.up = i.up;
    l.mtu = i.mtu;
    l.mac = i.mac;
    return l;
  }

  Status start() override {
    if (started_) return Status::ok();
    EnterNetns in(home_);
    Pool* pool = env_.pool;
    const std::uint64_t need = fill_ring_buffers(nq_, env_.rx_ring_size);
    if (pool->count() < need)
      return Status::errorf("af_xdp port '{}': pool '{}' has {} buffers but {} queue(s) with rx_ring_size {} keep up to "
                            "{} in the kernel's fill rings; raise the pool's count or lower rx_ring_size",
                            env_.name, pool->name(), pool->count(), nq_, env_.rx_ring_size, need);
    Status st = create_sockets();
    if (!st) {
      teardown();
      return st.context(fmt::format("af_xdp port '{}'", env_.name));
    }
    started_ = true;
    return Status::ok();
  }

  void stop() override {
    groups_.leave_all();  // the leave reports go out with the stop
    if (!started_) return;
    EnterNetns in(home_);
    teardown();
    started_ = false;
  }

  RxQueueHandle rx_queue(std::uint16_t q) override {
    if (q >= env_.rx_queues || q >= queues_.size()) return {};
    return {cfg_.verify_checksums ? &rx_burst_verify_csum : &rx_burst, queues_[q].get()};
  }
  TxQueueHandle tx_queue(std::uint16_t q) override {
    if (q >= env_.tx_queues || q >= queues_.size()) return {};
    return {&tx_burst, queues_[q].get()};
  }
  // The XSK itself: the kernel's xsk_poll reports POLLIN while its rx ring holds descriptors.
  int rx_wait_fd(std::uint16_t q) const override {
    return q < env_.rx_queues && q < queues_.size() ? queues_[q]->fd : -1;
  }

  PortStats stats() const override {
    PortStats s;
    std::uint64_t rx_wakeups = 0, rx_busy_polls = 0, tx_wakeups = 0, fill_failed = 0, tx_copied = 0, tx_nombuf = 0, tx_full = 0;
    std::uint64_t zc = 0;
    xdp_statistics total{};
    for (std::size_t i = 0; i < queues_.size(); ++i) {
      const XskQueue& q = *queues_[i];
      QueueCounters c;
      c.rx_packets = q.rx_packets.get();
      c.rx_bytes = q.rx_bytes.get();
      c.tx_packets = q.tx_packets.get();
      c.tx_bytes = q.tx_bytes.get();
      c.tx_errors = q.tx_foreign_nombuf.get();
      if (i < env_.rx_queues) s.rx_queues.push_back(c);
      if (i < env_.tx_queues) s.tx_queues.push_back(c);
      rx_wakeups += q.rx_wakeups.get();
      rx_busy_polls += q.rx_busy_polls.get();
      tx_wakeups += q.tx_wakeups.get();
      fill_failed += q.fill_alloc_failed.get();
      tx_copied += q.tx_copied.get();
      tx_nombuf += q.tx_foreign_nombuf.get();
      tx_full += q.tx_ring_full.get();
      zc += q.zero_copy ? 1 : 0;
    }
    bool unreadable = false;
    {
      // The sockets' counters die with them: stop() folds them into closed_xsk_ before closing.
      std::lock_guard lock(xsk_stats_mu_);
      total = closed_xsk_;
      for (const auto& q : queues_)
        if (q->fd >= 0 && !add_xsk_statistics(q->fd, total)) unreadable = true;
    }
    auto& e = s.extended;
    e["zero_copy_queues"] = started_ ? zc : 0;
    e["copy_mode_queues"] = started_ ? queues_.size() - zc : 0;
    e["xdp_attach_native"] = program_->attach_mode() == "native";
    e["xdp_attach_generic"] = program_->attach_mode() == "generic";
    e["need_wakeup"] = cfg_.need_wakeup;
    e["rx_wakeups"] = rx_wakeups;
    e["busy_poll_budget"] = cfg_.busy_poll_budget;
    e["rx_busy_polls"] = rx_busy_polls;
    e["busy_poll_queues_without_napi"] = busy_poll_queues_without_napi();
    e["tx_wakeups"] = tx_wakeups;
    e["fill_alloc_failed"] = fill_failed;
    e["tx_copied_foreign"] = tx_copied;
    e["tx_foreign_nombuf"] = tx_nombuf;
    e["tx_ring_full"] = tx_full;
    e["steering_entries"] = steer_entries_;
    e["xsk_rx_dropped"] = total.rx_dropped;
    e["xsk_rx_invalid_descs"] = total.rx_invalid_descs;
    e["xsk_tx_invalid_descs"] = total.tx_invalid_descs;
    e["xsk_rx_ring_full"] = total.rx_ring_full;
    e["xsk_rx_fill_ring_empty"] = total.rx_fill_ring_empty_descs;
    e["xsk_tx_ring_empty"] = total.tx_ring_empty_descs;
    // Frames lost on the way to the sockets. The kernel counts a frame that found the rx ring full
    // in rx_ring_full only, and one that found no fill-ring buffer (copy mode) or was too long in
    // rx_dropped; rx_fill_ring_empty_descs counts failed fill-ring reads (the same frames again in
    // copy mode, descriptor refills in zero-copy mode), so it is reported but not added.
    auto known = [unreadable](std::uint64_t v) { return unreadable ? std::nullopt : std::optional<std::uint64_t>(v); };
    s.losses["xsk_rx_dropped"] = known(total.rx_dropped);
    s.losses["xsk_rx_ring_full"] = known(total.rx_ring_full);
    link_drops_.add_losses_to(s.losses);
    for (const auto& [k, v] : program_->counters()) e[k] = v;
    link_drops_.add_to(e);
    std::uint64_t kick_errors = 0, wake_errors = 0, csum_completed = 0, csum_bad = 0;
    for (const auto& q : queues_) {
      csum_completed += q->csum_completed.get();
      csum_bad += q->csum_bad.get();
      kick_errors += q->tx_kick_errors.get();
      wake_errors += q->rx_wakeup_errors.get();
    }
    e["rx_csum_completed"] = csum_completed;
    e["rx_csum_bad"] = csum_bad;
    e["tx_kick_errors"] = kick_errors;
    e["rx_wakeup_errors"] = wake_errors;
    const InterfaceState st = interface_state();
    e["interface_present"] = st.present;
    e["link_up"] = st.present && st.up;
    return s;
  }

  std::vector<std::string> notices() const override {
    const InterfaceState st = interface_state();
    std::vector<std::string> out;
    if (!program_->removed_leftover().empty()) out.push_back(program_->removed_leftover());
    if (!st.present)
      out.push_back(fmt::format("interface {} (index {}) went away while the port ran: its AF_XDP sockets are unbound "
                                "and receive nothing; recreate the interface and start rawpipe again",
                                cfg_.interface, if_.index));
    else if (!st.up)
      out.push_back(fmt::format("interface {} is down: nothing arrives until `ip link set {} up`", cfg_.interface,
                                cfg_.interface));
    int err = 0;
    std::uint64_t refused = 0;
    for (const auto& q : queues_) {
      if (int e = q->last_errno.load(std::memory_order_relaxed)) err = e;
      refused += q->tx_kick_errors.get() + q->rx_wakeup_errors.get();
    }
    if (err)
      out.push_back(fmt::format("the kernel refused {} wakeup(s) of the AF_XDP sockets on {} (last: {})", refused,
                                cfg_.interface, std::strerror(err)));
    if (unsigned n = busy_poll_queues_without_napi())
      out.push_back(fmt::format(
          "busy polling is on, but the kernel named no NAPI instance for {} of the AF_XDP sockets on {} after frames "
          "reached them, so their busy polls run nothing and each empty receive is a system call that only costs "
          "(the driver registered its XDP receive queue without one: veth does on Linux 6.18); set "
          "busy_poll_budget = 0",
          n, cfg_.interface));
    return out;
  }

  Status update_steering(const SteeringRules& rules) override {
    {
      // Groups are joined in both modes: the XDP program takes the frames, but only a kernel
      // membership makes the switch and the NIC deliver them.
      EnterNetns in(home_);
      RAWPIPE_TRY(groups_.update(if_.index, cfg_.interface, rules).context(fmt::format("af_xdp port '{}'", env_.name)));
    }
    if (cfg_.mode == SteerMode::kAll) return Status::ok();  // the whole queue is ours anyway
    auto n = program_->set_rules(rules);
    if (!n) return n.status().context(fmt::format("af_xdp port '{}'", env_.name));
    steer_entries_ = n.value();
    return Status::ok();
  }

 private:
  Status create_umem() {
    Pool* pool = env_.pool;
    xsk_umem_config uc{};
    uc.fill_size = env_.rx_ring_size;
    uc.comp_size = env_.tx_ring_size;
    uc.frame_size = pool->buf_size();
    // The kernel writes packets after this much of each frame: our Mbuf header stays ours.
    uc.frame_headroom = kMbufHeaderSize;
    uc.flags = 0;
    XskQueue& q0 = *queues_[0];
    int err = xsk_umem__create(&umem_, pool->region(), std::uint64_t(pool->count()) * pool->buf_size(), &q0.fill,
                               &q0.comp, &uc);
    if (err) {
      umem_ = nullptr;
      return Status::errorf("cannot register pool '{}' ({} x {} bytes) as an AF_XDP UMEM: {}{}", pool->name(),
                            pool->count(), pool->buf_size(), std::strerror(-err),
                            -err == EPERM || -err == ENOMEM
                                ? " (root is needed, or raise RLIMIT_MEMLOCK with `ulimit -l unlimited`)"
                                : "");
    }
    return Status::ok();
  }

  static constexpr int kBusyQueueWaitMs = 2000;

  // The three options DPDK's net_af_xdp sets for busy_budget. Those the kernel lets us read are read
  // back (SO_BUSY_POLL_BUDGET has no getsockopt): a kernel that kept another value would make the
  // path report untrue.
  Status set_busy_poll(XskQueue& q) {
    q.busy_poll = false;
    if (cfg_.busy_poll_budget == 0) return Status::ok();
    const struct {
      int option;
      const char* name;
      int value;
    } options[] = {{SO_PREFER_BUSY_POLL, "SO_PREFER_BUSY_POLL", 1},
                   {SO_BUSY_POLL, "SO_BUSY_POLL", static_cast<int>(cfg_.busy_poll_us)},
                   {SO_BUSY_POLL_BUDGET, "SO_BUSY_POLL_BUDGET", static_cast<int>(cfg_.busy_poll_budget)}};
    for (const auto& o : options) {
      if (setsockopt(q.fd, SOL_SOCKET, o.option, &o.value, sizeof(o.value)) != 0) {
        const int err = errno;
        return Status::errorf(
            "cannot turn on preferred busy polling on the AF_XDP socket of {} queue {}: {} = {}: {}{}; set "
            "busy_poll_budget = 0 to run without it",
            cfg_.interface, q.device_queue, o.name, o.value, std::strerror(err),
            err == EPERM         ? " (it needs CAP_NET_ADMIN)"
            : err == ENOPROTOOPT ? " (the kernel has no busy polling: it needs Linux 5.11 or later built with "
                                   "CONFIG_NET_RX_BUSY_POLL)"
                                 : "");
      }
      int got = -1;
      socklen_t len = sizeof(got);
      if (getsockopt(q.fd, SOL_SOCKET, o.option, &got, &len) == 0 && got != o.value)
        return Status::errorf("the AF_XDP socket of {} queue {} kept {} = {} when {} was set", cfg_.interface,
                              q.device_queue, o.name, got, o.value);
    }
    q.busy_poll = true;
    return Status::ok();
  }

  Status bind_queue(XskQueue& q, std::uint16_t bind_flags) {
    xsk_socket_config sc{};
    sc.rx_size = env_.rx_ring_size;
    sc.tx_size = env_.tx_ring_size;
    sc.libxdp_flags = XSK_LIBXDP_FLAGS__INHIBIT_PROG_LOAD;  // our own program is already attached
    sc.xdp_flags = 0;
    sc.bind_flags = bind_flags;
    int err = xsk_socket__create_shared(&q.xsk, cfg_.interface.c_str(), q.device_queue, umem_, &q.rx, &q.tx,
                                        &q.fill, &q.comp, &sc);
    // The kernel frees a closed XSK's hold on its queue asynchronously, so a bind just after an
    // earlier socket on the same queue closed (our own refused zero-copy attempt, a previous run,
    // testpmd) meets EBUSY for a moment; the AF_XDP maintainers' advice is to wait and retry. A
    // queue that stays busy belongs to a live socket, and that is reported.
    for (int waited_ms = 0; err == -EBUSY && waited_ms < kBusyQueueWaitMs; waited_ms += 20) {
      q.xsk = nullptr;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      err = xsk_socket__create_shared(&q.xsk, cfg_.interface.c_str(), q.device_queue, umem_, &q.rx, &q.tx, &q.fill,
                                      &q.comp, &sc);
    }
    if (err == -EBUSY) {
      q.xsk = nullptr;
      return Status::errorf("cannot bind an AF_XDP socket to {} queue {} ({}): another AF_XDP socket still holds "
                            "that queue after {} ms (another rawpipe, testpmd or XDP program on {}?)",
                            cfg_.interface, q.device_queue, bind_flags & XDP_ZEROCOPY ? "zero-copy" : "copy mode",
                            kBusyQueueWaitMs, cfg_.interface);
    }
    if (err) {
      q.xsk = nullptr;
      return Status::errorf("cannot bind an AF_XDP socket to {} queue {} ({}): {}", cfg_.interface, q.device_queue,
                            bind_flags & XDP_ZEROCOPY ? "zero-copy" : "copy mode", std::strerror(-err));
    }
    return Status::ok();
  }

  Status create_sockets() {
    Pool* pool = env_.pool;
    RAWPIPE_TRY(create_umem());
    const std::uint16_t wake = cfg_.need_wakeup ? XDP_USE_NEED_WAKEUP : 0;
    std::uint16_t mode_flag = cfg_.zero_copy == ZeroCopy::kNever ? XDP_COPY : XDP_ZEROCOPY;
    for (unsigned i = 0; i < nq_; ++i) {
      XskQueue& q = *queues_[i];
      q.base = pool->region();
      q.pool = pool;
      q.slot_shift = static_cast<std::uint32_t>(std::countr_zero(pool->buf_size()));
      q.port_id = env_.port_id;
      q.queue_id = static_cast<std::uint16_t>(i);
      q.device_queue = cfg_.queue_offset + i;
      q.need_wakeup = cfg_.need_wakeup;
      q.held_bits.assign((pool->count() + 63) / 64, 0);
      q.held = q.held_bits.data();
      Status st = bind_queue(q, wake | mode_flag);
      if (!st && i == 0 && cfg_.zero_copy == ZeroCopy::kAuto) {
        // The driver has no zero-copy support (veth, most virtual NICs): copy mode. The first
        // socket owns the UMEM's rings, so the UMEM is made again for a clean second attempt.
        zc_failure_ = st.message();
        (void)xsk_umem__delete(umem_);
        umem_ = nullptr;
        RAWPIPE_TRY(create_umem());
        mode_flag = XDP_COPY;
        st = bind_queue(q, wake | mode_flag);
      }
      if (!st) {
        if (cfg_.zero_copy == ZeroCopy::kRequire)
          return Status::errorf("{}; the driver of {} does not do AF_XDP zero-copy: set zero_copy = \"auto\" to "
                                "accept copy mode",
                                st.message(), cfg_.interface);
        return st;
      }
      q.fd = xsk_socket__fd(q.xsk);
      RAWPIPE_TRY(set_busy_poll(q));
      xdp_options opts{};
      socklen_t len = sizeof(opts);
      if (getsockopt(q.fd, SOL_XDP, XDP_OPTIONS, &opts, &len) == 0) q.zero_copy = (opts.flags & XDP_OPTIONS_ZEROCOPY) != 0;
      q.fill_size = env_.rx_ring_size;
      // Buffers first, then the map entry: the socket can take frames the moment it is in the map.
      for (;;) {
        std::uint32_t before = xsk_prod_nb_free(&q.fill, q.fill_size);
        refill(q);
        if (xsk_prod_nb_free(&q.fill, q.fill_size) == before) break;
      }
      if (int err = xsk_socket__update_xskmap(q.xsk, program_->xsks_map_fd()); err)
        return Status::errorf("cannot add the socket of {} queue {} to the XSK map: {}", cfg_.interface,
                              q.device_queue, std::strerror(-err));
    }
    return Status::ok();
  }

  // Closes the sockets and the UMEM, then frees every buffer the kernel still had: whatever sat
  // in the fill, rx, tx and completion rings or inside the driver. Once the UMEM is gone the
  // kernel no longer touches any of them.
  void teardown() {
    {
      std::lock_guard lock(xsk_stats_mu_);
      for (auto& qp : queues_) {
        XskQueue& q = *qp;
        if (q.xsk) {
          (void)program_->remove_socket(q.device_queue);
          // Last read while the socket is open: the run's verdict needs what it lost.
          (void)add_xsk_statistics(q.fd, closed_xsk_);
          xsk_socket__delete(q.xsk);
          q.xsk = nullptr;
          q.fd = -1;
        }
      }
    }
    if (umem_) {
      (void)xsk_umem__delete(umem_);
      umem_ = nullptr;
    }
    Pool* pool = env_.pool;
    for (auto& qp : queues_) {
      XskQueue& q = *qp;
      Mbuf* batch[kMaxBurst];
      unsigned n = 0;
      for (std::size_t w = 0; w < q.held_bits.size(); ++w) {
        std::uint64_t bits = q.held_bits[w];
        while (bits) {
          unsigned b = static_cast<unsigned>(std::countr_zero(bits));
          bits &= bits - 1;
          batch[n++] = pool->at(static_cast<std::uint32_t>(w * 64 + b));
          if (n == kMaxBurst) {
            mbuf_free_bulk(batch, n);
            n = 0;
          }
        }
        q.held_bits[w] = 0;
      }
      if (n) mbuf_free_bulk(batch, n);
      // The rings' memory went with the socket; clear our copies so nothing reads stale pointers.
      q.rx = {};
      q.fill = {};
      q.tx = {};
      q.comp = {};
    }
  }

  // Sockets with busy polling on that have received frames and still have no NAPI id
  // (SO_INCOMING_NAPI_ID): the kernel learns the id from the XDP receive queue of the first frame.
  unsigned busy_poll_queues_without_napi() const {
    if (cfg_.busy_poll_budget == 0) return 0;
    std::lock_guard lock(xsk_stats_mu_);
    unsigned n = 0;
    for (const auto& q : queues_) {
      if (q->fd < 0 || q->rx_packets.get() == 0) continue;
      int id = 0;
      socklen_t len = sizeof(id);
      if (getsockopt(q->fd, SOL_SOCKET, SO_INCOMING_NAPI_ID, &id, &len) == 0 && id == 0) ++n;
    }
    return n;
  }

  // Adds one socket's XDP_STATISTICS to `total`; false when the kernel refuses to say.
  static bool add_xsk_statistics(int fd, xdp_statistics& total) {
    xdp_statistics x{};
    socklen_t len = sizeof(x);
    if (getsockopt(fd, SOL_XDP, XDP_STATISTICS, &x, &len) != 0) return false;
    total.rx_dropped += x.rx_dropped;
    total.rx_invalid_descs += x.rx_invalid_descs;
    total.tx_invalid_descs += x.tx_invalid_descs;
    total.rx_ring_full += x.rx_ring_full;
    total.rx_fill_ring_empty_descs += x.rx_fill_ring_empty_descs;
    total.tx_ring_empty_descs += x.tx_ring_empty_descs;
    return true;
  }

  Config cfg_;
  PortEnv env_;
  // Guards closed_xsk_ and the sockets' fds between the stats thread and teardown().
  mutable std::mutex xsk_stats_mu_;
  xdp_statistics closed_xsk_{};  // what sockets closed by stop() had counted
  OpenedNetns home_;  // the namespace open() ran in
  IfInfo if_;
  unsigned nq_ = 1;
  std::unique_ptr<SteerProgram> program_;
  std::vector<std::unique_ptr<XskQueue>> queues_;
  xsk_umem* umem_ = nullptr;
  bool started_ = false;
  unsigned steer_entries_ = 0;
  std::string zc_failure_;
  host::LinkDrops link_drops_;
  host::GroupMemberships groups_;
};

class AfXdpSpec final : public PortSpec {
 public:
  explicit AfXdpSpec(Config cfg) : cfg_(std::move(cfg)) {}
  Result<std::unique_ptr<Port>> open(const PortEnv& env) const override {
    auto port = std::make_unique<AfXdpPort>(cfg_, env);
    RAWPIPE_TRY(port->open());
    return std::unique_ptr<Port>(std::move(port));
  }
  // UMEM frames are buf_size apart and rx finds a slot by shifting the frame address.
  bool needs_exact_pool_stride() const override { return true; }
  std::uint64_t buffers_kept(std::uint16_t rx_queues, std::uint16_t tx_queues, std::uint32_t rx_ring_size) const override {
    return fill_ring_buffers(std::max(rx_queues, tx_queues), rx_ring_size);
  }
  ClaimedQueues claimed_queues() const override { return {cfg_.interface, cfg_.queue_offset}; }
  std::string unmatched_go_elsewhere() const override {
    if (cfg_.mode == SteerMode::kAll) return {};
    return "in mode = \"steer\" (the default) its XDP program redirects only frames an endpoint rule matches and "
           "passes everything else, ARP and neighbour discovery included, to the kernel; set mode = \"all\" to "
           "take the whole queue";
  }

 private:
  Config cfg_;
};

Result<std::unique_ptr<PortSpec>> parse(ConfigSection& s) {
  Config c;
  c.interface = s.string("interface");
  if (s.has("interface") && (c.interface.empty() || c.interface.size() >= IFNAMSIZ))
    s.fail("interface", fmt::format("expected an interface name of 1 to {} characters", IFNAMSIZ - 1));
  c.queue_offset = static_cast<std::uint32_t>(s.integer("queue_offset", 0, RAWPIPE_XDP_MAX_QUEUES - 1, 0));
  c.mode = s.choice("mode", {"steer", "all"}, "steer") == "all" ? SteerMode::kAll : SteerMode::kSteer;
  std::string zc = s.choice("zero_copy", {"auto", "require", "never"}, "auto");
  c.zero_copy = zc == "require" ? ZeroCopy::kRequire : zc == "never" ? ZeroCopy::kNever : ZeroCopy::kAuto;
  std::string at = s.choice("attach", {"auto", "native", "generic"}, "auto");
  c.attach = at == "native" ? Attach::kNative : at == "generic" ? Attach::kGeneric : Attach::kAuto;
  c.need_wakeup = s.boolean("need_wakeup", true);
  c.busy_poll_budget = static_cast<std::uint32_t>(s.integer("busy_poll_budget", 0, kMaxBusyPollBudget, 0));
  c.busy_poll_us = static_cast<std::uint32_t>(s.integer("busy_poll_us", 1, kMaxBusyPollUs, 20));
  // A key that changes nothing would look as if it did.
  if (s.has("busy_poll_us") && c.busy_poll_budget == 0)
    s.fail("busy_poll_us", "has no effect while busy_poll_budget is 0 (busy polling off); set busy_poll_budget too");
  c.verify_checksums = s.choice("rx_checksum", {"verify", "off"}, "verify") == "verify";
  RAWPIPE_TRY(s.status());
  return std::unique_ptr<PortSpec>(std::make_unique<AfXdpSpec>(std::move(c)));
}

}  // namespace
}  // namespace af_xdp

namespace {
const KeyDoc kAfXdpDocs[] = {
    {"interface", "string", "an interface name (1 to 15 characters)", "required", "interface the XDP program attaches to"},
    {"queue_offset", "integer", "0 to 63", "0", "first device queue; rx queue i binds device queue queue_offset + i"},
    {"mode", "string", "\"steer\", \"all\"", "\"steer\"",
     "redirect only frames the endpoints' rules match (the rest go to the kernel), or every frame"},
    {"zero_copy", "string", "\"auto\", \"require\", \"never\"", "\"auto\"", "XDP_ZEROCOPY if the driver offers it, always, or copy mode"},
    {"attach", "string", "\"auto\", \"native\", \"generic\"", "\"auto\"", "XDP attach mode: driver (native) or skb (generic)"},
    {"need_wakeup", "boolean", "", "true", "use XDP_USE_NEED_WAKEUP (a system call only when the kernel asks for one)"},
    {"busy_poll_budget", "integer", "0 to 65535", "0",
     "preferred busy polling (SO_PREFER_BUSY_POLL): frames per NAPI poll that an empty receive runs on the lcore; 0: "
     "off (the interface's softirq fills the ring)"},
    {"busy_poll_us", "integer", "1 to 1000000", "20", "SO_BUSY_POLL: microseconds each busy poll may spin (needs busy_poll_budget)"},
    {"rx_checksum", "string", "\"verify\", \"off\"", "\"verify\"", "verify IPv4/UDP checksums in software on receive"},
};
}  // namespace
const KeyTable kAfXdpKeys{"af_xdp", "[[ports]] pmd = \"af_xdp\"", "AF_XDP sockets with an XDP steering program", kAfXdpDocs};

const PmdDriver kAfXdpDriver = {
    "af_xdp",
    "AF_XDP sockets on a Linux interface; an XDP program steers the endpoints' traffic to them and passes the rest "
    "to the kernel",
    &af_xdp::parse, &kAfXdpKeys,
    // libxdp's default ring size, and what DPDK's net_af_xdp posts at setup: the same tolerance for
    // a late lcore as the peer users compare with (docs/operations.md, fill-ring losses).
    XSK_RING_CONS__DEFAULT_NUM_DESCS};

}  // namespace rawpipe
