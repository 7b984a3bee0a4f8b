#include "pmd/mana/model/device.hh"

#include <sys/mman.h>

#include <algorithm>
#include <bit>
#include <cstring>

#include <fmt/format.h>

#include "pipeline/wire/checksum.hh"
#include "pipeline/wire/wire.hh"

namespace rawpipe::mana {

namespace {

constexpr std::uint32_t kCqIdBase = 0x40;
constexpr std::uint32_t kRqIdBase = 0x100;
// SQ ids carry a non-zero VSQ frame (bits 10..23) so a driver that sends the wrong bits is caught.
constexpr std::uint32_t kSqIdBase = (5u << 10) | 0x200;
constexpr std::uint32_t kMaxFrame = 9216 + 64;

std::uint8_t* map_zeroed(std::size_t bytes) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) std::abort();  // control path of a test device; nothing to recover
  return static_cast<std::uint8_t*>(p);
}

// rdma-core's align_hw_size: a power of two, at least one page.
std::uint32_t hw_size(std::uint32_t bytes) {
  return std::max<std::uint32_t>(std::bit_ceil(bytes), 4096);
}

// Where the L3/L4 headers of an untagged frame are; false for anything but IPv4/IPv6.
struct FrameInfo {
  std::uint32_t l3 = 0, l4 = 0, l4_len = 0;
  std::uint8_t proto = 0;
  bool v4 = false, v6 = false;
};

bool locate(const std::uint8_t* f, std::uint32_t len, FrameInfo& fi) noexcept {
  if (len < 14) return false;
  const std::uint16_t et = wire::load_be16(f + 12);
  fi.l3 = 14;
  if (et == wire::kEtherTypeIpv4) {
    if (len < fi.l3 + 20) return false;
    const std::uint8_t* ip = f + fi.l3;
    const std::uint32_t ihl = (ip[0] & 0xf) * 4u;
    const std::uint32_t total = wire::load_be16(ip + 2);
    if ((ip[0] >> 4) != 4 || ihl < 20 || total < ihl || fi.l3 + total > len) return false;
    fi.v4 = true;
    fi.proto = ip[9];
    fi.l4 = fi.l3 + ihl;
    fi.l4_len = total - ihl;
    // Later fragments carry no L4 header.
    if (wire::load_be16(ip + 6) & 0x1fff) fi.proto = 0;
    return true;
  }
  if (et == wire::kEtherTypeIpv6) {
    if (len < fi.l3 + 40) return false;
    const std::uint8_t* ip = f + fi.l3;
    const std::uint32_t payload = wire::load_be16(ip + 4);
    if ((ip[0] >> 4) != 6 || fi.l3 + 40 + payload > len) return false;
    fi.v6 = true;
    fi.proto = ip[6];  // extension headers: the model hashes/checksums only a direct UDP/TCP header
    fi.l4 = fi.l3 + 40;
    fi.l4_len = payload;
    return true;
  }
  return false;
}

std::uint64_t pseudo_sum(const std::uint8_t* f, const FrameInfo& fi) noexcept {
  const std::uint8_t* ip = f + fi.l3;
  return fi.v4 ? wire::ipv4_pseudo_sum(ip + 12, ip + 16, fi.proto, fi.l4_len)
               : wire::ipv6_pseudo_sum(ip + 8, ip + 24, fi.proto, fi.l4_len);
}

// Model counters: written by the queue's thread, read by the stats thread (ManaModel::stats).
// Relaxed atomic accesses on plain fields keep those reads race-free without atomics in the struct.
void bump(std::uint64_t& c, std::uint64_t n) noexcept {
  __atomic_store_n(&c, __atomic_load_n(&c, __ATOMIC_RELAXED) + n, __ATOMIC_RELAXED);
}

std::uint16_t fold(std::uint64_t s) noexcept {
  while (s >> 16) s = (s & 0xffff) + (s >> 16);
  return static_cast<std::uint16_t>(s);
}

}  // namespace

std::uint32_t toeplitz_hash(const std::uint8_t* key, const std::uint8_t* in, unsigned len) noexcept {
  std::uint32_t result = 0;
  // The 32-bit window of the key that lines up with the current input bit.
  std::uint32_t window = wire::load_be32(key);
  unsigned next_key_bit = 32;
  for (unsigned i = 0; i < len; ++i) {
    for (int b = 7; b >= 0; --b) {
      if (in[i] & (1u << b)) result ^= window;
      const unsigned kb = next_key_bit++;
      const std::uint32_t bit = kb < 320 ? (key[kb / 8] >> (7 - kb % 8)) & 1 : 0;
      window = (window << 1) | bit;
    }
  }
  return result;
}

RssResult rss_of(const std::uint8_t* key, const std::uint8_t* frame, std::uint32_t len, bool l4) noexcept {
  RssResult r;
  if (len < 14) return r;
  std::uint32_t off = 14;
  std::uint16_t et = wire::load_be16(frame + 12);
  if (et == wire::kEtherTypeVlan) {  // hashed as the NIC sees it, after stripping the tag
    if (len < 18) return r;
    et = wire::load_be16(frame + 16);
    off = 18;
  }
  std::uint8_t in[36];
  unsigned n = 0;
  std::uint8_t proto = 0;
  std::uint32_t l4_off = 0;
  bool fragment = false;
  bool v4 = false;
  if (et == wire::kEtherTypeIpv4 && len >= off + 20) {
    const std::uint8_t* ip = frame + off;
    std::memcpy(in, ip + 12, 8);
    n = 8;
    v4 = true;
    proto = ip[9];
    l4_off = off + (ip[0] & 0xf) * 4u;
    fragment = wire::load_be16(ip + 6) & 0x3fff;
    r.ndis_type = ndis_hash::kIpv4;
  } else if (et == wire::kEtherTypeIpv6 && len >= off + 40) {
    const std::uint8_t* ip = frame + off;
    std::memcpy(in, ip + 8, 32);
    n = 32;
    proto = ip[6];
    l4_off = off + 40;
    r.ndis_type = ndis_hash::kIpv6;
  } else {
    return r;
  }
  const bool udp = proto == wire::kIpProtoUdp, tcp = proto == wire::kIpProtoTcp;
  if (l4 && !fragment && (udp || tcp) && len >= l4_off + 4) {
    std::memcpy(in + n, frame + l4_off, 4);
    n += 4;
    r.ndis_type = v4 ? (udp ? ndis_hash::kUdpIpv4 : ndis_hash::kTcpIpv4) : (udp ? ndis_hash::kUdpIpv6 : ndis_hash::kTcpIpv6);
  }
  r.hash = toeplitz_hash(key, in, n);
  return r;
}

struct ManaModel::Cq {
  std::uint32_t id = 0;
  std::uint32_t count = 0;
  std::uint32_t bytes = 0;
  Cqe* buf = nullptr;
  bool external = false;
  std::uint64_t produced = 0;
};

struct ManaModel::Wq {
  std::uint32_t id = 0;
  bool is_sq = false;
  std::uint32_t count = 0;
  std::uint32_t size = 0;
  std::uint8_t* buf = nullptr;
  bool external = false;
  Cq* cq = nullptr;
  std::uint32_t doorbell_bu = 0;  // producer position from the last doorbell
  std::uint32_t consumed_bu = 0;  // what the device has taken
  // Receive CQE being assembled (coalescing).
  RxCompOob group{};
  unsigned group_n = 0;
  // Send error injection.
  unsigned fail_skip = 0;
  unsigned fail_n = 0;
  std::uint32_t fail_type = 0;
  // WQEs the SQ may still take before it stalls (hold_tx); unlimited by default.
  std::uint32_t tx_budget = UINT32_MAX;
  ModelQueueStats stats;
  std::vector<std::string> violations;
  std::vector<std::vector<std::uint8_t>> sent;
  std::vector<std::uint8_t> scratch;
};

ManaModel::ManaModel(ModelOptions options) : options_(options) {
  options_.coalesce = std::clamp(options_.coalesce, 1u, kRxPacketsPerCqe);
  sink_.ctx = this;
  sink_.mmio64 = [](void* ctx, void* base, std::size_t offset, std::uint64_t value) noexcept {
    auto* self = static_cast<ManaModel*>(ctx);
    if (base != self->db_page_.data() || offset >= kDoorbellPageSize) {
      self->unknown_doorbells_.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    self->on_doorbell(static_cast<std::uint32_t>(offset), value);
  };
}

ManaModel::~ManaModel() {
  for (auto& c : cqs_)
    if (!c->external) munmap(c->buf, c->bytes);
  for (auto& w : wqs_)
    if (!w->external) munmap(w->buf, w->size);
}

std::uint32_t ManaModel::register_mr(const void* addr, std::size_t len) {
  const std::uint32_t lkey = 0x1000 + static_cast<std::uint32_t>(mrs_.size()) * 0x100 + 0x2a;
  mrs_.push_back({reinterpret_cast<std::uintptr_t>(addr), reinterpret_cast<std::uintptr_t>(addr) + len, lkey});
  return lkey;
}

std::uint32_t ManaModel::create_cq(std::uint32_t entries, std::uint8_t* external, std::uint32_t bytes) {
  auto c = std::make_unique<Cq>();
  c->id = kCqIdBase + static_cast<std::uint32_t>(cqs_.size());
  c->count = std::bit_ceil(std::max<std::uint32_t>(entries, 1));
  c->external = external != nullptr;
  c->bytes = external ? bytes : hw_size(c->count * kCqeSize);
  c->buf = reinterpret_cast<Cqe*>(external ? external : map_zeroed(c->bytes));
  cqs_.push_back(std::move(c));
  return cqs_.back()->id;
}

std::uint32_t ManaModel::create_rq(std::uint32_t max_wr, std::uint32_t cq_id, std::uint8_t* external,
                                   std::uint32_t bytes) {
  auto w = std::make_unique<Wq>();
  w->id = kRqIdBase + static_cast<std::uint32_t>(wqs_.size());
  w->count = max_wr;
  w->external = external != nullptr;
  w->size = external ? bytes : hw_size(max_wr * kWqeBu);
  w->buf = external ? external : map_zeroed(w->size);
  w->cq = cq(cq_id);
  wqs_.push_back(std::move(w));
  return wqs_.back()->id;
}

std::uint32_t ManaModel::create_sq(std::uint32_t max_wr, std::uint32_t cq_id, std::uint8_t* external,
                                   std::uint32_t bytes) {
  auto w = std::make_unique<Wq>();
  w->id = kSqIdBase + static_cast<std::uint32_t>(wqs_.size());
  w->is_sq = true;
  w->count = max_wr;
  w->external = external != nullptr;
  w->size = external ? bytes : hw_size(max_wr * kWqeBu);
  w->buf = external ? external : map_zeroed(w->size);
  w->cq = cq(cq_id);
  w->scratch.resize(kMaxFrame);
  wqs_.push_back(std::move(w));
  return wqs_.back()->id;
}

ManaModel::Cq* ManaModel::cq(std::uint32_t id) const noexcept {
  for (const auto& c : cqs_)
    if (c->id == id) return c.get();
  return nullptr;
}

ManaModel::Wq* ManaModel::wq(std::uint32_t id) const noexcept {
  for (const auto& w : wqs_)
    if (w->id == id) return w.get();
  return nullptr;
}

void ManaModel::describe_cq(std::uint32_t cq_id, CompletionQueue& out) const {
  Cq* c = cq(cq_id);
  out.init(c->buf, c->count, c->id);
}

void ManaModel::describe_wq(std::uint32_t wq_id, WorkQueue& out) const {
  Wq* w = wq(wq_id);
  out = WorkQueue{};
  out.buf = w->buf;
  out.size = w->size;
  out.count = w->count;
  out.id = w->id;
}

void ManaModel::violation(Wq& q, std::string what) noexcept {
  bump(q.stats.violations, 1);
  if (q.violations.size() < 64) q.violations.push_back(std::move(what));
}

bool ManaModel::check_range(Wq& q, std::uint32_t lkey, std::uint64_t addr, std::uint32_t len) noexcept {
  for (const Mr& mr : mrs_) {
    if (mr.lkey != lkey) continue;
    if (addr >= mr.begin && addr + len <= mr.end) return true;
    violation(q, fmt::format("SGE {:#x}+{} outside the region of lkey {:#x}", addr, len, lkey));
    return false;
  }
  violation(q, fmt::format("SGE uses unknown lkey {:#x}", lkey));
  return false;
}

void ManaModel::write_cqe(Cq& c, std::uint32_t wq_id, bool is_sq, const void* client) noexcept {
  Cqe* e = &c.buf[c.produced % c.count];
  const std::uint32_t owner = static_cast<std::uint32_t>((c.produced / c.count + 1) & kOwnerMask);
  std::memcpy(e->client, client, kCqeClientBytes);
  // R-CQE: release pairs with A-CQE in queue.hh (cq_peek): the client bytes above are visible
  // before the owner bits say the entry is new.
  __atomic_store_n(&e->wq_owner, cqe_wq_owner(wq_id, is_sq, owner), __ATOMIC_RELEASE);
  ++c.produced;
}

void ManaModel::on_doorbell(std::uint32_t offset, std::uint64_t value) noexcept {
  const std::uint32_t id = doorbell_id(value);
  Wq* q = offset == kDoorbellCq ? nullptr : wq(id);
  if (offset == kDoorbellCq) {
    // Arming a CQ: a polling driver has no reason to; accepted and ignored.
    if (!cq(id)) unknown_doorbells_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  if (!q || (offset == kDoorbellRq && q->is_sq) || (offset == kDoorbellSq && !q->is_sq) ||
      (offset != kDoorbellRq && offset != kDoorbellSq)) {
    unknown_doorbells_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  bump(q->stats.doorbells, 1);
  const std::uint32_t tail = doorbell_tail(value);
  if (tail % kWqeBu) violation(*q, fmt::format("doorbell tail {} is not a multiple of 32", tail));
  if (offset == kDoorbellRq && doorbell_wqe_cnt(value) != 0)
    violation(*q, fmt::format("RQ doorbell with wqe_cnt {} (must be 0)", doorbell_wqe_cnt(value)));
  const std::uint32_t bu = doorbell_bu(q->doorbell_bu, tail);
  if (bu - q->consumed_bu > q->size / kWqeBu || std::int32_t(bu - q->doorbell_bu) < 0) {
    violation(*q, fmt::format("doorbell at BU {} with the device at {} and {} BU in the ring", bu, q->consumed_bu,
                              q->size / kWqeBu));
    return;
  }
  q->doorbell_bu = bu;
  if (q->is_sq) process_sq(*q);
}

std::uint32_t ManaModel::rq_available(std::uint32_t rq_id) const noexcept {
  Wq* q = wq(rq_id);
  return q ? q->doorbell_bu - q->consumed_bu : 0;
}

void ManaModel::flush_rx_group(Wq& q) noexcept {
  if (q.group_n == 0) return;
  q.group.header = cqe_header(q.group_n > 1 ? kCqeRxCoalesced4 : kCqeRxOkay);
  write_cqe(*q.cq, q.id, false, &q.group);
  bump(q.stats.cqes, 1);
  q.group = {};
  q.group_n = 0;
}

unsigned ManaModel::receive_one(std::uint32_t rq_id, const std::uint8_t* frame, std::uint32_t len) noexcept {
  std::span<const std::uint8_t> f(frame, len);
  return receive(rq_id, std::span<const std::span<const std::uint8_t>>(&f, 1));
}

unsigned ManaModel::receive(std::uint32_t rq_id, std::span<const std::span<const std::uint8_t>> frames) noexcept {
  Wq* qp = wq(rq_id);
  if (!qp || qp->is_sq) return 0;
  Wq& q = *qp;
  unsigned accepted = 0;
  for (const auto& frame_span : frames) {
    const std::uint8_t* frame = frame_span.data();
    std::uint32_t len = static_cast<std::uint32_t>(frame_span.size());
    if (q.consumed_bu == q.doorbell_bu) {
      bump(q.stats.rx_no_wqe, 1);
      continue;
    }
    // Parse the WQE at the device's position: DMA OOB, client OOB, SGEs (which may wrap).
    const std::uint32_t pos = (q.consumed_bu * kWqeBu) & (q.size - 1);
    DmaOob dma;
    std::memcpy(&dma, q.buf + pos, sizeof dma);
    const std::uint32_t nsge = dma_oob_num_sge(dma.flags);
    const std::uint32_t oob = dma_oob_client_oob_bytes(dma.flags);
    const std::uint32_t wqe_bytes = static_cast<std::uint32_t>(align_up(8 + oob + 16 * std::max(nsge, 1u), kWqeBu));
    bool ok = true;
    if (nsge == 0 || (oob != kSmallOobBytes && oob != kLargeOobBytes) || wqe_bytes > kMaxRxWqeBytes) {
      violation(q, fmt::format("RQ WQE at BU {}: {} SGEs, {}-byte OOB", q.consumed_bu, nsge, oob));
      ok = false;
    }
    Sge sges[kMaxRxWqeBytes / sizeof(Sge)];
    std::uint32_t capacity = 0;
    for (std::uint32_t i = 0; ok && i < nsge; ++i) {
      const std::uint32_t at = (pos + 8 + oob + 16 * i) & (q.size - 1);
      std::memcpy(&sges[i], q.buf + at, sizeof(Sge));
      if (!check_range(q, sges[i].mem_key, sges[i].address, sges[i].size)) ok = false;
      capacity += sges[i].size;
    }
    q.consumed_bu += ok ? wqe_bytes / kWqeBu : 1;
    if (!ok) continue;  // a real NIC would fault the queue; the model skips the WQE and reports it

    // MANA strips the outer C-tag and reports the VLAN id.
    std::uint32_t flags = 0;
    std::uint8_t untagged[14];
    const std::uint8_t* body = frame;
    std::uint32_t body_len = len;
    bool tagged = len >= 18 && wire::load_be16(frame + 12) == wire::kEtherTypeVlan;
    if (tagged) {
      flags |= rx_flag::kVlanPresent | (wire::load_be16(frame + 14) & rx_flag::kVlanIdMask);
      std::memcpy(untagged, frame, 12);
      std::memcpy(untagged + 12, frame + 16, 2);
    }
    const std::uint32_t out_len = tagged ? len - 4 : len;
    if (out_len > capacity) {
      flush_rx_group(q);
      RxCompOob t{};
      t.header = cqe_header(kCqeRxTruncated);
      t.rx_wqe_offset = pos;
      write_cqe(*q.cq, q.id, false, &t);
      bump(q.stats.cqes, 1);
      bump(q.stats.rx_truncated, 1);
      ++accepted;
      continue;
    }
    // Scatter: with a stripped tag, the first 14 bytes come from `untagged`.
    auto scatter = [&](const std::uint8_t* src, std::uint32_t n, std::uint32_t& sge_i, std::uint32_t& sge_off) {
      while (n) {
        const std::uint32_t room = sges[sge_i].size - sge_off;
        const std::uint32_t c = std::min(room, n);
        std::memcpy(reinterpret_cast<std::uint8_t*>(sges[sge_i].address) + sge_off, src, c);
        src += c;
        n -= c;
        sge_off += c;
        if (sge_off == sges[sge_i].size) {
          ++sge_i;
          sge_off = 0;
        }
      }
    };
    std::uint32_t si = 0, so = 0;
    if (tagged) {
      scatter(untagged, 14, si, so);
      body = frame + 18;
      body_len = len - 18;
    }
    scatter(body, body_len, si, so);

    // Checksums and RSS on the untagged frame (first SGE holds the headers for the sizes used).
    const std::uint8_t* seen = reinterpret_cast<const std::uint8_t*>(sges[0].address);
    const std::uint32_t seen_len = std::min(out_len, sges[0].size);
    FrameInfo fi;
    if (locate(seen, seen_len, fi)) {
      if (fi.v4) {
        const std::uint8_t* ip = seen + fi.l3;
        flags |= wire::ipv4_header_checksum_ok(ip, (ip[0] & 0xf) * 4u) ? rx_flag::kIpCsumOk : rx_flag::kIpCsumFail;
      }
      const bool udp = fi.proto == wire::kIpProtoUdp, tcp = fi.proto == wire::kIpProtoTcp;
      if ((udp || tcp) && fi.l4 + fi.l4_len <= seen_len) {
        const std::uint8_t* l4 = seen + fi.l4;
        const bool no_csum = udp && fi.v4 && wire::load_be16(l4 + 6) == 0;
        const bool good = no_csum || wire::csum_fold(wire::csum_add(pseudo_sum(seen, fi), l4, fi.l4_len)) == 0;
        if (!no_csum) {
          if (udp) flags |= good ? rx_flag::kUdpCsumOk : rx_flag::kUdpCsumFail;
          else flags |= good ? rx_flag::kTcpCsumOk : rx_flag::kTcpCsumFail;
        }
      }
    }
    const RssResult rss = rss_of(options_.rss_key.data(), seen, seen_len, options_.rss_l4);
    flags |= rss.ndis_type << rx_flag::kHashTypeShift;

    // Packets of one CQE share its flags dword: start a new CQE when they differ.
    if (q.group_n && (q.group.flags != flags || q.group_n == options_.coalesce)) flush_rx_group(q);
    if (q.group_n == 0) {
      q.group.flags = flags;
      q.group.rx_wqe_offset = pos;
    }
    q.group.ppi[q.group_n].len = out_len;
    q.group.ppi[q.group_n].hash = rss.hash;
    ++q.group_n;
    bump(q.stats.rx_frames, 1);
    ++accepted;
  }
  flush_rx_group(q);
  return accepted;
}

void ManaModel::inject_rx_cqe(std::uint32_t rq_id, std::uint32_t type) {
  Wq* q = wq(rq_id);
  RxCompOob t{};
  t.header = cqe_header(type);
  if (type != kCqeRxObjectFence) {
    t.rx_wqe_offset = (q->consumed_bu * kWqeBu) & (q->size - 1);
    ++q->consumed_bu;
  }
  write_cqe(*q->cq, q->id, false, &t);
  bump(q->stats.cqes, 1);
}

void ManaModel::fail_next_tx(std::uint32_t sq_id, unsigned n, std::uint32_t type, unsigned skip) {
  Wq* q = wq(sq_id);
  q->fail_skip = skip;
  q->fail_n = n;
  q->fail_type = type;
}

void ManaModel::hold_tx(std::uint32_t sq_id, std::uint32_t wqes) {
  Wq* q = wq(sq_id);
  q->tx_budget = wqes;
  process_sq(*q);
}

void ManaModel::release_tx(std::uint32_t sq_id) {
  Wq* q = wq(sq_id);
  q->tx_budget = UINT32_MAX;
  process_sq(*q);
}

void ManaModel::process_sq(Wq& q) noexcept {
  while (q.consumed_bu != q.doorbell_bu && q.tx_budget != 0) {
    if (q.tx_budget != UINT32_MAX) --q.tx_budget;
    const std::uint32_t pos = (q.consumed_bu * kWqeBu) & (q.size - 1);
    DmaOob dma;
    std::memcpy(&dma, q.buf + pos, sizeof dma);
    const std::uint32_t nsge = dma_oob_num_sge(dma.flags);
    const std::uint32_t oob_bytes = dma_oob_client_oob_bytes(dma.flags);
    const std::uint32_t wqe_bytes = static_cast<std::uint32_t>(align_up(8 + oob_bytes + 16 * std::max(nsge, 1u), kWqeBu));
    if (nsge == 0 || (oob_bytes != kSmallOobBytes && oob_bytes != kLargeOobBytes) || wqe_bytes > kMaxTxWqeBytes ||
        q.doorbell_bu - q.consumed_bu < wqe_bytes / kWqeBu) {
      violation(q, fmt::format("SQ WQE at BU {}: {} SGEs, {}-byte OOB, {} BU before the doorbell", q.consumed_bu,
                               nsge, oob_bytes, q.doorbell_bu - q.consumed_bu));
      q.consumed_bu = q.doorbell_bu;  // the queue is unusable from here, as on hardware
      return;
    }
    TxShortOob oob;
    std::memcpy(&oob, q.buf + ((pos + 8) & (q.size - 1)), sizeof oob);
    const bool suppress = oob.dw0 & tx_oob::kSuppressCqe;
    std::uint32_t error = 0;
    if ((oob.dw0 & 3) != tx_oob::kPktFmtShort && oob_bytes != kLargeOobBytes) error = kCqeTxInvalidOob;
    if (tx_oob_vcq(oob.dw0) != q.cq->id || tx_oob_vsq_frame(oob.dw1) != vsq_frame_of(q.id) ||
        tx_oob_vp_offset(oob.dw1) != options_.vp_offset) {
      violation(q, fmt::format("send OOB names CQ {:#x}, VSQ frame {}, vPort offset {}; the queue has CQ {:#x}, "
                               "frame {}, offset {}",
                               tx_oob_vcq(oob.dw0), tx_oob_vsq_frame(oob.dw1), tx_oob_vp_offset(oob.dw1), q.cq->id,
                               vsq_frame_of(q.id), options_.vp_offset));
      error = kCqeTxInvalidOob;
    }
    // Gather.
    std::uint32_t len = 0;
    for (std::uint32_t i = 0; i < nsge && !error; ++i) {
      Sge s;
      std::memcpy(&s, q.buf + ((pos + 8 + oob_bytes + 16 * i) & (q.size - 1)), sizeof s);
      if (!check_range(q, s.mem_key, s.address, s.size) || len + s.size > kMaxFrame) {
        error = kCqeTxHdrProcessingError;
        break;
      }
      std::memcpy(q.scratch.data() + len, reinterpret_cast<const void*>(s.address), s.size);
      len += s.size;
    }
    std::uint8_t* f = q.scratch.data();
    if (!error && len < 14) error = kCqeTxInvalidEthType;
    if (!error && (oob.dw0 & (tx_oob::kCompIpHdrCsum | tx_oob::kCompTcpCsum | tx_oob::kCompUdpCsum))) {
      FrameInfo fi;
      if (!locate(f, len, fi)) {
        error = kCqeTxHdrProcessingError;
      } else {
        if ((oob.dw0 & tx_oob::kCompIpHdrCsum) && fi.v4) {
          std::uint8_t* ip = f + fi.l3;
          wire::store_be16(ip + 10, 0);
          wire::store_be16(ip + 10, wire::ipv4_header_checksum(ip, (ip[0] & 0xf) * 4u));
        }
        const bool want_udp = oob.dw0 & tx_oob::kCompUdpCsum, want_tcp = oob.dw0 & tx_oob::kCompTcpCsum;
        if (want_udp || want_tcp) {
          const std::uint8_t need = want_udp ? wire::kIpProtoUdp : wire::kIpProtoTcp;
          if (fi.proto != need || fi.l4 + fi.l4_len > len || (want_tcp && tx_oob_trans_off(oob.dw1) != fi.l4)) {
            error = kCqeTxHdrProcessingError;
          } else {
            std::uint8_t* l4 = f + fi.l4;
            const unsigned field = want_udp ? 6 : 16;
            // The NIC adds the L4 bytes to what the driver left in the field: it must be the
            // pseudo-header sum or the result is wrong (counted, sent as computed).
            if (wire::load_be16(l4 + field) != fold(pseudo_sum(f, fi))) bump(q.stats.pseudo_csum_missing, 1);
            std::uint16_t c = wire::csum_fold(wire::csum_add(0, l4, fi.l4_len));
            if (want_udp) c = wire::udp_checksum_on_wire(c);
            wire::store_be16(l4 + field, c);
          }
        }
      }
    }
    if (!error && q.fail_n) {
      if (q.fail_skip) {
        --q.fail_skip;
      } else {
        --q.fail_n;
        error = q.fail_type;
      }
    }
    // tx_wqe_offset counts 32-byte units, not bytes (the kernel's mana_ib cq.c divides only
    // rx_wqe_offset by GDMA_WQE_BU_SIZE); the free-running queue offset, 27 bits wide
    // (rdma-core providers/mana gdma.h GDMA_QUEUE_OFFSET_WIDTH).
    const std::uint32_t wqe_pos = q.consumed_bu & ((1u << 27) - 1);
    q.consumed_bu += wqe_bytes / kWqeBu;
    if (error) {
      bump(q.stats.tx_errors, 1);
      TxCompOob c{};
      c.header = cqe_header(error);
      c.offsets = tx_comp_offsets(0, wqe_pos);
      write_cqe(*q.cq, q.id, true, &c);
      bump(q.stats.cqes, 1);
      continue;
    }
    bump(q.stats.tx_frames, 1);
    bump(q.stats.tx_bytes, len);
    if (options_.capture_tx) q.sent.emplace_back(f, f + len);
    if (suppress) {
      bump(q.stats.tx_suppressed, 1);
      continue;
    }
    TxCompOob c{};
    c.header = cqe_header(kCqeTxOkay);
    c.tx_data_offset = 0;
    c.offsets = tx_comp_offsets(0, wqe_pos);
    write_cqe(*q.cq, q.id, true, &c);
    bump(q.stats.cqes, 1);
  }
}

ModelQueueStats ManaModel::stats(std::uint32_t queue_id) const {
  Wq* q = wq(queue_id);
  ModelQueueStats out{};
  if (!q) return out;
  const auto* from = reinterpret_cast<const std::uint64_t*>(&q->stats);
  auto* to = reinterpret_cast<std::uint64_t*>(&out);
  static_assert(sizeof(ModelQueueStats) % sizeof(std::uint64_t) == 0);
  for (std::size_t i = 0; i < sizeof(ModelQueueStats) / sizeof(std::uint64_t); ++i)
    to[i] = __atomic_load_n(&from[i], __ATOMIC_RELAXED);
  return out;
}

std::vector<std::string> ManaModel::violations(std::uint32_t queue_id) const {
  Wq* q = wq(queue_id);
  return q ? q->violations : std::vector<std::string>{};
}

const std::vector<std::vector<std::uint8_t>>& ManaModel::sent(std::uint32_t sq_id) const {
  static const std::vector<std::vector<std::uint8_t>> none;
  Wq* q = wq(sq_id);
  return q ? q->sent : none;
}

}  // namespace rawpipe::mana
