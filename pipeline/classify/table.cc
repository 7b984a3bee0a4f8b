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
namespace {

constexpr std::uint8_t kProtoUdp = 17;
constexpr std::uint8_t kProtoTcp = 6;

RAWPIPE_ALWAYS_INLINE std::uint32_t hash_key(const FlowKey& k) noexcept {
  std::uint64_t w[5];
  std::memcpy(w, &k, sizeof w);
  std::uint64_t h = 0x9e3779b9u;
  for (std::uint64_t x : w) h = _mm_crc32_u64(h, x);
  return static_cast<std::uint32_t>(h);
}

RAWPIPE_ALWAYS_INLINE bool key_equal(const FlowKey& a, const FlowKey& b) noexcept {
  std::uint64_t x[5], y[5];
  std::memcpy(x, &a, sizeof x);
  std::memcpy(y, &b, sizeof y);
  return ((x[0] ^ y[0]) | (x[1] ^ y[1]) | (x[2] ^ y[2]) | (x[3] ^ y[3]) | (x[4] ^ y[4])) == 0;
}

// What the data path extracts from one packet.
struct PacketView {
  FlowKey key;       // full 5-tuple (ports zero when absent)
  bool has_ports;
  bool has_vlan;
  std::uint16_t vlan;
  std::uint16_t port;
};

// False for packets the rules cannot match (not IP). Reads only bytes parse validated: the
// addresses inside the IP header at l3_off and, when l4_off is set for UDP/TCP, the first four
// bytes of the L4 header.
RAWPIPE_ALWAYS_INLINE bool view_packet(const Mbuf* m, PacketView& v) noexcept {
  const std::uint8_t* d = m->data();
  const std::uint8_t* l3 = d + m->l3_off;
  v.key.dst[1] = v.key.src[1] = 0;
  if (m->l3_type == L3Type::kIpv4) {
    std::uint32_t a, b;
    std::memcpy(&a, l3 + 16, 4);
    std::memcpy(&b, l3 + 12, 4);
    v.key.dst[0] = a;
    v.key.src[0] = b;
  } else if (m->l3_type == L3Type::kIpv6) {
    std::memcpy(v.key.dst, l3 + 24, 16);
    std::memcpy(v.key.src, l3 + 8, 16);
  } else {
    return false;
  }
  v.key.family = static_cast<std::uint8_t>(m->l3_type);
  v.key.proto = m->l4_proto;
  v.key.pad[0] = v.key.pad[1] = 0;
  v.has_ports = m->l4_off != 0 && m->frag_off == 0 && (m->l4_proto == kProtoUdp || m->l4_proto == kProtoTcp);
  if (v.has_ports) {
    const std::uint8_t* l4 = d + m->l4_off;
    v.key.sport = wire::load_be16(l4);
    v.key.dport = wire::load_be16(l4 + 2);
  } else {
    v.key.sport = v.key.dport = 0;
  }
  v.has_vlan = m->vlan_count != 0;
  v.vlan = m->vlan_tci[0] & wire::kVlanVidMask;
  v.port = m->port;
  return true;
}

RAWPIPE_ALWAYS_INLINE bool rule_matches(const CompiledRule& r, const PacketView& v) noexcept {
  if (r.family && r.family != v.key.family) return false;
  if (r.proto && r.proto != v.key.proto) return false;
  std::uint64_t addr_diff = ((v.key.dst[0] & r.dst_mask[0]) ^ r.dst[0]) | ((v.key.dst[1] & r.dst_mask[1]) ^ r.dst[1]) |
                            ((v.key.src[0] & r.src_mask[0]) ^ r.src[0]) | ((v.key.src[1] & r.src_mask[1]) ^ r.src[1]);
  if (addr_diff) return false;
  if ((r.has_dport | r.has_sport) && !v.has_ports) return false;
  if (r.has_dport && r.dport != v.key.dport) return false;
  if (r.has_sport && r.sport != v.key.sport) return false;
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
  r.endpoint = tr.rule.endpoint;
  r.flow_tag = tr.rule.flow_tag;
  r.rule_id = tr.id;
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
      std::stable_sort(cands.begin(), cands.end(), more_specific);
      std::uint32_t i = hash_key(key) & h.mask;
      while (h.slots[i].count != 0) i = (i + 1) & h.mask;
      h.slots[i].key = key;
      h.slots[i].first = static_cast<std::uint32_t>(t->cands_.size());
      h.slots[i].count = static_cast<std::uint32_t>(cands.size());
      t->cands_.insert(t->cands_.end(), cands.begin(), cands.end());
      (g == 0 ? t->n5_ : t->n3_) += cands.size();
    }
  }
  return t;
}

namespace {

template <typename Slot>
RAWPIPE_ALWAYS_INLINE const Slot* find_slot(const std::vector<Slot>& slots, std::uint32_t mask,
                                            const FlowKey& k) noexcept {
  std::uint32_t i = hash_key(k) & mask;
  for (;;) {
    const Slot& s = slots[i];
    if (s.count == 0) return nullptr;  // load <= 1/2 guarantees an empty slot ends every probe
    if (key_equal(s.key, k)) return &s;
    i = (i + 1) & mask;
  }
}

}  // namespace

const CompiledRule* ClassifyTable::lookup(const Mbuf* m) const noexcept {
  PacketView v;
  if (!view_packet(m, v)) return nullptr;
  if (v.has_ports) {
    if (n5_) {
      if (const Slot* s = find_slot(h5_.slots, h5_.mask, v.key))
        for (std::uint32_t i = s->first; i < s->first + s->count; ++i)
          if (rule_matches(cands_[i], v)) return &cands_[i];
    }
    if (n3_) {
      FlowKey k3 = v.key;
      k3.src[0] = k3.src[1] = 0;
      k3.sport = 0;
      if (const Slot* s = find_slot(h3_.slots, h3_.mask, k3))
        for (std::uint32_t i = s->first; i < s->first + s->count; ++i)
          if (rule_matches(cands_[i], v)) return &cands_[i];
    }
  }
  for (const CompiledRule& r : wild_)
    if (rule_matches(r, v)) return &r;
  return nullptr;
}

void ClassifyTable::classify_burst(Mbuf* const* pkts, unsigned n) const noexcept {
  const std::uint8_t no_match = default_.endpoint == Mbuf::kNoEndpoint ? static_cast<std::uint8_t>(DropReason::kNoMatch) : 0;
  for (unsigned i = 0; i < n; ++i) {
    Mbuf* m = pkts[i];
    if (m->drop_reason != 0) [[unlikely]]
      continue;
    const CompiledRule* r = lookup(m);
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

}  // namespace rawpipe
