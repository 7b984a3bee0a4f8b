// libFuzzer target for the classify stage with random rules.
//
// Input layout: rule texts separated by '\n', then a NUL byte, then one byte of ingress port id,
// then one frame. Every line parse_match_rule accepts becomes a rule for endpoint = its index
// (`port pN` resolves to id N). The frame is parsed in a guarded pool slot (a read past the frame
// faults) and classified. A naive matcher, written from the grammar in rule.hh and not from the
// table's code, must agree: the packet reaches the endpoint of a rule the naive matcher says
// matches, and is dropped with kNoMatch only when no rule matches. With one rule the answer must
// be exactly the naive one.
//
// Seeds: tests/fuzz/corpus/classify/.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "pipeline/classify/table.hh"
#include "pipeline/parse/parse.hh"
#include "tests/support/guarded_pool.hh"
#include "pipeline/port/driver.hh"

namespace {

using namespace rawpipe;

constexpr std::size_t kMaxRules = 16;

testing::GuardedPool* guarded() {
  static testing::GuardedPool* g = [] {
    auto p = testing::GuardedPool::create(16384);
    if (!p) std::abort();
    return p.release();
  }();
  return g;
}

// Names the failed check on stderr before aborting, so a crash input explains itself.
#define must(cond)                                                           \
  do {                                                                         \
    if (!(cond)) {                                                             \
      std::fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                            \
    }                                                                          \
  } while (0)

std::uint16_t be16(const std::uint8_t* p) { return static_cast<std::uint16_t>(p[0] << 8 | p[1]); }

// Prefix test bit by bit, independent of IpPrefix::contains and the table's masks.
bool prefix_has(const IpPrefix& p, const std::uint8_t* a) {
  for (unsigned bit = 0; bit < p.len; ++bit) {
    const unsigned byte = bit / 8, shift = 7 - bit % 8;
    if (((p.addr[byte] >> shift) & 1) != ((a[byte] >> shift) & 1)) return false;
  }
  return true;
}

bool naive_match(const MatchRule& r, const Mbuf* m) {
  if (m->l3_type != L3Type::kIpv4 && m->l3_type != L3Type::kIpv6) return false;
  const std::uint8_t* d = const_cast<Mbuf*>(m)->data();
  const std::uint8_t* l3 = d + m->l3_off;
  std::uint8_t dst[16]{}, src[16]{};
  if (m->l3_type == L3Type::kIpv4) {
    std::memcpy(dst, l3 + 16, 4);
    std::memcpy(src, l3 + 12, 4);
  } else {
    std::memcpy(dst, l3 + 24, 16);
    std::memcpy(src, l3 + 8, 16);
  }
  if (r.ip_proto != kIpProtoAny && r.ip_proto != m->l4_proto) return false;
  if (r.dst_ip && (r.dst_ip->family != m->l3_type || !prefix_has(*r.dst_ip, dst))) return false;
  if (r.src_ip && (r.src_ip->family != m->l3_type || !prefix_has(*r.src_ip, src))) return false;
  const bool ports = m->l4_off != 0 && m->frag_off == 0 && (m->l4_proto == 17 || m->l4_proto == 6);
  if ((r.dst_port || r.src_port) && !ports) return false;
  if (r.dst_port && *r.dst_port != be16(d + m->l4_off + 2)) return false;
  if (r.src_port && *r.src_port != be16(d + m->l4_off)) return false;
  if (r.vlan && (m->vlan_count == 0 || *r.vlan != (m->vlan_tci[0] & 0x0fff))) return false;
  if (r.ingress_port && *r.ingress_port != m->port) return false;
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto* nul = static_cast<const std::uint8_t*>(std::memchr(data, 0, size));
  if (!nul || static_cast<std::size_t>(nul - data) + 2 > size) return -1;
  std::string_view text(reinterpret_cast<const char*>(data), static_cast<std::size_t>(nul - data));
  const std::uint8_t ingress = nul[1] & 3;
  const std::uint8_t* frame = nul + 2;
  const std::size_t frame_len = size - static_cast<std::size_t>(frame - data);

  std::vector<TableRule> rules;
  while (!text.empty() && rules.size() < kMaxRules) {
    const std::size_t eol = text.find('\n');
    std::string_view line = text.substr(0, eol);
    text = eol == std::string_view::npos ? std::string_view{} : text.substr(eol + 1);
    auto r = parse_match_rule(line);
    if (!r) {
      must(!r.message().empty());
      continue;
    }
    MatchRule m = std::move(r).value();
    // A rule the parser accepts must print back to text it accepts with the same meaning.
    auto again = parse_match_rule(format_match_rule(m));
    must(static_cast<bool>(again));
    must(again.value().ip_proto == m.ip_proto && again.value().dst_ip == m.dst_ip &&
          again.value().src_ip == m.src_ip && again.value().dst_port == m.dst_port &&
          again.value().src_port == m.src_port && again.value().vlan == m.vlan &&
          again.value().ingress_port_name == m.ingress_port_name);
    if (!m.ingress_port_name.empty()) {
      const std::string& n = m.ingress_port_name;
      if (n.size() != 2 || n[0] != 'p' || n[1] < '0' || n[1] > '3') continue;  // unresolved: skip
      m.ingress_port = static_cast<std::uint16_t>(n[1] - '0');
    }
    const auto ep = static_cast<std::uint16_t>(rules.size());
    rules.push_back({SteeringRule{std::move(m), ep, ep + 1u}, ep + 1u});
  }
  auto table = ClassifyTable::build(rules, TableDefault{});
  must(static_cast<bool>(table));

  testing::GuardedPool* g = guarded();
  if (frame_len > g->max_frame()) return -1;
  Mbuf* m = g->place(frame, frame_len);
  m->port = ingress;
  m->endpoint = Mbuf::kNoEndpoint;
  parse_burst(&m, 1);
  if (m->drop_reason != 0) {
    const std::uint8_t before = m->drop_reason;
    table.value()->classify_burst(&m, 1);
    must(m->drop_reason == before && m->endpoint == Mbuf::kNoEndpoint);  // parse drops left alone
    return 0;
  }
  table.value()->classify_burst(&m, 1);
  bool any = false;
  for (const TableRule& tr : rules) any = any || naive_match(tr.rule.match, m);
  if (m->drop_reason == 0) {
    must(m->endpoint < rules.size());
    const TableRule& won = rules[m->endpoint];
    must(naive_match(won.rule.match, m));
    must(m->flow_tag == won.rule.flow_tag);
    if (rules.size() == 1) must(any);
  } else {
    must(m->drop_reason == static_cast<std::uint8_t>(DropReason::kNoMatch));
    must(!any);
  }
  return 0;
}
