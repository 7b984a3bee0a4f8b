#include "pipeline/classify/table.hh"

#include <nmmintrin.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstring>
#include <map>
#include <tuple>

#include "rawpipe/drop_reason.hh"
#include "pipeline/parse/udp4_key.hh"
#include "pipeline/wire/wire.hh"

namespace rawpipe {

// What the data path extracts from one packet. The key is kept as the five 64-bit words of a
// FlowKey, each written whole: writing it field by field and reading it back as words would stall
// on store-to-load forwarding in the hash and compare.
struct PacketView {
  std::uint64_t w[5];  // dst[2], src[2], tail = dport | sport << 16 | proto << 32 | family << 40
  std::uint16_t dport, sport;
  std::uint8_t proto, family;
  bool has_ports;
  bool has_vlan;
  std::uint16_t vlan;
  std::uint16_t port;
};

namespace {

constexpr std::uint8_t kProtoUdp = 17;
constexpr std::uint8_t kProtoTcp = 6;
// The tail word without the source port: what a 3-tuple key holds.
constexpr std::uint64_t kTail3Mask = ~(std::uint64_t{0xffff} << 16);

RAWPIPE_ALWAYS_INLINE std::uint32_t hash_words(std::uint64_t a, std::uint64_t b, std::uint64_t c, std::uint64_t d,
                                               std::uint64_t e) noexcept {
  std::uint64_t h = 0x9e3779b9u;
  h = _mm_crc32_u64(h, a);
  h = _mm_crc32_u64(h, b);
  h = _mm_crc32_u64(h, c);
  h = _mm_crc32_u64(h, d);
  h = _mm_crc32_u64(h, e);
  return static_cast<std::uint32_t>(h);
}

RAWPIPE_ALWAYS_INLINE std::uint32_t hash_key(const FlowKey& k) noexcept {
  std::uint64_t w[5];
  std::memcpy(w, &k, sizeof w);
  return hash_words(w[0], w[1], w[2], w[3], w[4]);
}

RAWPIPE_ALWAYS_INLINE bool key_equal(const FlowKey& a, std::uint64_t b0, std::uint64_t b1, std::uint64_t b2,
                                     std::uint64_t b3, std::uint64_t b4) noexcept {
  std::uint64_t x[5];
  std::memcpy(x, &a, sizeof x);
  return ((x[0] ^ b0) | (x[1] ^ b1) | (x[2] ^ b2) | (x[3] ^ b3) | (x[4] ^ b4)) == 0;
}

// False for packets the rules cannot match (not IP). Reads only bytes parse validated: the
// addresses inside the IP header at l3_off and, when l4_off is set for UDP/TCP, the first four
// bytes of the L4 header.
RAWPIPE_ALWAYS_INLINE bool view_packet(const Mbuf* m, PacketView& v) noexcept {
  const std::uint8_t* d = m->data();
  const std::uint8_t* l3 = d + m->l3_off;
  if (m->l3_type == L3Type::kIpv4) {
    std::uint32_t a, b;
    std::memcpy(&a, l3 + 16, 4);
    std::memcpy(&b, l3 + 12, 4);
    v.w[0] = a;
    v.w[1] = 0;
    v.w[2] = b;
    v.w[3] = 0;
  } else if (m->l3_type == L3Type::kIpv6) {
    std::memcpy(&v.w[0], l3 + 24, 16);
    std::memcpy(&v.w[2], l3 + 8, 16);
  } else {
    return false;
  }
  const std::uint8_t proto = m->l4_proto;
  const std::uint8_t family = static_cast<std::uint8_t>(m->l3_type);
  const bool has_ports = m->l4_off != 0 && m->frag_off == 0 && (proto == kProtoUdp || proto == kProtoTcp);
  std::uint16_t sport = 0, dport = 0;
  if (has_ports) {
    const std::uint8_t* l4 = d + m->l4_off;
    sport = wire::load_be16(l4);
    dport = wire::load_be16(l4 + 2);
  }
  v.w[4] = std::uint64_t{dport} | std::uint64_t{sport} << 16 | std::uint64_t{proto} << 32 | std::uint64_t{family} << 40;
  v.dport = dport;
  v.sport = sport;
  v.proto = proto;
  v.family = family;
  v.has_ports = has_ports;
  v.has_vlan = m->vlan_count != 0;
  v.vlan = m->vlan_tci[0] & wire::kVlanVidMask;
  v.port = m->port;
  return true;
}

RAWPIPE_ALWAYS_INLINE bool rule_matches(const CompiledRule& r, const PacketView& v) noexcept {
  if (r.family && r.family != v.family) return false;
  if (r.proto && r.proto != v.proto) return false;
  std::uint64_t addr_diff = ((v.w[0] & r.dst_mask[0]) ^ r.dst[0]) | ((v.w[1] & r.dst_mask[1]) ^ r.dst[1]) |
                            ((v.w[2] & r.src_mask[0]) ^ r.src[0]) | ((v.w[3] & r.src_mask[1]) ^ r.src[1]);
  if (addr_diff) return false;
  if ((r.has_dport | r.has_sport) && !v.has_ports) return false;
  if (r.has_dport && r.dport != v.dport) return false;
  if (r.has_sport && r.sport != v.sport) return false;
  if (r.has_vlan && (!v.has_vlan || r.vlan != v.vlan)) return false;
  if (r.has_ingress && r.ingress != v.port) return false;
  return true;
}

void prefix_words(const std::optional<IpPrefix>& p, std::uint64_t addr[2], std::uint64_t mask[2]) {
  std::uint8_t a[16] = {}, m[16] = {};
  if (p) {
    for (unsigned bit = 0; bit < p->len; ++bit) m[bit / 8] |= static_cast<std::uint8_t>(0x80u >> (bit % 8));
    for (unsigned i = 0; i < 16; ++i) a[i] = p->addr[i] & m[i];
  }
  std::memcpy(addr, a, 16);
  std::memcpy(mask, m, 16);
}

CompiledRule compile(const TableRule& tr) {
  const MatchRule& mr = tr.rule.match;
  CompiledRule r{};
  prefix_words(mr.dst_ip, r.dst, r.dst_mask);
  prefix_words(mr.src_ip, r.src, r.src_mask);
  r.family = static_cast<std::uint8_t>(mr.family());
  r.proto = mr.ip_proto;
  r.dst_len = mr.dst_ip ? mr.dst_ip->len : 0;
  r.src_len = mr.src_ip ? mr.src_ip->len : 0;
  r.has_dport = mr.dst_port.has_value();
  r.dport = mr.dst_port.value_or(0);
  r.has_sport = mr.src_port.has_value();
  r.sport = mr.src_port.value_or(0);
  r.has_vlan = mr.vlan.has_value();
  r.vlan = mr.vlan.value_or(0);
  r.has_ingress = mr.ingress_port.has_value();
  r.ingress = mr.ingress_port.value_or(0);
  r.hit.endpoint = tr.rule.endpoint;
  r.hit.flow_tag = tr.rule.flow_tag;
  r.hit.rule_id = tr.id;
  return r;
}

// Most specific first; see the order in table.hh.
bool more_specific(const CompiledRule& a, const CompiledRule& b) {
  auto rank = [](const CompiledRule& r) {
    return std::make_tuple(r.dst_len, r.has_dport, r.src_len, r.has_sport, r.has_vlan, r.has_ingress, r.proto != 0);
  };
  return rank(a) > rank(b);
}

enum class Level { k5, k3, kWild };

Level level_of(const MatchRule& m) {
  if (m.ip_proto == kIpProtoAny || !m.dst_ip || !m.dst_ip->is_host() || !m.dst_port) return Level::kWild;
  if (m.src_ip && m.src_ip->is_host() && m.src_port) return Level::k5;
  return Level::k3;
}

FlowKey exact_key(const CompiledRule& r, Level level) {
  FlowKey k{};
  k.dst[0] = r.dst[0];
  k.dst[1] = r.dst[1];
  k.dport = r.dport;
  k.proto = r.proto;
  k.family = r.family;
  if (level == Level::k5) {
    k.src[0] = r.src[0];
    k.src[1] = r.src[1];
    k.sport = r.sport;
  }
  return k;
}

struct KeyLess {
  bool operator()(const FlowKey& a, const FlowKey& b) const { return std::memcmp(&a, &b, sizeof a) < 0; }
};

// IPv4 exact keys, packed so a lookup needs no byte swaps: addresses and ports stay in network
// order as a little-endian load reads them (`ports` is the raw 32-bit load of the UDP/TCP header's
// first four bytes: source port in the low half, destination port in the high half).
//   5-tuple: k0 = dst | src << 32,                    k1 = ports | proto << 32
//   3-tuple: k0 = dst | proto << 32 | dport << 48,    k1 = 0
RAWPIPE_ALWAYS_INLINE std::uint64_t v4_key5_lo(std::uint32_t dst, std::uint32_t src) noexcept {
  return dst | std::uint64_t{src} << 32;
}
RAWPIPE_ALWAYS_INLINE std::uint64_t v4_key5_hi(std::uint32_t ports, std::uint8_t proto) noexcept {
  return ports | std::uint64_t{proto} << 32;
}
RAWPIPE_ALWAYS_INLINE constexpr std::uint64_t v4_key3(std::uint32_t dst, std::uint32_t ports,
                                                       std::uint8_t proto) noexcept {
  return dst | std::uint64_t{proto} << 32 | std::uint64_t{ports >> 16} << 48;
}
// Parse's key of a plain UDP frame is this layout's 3-tuple key (pipeline/parse/udp4_key.hh).
static_assert(udp4_key(0x0a0b0c0du | std::uint64_t{0x13881234u} << 32) == v4_key3(0x0a0b0c0du, 0x13881234u, 17));
RAWPIPE_ALWAYS_INLINE std::uint32_t v4_hash5(std::uint64_t k0, std::uint64_t k1) noexcept {
  return static_cast<std::uint32_t>(_mm_crc32_u64(_mm_crc32_u64(0x9e3779b9u, k0), k1));
}
RAWPIPE_ALWAYS_INLINE std::uint32_t v4_hash3(std::uint64_t k0) noexcept {
  return static_cast<std::uint32_t>(_mm_crc32_u64(0x9e3779b9u, k0));
}
RAWPIPE_ALWAYS_INLINE std::uint32_t raw_ports(std::uint16_t sport, std::uint16_t dport) noexcept {
  return std::uint32_t{wire::hton16(sport)} | std::uint32_t{wire::hton16(dport)} << 16;
}

// A rule's IPv4 key words (k1 is 0 for a 3-tuple).
std::pair<std::uint64_t, std::uint64_t> v4_rule_key(const CompiledRule& r, Level level) {
  const auto dst = static_cast<std::uint32_t>(r.dst[0]);
  if (level == Level::k5) {
    const auto src = static_cast<std::uint32_t>(r.src[0]);
    return {v4_key5_lo(dst, src), v4_key5_hi(raw_ports(r.sport, r.dport), r.proto)};
  }
  return {v4_key3(dst, raw_ports(0, r.dport), r.proto), 0};
}

// Pure: one rule, and the key already says everything it checks.
bool is_pure(const std::vector<CompiledRule>& cands, Level level) {
  const CompiledRule& c0 = cands.front();
  const bool exact_src = level == Level::k5 || (c0.src_len == 0 && !c0.has_sport);
  return cands.size() == 1 && exact_src && !c0.has_vlan && !c0.has_ingress;
}

// A table this size (8 KiB of Slot4, 16 KiB of Slot) stays in L1 while it is used: a probe costs
// no miss, so there is nothing for the grouped prefetching of classify_grouped() to hide.
constexpr std::size_t kSmallTableSlots = 256;

std::size_t table_capacity(std::size_t keys) { return std::bit_ceil(std::max<std::size_t>(16, 2 * keys)); }

}  // namespace

Result<std::unique_ptr<ClassifyTable>> ClassifyTable::build(const std::vector<TableRule>& rules, TableDefault dflt) {
  static std::atomic<std::uint64_t> last_id{0};
  std::unique_ptr<ClassifyTable> t(new ClassifyTable());
  t->id_ = last_id.fetch_add(1, std::memory_order_relaxed) + 1;
  t->default_ = dflt;
  // [0] IPv6 5-tuple, [1] IPv6 3-tuple (FlowKey tables); IPv4 ones keyed by their packed words.
  std::map<FlowKey, std::vector<CompiledRule>, KeyLess> groups[2];
  std::map<std::pair<std::uint64_t, std::uint64_t>, std::vector<CompiledRule>> groups4[2];
  for (const TableRule& tr : rules) {
    const MatchRule& m = tr.rule.match;
    if (!m.ingress_port_name.empty() && !m.ingress_port)
      return Status::errorf("rule '{}': port '{}' was not resolved to a port id", m.text, m.ingress_port_name);
    CompiledRule r = compile(tr);
    Level level = level_of(m);
    if (level == Level::kWild)
      t->wild_.push_back(r);
    else if (r.family == static_cast<std::uint8_t>(L3Type::kIpv4))
      groups4[level == Level::k5 ? 0 : 1][v4_rule_key(r, level)].push_back(r);
    else
      groups[level == Level::k5 ? 0 : 1][exact_key(r, level)].push_back(r);
  }
  std::stable_sort(t->wild_.begin(), t->wild_.end(), more_specific);
  for (int g = 0; g < 2; ++g) {
    Hash& h = g == 0 ? t->h5_ : t->h3_;
    const Level level = g == 0 ? Level::k5 : Level::k3;
    (g == 0 ? t->n5_ : t->n3_) = 0;
    if (groups[g].empty()) continue;
    const std::size_t cap = table_capacity(groups[g].size());
    h.slots.assign(cap, Slot{});
    h.mask = static_cast<std::uint32_t>(cap - 1);
    for (auto& [key, cands] : groups[g]) {
      if (cands.size() > 0xffff)
        return Status::errorf("more than 65535 rules share the exact key of rule '{}'", rules.front().rule.match.text);
      std::stable_sort(cands.begin(), cands.end(), more_specific);
      std::uint32_t i = hash_key(key) & h.mask;
      while (h.slots[i].count != 0) i = (i + 1) & h.mask;
      h.slots[i].key = key;
      h.slots[i].first = static_cast<std::uint32_t>(t->cands_.size());
      h.slots[i].count = static_cast<std::uint16_t>(cands.size());
      h.slots[i].pure = is_pure(cands, level);
      h.slots[i].hit = cands.front().hit;
      t->cands_.insert(t->cands_.end(), cands.begin(), cands.end());
      (g == 0 ? t->n5_ : t->n3_) += cands.size();
    }
  }
  for (int g = 0; g < 2; ++g) {
    Hash4& h = g == 0 ? t->v4_5_ : t->v4_3_;
    const Level level = g == 0 ? Level::k5 : Level::k3;
    if (groups4[g].empty()) continue;
    const std::size_t cap = table_capacity(groups4[g].size());
    h.slots.assign(cap, Slot4{});
    h.mask = static_cast<std::uint32_t>(cap - 1);
    for (auto& [key, cands] : groups4[g]) {
      if (cands.size() > 0xffff)
        return Status::errorf("more than 65535 rules share the exact key of rule '{}'", rules.front().rule.match.text);
      std::stable_sort(cands.begin(), cands.end(), more_specific);
      const std::uint32_t hash = level == Level::k5 ? v4_hash5(key.first, key.second) : v4_hash3(key.first);
      std::uint32_t i = hash & h.mask;
      while (h.slots[i].count != 0) i = (i + 1) & h.mask;
      Slot4& s = h.slots[i];
      s.k0 = key.first;
      s.k1 = key.second;
      s.first = static_cast<std::uint32_t>(t->cands_.size());
      s.count = static_cast<std::uint16_t>(cands.size());
      s.pure = is_pure(cands, level);
      s.endpoint = cands.front().hit.endpoint;
      s.flow_tag = cands.front().hit.flow_tag;
      s.tagged = s.pure && s.flow_tag != 0;
      t->cands_.insert(t->cands_.end(), cands.begin(), cands.end());
      h.rules += cands.size();
    }
  }
  // What an IPv4 packet with ports is compared on, over every rule that can match one: a 5-tuple
  // rule makes every source relevant, and then the memo of classify_v4_memo() would rarely hit.
  auto widen = [&t](const CompiledRule& r) {
    if (r.family == static_cast<std::uint8_t>(L3Type::kIpv6)) return;
    t->v4_relevant_.dst |= static_cast<std::uint32_t>(r.dst_mask[0]);
    t->v4_relevant_.src |= static_cast<std::uint32_t>(r.src_mask[0]);
    t->v4_relevant_.ports |= raw_ports(r.has_sport ? 0xffff : 0, r.has_dport ? 0xffff : 0);
    if (r.has_vlan) t->v4_relevant_.vlan = 0x1fff;
    if (r.has_ingress) t->v4_relevant_.ingress = 0xffff;
  };
  for (const CompiledRule& r : t->cands_) widen(r);
  for (const CompiledRule& r : t->wild_) widen(r);
  V4Relevance& rel = t->v4_relevant_;
  rel.wide = rel.src != 0 || (rel.ports & 0xffff) != 0 || rel.vlan != 0 || rel.ingress != 0;
  rel.key3 = v4_key3(rel.dst, rel.ports, 0xff);
  // IPv6 packets take the full lookup on that path, without prefetching: fine while their tables
  // are small too.
  t->memo_v4_ = t->v4_5_.rules == 0 && t->v4_3_.slots.size() <= kSmallTableSlots &&
                t->h5_.slots.size() + t->h3_.slots.size() <= kSmallTableSlots;
  return t;
}

namespace {

template <typename Slot>
RAWPIPE_ALWAYS_INLINE const Slot* find_slot(const std::vector<Slot>& slots, std::uint32_t mask,
                                            const std::uint64_t* k, std::uint32_t hash) noexcept {
  std::uint32_t i = hash & mask;
  for (;;) {
    const Slot& s = slots[i];
    if (s.count == 0) return nullptr;  // load <= 1/2 guarantees an empty slot ends every probe
    if (key_equal(s.key, k[0], k[1], k[2], k[3], k[4])) return &s;
    i = (i + 1) & mask;
  }
}

template <typename Slot4>
RAWPIPE_ALWAYS_INLINE const Slot4* find_slot4(const std::vector<Slot4>& slots, std::uint32_t mask, std::uint64_t k0,
                                              std::uint64_t k1, std::uint32_t hash) noexcept {
  std::uint32_t i = hash & mask;
  for (;;) {
    const Slot4& s = slots[i];
    if (s.count == 0) return nullptr;  // load <= 1/2 guarantees an empty slot ends every probe
    if (((s.k0 ^ k0) | (s.k1 ^ k1)) == 0) return &s;
    i = (i + 1) & mask;
  }
}

// The 3-tuple key words of a packet: no source address or port.
struct Key3 {
  std::uint64_t w[5];
  RAWPIPE_ALWAYS_INLINE explicit Key3(const PacketView& v) noexcept : w{v.w[0], v.w[1], 0, 0, v.w[4] & kTail3Mask} {}
};

RAWPIPE_ALWAYS_INLINE std::uint32_t hash5(const PacketView& v) noexcept {
  return hash_words(v.w[0], v.w[1], v.w[2], v.w[3], v.w[4]);
}
RAWPIPE_ALWAYS_INLINE std::uint32_t hash3(const PacketView& v) noexcept {
  return hash_words(v.w[0], v.w[1], 0, 0, v.w[4] & kTail3Mask);
}

RAWPIPE_ALWAYS_INLINE void assign_hit(Mbuf* m, std::uint16_t endpoint, bool tagged, std::uint32_t flow_tag) noexcept {
  m->endpoint = endpoint;
  if (tagged) {
    m->flow_tag = flow_tag;
    m->flags |= pkt_flag::kFlowTag;
  }
}

}  // namespace

std::uint8_t ClassifyTable::no_match_reason() const noexcept {
  return default_.endpoint == Mbuf::kNoEndpoint ? static_cast<std::uint8_t>(DropReason::kNoMatch) : 0;
}

RAWPIPE_ALWAYS_INLINE void ClassifyTable::assign_outcome(Mbuf* m, const RuleHit* r, std::uint8_t no_match) const noexcept {
  if (r) [[likely]] {
    assign_hit(m, r->endpoint, r->flow_tag != 0, r->flow_tag);
  } else {
    m->endpoint = default_.endpoint;
    m->drop_reason = no_match;
  }
}

RAWPIPE_ALWAYS_INLINE const RuleHit* ClassifyTable::check_candidates(std::uint32_t first, std::uint32_t count,
                                                                     const PacketView& v) const noexcept {
  for (std::uint32_t i = first; i < first + count; ++i)
    if (rule_matches(cands_[i], v)) return &cands_[i].hit;
  return nullptr;
}

const RuleHit* ClassifyTable::match_v4_exact(const PacketView& v) const noexcept {
  const auto dst = static_cast<std::uint32_t>(v.w[0]);
  const std::uint32_t ports = raw_ports(v.sport, v.dport);
  if (v4_5_.rules) {
    const std::uint64_t k0 = v4_key5_lo(dst, static_cast<std::uint32_t>(v.w[2]));
    const std::uint64_t k1 = v4_key5_hi(ports, v.proto);
    if (const Slot4* s = find_slot4(v4_5_.slots, v4_5_.mask, k0, k1, v4_hash5(k0, k1))) {
      if (s->pure) return &cands_[s->first].hit;
      if (const RuleHit* r = check_candidates(s->first, s->count, v)) return r;
    }
  }
  if (v4_3_.rules) {
    const std::uint64_t k0 = v4_key3(dst, ports, v.proto);
    if (const Slot4* s = find_slot4(v4_3_.slots, v4_3_.mask, k0, 0, v4_hash3(k0))) {
      if (s->pure) return &cands_[s->first].hit;
      if (const RuleHit* r = check_candidates(s->first, s->count, v)) return r;
    }
  }
  return nullptr;
}

// h5/h3 are the IPv6 slot hashes (0 when the caller did not compute them: no IPv6 exact keys).
RAWPIPE_ALWAYS_INLINE const RuleHit* ClassifyTable::match_view(const PacketView& v, std::uint32_t h5,
                                                               std::uint32_t h3) const noexcept {
  if (v.has_ports) {
    if (v.family == static_cast<std::uint8_t>(L3Type::kIpv4)) {
      if (const RuleHit* r = match_v4_exact(v)) return r;
    } else {
      if (n5_) {
        if (const Slot* s = find_slot(h5_.slots, h5_.mask, v.w, h5)) {
          if (s->pure) return &s->hit;
          if (const RuleHit* r = check_candidates(s->first, s->count, v)) return r;
        }
      }
      if (n3_) {
        if (const Slot* s = find_slot(h3_.slots, h3_.mask, Key3(v).w, h3)) {
          if (s->pure) return &s->hit;
          if (const RuleHit* r = check_candidates(s->first, s->count, v)) return r;
        }
      }
    }
  }
  for (const CompiledRule& r : wild_)
    if (rule_matches(r, v)) return &r.hit;
  return nullptr;
}

const RuleHit* ClassifyTable::lookup(const Mbuf* m) const noexcept {
  PacketView v;
  if (!view_packet(m, v)) return nullptr;
  const bool v6_keys = v.has_ports && v.family == static_cast<std::uint8_t>(L3Type::kIpv6);
  const std::uint32_t h5 = v6_keys && n5_ ? hash5(v) : 0;
  const std::uint32_t h3 = v6_keys && n3_ ? hash3(v) : 0;
  return match_view(v, h5, h3);
}

namespace {
// Packets looked at per group: keys and hashes first (prefetching the slots they land on), then
// the compares, so slot loads of a group overlap instead of waiting one after another.
constexpr unsigned kGroup = 16;

enum class Pass : std::uint8_t {
  kSkip,   // dropped by parse: left alone
  kV4,     // IPv4 UDP/TCP with ports, and the table has IPv4 exact keys: packed-key probe
  kView,   // everything else: the generic view (IPv6 hashes computed when there are IPv6 keys)
  kNotIp,  // no rule can match
};
}  // namespace

std::uint16_t ClassifyTable::classify_burst(Mbuf* const* pkts, unsigned n, const std::uint64_t* udp4_keys,
                                            ClassifyMemo* memo) const noexcept {
  if (memo_v4_ && v4_relevant_.wide) return classify_v4_memo<true, false>(pkts, n, nullptr, nullptr);
  if (memo_v4_ && udp4_keys) return classify_v4_memo<false, true>(pkts, n, udp4_keys, memo);
  if (memo_v4_) return classify_v4_memo<false, false>(pkts, n, nullptr, nullptr);
  classify_grouped(pkts, n);
  return Mbuf::kNoEndpoint;
}

// The result for an IPv4 packet with ports whose relevant fields did not repeat: the 3-tuple slot
// when it settles it, else the full lookup. Out of line, so the loop around it keeps its state in
// registers.
__attribute__((noinline)) const RuleHit* ClassifyTable::resolve_v4(const Mbuf* m, std::uint64_t key3) const noexcept {
  if (v4_3_.rules) {
    const Slot4* s = find_slot4(v4_3_.slots, v4_3_.mask, key3, 0, v4_hash3(key3));
    if (s && s->pure) return &cands_[s->first].hit;
    if (s) return lookup(m);  // candidates beyond the key
  }
  return wild_.empty() ? nullptr : lookup(m);
}

// A server's table: a few IPv4 3-tuple rules (each a UDP/TCP service) and wildcards such as
// "udp dst *:5000", traffic from many sources to them. Only the fields some rule examines decide a
// packet's result (v4_relevant_), so a packet whose relevant fields equal the previous packet's
// gets the previous result without a lookup; with 1024 sources to one service every packet after
// the first in a burst does. Anything else (IPv6, no ports) takes the full lookup.
//
// Narrow tables (no rule looks at the source, the VLAN or the ingress port; the usual case) key
// the memo on the 3-tuple key word itself, masked; wide ones on three words.
//
// With parse's keys (kKeyed), a plain UDP frame's 3-tuple key comes ready from parse, and the
// packet's header fields and data are not read at all.
template <bool kWide, bool kKeyed>
std::uint16_t ClassifyTable::classify_v4_memo(Mbuf* const* pkts, unsigned n, const std::uint64_t* udp4_keys,
                                              ClassifyMemo* memo) const noexcept {
  static_assert(!(kWide && kKeyed), "a wide memo compares fields the key does not carry");
  if constexpr (kKeyed) {
    // A burst of one service's traffic: the keys carry no source, so they are all the same.
    // Checking that costs one compare per packet and no branch (it vectorises); the per-packet
    // memo test, result loads and the tests of what the result holds then go.
    std::uint64_t differ = 0;
#pragma GCC unroll 4
    for (unsigned i = 0; i < n; ++i) differ |= udp4_keys[i] ^ udp4_keys[0];
    if (n != 0 && differ == 0 && udp4_keys[0] != kNoUdp4Key) return classify_v4_one_key(pkts, n, udp4_keys[0], memo);
  }
  const std::uint8_t no_match = no_match_reason();
  const V4Relevance rel = v4_relevant_;
  // No packet has these keys: bits 40-47 of a 3-tuple key and bits 53-63 of a wide key's second
  // word are always zero.
  std::uint64_t last_k0 = ~std::uint64_t{0}, last_k1 = ~std::uint64_t{0}, last_k2 = 0;
  const RuleHit* last_hit = nullptr;
  if (memo != nullptr && memo->table_id == id_) {
    last_k0 = memo->key;
    last_hit = memo->hit;
  }
  // Every packet so far alive and given last_hit, which matched: the burst has one endpoint.
  bool one_hit = true;
  for (unsigned i = 0; i < n; ++i) {
    Mbuf* m = pkts[i];
    const RuleHit* r;
    if constexpr (kKeyed) {
      const std::uint64_t key3 = udp4_keys[i];
      if (key3 != kNoUdp4Key) [[likely]] {
        const std::uint64_t k0 = key3 & rel.key3;
        if (k0 == last_k0) [[likely]] {
          r = last_hit;
        } else {
          r = resolve_v4(m, key3);
          one_hit &= i == 0 || r == last_hit;
          last_k0 = k0;
          last_hit = r;
        }
        assign_outcome(m, r, no_match);
        if (r == nullptr) [[unlikely]]
          one_hit = false;
        continue;
      }
    }
    one_hit = false;
    if (m->drop_reason != 0) [[unlikely]]
      continue;
    const std::uint8_t proto = m->l4_proto;
    if (m->l3_type == L3Type::kIpv4 && m->l4_off != 0 && m->frag_off == 0 && (proto == kProtoUdp || proto == kProtoTcp))
        [[likely]] {
      const std::uint8_t* d = m->data();
      std::uint32_t dst, ports;
      std::memcpy(&dst, d + m->l3_off + 16, 4);
      std::memcpy(&ports, d + m->l4_off, 4);
      const std::uint64_t key3 = v4_key3(dst, ports, proto);
      bool same;
      std::uint64_t k0, k1 = 0, k2 = 0;
      if constexpr (kWide) {
        std::uint32_t src;
        std::memcpy(&src, d + m->l3_off + 12, 4);
        const std::uint64_t vlan = m->vlan_count != 0 ? (m->vlan_tci[0] & wire::kVlanVidMask) | 0x1000u : 0;
        k0 = (dst & rel.dst) | std::uint64_t{src & rel.src} << 32;
        k1 = (ports & rel.ports) | std::uint64_t{proto} << 32 | (vlan & rel.vlan) << 40;
        k2 = m->port & rel.ingress;
        same = ((k0 ^ last_k0) | (k1 ^ last_k1) | (k2 ^ last_k2)) == 0;
      } else {
        k0 = key3 & rel.key3;
        same = k0 == last_k0;
      }
      if (same) [[likely]] {
        r = last_hit;
      } else {
        r = resolve_v4(m, key3);
        last_k0 = k0;
        last_k1 = k1;
        last_k2 = k2;
        last_hit = r;
      }
    } else {
      r = lookup(m);
    }
    assign_outcome(m, r, no_match);
  }
  if (memo != nullptr) *memo = ClassifyMemo{id_, last_k0, last_hit};
  return one_hit && n != 0 ? last_hit->endpoint : Mbuf::kNoEndpoint;
}

// classify_v4_memo()'s result for a burst whose packets all carry parse's key `key3`: one memo test
// or lookup, then the same outcome written into every packet.
std::uint16_t ClassifyTable::classify_v4_one_key(Mbuf* const* pkts, unsigned n, std::uint64_t key3,
                                                 ClassifyMemo* memo) const noexcept {
  const std::uint64_t k0 = key3 & v4_relevant_.key3;
  const RuleHit* r = memo != nullptr && memo->table_id == id_ && memo->key == k0 ? memo->hit : resolve_v4(pkts[0], key3);
  if (memo != nullptr) *memo = ClassifyMemo{id_, k0, r};
  if (r == nullptr) [[unlikely]] {
    const std::uint8_t no_match = no_match_reason();
    for (unsigned i = 0; i < n; ++i) assign_outcome(pkts[i], nullptr, no_match);
    return Mbuf::kNoEndpoint;
  }
  // Held in locals: a store into a packet could otherwise alias the rule and force a reload.
  const std::uint16_t endpoint = r->endpoint;
  const std::uint32_t flow_tag = r->flow_tag;
  if (flow_tag == 0) [[likely]] {
#pragma GCC unroll 4
    for (unsigned i = 0; i < n; ++i) pkts[i]->endpoint = endpoint;
  } else {
    for (unsigned i = 0; i < n; ++i) assign_hit(pkts[i], endpoint, true, flow_tag);
  }
  return endpoint;
}

void ClassifyTable::classify_grouped(Mbuf* const* pkts, unsigned n) const noexcept {
  const std::uint8_t no_match = no_match_reason();
  const bool v4_exact = (v4_5_.rules | v4_3_.rules) != 0;
  PacketView views[kGroup];
  std::uint64_t k5lo[kGroup], k5hi[kGroup], k3[kGroup];
  std::uint32_t h5[kGroup], h3[kGroup];
  Pass pass[kGroup];
  for (unsigned base = 0; base < n; base += kGroup) {
    const unsigned g = n - base < kGroup ? n - base : kGroup;
    for (unsigned j = 0; j < g; ++j) {
      const Mbuf* m = pkts[base + j];
      h5[j] = h3[j] = 0;
      if (m->drop_reason != 0) [[unlikely]] {
        pass[j] = Pass::kSkip;
        continue;
      }
      const std::uint8_t proto = m->l4_proto;
      if (v4_exact && m->l3_type == L3Type::kIpv4 && m->l4_off != 0 && m->frag_off == 0 &&
          (proto == kProtoUdp || proto == kProtoTcp)) [[likely]] {
        const std::uint8_t* d = m->data();
        const std::uint8_t* l3 = d + m->l3_off;
        std::uint32_t dst, src, ports;
        std::memcpy(&dst, l3 + 16, 4);
        std::memcpy(&src, l3 + 12, 4);
        std::memcpy(&ports, d + m->l4_off, 4);
        k5lo[j] = v4_key5_lo(dst, src);
        k5hi[j] = v4_key5_hi(ports, proto);
        k3[j] = v4_key3(dst, ports, proto);
        if (v4_5_.rules) {
          h5[j] = v4_hash5(k5lo[j], k5hi[j]);
          prefetch0(&v4_5_.slots[h5[j] & v4_5_.mask]);
        }
        if (v4_3_.rules) {
          h3[j] = v4_hash3(k3[j]);
          prefetch0(&v4_3_.slots[h3[j] & v4_3_.mask]);
        }
        pass[j] = Pass::kV4;
        continue;
      }
      if (!view_packet(m, views[j])) {
        pass[j] = Pass::kNotIp;
        continue;
      }
      pass[j] = Pass::kView;
      if (!views[j].has_ports || views[j].family != static_cast<std::uint8_t>(L3Type::kIpv6)) continue;
      if (n5_) {
        h5[j] = hash5(views[j]);
        prefetch0(&h5_.slots[h5[j] & h5_.mask]);
      }
      if (n3_) {
        h3[j] = hash3(views[j]);
        prefetch0(&h3_.slots[h3[j] & h3_.mask]);
      }
    }
    for (unsigned j = 0; j < g; ++j) {
      Mbuf* m = pkts[base + j];
      const RuleHit* r;
      switch (pass[j]) {
        case Pass::kSkip:
          continue;
        case Pass::kV4:
          if (v4_5_.rules) {
            const Slot4* s = find_slot4(v4_5_.slots, v4_5_.mask, k5lo[j], k5hi[j], h5[j]);
            if (s && s->pure) [[likely]] {
              assign_hit(m, s->endpoint, s->tagged, s->flow_tag);
              continue;
            }
            if (s) {
              r = lookup(m);  // candidates beyond the key: the full lookup decides
              break;
            }
          }
          if (v4_3_.rules) {
            const Slot4* s = find_slot4(v4_3_.slots, v4_3_.mask, k3[j], 0, h3[j]);
            if (s && s->pure) [[likely]] {
              assign_hit(m, s->endpoint, s->tagged, s->flow_tag);
              continue;
            }
          }
          r = lookup(m);  // a non-pure 3-tuple key, or the wildcards
          break;
        case Pass::kView:
          r = match_view(views[j], h5[j], h3[j]);
          break;
        case Pass::kNotIp:
        default:
          r = nullptr;
          break;
      }
      assign_outcome(m, r, no_match);
    }
  }
}

}  // namespace rawpipe
