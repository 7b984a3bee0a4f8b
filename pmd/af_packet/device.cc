// AF_PACKET poll-mode driver: config keys, sockets, rings, fanout, statistics.
#include <arpa/inet.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <vector>

#include "pipeline/config/section.hh"
#include "pmd/af_packet/af_packet.hh"
#include "pmd/drivers.hh"
#include "pmd/host/link_stats.hh"
#include "pmd/host/multicast.hh"

namespace rawpipe {
namespace af_packet {
namespace {

constexpr std::uint32_t kFrameSize = 2048;  // ring accounting only: V3 packs frames by real size
constexpr std::uint32_t kMinBlocks = 32;

struct Spec final : PortSpec {
  std::string interface;
  bool promiscuous = false;
  // Blocks retire when full or after block_timeout_ms, so at low rates each block holds about one
  // timeout's worth of frames: many smaller blocks ride out a stalled consumer better than a few
  // big ones.
  std::uint32_t block_size = 256u << 10;
  std::uint32_t block_count = 0;  // 0: enough for rx_ring_size full-size frames, at least kMinBlocks
  std::uint32_t block_timeout_ms = 1;
  std::uint16_t fanout_type = PACKET_FANOUT_HASH;
  std::string fanout_name = "hash";
  bool qdisc_bypass = false;
  int tpacket_version = 3;

  Result<std::unique_ptr<Port>> open(const PortEnv& env) const override;
  // Every AF_PACKET socket gets a copy of every frame: a second pipeline on the interface would
  // receive (and answer, echo, forward) the same traffic again.
  ClaimedQueues claimed_queues() const override { return {interface, 0}; }
};

std::string errno_text(int err) { return std::strerror(err); }

Status socket_error(std::string_view what, const std::string& ifname, int err) {
  if (err == EPERM || err == EACCES)
    return Status::errorf("af_packet '{}': {} failed: {}; AF_PACKET needs CAP_NET_RAW: run as root, grant "
                          "cap_net_raw to the binary, or use pmd = \"socket\" (unprivileged)",
                          ifname, what, errno_text(err));
  return Status::errorf("af_packet '{}': {} failed: {}", ifname, what, errno_text(err));
}

class AfPacketPort final : public Port {
 public:
  AfPacketPort(const Spec& spec, const PortEnv& env, int ifindex)
      : spec_(spec), env_(env), ifindex_(ifindex), mtu_(link().mtu) {
    // The interface's own drop counters, from this (the port's) namespace; none if netlink fails.
    if (auto d = host::LinkDrops::open(ifindex)) link_drops_ = std::move(d).value();
  }
  ~AfPacketPort() override { close_all(); }

  Status open_queues();

  std::string_view pmd_name() const noexcept override { return "af_packet"; }
  std::string path_report() const override;
  PortCaps caps() const override;
  LinkInfo link() const override;
  Status start() override;
  void stop() override;
  RxQueueHandle rx_queue(std::uint16_t q) override {
    return {spec_.tpacket_version == 2 ? &rx_burst_v2 : &rx_burst, &rxq_[q]};
  }
  TxQueueHandle tx_queue(std::uint16_t q) override { return {&tx_burst, &txq_[q]}; }
  // The ring's socket: readable once a frame (TPACKET_V2) or a block (TPACKET_V3, at the latest
  // after block_timeout_ms) is the user's.
  int rx_wait_fd(std::uint16_t q) const override { return q < rxq_.size() ? rxq_[q].fd : -1; }
  PortStats stats() const override;
  // Classify filters in software; the rules' multicast groups are joined on the interface so the
  // kernel reports them (IGMP/MLD) and the NIC's filter admits them.
  Status update_steering(const SteeringRules& rules) override {
    return groups_.update(ifindex_, spec_.interface, rules).context(fmt::format("af_packet port '{}'", env_.name));
  }

 private:
  Status bind_rx(RxQueue& q, std::uint16_t protocol);
  void close_all();

  Spec spec_;
  PortEnv env_;
  int ifindex_;
  std::uint32_t mtu_;
  std::vector<RxQueue> rxq_;
  std::vector<TxQueue> txq_;
  bool started_ = false;
  bool fanout_joined_ = false;
  int fanout_id_ = -1;

  // PACKET_STATISTICS resets the kernel's counters on every read, so they accumulate here.
  mutable std::mutex stats_mu_;
  mutable std::vector<tpacket_stats_v3> kernel_totals_;
  host::LinkDrops link_drops_;
  host::GroupMemberships groups_;
};

Status AfPacketPort::open_queues() {
  const std::string& ifname = spec_.interface;
  std::uint32_t block_count = spec_.block_count;
  if (block_count == 0) {
    std::uint64_t bytes = std::uint64_t(env_.rx_ring_size) * kFrameSize;
    block_count = static_cast<std::uint32_t>(std::max<std::uint64_t>(kMinBlocks, (bytes + spec_.block_size - 1) / spec_.block_size));
  }
  rxq_.resize(env_.rx_queues);
  kernel_totals_.resize(env_.rx_queues);
  for (std::uint16_t i = 0; i < env_.rx_queues; ++i) {
    RxQueue& q = rxq_[i];
    q.pool = env_.pool;
    q.port = env_.port_id;
    q.queue = i;
    // Protocol 0: the socket receives nothing until start() binds it to ETH_P_ALL.
    q.fd = socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, 0);
    if (q.fd < 0) return socket_error("socket(AF_PACKET)", ifname, errno);
    int v = spec_.tpacket_version == 2 ? TPACKET_V2 : TPACKET_V3;
    if (setsockopt(q.fd, SOL_PACKET, PACKET_VERSION, &v, sizeof v) < 0)
      return socket_error(spec_.tpacket_version == 2 ? "PACKET_VERSION TPACKET_V2" : "PACKET_VERSION TPACKET_V3",
                          ifname, errno);
    // Our own transmit must not come back as receive.
    int one = 1;
    if (setsockopt(q.fd, SOL_PACKET, PACKET_IGNORE_OUTGOING, &one, sizeof one) < 0)
      return socket_error("PACKET_IGNORE_OUTGOING (Linux 4.20 or later)", ifname, errno);
    if (spec_.tpacket_version == 2) {
      // Slots must hold the header, the sockaddr_ll and a whole frame of the interface's MTU.
      const std::uint32_t frame_size = std::max<std::uint32_t>(
          kFrameSize, static_cast<std::uint32_t>(std::bit_ceil(std::uint64_t(mtu_) + 14 + 8 + 128)));
      const std::uint32_t block_size = std::max<std::uint32_t>(frame_size, 4096) * 16;
      const std::uint32_t per_block = block_size / frame_size;
      const std::uint32_t blocks = (std::max<std::uint32_t>(env_.rx_ring_size, per_block) + per_block - 1) / per_block;
      tpacket_req req{};
      req.tp_block_size = block_size;
      req.tp_block_nr = blocks;
      req.tp_frame_size = frame_size;
      req.tp_frame_nr = blocks * per_block;
      if (setsockopt(q.fd, SOL_PACKET, PACKET_RX_RING, &req, sizeof req) < 0)
        return socket_error(fmt::format("PACKET_RX_RING ({} frames of {} bytes)", req.tp_frame_nr, frame_size),
                            ifname, errno);
      q.block_size = block_size;
      q.block_count = blocks;
      q.frame_size = frame_size;
      q.frames_per_block = per_block;
      q.frame_count = req.tp_frame_nr;
    } else {
      tpacket_req3 req{};
      req.tp_block_size = spec_.block_size;
      req.tp_block_nr = block_count;
      req.tp_frame_size = kFrameSize;
      req.tp_frame_nr = static_cast<unsigned>((std::uint64_t(spec_.block_size) / kFrameSize) * block_count);
      req.tp_retire_blk_tov = spec_.block_timeout_ms;
      req.tp_feature_req_word = TP_FT_REQ_FILL_RXHASH;
      if (setsockopt(q.fd, SOL_PACKET, PACKET_RX_RING, &req, sizeof req) < 0)
        return socket_error(fmt::format("PACKET_RX_RING ({} blocks of {} bytes)", block_count, spec_.block_size),
                            ifname, errno);
      q.block_size = spec_.block_size;
      q.block_count = block_count;
    }
    q.ring_bytes = std::size_t(q.block_size) * q.block_count;
    void* ring = mmap(nullptr, q.ring_bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, q.fd, 0);
    if (ring == MAP_FAILED) {
      q.ring_bytes = 0;
      return socket_error("mmap of the receive ring", ifname, errno);
    }
    q.ring = static_cast<std::uint8_t*>(ring);
    RAWPIPE_TRY(bind_rx(q, 0));
  }
  txq_.resize(env_.tx_queues);
  for (TxQueue& q : txq_) {
    q.ifindex = ifindex_;
    q.fd = socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, 0);
    if (q.fd < 0) return socket_error("socket(AF_PACKET) for transmit", ifname, errno);
    sockaddr_ll sll{};
    sll.sll_family = AF_PACKET;
    sll.sll_ifindex = ifindex_;
    sll.sll_protocol = 0;  // transmit only; the kernel reads the EtherType from each frame
    if (bind(q.fd, reinterpret_cast<sockaddr*>(&sll), sizeof sll) < 0)
      return socket_error("bind of the transmit socket", ifname, errno);
    if (spec_.qdisc_bypass) {
      int one = 1;
      if (setsockopt(q.fd, SOL_PACKET, PACKET_QDISC_BYPASS, &one, sizeof one) < 0)
        return socket_error("PACKET_QDISC_BYPASS", ifname, errno);
    }
  }
  return Status::ok();
}

Status AfPacketPort::bind_rx(RxQueue& q, std::uint16_t protocol) {
  sockaddr_ll sll{};
  sll.sll_family = AF_PACKET;
  sll.sll_protocol = htons(protocol);
  sll.sll_ifindex = ifindex_;
  if (bind(q.fd, reinterpret_cast<sockaddr*>(&sll), sizeof sll) < 0)
    return socket_error("bind of the receive socket", spec_.interface, errno);
  return Status::ok();
}

Status AfPacketPort::start() {
  if (started_) return Status::ok();
  for (RxQueue& q : rxq_) RAWPIPE_TRY(bind_rx(q, ETH_P_ALL));
  if (rxq_.size() > 1 && !fanout_joined_) {
    // The kernel picks an unused group id for the first socket; the others join that id, so two
    // rawpipe processes on one interface never share a group by accident.
    int arg = (PACKET_FANOUT_FLAG_UNIQUEID | spec_.fanout_type) << 16;
    if (setsockopt(rxq_[0].fd, SOL_PACKET, PACKET_FANOUT, &arg, sizeof arg) < 0)
      return socket_error("PACKET_FANOUT (unique group)", spec_.interface, errno);
    int got = 0;
    socklen_t len = sizeof got;
    if (getsockopt(rxq_[0].fd, SOL_PACKET, PACKET_FANOUT, &got, &len) < 0)
      return socket_error("reading the PACKET_FANOUT group id", spec_.interface, errno);
    fanout_id_ = got & 0xffff;
    for (std::size_t i = 1; i < rxq_.size(); ++i) {
      int join = fanout_id_ | (spec_.fanout_type << 16);
      if (setsockopt(rxq_[i].fd, SOL_PACKET, PACKET_FANOUT, &join, sizeof join) < 0)
        return socket_error(fmt::format("PACKET_FANOUT join of group {}", fanout_id_), spec_.interface, errno);
    }
    fanout_joined_ = true;
  }
  if (spec_.promiscuous) {
    // Membership is per socket and dropped by the kernel when the socket closes.
    packet_mreq mr{};
    mr.mr_ifindex = ifindex_;
    mr.mr_type = PACKET_MR_PROMISC;
    if (setsockopt(rxq_[0].fd, SOL_PACKET, PACKET_ADD_MEMBERSHIP, &mr, sizeof mr) < 0)
      return socket_error("PACKET_ADD_MEMBERSHIP promiscuous", spec_.interface, errno);
  }
  started_ = true;
  return Status::ok();
}

void AfPacketPort::stop() {
  groups_.leave_all();  // the kernel sends the leaves now, not when the port is destroyed
  if (!started_) return;
  // Protocol 0 stops delivery. The ring holds kernel memory, not pool buffers, and rx_burst
  // returns its spare buffers before it returns, so no pool buffer is held here.
  for (RxQueue& q : rxq_) (void)bind_rx(q, 0);
  if (spec_.promiscuous && !rxq_.empty()) {
    packet_mreq mr{};
    mr.mr_ifindex = ifindex_;
    mr.mr_type = PACKET_MR_PROMISC;
    (void)setsockopt(rxq_[0].fd, SOL_PACKET, PACKET_DROP_MEMBERSHIP, &mr, sizeof mr);
  }
  started_ = false;
}

void AfPacketPort::close_all() {
  for (RxQueue& q : rxq_) {
    if (q.ring) munmap(q.ring, q.ring_bytes);
    if (q.fd >= 0) close(q.fd);
    q.ring = nullptr;
    q.fd = -1;
  }
  for (TxQueue& q : txq_) {
    if (q.fd >= 0) close(q.fd);
    q.fd = -1;
  }
}

std::string AfPacketPort::path_report() const {
  std::string out;
  for (const RxQueue& q : rxq_) {
    if (spec_.tpacket_version == 2) {
      out += fmt::format(
          "af_packet {} rxq{}: TPACKET_V2 ring of {} frame slots of {} bytes, each handed over as soon as it is "
          "written, one copy per frame into pool buffers (the ring is kernel memory; af_xdp is the zero-copy "
          "rung){}{}\n",
          spec_.interface, q.queue, q.frame_count, q.frame_size,
          rxq_.size() > 1 ? fmt::format(", fanout {} group {}", spec_.fanout_name, fanout_id_) : std::string(),
          spec_.promiscuous ? ", promiscuous" : "");
      continue;
    }
    out += fmt::format(
        "af_packet {} rxq{}: TPACKET_V3 ring of {} x {} KiB blocks, block timeout {} ms, one copy per frame into "
        "pool buffers (the ring is kernel memory recycled per block, so frames cannot be lent out; af_xdp is the "
        "zero-copy rung; a frame can wait up to the block timeout: tpacket_version = 2 for latency){}{}\n",
        spec_.interface, q.queue, q.block_count, q.block_size / 1024, spec_.block_timeout_ms,
        rxq_.size() > 1 ? fmt::format(", fanout {} group {}", spec_.fanout_name, fanout_id_) : std::string(),
        spec_.promiscuous ? ", promiscuous" : "");
  }
  for (const std::string& g : groups_.joined())
    out += fmt::format("af_packet {}: multicast group {} joined on the interface (IGMP/MLD reports sent)\n",
                       spec_.interface, g);
  for (std::size_t i = 0; i < txq_.size(); ++i)
    out += fmt::format("af_packet {} txq{}: sendmmsg, one system call per burst, the kernel copies each frame{}\n",
                       spec_.interface, i, spec_.qdisc_bypass ? ", qdisc bypassed" : "");
  return out;  // one line per queue, each ending in a newline
}

PortCaps AfPacketPort::caps() const {
  PortCaps c;
  c.rss = rxq_.size() > 1;
  c.kernel_pass = true;  // AF_PACKET receives a copy; the kernel stack still gets every frame
  c.timestamps = true;
  c.tx = true;
  c.max_rx_queues = 64;
  c.max_tx_queues = 64;
  return c;
}

LinkInfo AfPacketPort::link() const {
  LinkInfo info;
  int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return info;
  ifreq ifr{};
  std::snprintf(ifr.ifr_name, sizeof ifr.ifr_name, "%s", spec_.interface.c_str());
  if (ioctl(fd, SIOCGIFFLAGS, &ifr) == 0) info.up = (ifr.ifr_flags & IFF_RUNNING) != 0;
  if (ioctl(fd, SIOCGIFMTU, &ifr) == 0) info.mtu = static_cast<std::uint32_t>(ifr.ifr_mtu);
  if (ioctl(fd, SIOCGIFHWADDR, &ifr) == 0) std::memcpy(info.mac.data(), ifr.ifr_hwaddr.sa_data, 6);
  close(fd);
  return info;
}

PortStats AfPacketPort::stats() const {
  PortStats s;
  std::uint64_t kernel_packets = 0, kernel_drops = 0, freezes = 0;
  std::uint64_t oversize = 0, truncated = 0, csum = 0, vlan = 0, would_block = 0;
  bool unreadable = false;
  {
    std::lock_guard lock(stats_mu_);
    for (std::size_t i = 0; i < rxq_.size(); ++i) {
      tpacket_stats_v3 st{};
      socklen_t len = sizeof st;
      if (getsockopt(rxq_[i].fd, SOL_PACKET, PACKET_STATISTICS, &st, &len) == 0) {
        kernel_totals_[i].tp_packets += st.tp_packets;
        kernel_totals_[i].tp_drops += st.tp_drops;
        kernel_totals_[i].tp_freeze_q_cnt += st.tp_freeze_q_cnt;
      } else {
        unreadable = true;
      }
      kernel_packets += kernel_totals_[i].tp_packets;
      kernel_drops += kernel_totals_[i].tp_drops;
      freezes += kernel_totals_[i].tp_freeze_q_cnt;
      s.extended[fmt::format("rxq{}_kernel_drops", i)] = kernel_totals_[i].tp_drops;
    }
  }
  for (const RxQueue& q : rxq_) {
    QueueCounters c = load_counters(q.counters);
    std::uint64_t o = count_load(q.oversize), t = count_load(q.truncated);
    c.rx_errors = o + t;
    oversize += o;
    truncated += t;
    csum += count_load(q.csum_completed);
    vlan += count_load(q.vlan_reinserted);
    s.rx_queues.push_back(c);
  }
  for (const TxQueue& q : txq_) {
    QueueCounters c = load_counters(q.counters);
    would_block += count_load(q.would_block);
    s.tx_queues.push_back(c);
  }
  // tp_packets counts every frame the kernel offered to the ring, tp_drops those that found it full.
  s.extended["kernel_packets"] = kernel_packets;
  s.extended["kernel_drops"] = kernel_drops;
  s.extended["kernel_freeze_queue"] = freezes;
  s.extended["rx_oversize"] = oversize;
  s.extended["rx_truncated"] = truncated;
  s.extended["rx_csum_completed"] = csum;
  s.extended["rx_vlan_reinserted"] = vlan;
  s.extended["tx_would_block"] = would_block;
  link_drops_.add_to(s.extended);
  // tp_drops counts frames; tp_freeze_q_cnt counts the times a V3 ring froze (events, not frames),
  // so only the first is a loss. A socket whose statistics cannot be read makes the count unknown.
  s.losses["kernel_ring_full"] = unreadable ? std::nullopt : std::optional<std::uint64_t>(kernel_drops);
  link_drops_.add_losses_to(s.losses);
  return s;
}

Result<std::unique_ptr<Port>> Spec::open(const PortEnv& env) const {
  unsigned ifindex = if_nametoindex(interface.c_str());
  if (ifindex == 0)
    return Status::errorf("af_packet port '{}': no interface named '{}' in this network namespace ({}); check "
                          "`ip link`", env.name, interface, errno_text(errno));
  if (env.pool == nullptr) return Status::errorf("af_packet port '{}': no receive pool", env.name);
  auto port = std::make_unique<AfPacketPort>(*this, env, static_cast<int>(ifindex));
  Status st = port->open_queues();
  if (!st) return st.context(fmt::format("port '{}'", env.name));
  return std::unique_ptr<Port>(std::move(port));
}

Result<std::unique_ptr<PortSpec>> parse(ConfigSection& section) {
  auto spec = std::make_unique<Spec>();
  spec->interface = section.string("interface");
  spec->promiscuous = section.boolean("promiscuous", false);
  std::int64_t block_size = section.integer("block_size", 4096, 1 << 26, 256 << 10);
  if (!is_power_of_two(static_cast<std::uint64_t>(block_size)))
    section.fail("block_size", fmt::format("expected a power of two (the kernel needs page-multiple blocks), got {}",
                                           block_size));
  spec->block_size = static_cast<std::uint32_t>(block_size);
  spec->block_count = static_cast<std::uint32_t>(section.integer("block_count", 0, 1 << 16, 0));
  spec->block_timeout_ms = static_cast<std::uint32_t>(section.integer("block_timeout_ms", 0, 10000, 1));
  spec->fanout_name = section.choice("fanout", {"hash", "lb", "cpu"}, "hash");
  spec->fanout_type = spec->fanout_name == "hash" ? PACKET_FANOUT_HASH
                      : spec->fanout_name == "lb" ? PACKET_FANOUT_LB
                                                  : PACKET_FANOUT_CPU;
  spec->qdisc_bypass = section.boolean("qdisc_bypass", false);
  spec->tpacket_version = static_cast<int>(section.integer("tpacket_version", 2, 3, 3));
  if (spec->tpacket_version == 2) {
    for (std::string_view k : {"block_size", "block_count", "block_timeout_ms"})
      if (section.has(k)) section.fail(k, "only used with tpacket_version = 3 (V2 rings have fixed frame slots)");
  }
  RAWPIPE_TRY(section.status());
  return std::unique_ptr<PortSpec>(std::move(spec));
}

}  // namespace
}  // namespace af_packet

namespace {
const KeyDoc kAfPacketDocs[] = {
    {"interface", "string", "an interface name", "required", "interface the socket binds to"},
    {"promiscuous", "boolean", "", "false", "put the interface in promiscuous mode while the port is open"},
    {"block_size", "integer", "power of two, 4096 to 67108864", "262144", "bytes per ring block"},
    {"block_count", "integer", "0 to 65536", "0", "ring blocks per queue; 0: from rx_ring_size"},
    {"block_timeout_ms", "integer", "0 to 10000", "1",
     "milliseconds before the kernel retires a partly filled block (TPACKET_V3), which is how long a frame can wait at "
     "low rates; 0: the kernel picks it from the link speed"},
    {"fanout", "string", "\"hash\", \"lb\", \"cpu\"", "\"hash\"", "how the kernel spreads frames over several rx queues"},
    {"qdisc_bypass", "boolean", "", "false", "transmit straight to the driver, skipping the qdisc layer"},
    {"tpacket_version", "integer", "2 to 3", "3",
     "receive ring version: 3, frames packed in blocks (one status per block, the higher receive rate, but a frame "
     "waits for its block: see block_timeout_ms); 2, each frame handed over at once (the lower latency, as DPDK's "
     "net_af_packet)"},
};
}  // namespace
const KeyTable kAfPacketKeys{"af_packet", "[[ports]] pmd = \"af_packet\"", "Linux AF_PACKET sockets", kAfPacketDocs};

const PmdDriver kAfPacketDriver{
    .name = "af_packet",
    .summary = "Linux AF_PACKET socket (TPACKET_V3 receive ring, sendmmsg transmit, fanout for several queues)",
    .parse = &af_packet::parse,
    .keys = &kAfPacketKeys,
};

}  // namespace rawpipe
