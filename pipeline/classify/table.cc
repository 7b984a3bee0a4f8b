#include "pipeline/classify/table.hh"

#include <nmmintrin.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <map>
#include <tuple>

#include "pipeline/stats/drop_reason.hh"
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

}  // namespace

Result<std::unique_ptr<ClassifyTable>> ClassifyTable::build(const std::vector<TableRule>& rules, TableDefault dflt) {
  std::unique_ptr<ClassifyTable> t(new ClassifyTable());
  t->default_ = dflt;
  std::map<FlowKey, std::vector<CompiledRule>, KeyLess> groups[2];
  for (const TableRule& tr : rules) {
    const MatchRule& m = tr.rule.match;
    if (!m.ingress_port_name.empty() && !m.ingress_port)
      return Status::errorf("rule '{}': port '{}' was not resolved to a port id", m.text, m.ingress_port_name);
    CompiledRule r = compile(tr);
    Level level = level_of(m);
    if (level == Level::kWild)
      t->wild_.push_back(r);
    else
      groups[level == Level::k5 ? 0 : 1][exact_key(r, level)].push_back(r);
  }
  std::stable_sort(t->wild_.begin(), t->wild_.end(), more_specific);
  for (int g = 0; g < 2; ++g) {
    Hash& h = g == 0 ? t->h5_ : t->h3_;
    (g == 0 ? t->n5_ : t->n3_) = 0;
    if (groups[g].empty()) continue;
    std::size_t cap = std::bit_ceil(std::max<std::size_t>(16, 2 * groups[g].size()));
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
      const CompiledRule& c0 = cands.front();
      // Pure: one rule, and the key already says everything it checks.
      const bool exact_src = g == 0 || (c0.src_len == 0 && !c0.has_sport);
      h.slots[i].pure = cands.size() == 1 && exact_src && !c0.has_vlan && !c0.has_ingress;
      h.slots[i].hit = c0.hit;
      t->cands_.insert(t->cands_.end(), cands.begin(), cands.end());
      (g == 0 ? t->n5_ : t->n3_) += cands.size();
    }
  }
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

}  // namespace

namespace {

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

}  // namespace

// Shared by lookup() and classify_burst(); h5/h3 are the slot hashes when the caller has them.
#define RAWPIPE_CLASSIFY_LOOKUP(V, H5, H3)                                                        \
  do {                                                                                            \
    if ((V).has_ports) {                                                                          \
      if (n5_) {                                                                                  \
        if (const Slot* s = find_slot(h5_.slots, h5_.mask, (V).w, (H5))) {                      \
          if (s->pure) return &s->hit;                                                            \
          for (std::uint32_t i = s->first; i < s->first + s->count; ++i)                          \
            if (rule_matches(cands_[i], (V))) return &cands_[i].hit;                              \
        }                                                                                         \
      }                                                                                           \
      if (n3_) {                                                                                  \
        if (const Slot* s = find_slot(h3_.slots, h3_.mask, Key3(V).w, (H3))) {             \
          if (s->pure) return &s->hit;                                                            \
          for (std::uint32_t i = s->first; i < s->first + s->count; ++i)                          \
            if (rule_matches(cands_[i], (V))) return &cands_[i].hit;                              \
        }                                                                                         \
      }                                                                                           \
    }                                                                                             \
    for (const CompiledRule& r : wild_)                                                           \
      if (rule_matches(r, (V))) return &r.hit;                                                    \
    return nullptr;                                                                               \
  } while (0)

const RuleHit* ClassifyTable::lookup(const Mbuf* m) const noexcept {
  PacketView v;
  if (!view_packet(m, v)) return nullptr;
  const std::uint32_t h5 = n5_ ? hash5(v) : 0;
  const std::uint32_t h3 = n3_ ? hash3(v) : 0;
  RAWPIPE_CLASSIFY_LOOKUP(v, h5, h3);
}

namespace {
// Packets looked at per group: views and hashes first (prefetching the slots they land on), then
// the compares, so slot loads of a group overlap instead of waiting one after another.
constexpr unsigned kGroup = 16;
}  // namespace

void ClassifyTable::classify_burst(Mbuf* const* pkts, unsigned n) const noexcept {
  const std::uint8_t no_match = default_.endpoint == Mbuf::kNoEndpoint ? static_cast<std::uint8_t>(DropReason::kNoMatch) : 0;
  PacketView views[kGroup];
  std::uint32_t h5[kGroup], h3[kGroup];
  bool ip[kGroup];
  for (unsigned base = 0; base < n; base += kGroup) {
    const unsigned g = n - base < kGroup ? n - base : kGroup;
    for (unsigned j = 0; j < g; ++j) {
      const Mbuf* m = pkts[base + j];
      ip[j] = m->drop_reason == 0 && view_packet(m, views[j]);
      h5[j] = h3[j] = 0;
      if (!ip[j] || !views[j].has_ports) continue;
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
      if (m->drop_reason != 0) [[unlikely]]
        continue;
      const RuleHit* r = ip[j] ? match_view(views[j], h5[j], h3[j]) : nullptr;
      if (r) [[likely]] {
        m->endpoint = r->endpoint;
        if (r->flow_tag) {
          m->flow_tag = r->flow_tag;
          m->flags |= pkt_flag::kFlowTag;
        }
      } else {
        m->endpoint = default_.endpoint;
        m->drop_reason = no_match;
      }
    }
  }
}

RAWPIPE_ALWAYS_INLINE const RuleHit* ClassifyTable::match_view(const PacketView& v, std::uint32_t h5,
                                                               std::uint32_t h3) const noexcept {
  RAWPIPE_CLASSIFY_LOOKUP(v, h5, h3);
}

#undef RAWPIPE_CLASSIFY_LOOKUP

}  // namespace rawpipe
