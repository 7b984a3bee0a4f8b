#include "pmd/mlx5/model/device.hh"

#include <arpa/inet.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cstdlib>
#include <cstring>

#include "pmd/mlx5/hw.hh"

namespace rawpipe::mlx5::model {
namespace {

struct AlignedFree {
  void operator()(void* p) const noexcept { std::free(p); }
};
using Mem = std::unique_ptr<std::uint8_t[], AlignedFree>;

Mem alloc_zeroed(std::size_t bytes) {
  bytes = (bytes + 4095) & ~std::size_t(4095);
  auto* p = static_cast<std::uint8_t*>(std::aligned_alloc(4096, bytes));
  if (!p) std::abort();  // test/model infrastructure: out of memory is fatal
  std::memset(p, 0, bytes);
  return Mem(p);
}

std::uint32_t load_record(std::uint32_t* rec) noexcept {
  // A-DB: pairs with the driver's release store of the record (R-DB in doorbell.hh).
  return be32(std::atomic_ref<std::uint32_t>(*rec).load(std::memory_order_acquire));
}

// ---- a small frame parser: what the NIC's parser extracts for steering, RSS and checksums ----
struct Frame {
  const std::uint8_t* p = nullptr;
  std::size_t len = 0;
  const std::uint8_t* dmac = nullptr;
  const std::uint8_t* smac = nullptr;
  std::uint16_t ethertype = 0;
  bool has_vlan = false;
  std::uint16_t vlan_tci = 0;
  int l3 = 0;                      // 4, 6 or 0
  std::size_t l3_off = 0, l3_len = 0, l4_off = 0, l4_len = 0;
  std::uint8_t proto = 0;
  bool frag = false;
  bool l3_csum_ok = false;
  const std::uint8_t* src = nullptr;
  const std::uint8_t* dst = nullptr;
  std::uint16_t sport = 0, dport = 0;  // host order
  bool has_ports = false;
};

std::uint16_t rd16(const std::uint8_t* p) { return static_cast<std::uint16_t>(p[0] << 8 | p[1]); }

std::uint32_t sum16(const std::uint8_t* p, std::size_t n, std::uint32_t s = 0) {
  for (std::size_t i = 0; i + 1 < n; i += 2) s += rd16(p + i);
  if (n & 1) s += static_cast<std::uint32_t>(p[n - 1]) << 8;
  return s;
}
std::uint16_t fold(std::uint32_t s) {
  while (s >> 16) s = (s & 0xffff) + (s >> 16);
  return static_cast<std::uint16_t>(s);
}

Frame parse(std::span<const std::uint8_t> f) {
  Frame r;
  r.p = f.data();
  r.len = f.size();
  if (f.size() < 14) return r;
  r.dmac = f.data();
  r.smac = f.data() + 6;
  std::size_t off = 12;
  r.ethertype = rd16(f.data() + off);
  off += 2;
  if ((r.ethertype == 0x8100 || r.ethertype == 0x88a8) && f.size() >= off + 4) {
    r.has_vlan = true;
    r.vlan_tci = rd16(f.data() + off);
    r.ethertype = rd16(f.data() + off + 2);
    off += 4;
  }
  const std::uint8_t* ip = f.data() + off;
  const std::size_t rest = f.size() - off;
  if (r.ethertype == 0x0800 && rest >= 20 && (ip[0] >> 4) == 4) {
    const std::size_t ihl = (ip[0] & 15u) * 4;
    const std::size_t total = rd16(ip + 2);
    if (ihl < 20 || ihl > rest || total < ihl || total > rest) return r;
    r.l3 = 4;
    r.l3_off = off;
    r.l3_len = total;
    r.proto = ip[9];
    r.frag = (rd16(ip + 6) & 0x3fff) != 0;
    r.l3_csum_ok = fold(sum16(ip, ihl)) == 0xffff;
    r.src = ip + 12;
    r.dst = ip + 16;
    r.l4_off = off + ihl;
    r.l4_len = total - ihl;
  } else if (r.ethertype == 0x86dd && rest >= 40 && (ip[0] >> 4) == 6) {
    const std::size_t plen = rd16(ip + 4);
    if (40 + plen > rest) return r;
    r.l3 = 6;
    r.l3_off = off;
    r.l3_len = 40 + plen;
    r.proto = ip[6];
    r.l3_csum_ok = true;
    r.src = ip + 8;
    r.dst = ip + 24;
    r.l4_off = off + 40;
    r.l4_len = plen;
  } else {
    return r;
  }
  if (!r.frag && (r.proto == 17 || r.proto == 6) && r.l4_len >= (r.proto == 17 ? 8u : 20u)) {
    r.has_ports = true;
    r.sport = rd16(r.p + r.l4_off);
    r.dport = rd16(r.p + r.l4_off + 2);
  }
  return r;
}

bool l4_csum_ok(const Frame& f) {
  if (!f.has_ports) return false;
  const std::uint8_t* l4 = f.p + f.l4_off;
  std::size_t len = f.l4_len;
  if (f.proto == 17) {
    if (f.l3 == 4 && rd16(l4 + 6) == 0) return true;  // no checksum
    len = rd16(l4 + 4);
    if (len < 8 || len > f.l4_len) return false;
  }
  std::uint32_t s = 0;
  const std::size_t alen = f.l3 == 4 ? 4 : 16;
  s = sum16(f.src, alen, s);
  s = sum16(f.dst, alen, s);
  s += f.proto;
  s += static_cast<std::uint32_t>(len);
  s = sum16(l4, len, s);
  return fold(s) == 0xffff;
}

std::uint32_t toeplitz(std::span<const std::uint8_t> key, const std::uint8_t* in, std::size_t n) {
  std::uint32_t result = 0;
  std::uint32_t window = static_cast<std::uint32_t>(key[0]) << 24 | key[1] << 16 | key[2] << 8 | key[3];
  std::size_t next = 4;
  for (std::size_t i = 0; i < n; ++i) {
    for (int b = 7; b >= 0; --b) {
      if (in[i] & (1u << b)) result ^= window;
      window <<= 1;
      const std::uint8_t kb = next < key.size() ? key[next] : 0;
      window |= (kb >> b) & 1u;
    }
    ++next;
  }
  return result;
}

template <typename T>
const T& spec_as(const std::uint8_t* p) {
  return *reinterpret_cast<const T*>(p);
}

bool masked_eq(const std::uint8_t* a, const std::uint8_t* val, const std::uint8_t* mask, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i)
    if ((a[i] & mask[i]) != (val[i] & mask[i])) return false;
  return true;
}

// Matches a frame against one ibv_flow_attr (the specs are ANDed). Fills the flow tag.
bool flow_matches(const std::vector<std::uint8_t>& attr_bytes, const Frame& f, std::uint32_t& tag) {
  const auto* attr = reinterpret_cast<const ibv_flow_attr*>(attr_bytes.data());
  const std::uint8_t* p = attr_bytes.data() + sizeof(ibv_flow_attr);
  const std::uint8_t* end = attr_bytes.data() + attr_bytes.size();
  if (!f.dmac) return false;
  std::uint32_t t = 0;
  for (unsigned i = 0; i < attr->num_of_specs; ++i) {
    if (p + 8 > end) return false;
    const auto type = *reinterpret_cast<const ibv_flow_spec_type*>(p);
    const std::uint16_t size = *reinterpret_cast<const std::uint16_t*>(p + 4);
    if (size == 0 || p + size > end) return false;
    switch (type) {
      case IBV_FLOW_SPEC_ETH: {
        const auto& s = spec_as<ibv_flow_spec_eth>(p);
        if (!masked_eq(f.dmac, s.val.dst_mac, s.mask.dst_mac, 6)) return false;
        if (!masked_eq(f.smac, s.val.src_mac, s.mask.src_mac, 6)) return false;
        if ((htons(f.ethertype) & s.mask.ether_type) != (s.val.ether_type & s.mask.ether_type)) return false;
        if (s.mask.vlan_tag) {
          if (!f.has_vlan) return false;
          if ((htons(f.vlan_tci) & s.mask.vlan_tag) != (s.val.vlan_tag & s.mask.vlan_tag)) return false;
        }
        break;
      }
      case IBV_FLOW_SPEC_IPV4:
      case IBV_FLOW_SPEC_IPV4_EXT: {
        if (f.l3 != 4) return false;
        const auto& s = spec_as<ibv_flow_spec_ipv4_ext>(p);
        if (!masked_eq(f.src, reinterpret_cast<const std::uint8_t*>(&s.val.src_ip),
                       reinterpret_cast<const std::uint8_t*>(&s.mask.src_ip), 4))
          return false;
        if (!masked_eq(f.dst, reinterpret_cast<const std::uint8_t*>(&s.val.dst_ip),
                       reinterpret_cast<const std::uint8_t*>(&s.mask.dst_ip), 4))
          return false;
        if (type == IBV_FLOW_SPEC_IPV4_EXT && (f.proto & s.mask.proto) != (s.val.proto & s.mask.proto)) return false;
        break;
      }
      case IBV_FLOW_SPEC_IPV6: {
        if (f.l3 != 6) return false;
        const auto& s = spec_as<ibv_flow_spec_ipv6>(p);
        if (!masked_eq(f.src, s.val.src_ip, s.mask.src_ip, 16)) return false;
        if (!masked_eq(f.dst, s.val.dst_ip, s.mask.dst_ip, 16)) return false;
        if ((f.proto & s.mask.next_hdr) != (s.val.next_hdr & s.mask.next_hdr)) return false;
        break;
      }
      case IBV_FLOW_SPEC_UDP:
      case IBV_FLOW_SPEC_TCP: {
        if (!f.has_ports || f.proto != (type == IBV_FLOW_SPEC_UDP ? 17 : 6)) return false;
        const auto& s = spec_as<ibv_flow_spec_tcp_udp>(p);
        if ((htons(f.dport) & s.mask.dst_port) != (s.val.dst_port & s.mask.dst_port)) return false;
        if ((htons(f.sport) & s.mask.src_port) != (s.val.src_port & s.mask.src_port)) return false;
        break;
      }
      case IBV_FLOW_SPEC_ACTION_TAG:
        t = spec_as<ibv_flow_spec_action_tag>(p).tag_id;
        break;
      default:
        return false;  // a spec this model does not implement never matches
    }
    p += size;
  }
  tag = t;
  return true;
}

}  // namespace

struct Device::Cq {
  Mem buf;
  std::uint32_t cnt = 0, log = 0;
  Mem dbrec_mem;
  std::uint32_t* dbrec = nullptr;
  std::uint32_t pi = 0;  // CQEs written (free-running; its low 24 bits are the hardware index)
  Cqe64* at(std::uint32_t i) const { return reinterpret_cast<Cqe64*>(buf.get() + std::size_t(i & (cnt - 1)) * kCqeSize); }
  std::uint8_t owner() const { return static_cast<std::uint8_t>((pi >> log) & 1u); }
};

struct Device::Rq {
  std::uint16_t id = 0;
  RqOptions o;
  Mem buf;
  std::uint32_t stride = 0;
  Mem dbrec_mem;
  std::uint32_t* dbrec = nullptr;
  std::uint32_t consumed = 0;   // WQEs consumed (free-running; compared in 16 bits)
  std::uint32_t pos = 0;        // striding: next stride in the current WQE
  Cq* cq = nullptr;
  bool error = false;
  bool ready = true;            // false between quiesce() and reset_rq()
  std::uint8_t fail_next = 0;
  std::uint32_t qpn = 0;
  std::array<std::uint64_t, 256> syndromes{};
  std::uint32_t posted() const { return static_cast<std::uint16_t>(load_record(dbrec) - consumed); }
};

struct Device::Sq {
  std::uint16_t id = 0;
  SqOptions o;
  Mem buf;
  Mem dbrec_mem;
  std::uint32_t* dbrec = nullptr;  // [0] RCV (unused), [1] SND
  Mem uar;
  std::uint32_t consumed = 0;
  Cq* cq = nullptr;
  std::uint32_t qpn = 0;
  bool error = false;
  bool ready = true;               // false between quiesce() and reset_sq()
  std::uint8_t fail_next = 0;
};

struct Device::Flow {
  std::uint16_t rq = 0;
  std::vector<std::uint8_t> attr;
  std::uint16_t priority = 0;
  std::uint64_t hash_fields = 0;   // of the hash QP the flow is attached to
  bool alive = true;
};

Device::Device() {
  sink_.ctx = this;
  sink_.mmio64 = on_mmio;
}

Device::~Device() { stop_thread(); }

std::uint32_t Device::reg_mr(void* addr, std::size_t len) {
  std::lock_guard lock(mu_);
  const std::uint32_t lkey = next_lkey_;
  next_lkey_ += 0x100;
  mrs_.push_back({static_cast<std::uint8_t*>(addr), len, lkey});
  return lkey;
}

void Device::dereg_mr(std::uint32_t lkey) {
  std::lock_guard lock(mu_);
  std::erase_if(mrs_, [lkey](const Mr& m) { return m.lkey == lkey; });
}

bool Device::mr_ok(std::uint32_t lkey, std::uint64_t addr, std::size_t len) const {
  for (const Mr& m : mrs_) {
    if (m.lkey != lkey) continue;
    const auto base = reinterpret_cast<std::uint64_t>(m.addr);
    return addr >= base && addr + len <= base + m.len;
  }
  return false;
}

namespace {
void init_cq(std::uint8_t* buf, std::uint32_t cnt) {
  for (std::uint32_t i = 0; i < cnt; ++i) buf[i * kCqeSize + 63] = kCqeInvalidOpOwn;  // as mlx5_alloc_cq_buf
}
}  // namespace

std::uint16_t Device::create_rq(const RqOptions& o, RqRing& rq_out, CqRing& cq_out) {
  std::lock_guard lock(mu_);
  auto cq = std::make_unique<Cq>();
  cq->cnt = o.cqe_cnt;
  cq->log = static_cast<std::uint32_t>(std::countr_zero(o.cqe_cnt));
  cq->buf = alloc_zeroed(std::size_t(o.cqe_cnt) * kCqeSize);
  init_cq(cq->buf.get(), o.cqe_cnt);
  cq->dbrec_mem = alloc_zeroed(64);
  cq->dbrec = reinterpret_cast<std::uint32_t*>(cq->dbrec_mem.get());
  auto rq = std::make_unique<Rq>();
  rq->id = static_cast<std::uint16_t>(rqs_.size());
  rq->o = o;
  rq->stride = o.striding ? sizeof(MprqWqe) : sizeof(WqeDataSeg);
  rq->buf = alloc_zeroed(std::max<std::size_t>(64, std::size_t(o.wqe_cnt) * rq->stride));
  rq->dbrec_mem = alloc_zeroed(64);
  rq->dbrec = reinterpret_cast<std::uint32_t*>(rq->dbrec_mem.get());
  rq->cq = cq.get();
  rq->qpn = 0x100 + rq->id;
  rq_out = RqRing{rq->buf.get(), o.wqe_cnt, rq->stride, rq->dbrec};
  cq_out = CqRing{cq->buf.get(), o.cqe_cnt, cq->dbrec};
  cqs_.push_back(std::move(cq));
  rqs_.push_back(std::move(rq));
  return static_cast<std::uint16_t>(rqs_.size() - 1);
}

std::uint16_t Device::create_sq(const SqOptions& o, SqRing& sq_out, CqRing& cq_out) {
  std::lock_guard lock(mu_);
  auto cq = std::make_unique<Cq>();
  cq->cnt = o.cqe_cnt;
  cq->log = static_cast<std::uint32_t>(std::countr_zero(o.cqe_cnt));
  cq->buf = alloc_zeroed(std::size_t(o.cqe_cnt) * kCqeSize);
  init_cq(cq->buf.get(), o.cqe_cnt);
  cq->dbrec_mem = alloc_zeroed(64);
  cq->dbrec = reinterpret_cast<std::uint32_t*>(cq->dbrec_mem.get());
  auto sq = std::make_unique<Sq>();
  sq->id = static_cast<std::uint16_t>(sqs_.size());
  sq->o = o;
  sq->buf = alloc_zeroed(std::size_t(o.wqe_cnt) * kWqeBb);
  sq->dbrec_mem = alloc_zeroed(64);
  sq->dbrec = reinterpret_cast<std::uint32_t*>(sq->dbrec_mem.get());
  sq->uar = alloc_zeroed(4096);
  sq->cq = cq.get();
  sq->qpn = 0x200 + sq->id;
  sq_out = SqRing{sq->buf.get(), o.wqe_cnt, &sq->dbrec[kSndDbr], sq->uar.get(), 256, sq->qpn};
  cq_out = CqRing{cq->buf.get(), o.cqe_cnt, cq->dbrec};
  cqs_.push_back(std::move(cq));
  sqs_.push_back(std::move(sq));
  return static_cast<std::uint16_t>(sqs_.size() - 1);
}

void Device::set_rss(std::span<const std::uint8_t> key, std::span<const std::uint16_t> rqs) {
  std::lock_guard lock(mu_);
  rss_key_.assign(key.begin(), key.end());
  const std::size_t size = std::bit_ceil(std::max<std::size_t>(rqs.size(), 1));
  rss_table_.resize(size);
  for (std::size_t i = 0; i < size; ++i) rss_table_[i] = rqs[i % rqs.size()];
}

int Device::create_flow(std::uint16_t rq, const ibv_flow_attr* attr, std::uint64_t hash_fields) {
  std::lock_guard lock(mu_);
  auto f = std::make_unique<Flow>();
  f->rq = rq;
  f->hash_fields = hash_fields;
  const auto* p = reinterpret_cast<const std::uint8_t*>(attr);
  f->attr.assign(p, p + attr->size);
  f->priority = attr->priority;
  flows_.push_back(std::move(f));
  return static_cast<int>(flows_.size() - 1);
}

void Device::destroy_flow(int handle) {
  std::lock_guard lock(mu_);
  if (handle >= 0 && static_cast<std::size_t>(handle) < flows_.size()) flows_[handle]->alive = false;
}

void Device::quiesce() {
  std::lock_guard lock(mu_);
  for (auto& rq : rqs_) rq->ready = false;
  for (auto& sq : sqs_) sq->ready = false;
}

std::vector<std::uint64_t> Device::posted_buffers(std::uint16_t id) const {
  std::lock_guard lock(mu_);
  const Rq& rq = *rqs_.at(id);
  std::vector<std::uint64_t> out;
  if (!rq.ready || rq.error || rq.o.striding) return out;
  for (std::uint32_t n = 0, left = std::min(rq.posted(), rq.o.wqe_cnt); n < left; ++n) {
    const std::uint32_t slot = (rq.consumed + n) & (rq.o.wqe_cnt - 1);
    out.push_back(be64(reinterpret_cast<const WqeDataSeg*>(rq.buf.get() + std::size_t(slot) * rq.stride)->addr));
  }
  return out;
}

void Device::stop_rq(std::uint16_t id) {
  std::lock_guard lock(mu_);
  rqs_.at(id)->ready = false;
}

void Device::stop_sq(std::uint16_t id) {
  std::lock_guard lock(mu_);
  sqs_.at(id)->ready = false;
}

bool Device::reset_rq(std::uint16_t id) {
  std::lock_guard lock(mu_);
  Rq& rq = *rqs_.at(id);
  rq.error = false;
  rq.ready = true;
  rq.consumed = 0;
  rq.pos = 0;
  rq.fail_next = 0;
  // The reset queue has nothing posted until the driver publishes its WQEs again.
  std::atomic_ref<std::uint32_t>(*rq.dbrec).store(0, std::memory_order_relaxed);
  return true;
}

bool Device::reset_sq(std::uint16_t id) {
  std::lock_guard lock(mu_);
  Sq& sq = *sqs_.at(id);
  sq.error = false;
  sq.ready = true;
  sq.consumed = 0;
  sq.fail_next = 0;
  std::atomic_ref<std::uint32_t>(sq.dbrec[kSndDbr]).store(0, std::memory_order_relaxed);
  return true;
}

void Device::fail_next_rx(std::uint16_t rq, std::uint8_t syndrome) {
  std::lock_guard lock(mu_);
  rqs_.at(rq)->fail_next = syndrome;
}

void Device::fail_every_rx(std::uint32_t every, std::uint8_t syndrome) {
  std::lock_guard lock(mu_);
  rx_fail_every_ = every;
  rx_fail_count_ = 0;
  rx_fail_syndrome_ = syndrome;
}

void Device::fail_next_tx(std::uint16_t sq, std::uint8_t syndrome) {
  std::lock_guard lock(mu_);
  sqs_.at(sq)->fail_next = syndrome;
}

std::uint32_t Device::cq_room(const Cq& cq) const {
  const std::uint32_t ci = load_record(cq.dbrec) & kCqCiMask;
  const std::uint32_t used = (cq.pi - ci) & kCqCiMask;
  return used >= cq.cnt ? 0 : cq.cnt - used;
}

namespace {
// R-CQE: every field is written before op_own; the release pairs with the driver's acquire (A-CQE).
void publish_cqe(Cqe64* c, std::uint8_t op_own) {
  std::atomic_ref<std::uint8_t>(c->op_own).store(op_own, std::memory_order_release);
}
void clear_body(Cqe64* c) { std::memset(c, 0, offsetof(Cqe64, op_own)); }
}  // namespace

void Device::write_error_cqe(Cq& cq, std::uint8_t opcode, std::uint8_t syndrome, std::uint16_t wqe_counter,
                             std::uint32_t qpn, std::uint32_t byte_cnt) {
  Cqe64* c = cq.at(cq.pi);
  clear_body(c);
  auto* e = reinterpret_cast<ErrCqe*>(c);
  e->byte_cnt = be32(byte_cnt);
  e->syndrome = syndrome;
  e->s_wqe_opcode_qpn = be32(qpn & 0xffffff);
  e->wqe_counter = be16(wqe_counter);
  publish_cqe(c, static_cast<std::uint8_t>(opcode << 4 | cq.owner()));
  ++cq.pi;
}

void Device::error_rq(Rq& rq, std::uint8_t syndrome) {
  Cq& cq = *rq.cq;
  if (cq_room(cq) == 0) {
    ++c_.rx_cq_full;
  } else {
    // Striding: the failed frame takes the rest of the WQE's strides, and the error CQE says how
    // many (mlx5_error_cqe.byte_cnt, which DPDK's mlx5_rx_burst_mprq skips by).
    const std::uint32_t strides = rq.o.striding ? (1u << rq.o.log_strides) - rq.pos : 0;
    write_error_cqe(cq, kCqeRespErr, syndrome, static_cast<std::uint16_t>(rq.consumed), rq.qpn,
                    strides << kMprqStrideShift);
    ++rq.syndromes[syndrome];
    ++c_.rx_error_cqes;
  }
  ++rq.consumed;
  rq.pos = 0;
  // Only LOCAL_QP_OP, LOCAL_PROT and WR_FLUSH leave the RQ in the error state (DPDK's
  // mlx5_rx_err_handle resets on exactly these); any other syndrome (LOCAL_LENGTH) spoils the one
  // WQE and the queue keeps receiving.
  if (syndrome != kSyndromeLocalQpOp && syndrome != kSyndromeLocalProt && syndrome != kSyndromeWrFlush) return;
  rq.error = true;
  // Every WQE still posted completes with a flush error.
  for (std::uint32_t n = rq.posted(); n > 0 && cq_room(cq) > 0; --n) {
    write_error_cqe(cq, kCqeRespErr, kSyndromeWrFlush, static_cast<std::uint16_t>(rq.consumed), rq.qpn);
    ++rq.syndromes[kSyndromeWrFlush];
    ++c_.rx_flush_cqes;
    ++rq.consumed;
  }
}

int Device::steer(std::span<const std::uint8_t> frame, std::uint32_t& tag, std::uint32_t& hash,
                  std::uint8_t& hash_type) const {
  const Frame f = parse(frame);
  int rq = -1;
  const Flow* best = nullptr;
  std::uint32_t best_tag = 0;
  for (const auto& fl : flows_) {
    if (!fl->alive) continue;
    std::uint32_t t = 0;
    if ((!best || fl->priority < best->priority) && flow_matches(fl->attr, f, t)) {
      best = fl.get();
      best_tag = t;
    }
  }
  if (!best) return -1;
  tag = best_tag;
  rq = best->rq;
  if (!rss_table_.empty()) {
    // A TIR hashes only the fields it was created with; a frame of another type (an IPv6 frame
    // on an IPv4 QP, a non-IP frame) is not hashed and takes the table's first entry.
    const std::uint64_t h = best->hash_fields;
    const bool l3 = (f.l3 == 4 && (h & (IBV_RX_HASH_SRC_IPV4 | IBV_RX_HASH_DST_IPV4))) ||
                    (f.l3 == 6 && (h & (IBV_RX_HASH_SRC_IPV6 | IBV_RX_HASH_DST_IPV6)));
    const bool ports = f.has_ports && ((f.proto == 17 && (h & (IBV_RX_HASH_SRC_PORT_UDP | IBV_RX_HASH_DST_PORT_UDP))) ||
                                       (f.proto == 6 && (h & (IBV_RX_HASH_SRC_PORT_TCP | IBV_RX_HASH_DST_PORT_TCP))));
    if (!l3) {
      hash = 0;
      hash_type = 0;
      return rss_table_[0];
    }
    std::uint8_t in[36];
    const std::size_t alen = f.l3 == 4 ? 4 : 16;
    std::memcpy(in, f.src, alen);
    std::memcpy(in + alen, f.dst, alen);
    std::size_t n = 2 * alen;
    if (ports) {
      in[n++] = static_cast<std::uint8_t>(f.sport >> 8);
      in[n++] = static_cast<std::uint8_t>(f.sport);
      in[n++] = static_cast<std::uint8_t>(f.dport >> 8);
      in[n++] = static_cast<std::uint8_t>(f.dport);
    }
    hash = toeplitz(rss_key_, in, n);
    hash_type = static_cast<std::uint8_t>((f.l3 == 4 ? 1 : 2) | (ports ? 4 : 0));
    rq = rss_table_[hash & (rss_table_.size() - 1)];
  }
  return rq;
}

namespace {
struct CqeFields {
  std::uint8_t hds = 0, l4type = 0;
  std::uint32_t tag = 0, hash = 0;
  std::uint8_t hash_type = 0;
};

CqeFields cqe_fields(std::span<const std::uint8_t> frame) {
  const Frame f = parse(frame);
  CqeFields c;
  c.hds = kCqeL2Ok;
  if (f.l3 == 4) {
    c.l4type |= kCqeL3Ipv4;
    if (f.l3_csum_ok) c.hds |= kCqeL3Ok;
  } else if (f.l3 == 6) {
    c.l4type |= kCqeL3Ipv6;
    c.hds |= kCqeL3Ok;
  }
  if (f.frag) c.l4type |= 0x80;
  if (f.has_ports) {
    c.l4type |= f.proto == 17 ? kCqeL4Udp : kCqeL4Tcp;
    if (l4_csum_ok(f)) c.hds |= kCqeL4Ok;
  }
  return c;
}

void fill_rx_cqe(Cqe64* c, const CqeFields& f, std::uint32_t byte_cnt, std::uint16_t wqe_counter, std::uint16_t wqe_id) {
  clear_body(c);
  c->wqe_id = be16(wqe_id);
  c->rx_hash_res = be32(f.hash);
  c->rx_hash_type = f.hash_type;
  c->hds_ip_ext = f.hds;
  c->l4_hdr_type_etc = f.l4type;
  c->byte_cnt = be32(byte_cnt);
  c->sop_drop_qpn = be32(f.tag & kFlowTagMask);
  c->wqe_counter = be16(wqe_counter);
}
}  // namespace

Device::Rx Device::receive(std::span<const std::uint8_t> frame, const FrameMeta& meta) {
  std::lock_guard lock(mu_);
  return receive_locked(frame, meta);
}

Device::Rx Device::receive_locked(std::span<const std::uint8_t> frame, const FrameMeta& meta) {
  CqeFields fields = cqe_fields(frame);
  fields.hash_type = static_cast<std::uint8_t>(meta.rx_hash_type);
  const int target = steer(frame, fields.tag, fields.hash, fields.hash_type);
  if (target < 0) {
    ++c_.rx_to_kernel;
    return Rx::kToKernel;
  }
  Rq& rq = *rqs_[static_cast<std::size_t>(target)];
  Cq& cq = *rq.cq;
  if (!rq.ready) {
    ++c_.rx_not_ready;
    return Rx::kQueueError;
  }
  if (rq.error) {
    ++c_.rx_queue_error;
    return Rx::kQueueError;
  }
  if (rq.posted() > rq.o.wqe_cnt) {
    // The record went backwards (or past the ring): nothing it announces can be trusted.
    ++c_.record_errors;
    ++c_.rx_no_wqe;
    return Rx::kNoWqe;
  }
  if (rq.posted() == 0) {
    ++c_.rx_no_wqe;
    return Rx::kNoWqe;
  }
  if (cq_room(cq) < (rq.o.striding ? 2u : 1u)) {  // striding: room for a filler and the packet
    ++c_.rx_cq_full;
    return Rx::kCqFull;
  }
  if (rx_fail_every_ && ++rx_fail_count_ == rx_fail_every_) {
    rx_fail_count_ = 0;
    rq.fail_next = rx_fail_syndrome_;
  }
  if (rq.fail_next) {
    const std::uint8_t s = rq.fail_next;
    rq.fail_next = 0;
    error_rq(rq, s);
    return Rx::kErrorCqe;
  }
  const std::uint32_t slot = rq.consumed & (rq.o.wqe_cnt - 1);
  if (!rq.o.striding) {
    const auto* d = reinterpret_cast<const WqeDataSeg*>(rq.buf.get() + std::size_t(slot) * rq.stride);
    const std::uint32_t cap = be32(d->byte_count), lkey = be32(d->lkey);
    const std::uint64_t addr = be64(d->addr);
    if (!mr_ok(lkey, addr, cap)) {
      error_rq(rq, kSyndromeLocalProt);
      return Rx::kErrorCqe;
    }
    if (frame.size() > cap) {
      error_rq(rq, kSyndromeLocalLength);
      return Rx::kErrorCqe;
    }
    std::memcpy(reinterpret_cast<void*>(addr), frame.data(), frame.size());
    Cqe64* c = cq.at(cq.pi);
    fill_rx_cqe(c, fields, static_cast<std::uint32_t>(frame.size()), static_cast<std::uint16_t>(rq.consumed), 0);
    publish_cqe(c, static_cast<std::uint8_t>(kCqeRespSend << 4 | cq.owner()));
    ++cq.pi;
    ++rq.consumed;
  } else {
    const std::uint32_t strides = 1u << rq.o.log_strides;
    const std::uint32_t ssize = 1u << rq.o.log_stride_size;
    const std::uint32_t need = static_cast<std::uint32_t>((frame.size() + ssize - 1) / ssize);
    if (need > strides || need == 0) {
      error_rq(rq, kSyndromeLocalLength);
      return Rx::kErrorCqe;
    }
    if (rq.pos + need > strides) {
      // The frame does not fit in this WQE's remaining strides: a filler CQE consumes them.
      Cqe64* c = cq.at(cq.pi);
      fill_rx_cqe(c, fields, kMprqFiller | ((strides - rq.pos) << kMprqStrideShift), static_cast<std::uint16_t>(rq.pos),
                  static_cast<std::uint16_t>(rq.consumed));
      publish_cqe(c, static_cast<std::uint8_t>(kCqeRespSend << 4 | cq.owner()));
      ++cq.pi;
      ++c_.fillers;
      ++rq.consumed;
      rq.pos = 0;
      if (rq.posted() == 0) {
        ++c_.rx_no_wqe;
        return Rx::kNoWqe;
      }
    }
    const std::uint32_t s2 = rq.consumed & (rq.o.wqe_cnt - 1);
    const auto* w = reinterpret_cast<const MprqWqe*>(rq.buf.get() + std::size_t(s2) * rq.stride);
    const std::uint32_t cap = be32(w->data.byte_count), lkey = be32(w->data.lkey);
    const std::uint64_t addr = be64(w->data.addr);
    if (!mr_ok(lkey, addr, cap) || cap < strides * ssize) {
      error_rq(rq, kSyndromeLocalProt);
      return Rx::kErrorCqe;
    }
    std::memcpy(reinterpret_cast<void*>(addr + std::uint64_t(rq.pos) * ssize), frame.data(), frame.size());
    Cqe64* c = cq.at(cq.pi);
    fill_rx_cqe(c, fields, static_cast<std::uint32_t>(frame.size()) | (need << kMprqStrideShift),
                static_cast<std::uint16_t>(rq.pos), static_cast<std::uint16_t>(rq.consumed));
    publish_cqe(c, static_cast<std::uint8_t>(kCqeRespSend << 4 | cq.owner()));
    ++cq.pi;
    rq.pos += need;
    if (rq.pos == strides) {
      rq.pos = 0;
      ++rq.consumed;
    }
  }
  ++c_.rx_delivered;
  return Rx::kDelivered;
}

// Writes frames[0..n) as one compressed session when they go to the same compressed, cyclic RQ
// with identical title fields; returns how many it took (0: not a session).
std::size_t Device::try_session(std::span<const std::vector<std::uint8_t>> frames) {
  if (frames.size() < 2) return 0;
  CqeFields first = cqe_fields(frames[0]);
  const int target = steer(frames[0], first.tag, first.hash, first.hash_type);
  if (target < 0) return 0;
  Rq& rq = *rqs_[static_cast<std::size_t>(target)];
  Cq& cq = *rq.cq;
  if (!rq.o.compression || rq.o.striding || !rq.ready || rq.error || rq.fail_next || rx_fail_every_ ||
      rq.posted() > rq.o.wqe_cnt)
    return 0;
  const std::size_t limit = std::min<std::size_t>({frames.size(), kMaxSessionLength, rq.posted(), cq_room(cq)});
  std::vector<std::uint32_t> hashes;
  std::size_t n = 0;
  for (; n < limit; ++n) {
    CqeFields f = cqe_fields(frames[n]);
    if (steer(frames[n], f.tag, f.hash, f.hash_type) != target) break;
    if (f.hds != first.hds || f.l4type != first.l4type || f.tag != first.tag || (f.hash_type != 0) != (first.hash_type != 0)) break;
    const std::uint32_t slot = (rq.consumed + static_cast<std::uint32_t>(n)) & (rq.o.wqe_cnt - 1);
    const auto* d = reinterpret_cast<const WqeDataSeg*>(rq.buf.get() + std::size_t(slot) * rq.stride);
    if (!mr_ok(be32(d->lkey), be64(d->addr), be32(d->byte_count)) || frames[n].size() > be32(d->byte_count)) break;
    hashes.push_back(f.hash);
  }
  if (n < 2) return 0;
  const std::uint32_t t = cq.pi;
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint32_t slot = (rq.consumed + static_cast<std::uint32_t>(i)) & (rq.o.wqe_cnt - 1);
    const auto* d = reinterpret_cast<const WqeDataSeg*>(rq.buf.get() + std::size_t(slot) * rq.stride);
    std::memcpy(reinterpret_cast<void*>(be64(d->addr)), frames[i].data(), frames[i].size());
    auto* mini = reinterpret_cast<MiniCqe8*>(cq.at(t + mini_array_slot(static_cast<std::uint32_t>(i)))) + (i & 7);
    mini->rx_hash_result = be32(hashes[i]);
    mini->byte_cnt = be32(static_cast<std::uint32_t>(frames[i].size()));
  }
  // The title last: its op_own publishes the whole session. Holes are left as they were.
  Cqe64* title = cq.at(t);
  fill_rx_cqe(title, first, static_cast<std::uint32_t>(n), static_cast<std::uint16_t>(rq.consumed), 0);
  publish_cqe(title, static_cast<std::uint8_t>(kCqeRespSend << 4 | kCqeFormatCompressed << 2 | cq.owner()));
  cq.pi += static_cast<std::uint32_t>(n);
  rq.consumed += static_cast<std::uint32_t>(n);
  c_.rx_delivered += n;
  ++c_.sessions;
  return n;
}

std::size_t Device::receive_burst(std::span<const std::vector<std::uint8_t>> frames, bool stop_when_full) {
  std::lock_guard lock(mu_);
  std::size_t i = 0;
  while (i < frames.size()) {
    const std::size_t s = try_session(frames.subspan(i));
    if (s) {
      i += s;
      continue;
    }
    const Rx r = receive_locked(frames[i], {});
    if (stop_when_full && (r == Rx::kNoWqe || r == Rx::kCqFull)) {
      // Not consumed: undo the drop counter, the caller retries this frame.
      if (r == Rx::kNoWqe) --c_.rx_no_wqe; else --c_.rx_cq_full;
      break;
    }
    ++i;
  }
  return i;
}

void Device::on_mmio(void* ctx, void* base, std::size_t offset, std::uint64_t value) noexcept {
  auto* d = static_cast<Device*>(ctx);
  (void)offset;
  const bool threaded = d->thread_.joinable();
  std::unique_lock lock(d->mu_, std::defer_lock);
  if (!threaded) lock.lock();
  for (auto& sq : d->sqs_) {
    if (sq->uar.get() != base) continue;
    // The UAR write names the last WQE posted; the SQ record must already cover it.
    const std::uint32_t idx = (be32(static_cast<std::uint32_t>(value)) >> 8) & kWqeCounterMask;
    const std::uint32_t rec = load_record(&sq->dbrec[kSndDbr]) & kWqeCounterMask;
    // The record must end exactly after the WQE the UAR names (one or two WQEBBs, from its DS count).
    const auto* w = reinterpret_cast<const WqeCtrlSeg*>(sq->buf.get() + std::size_t(idx & (sq->o.wqe_cnt - 1)) * kWqeBb);
    const std::uint32_t ds = be32(w->qpn_ds) & 0x3f;
    const std::uint32_t bbs = ds >= 1 && ds <= 8 ? wqe_bbs(ds) : 1;
    // Relaxed: statistics only.
    if (((rec - idx) & kWqeCounterMask) != bbs) d->order_errors_.fetch_add(1, std::memory_order_relaxed);
    d->uar_writes_.fetch_add(1, std::memory_order_relaxed);
    if (!threaded) d->process_sq(*sq);
  }
}

void Device::process_tx() {
  std::lock_guard lock(mu_);
  for (auto& sq : sqs_) process_sq(*sq);
}

void Device::process_sq(Sq& sq) {
  if (sq.error || !sq.ready) return;
  Cq& cq = *sq.cq;
  const std::uint32_t mask = sq.o.wqe_cnt - 1;
  const std::uint32_t rec = load_record(&sq.dbrec[kSndDbr]) & kWqeCounterMask;
  // The record only moves forward and never past the ring: a record behind the consumer (or
  // further ahead than the ring holds) cannot come from a correct driver, and a NIC would read
  // garbage WQEs. The SQ goes to the error state with a LOCAL_QP_OP CQE.
  if (((rec - sq.consumed) & kWqeCounterMask) > sq.o.wqe_cnt) {
    ++c_.record_errors;
    if (cq_room(cq)) {
      write_error_cqe(cq, kCqeReqErr, kSyndromeLocalQpOp, static_cast<std::uint16_t>(sq.consumed), sq.qpn);
      ++c_.tx_error_cqes;
    }
    sq.error = true;
    return;
  }
  const std::size_t ring_bytes = std::size_t(sq.o.wqe_cnt) * kWqeBb;
  while ((sq.consumed & kWqeCounterMask) != rec) {
    const std::uint16_t idx = static_cast<std::uint16_t>(sq.consumed);
    const std::size_t start = std::size_t(sq.consumed & mask) * kWqeBb;
    // A WQE may span WQEBBs and wrap at the end of the ring, as on the NIC.
    auto at = [&](std::size_t off) { return sq.buf.get() + (start + off) % ring_bytes; };
    auto copy_out = [&](std::size_t off, void* dst, std::size_t n) {
      for (std::size_t i = 0; i < n; ++i) static_cast<std::uint8_t*>(dst)[i] = *at(off + i);
    };
    WqeCtrlSeg ctrl;
    copy_out(0, &ctrl, sizeof ctrl);
    const std::uint32_t op = be32(ctrl.opmod_idx_opcode);
    const std::uint32_t qpn_ds = be32(ctrl.qpn_ds);
    const std::uint32_t ds = qpn_ds & 0x3f;
    const std::uint8_t opcode = op & 0xff;
    std::uint8_t syndrome = 0;
    // Up to two WQEBBs (an L4 inline header and a data segment); a NOP may be the ctrl segment alone.
    if (((op >> 8) & kWqeCounterMask) != idx || (qpn_ds >> 8) != sq.qpn || ds < 1 || ds > 8 ||
        (opcode == kOpcodeSend && ds < 2))
      syndrome = kSyndromeLocalQpOp;
    const std::uint32_t bbs = ds >= 1 && ds <= 8 ? wqe_bbs(ds) : 1;
    if (!syndrome && ((rec - sq.consumed) & kWqeCounterMask) < bbs) syndrome = kSyndromeLocalQpOp;  // record mid-WQE
    if (sq.fail_next) {
      syndrome = sq.fail_next;
      sq.fail_next = 0;
    }
    std::vector<std::uint8_t> frame;
    if (!syndrome && opcode == kOpcodeSend) {
      WqeEthSeg eth;
      copy_out(kDsSize, &eth, sizeof eth);
      const std::uint16_t inl = be16(eth.inline_hdr_sz);
      const std::uint32_t eth_ds = eth_seg_ds(inl);
      const bool has_data = ds > 1 + eth_ds;
      // The inline header must reach the device's minimum unless it is the whole frame (no data
      // segment), and the DS count must cover the eth segment with its inline bytes, or the NIC
      // would take inline bytes for a data segment.
      if ((inl < sq.o.min_inline && has_data) || inl > kInlineL4 || ds < 1 + eth_ds) syndrome = kSyndromeLocalQpOp;
      else {
        frame.resize(inl);
        copy_out(kDsSize + offsetof(WqeEthSeg, inline_hdr_start), frame.data(), inl);
        for (std::uint32_t s = 1 + eth_ds; s < ds; ++s) {
          WqeDataSeg d;
          copy_out(std::size_t(s) * kDsSize, &d, sizeof d);
          const std::uint32_t len = be32(d.byte_count);
          const std::uint64_t addr = be64(d.addr);
          if (len & kInlineSeg || !mr_ok(be32(d.lkey), addr, len)) {
            syndrome = kSyndromeLocalProt;
            break;
          }
          const auto* src = reinterpret_cast<const std::uint8_t*>(addr);
          frame.insert(frame.end(), src, src + len);
        }
      }
    } else if (!syndrome && opcode != kOpcodeNop) {
      syndrome = kSyndromeLocalQpOp;
    }
    ++c_.tx_wqes;
    if (syndrome) {
      if (cq_room(cq)) {
        write_error_cqe(cq, kCqeReqErr, syndrome, idx, sq.qpn);
        ++c_.tx_error_cqes;
      }
      sq.error = true;
      ++sq.consumed;
      return;
    }
    if (opcode == kOpcodeNop) {
      ++c_.tx_nops;
    } else {
      ++c_.tx_frames;
      if (keep_sent_) sent_.push_back(std::move(frame));
    }
    if (ctrl.fm_ce_se & kCtrlCqUpdate) {
      if (cq_room(cq) == 0) return;  // stalls until the driver frees CQ room, like a full CQ would
      Cqe64* c = cq.at(cq.pi);
      clear_body(c);
      c->wqe_counter = be16(idx);
      c->sop_drop_qpn = be32(sq.qpn);
      publish_cqe(c, static_cast<std::uint8_t>(kCqeReq << 4 | cq.owner()));
      ++cq.pi;
      ++c_.tx_cqes;
    }
    sq.consumed += bbs;
  }
}

void Device::keep_sent(bool keep) {
  std::lock_guard lock(mu_);
  keep_sent_ = keep;
}

std::vector<std::vector<std::uint8_t>> Device::take_sent() {
  std::lock_guard lock(mu_);
  return std::exchange(sent_, {});
}

Counters Device::counters() const {
  std::lock_guard lock(mu_);
  Counters c = c_;
  c.uar_writes = uar_writes_.load(std::memory_order_relaxed);
  c.doorbell_order_errors = order_errors_.load(std::memory_order_relaxed);
  return c;
}

std::uint64_t Device::rq_syndromes(std::uint16_t rq, std::uint8_t syndrome) const {
  std::lock_guard lock(mu_);
  return rqs_.at(rq)->syndromes[syndrome];
}

void Device::start_thread(std::vector<std::vector<std::uint8_t>> frames, std::uint64_t total, double rate_pps) {
  if (total == 0) total = frames.size();
  if (frames.empty()) total = 0;
  // A short pattern is repeated so one batch can hold several frames (compressed sessions form
  // within a batch); whole repetitions keep the order.
  if (!frames.empty() && frames.size() < 64) {
    const std::size_t p = frames.size();
    for (std::size_t i = p; i < 64 + (p - 64 % p) % p; ++i) frames.push_back(frames[i % p]);
  }
  stop_.store(false, std::memory_order_relaxed);
  thread_delivered_.store(0, std::memory_order_relaxed);
  thread_ = std::thread([this, frames = std::move(frames), total, rate_pps] {
    std::uint64_t next = 0;
    const auto t0 = std::chrono::steady_clock::now();
    while (!stop_.load(std::memory_order_acquire)) {
      std::size_t took = 0;
      {
        std::lock_guard lock(mu_);
        for (auto& sq : sqs_) process_sq(*sq);
      }
      std::uint64_t due = total;
      if (rate_pps > 0) {
        const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        due = std::min<std::uint64_t>(total, static_cast<std::uint64_t>(s * rate_pps));
      }
      if (next < due) {
        const std::size_t at = static_cast<std::size_t>(next % frames.size());
        const std::size_t batch = static_cast<std::size_t>(std::min<std::uint64_t>({due - next, 16, frames.size() - at}));
        took = receive_burst(std::span(frames).subspan(at, batch), true);
        next += took;
        // Release: readers of the count see every frame it covers delivered.
        thread_delivered_.store(static_cast<std::size_t>(next), std::memory_order_release);
      }
      if (took == 0) std::this_thread::yield();
    }
  });
}

void Device::stop_thread() {
  if (!thread_.joinable()) return;
  stop_.store(true, std::memory_order_release);
  thread_.join();
}

}  // namespace rawpipe::mlx5::model
