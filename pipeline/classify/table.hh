// The compiled classification table and the classify stage.
//
// A ClassifyTable is built once from a list of steering rules (control path) and never changes
// afterwards; lcores read it without locks (see classifier.hh for how tables are swapped at run
// time). Lookup order, like libvma.conf priorities:
//   1. exact 5-tuple  (protocol, full dst address, dst port, full src address, src port)
//   2. exact 3-tuple  (protocol, full dst address, dst port), including rules that add a source
//                     prefix, a VLAN or an ingress port on top of such a 3-tuple
//   3. wildcards      every other rule, in an ordered list
// The two exact levels are open-addressing hash tables (power-of-two size, linear probing, load
// <= 1/2, prebuilt). IPv4 keys live in their own pair of tables with the key packed into two
// 64-bit words (see table.cc), so an IPv4 lookup hashes one or two words and compares in place
// without building the generic view; IPv6 keys use the 40-byte FlowKey. A hash slot points at the rules that share its key, most specific first, and
// each of them is checked in full (VLAN, ingress port, source prefix), so a more specific rule on
// the same key is never shadowed. The wildcard list is sorted by: longer destination prefix, dst
// port given, longer source prefix, src port given, VLAN given, ingress port given, protocol
// given; ties keep config order. The first full match wins; when nothing matches, the table's
// default applies (drop with DropReason::kNoMatch, or a catch-all endpoint).
//
// A burst is classified in one of two ways, with the same results. When there are no IPv4 5-tuple
// keys and the 3-tuple ones fit in L1 (a server's few services, wildcards such as "udp dst
// *:5000"), packet by packet, and an IPv4 packet whose fields that any rule examines equal the
// previous packet's takes its result without a lookup. Otherwise in groups: keys and hashes of a
// group first, prefetching their slots, then the compares.
//
// Rules match IP packets only (Mbuf::l3_type is IPv4 or IPv6). Ports are known only for UDP/TCP
// packets whose L4 header parse found (first fragments and unfragmented packets); a rule naming a
// port never matches a packet without one. VLAN rules look at the outer tag's VID.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "rawpipe/mbuf.hh"
#include "pipeline/classify/rule.hh"
#include "rawpipe/status.hh"

namespace rawpipe {

// What a match yields.
struct RuleHit {
  std::uint32_t rule_id;   // the Classifier's handle, for stats and tests
  std::uint32_t flow_tag;
  std::uint16_t endpoint;
};

// A rule reduced to masks and integers; what the data path compares.
struct CompiledRule {
  std::uint64_t dst[2], dst_mask[2];  // address bytes as loaded from the packet, masked
  std::uint64_t src[2], src_mask[2];
  std::uint8_t family;     // 0 any, 4, 6 (L3Type values)
  std::uint8_t proto;      // kIpProtoAny or an IP protocol number
  std::uint8_t dst_len, src_len;
  std::uint16_t dport, sport, vlan, ingress;
  std::uint8_t has_dport, has_sport, has_vlan, has_ingress;
  RuleHit hit;
};

// The packet's fields as the classifier compares them.
struct FlowKey {
  std::uint64_t dst[2];
  std::uint64_t src[2];
  std::uint16_t dport, sport;
  std::uint8_t proto;
  std::uint8_t family;
  std::uint8_t pad[2];
};
static_assert(sizeof(FlowKey) == 40, "FlowKey is hashed and compared as five 64-bit words");

struct PacketView;  // table.cc: the packet fields a lookup compares

struct TableRule {
  SteeringRule rule;       // ingress_port must already be resolved when the name was given
  std::uint32_t id = 0;
};

struct TableDefault {
  std::uint16_t endpoint = Mbuf::kNoEndpoint;  // kNoEndpoint: drop with kNoMatch
};

// What one reader's last IPv4 lookup found, kept from one burst to the next (a burst of a busy
// flow would otherwise start with a full lookup). Owned by the reader (an lcore); valid only for
// the table that wrote it, which a table tells by an id no other table ever has.
struct ClassifyMemo {
  std::uint64_t table_id = 0;
  std::uint64_t key = ~std::uint64_t{0};
  const RuleHit* hit = nullptr;
};

class ClassifyTable {
 public:
  // Control path. Fails only for a rule naming a port by name that was not resolved to an id.
  static Result<std::unique_ptr<ClassifyTable>> build(const std::vector<TableRule>& rules, TableDefault dflt);

  // Data path: sets Mbuf::endpoint of every packet whose drop_reason is 0, and drop_reason =
  // kNoMatch for those that match nothing when the default is drop. Packets already dropped by
  // parse are left alone. Sets flow_tag (and pkt_flag::kFlowTag) from the rule when the rule has
  // a non-zero tag. Reads only the table and the packets; no allocation.
  //
  // udp4_keys, when given, is parse's key of each packet (parse_burst with keys): plain UDP
  // frames are then classified from it alone. Returns the endpoint of the whole burst when the
  // table can tell cheaply that every packet is alive and went to that one endpoint (the lcore
  // then hands the burst over without looking at each packet again), Mbuf::kNoEndpoint when not
  // or when it cannot tell.
  // `memo`, when given, carries the last lookup's result over to the caller's next burst.
  std::uint16_t classify_burst(Mbuf* const* pkts, unsigned n, const std::uint64_t* udp4_keys,
                               ClassifyMemo* memo = nullptr) const noexcept;
  void classify_burst(Mbuf* const* pkts, unsigned n) const noexcept { (void)classify_burst(pkts, n, nullptr); }

  // Looks one packet up; returns what the matching rule yields, or nullptr.
  const RuleHit* lookup(const Mbuf* m) const noexcept;

  std::size_t exact5_count() const noexcept { return n5_ + v4_5_.rules; }
  std::size_t exact3_count() const noexcept { return n3_ + v4_3_.rules; }
  std::size_t wildcard_count() const noexcept { return wild_.size(); }
  std::uint16_t default_endpoint() const noexcept { return default_.endpoint; }

 private:
  // One cache line. A key whose only rule has no constraint beyond the key ("pure", the common
  // case) carries that rule's result here, so a hit reads nothing but this line.
  struct alignas(kCacheLine) Slot {
    FlowKey key;
    std::uint32_t first;   // index into cands_
    std::uint16_t count;   // 0: empty slot
    std::uint8_t pure;
    RuleHit hit;           // valid when pure
  };
  static_assert(sizeof(Slot) == kCacheLine);
  struct Hash {
    std::vector<Slot> slots;
    std::uint32_t mask = 0;
  };
  // An IPv4 exact key in two words; half a cache line, so two slots share one.
  struct alignas(32) Slot4 {
    std::uint64_t k0, k1;
    std::uint32_t first;   // index into cands_
    std::uint16_t count;   // 0: empty slot
    std::uint8_t pure;
    std::uint8_t tagged;   // pure and the rule sets a flow tag
    std::uint16_t endpoint;  // valid when pure
    std::uint16_t unused;
    std::uint32_t flow_tag;  // valid when pure
  };
  static_assert(sizeof(Slot4) == 32);
  struct Hash4 {
    std::vector<Slot4> slots;
    std::uint32_t mask = 0;
    std::size_t rules = 0;
  };
  ClassifyTable() = default;
  const RuleHit* match_view(const PacketView& v, std::uint32_t h5, std::uint32_t h3) const noexcept;
  const RuleHit* match_v4_exact(const PacketView& v) const noexcept;
  const RuleHit* check_candidates(std::uint32_t first, std::uint32_t count, const PacketView& v) const noexcept;
  template <bool kWide, bool kKeyed>
  std::uint16_t classify_v4_memo(Mbuf* const* pkts, unsigned n, const std::uint64_t* udp4_keys,
                                 ClassifyMemo* memo) const noexcept;
  const RuleHit* resolve_v4(const Mbuf* m, std::uint64_t key3) const noexcept;
  std::uint16_t classify_v4_one_key(Mbuf* const* pkts, unsigned n, std::uint64_t key3, ClassifyMemo* memo) const noexcept;
  // What a packet that no rule matched carries: kNoMatch when the default drops, else nothing.
  std::uint8_t no_match_reason() const noexcept;
  // A lookup's outcome on the packet: the rule's endpoint and tag, or the default and no_match.
  void assign_outcome(Mbuf* m, const RuleHit* r, std::uint8_t no_match) const noexcept;
  void classify_grouped(Mbuf* const* pkts, unsigned n) const noexcept;

  Hash h5_, h3_;          // IPv6 exact keys
  Hash4 v4_5_, v4_3_;     // IPv4 exact keys
  std::size_t n5_ = 0, n3_ = 0;
  std::vector<CompiledRule> cands_;   // hash candidates, grouped per slot
  std::vector<CompiledRule> wild_;
  TableDefault default_;
  // Masks over an IPv4 packet's fields (in classify_v4_memo()'s key layout) that some rule compares.
  struct V4Relevance {
    std::uint32_t dst = 0, src = 0;
    std::uint32_t ports = 0;  // as the two port fields load from the packet
    std::uint64_t vlan = 0;   // 0x1fff: the outer VID and whether there is a tag
    std::uint16_t ingress = 0;
    bool wide = false;       // some rule looks at the source, the VLAN or the ingress port
    std::uint64_t key3 = 0;  // when not wide: the relevant bits of a 3-tuple key word
  };
  V4Relevance v4_relevant_;
  // No IPv4 5-tuple keys, and the 3-tuple ones fit in L1: classify_v4_memo().
  bool memo_v4_ = false;
  std::uint64_t id_ = 0;  // unique among every table this process builds (ClassifyMemo)
};

}  // namespace rawpipe
