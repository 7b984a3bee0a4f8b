// Golden classification cases: which endpoint each packet reaches for a given rule set.
#include "pipeline/classify/table.hh"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "pipeline/parse/parse.hh"
#include "tests/support/test_port.hh"
#include "pipeline/port/driver.hh"
#include "pipeline/buf/pool.hh"

namespace rawpipe {
namespace {

using testing::Frame;
using testing::icmp_frame;
using testing::udp_frame;

constexpr std::uint16_t kNone = Mbuf::kNoEndpoint;

class TableTest : public ::testing::Test {
 protected:
  void SetUp() override {
    PoolConfig pc;
    pc.name = "table_test";
    pc.count = 512;
    pc.cache_size = 0;
    pc.huge_pages = HugePages::kNever;
    pool_ = std::move(Pool::create(pc)).value();
  }

  // Rules as (endpoint, text); `port NAME` resolves p0 -> 0, p1 -> 1.
  std::unique_ptr<ClassifyTable> table(const std::vector<std::pair<std::uint16_t, std::string>>& rules,
                                       std::uint16_t dflt = kNone) {
    std::vector<TableRule> trs;
    std::uint32_t id = 1;
    for (const auto& [ep, text] : rules) {
      auto r = parse_match_rule(text);
      EXPECT_TRUE(r) << r.message();
      MatchRule m = r.value();
      if (m.ingress_port_name == "p0") m.ingress_port = 0;
      if (m.ingress_port_name == "p1") m.ingress_port = 1;
      trs.push_back({SteeringRule{m, ep, ep == 7 ? 0xabcdu : 0u}, id++});
    }
    auto t = ClassifyTable::build(trs, TableDefault{dflt});
    EXPECT_TRUE(t) << t.message();
    return std::move(t).value();
  }

  // Classifies one frame; returns {endpoint, drop_reason}.
  std::pair<std::uint16_t, DropReason> classify(const ClassifyTable& t, const Frame& f, std::uint16_t port = 0) {
    Mbuf* m = testing::load_frame(*pool_, f, port);
    parse_burst(&m, 1);
    t.classify_burst(&m, 1);
    auto out = std::make_pair(m->endpoint, static_cast<DropReason>(m->drop_reason));
    mbuf_free(m);
    return out;
  }
  std::uint16_t ep(const ClassifyTable& t, const Frame& f, std::uint16_t port = 0) { return classify(t, f, port).first; }

  std::unique_ptr<Pool> pool_;
};

TEST_F(TableTest, FiveTupleBeatsThreeTupleBeatsWildcardWhateverTheConfigOrder) {
  auto t = table({{1, "udp dst *:5000"},
                  {2, "udp dst 10.0.0.1:5000"},
                  {3, "udp dst 10.0.0.1:5000 src 10.9.9.9:4000"}});
  EXPECT_EQ(t->exact5_count(), 1u);
  EXPECT_EQ(t->exact3_count(), 1u);
  EXPECT_EQ(t->wildcard_count(), 1u);
  EXPECT_EQ(ep(*t, udp_frame("10.9.9.9", 4000, "10.0.0.1", 5000)), 3);
  EXPECT_EQ(ep(*t, udp_frame("10.9.9.9", 4001, "10.0.0.1", 5000)), 2);
  EXPECT_EQ(ep(*t, udp_frame("10.9.9.8", 4000, "10.0.0.1", 5000)), 2);
  EXPECT_EQ(ep(*t, udp_frame("10.9.9.9", 4000, "10.0.0.2", 5000)), 1);
  EXPECT_EQ(classify(*t, udp_frame("10.9.9.9", 4000, "10.0.0.2", 5001)),
            std::make_pair(kNone, DropReason::kNoMatch));
}

TEST_F(TableTest, Ipv4PackedKeysFallBackFromANarrowedFiveTupleAndKeepPortsApart) {
  // IPv4 exact keys take the packed-key path; a 5-tuple narrowed by a VLAN is not "pure", so a
  // packet on its key without the tag must still reach the 3-tuple below it.
  auto t = table({{1, "udp dst 10.0.0.1:5000"},
                  {2, "udp dst 10.0.0.1:5000 src 10.9.9.9:4000 vlan 7"},
                  {4, "udp dst 10.0.0.1:5001"},
                  {7, "udp dst 10.0.0.1:5002 src 10.9.9.9:4000"}});
  EXPECT_EQ(t->exact5_count(), 2u);
  EXPECT_EQ(t->exact3_count(), 2u);
  EXPECT_EQ(ep(*t, udp_frame("10.9.9.9", 4000, "10.0.0.1", 5000, 7)), 2);
  EXPECT_EQ(ep(*t, udp_frame("10.9.9.9", 4000, "10.0.0.1", 5000)), 1);
  EXPECT_EQ(ep(*t, udp_frame("10.9.9.9", 4000, "10.0.0.1", 5001)), 4);
  // Source and destination ports are not interchangeable in the packed key.
  EXPECT_EQ(ep(*t, udp_frame("10.9.9.9", 5001, "10.0.0.1", 4000)), kNone);
  EXPECT_EQ(ep(*t, udp_frame("10.9.9.9", 4000, "10.0.0.1", 5002)), 7);
  EXPECT_EQ(ep(*t, udp_frame("10.9.9.9", 4001, "10.0.0.1", 5002)), kNone);
  // A pure packed-key hit carries its rule's flow tag.
  Mbuf* m = testing::load_frame(*pool_, udp_frame("10.9.9.9", 4000, "10.0.0.1", 5002), 0);
  parse_burst(&m, 1);
  t->classify_burst(&m, 1);
  EXPECT_EQ(m->flow_tag, 0xabcdu);
  EXPECT_TRUE(m->flags & pkt_flag::kFlowTag);
  mbuf_free(m);
}

TEST_F(TableTest, ExtraConstraintsOnAnExactKeyAreCheckedAndNotShadowed) {
  // Same 3-tuple, one rule narrowed by a source prefix, one by VLAN, one plain (listed first).
  auto t = table({{1, "udp dst 10.0.0.1:5000"},
                  {2, "udp dst 10.0.0.1:5000 src 192.168.0.0/16:*"},
                  {3, "udp dst 10.0.0.1:5000 vlan 42"}});
  EXPECT_EQ(t->exact3_count(), 3u);
  EXPECT_EQ(ep(*t, udp_frame("192.168.3.4", 1, "10.0.0.1", 5000)), 2);
  EXPECT_EQ(ep(*t, udp_frame("172.16.3.4", 1, "10.0.0.1", 5000, 42)), 3);
  EXPECT_EQ(ep(*t, udp_frame("172.16.3.4", 1, "10.0.0.1", 5000, 43)), 1);
  EXPECT_EQ(ep(*t, udp_frame("172.16.3.4", 1, "10.0.0.1", 5000)), 1);
}

TEST_F(TableTest, WildcardsLongestPrefixFirstThenMoreFieldsThenConfigOrder) {
  auto t = table({{1, "udp dst 10.0.0.0/8"},
                  {2, "udp dst 10.1.0.0/16"},
                  {3, "udp dst 10.1.0.0/16:7000"},
                  {4, "any dst 10.1.2.0/24"},
                  {5, "udp dst 10.2.0.0/16"},
                  {6, "udp dst 10.2.0.0/16"}});
  EXPECT_EQ(t->wildcard_count(), 6u);
  EXPECT_EQ(ep(*t, udp_frame("1.1.1.1", 1, "10.1.2.3", 7000)), 4);   // /24 beats /16 with a port
  EXPECT_EQ(ep(*t, udp_frame("1.1.1.1", 1, "10.1.3.3", 7000)), 3);   // same /16, the port is a field more
  EXPECT_EQ(ep(*t, udp_frame("1.1.1.1", 1, "10.1.3.3", 7001)), 2);
  EXPECT_EQ(ep(*t, udp_frame("1.1.1.1", 1, "10.3.3.3", 7001)), 1);
  EXPECT_EQ(ep(*t, udp_frame("1.1.1.1", 1, "10.2.3.3", 7001)), 5);   // identical rules: config order
  EXPECT_EQ(ep(*t, icmp_frame("1.1.1.1", "10.1.2.9")), 4);           // 'any' takes ICMP too
  EXPECT_EQ(ep(*t, icmp_frame("1.1.1.1", "10.1.3.9")), kNone);       // udp rules do not
}

TEST_F(TableTest, Ipv6ExactPrefixAndFamilySeparation) {
  auto t = table({{1, "udp dst [2001:db8::1]:5000"},
                  {2, "udp dst [2001:db8::/32]:*"},
                  {3, "udp dst *:5000"},
                  {4, "udp dst 0.0.0.0/0:6000"}});
  EXPECT_EQ(ep(*t, udp_frame("2001:db8::9", 1, "2001:db8::1", 5000)), 1);
  EXPECT_EQ(ep(*t, udp_frame("2001:db8::9", 1, "2001:db8::2", 5000)), 2);
  EXPECT_EQ(ep(*t, udp_frame("2001:db8::9", 1, "2001:db9::2", 5000)), 3);
  EXPECT_EQ(ep(*t, udp_frame("10.0.0.9", 1, "10.0.0.1", 5000)), 3);
  // An IPv4 rule never takes IPv6 traffic, even with an all-zero prefix.
  EXPECT_EQ(ep(*t, udp_frame("10.0.0.9", 1, "10.0.0.1", 6000)), 4);
  EXPECT_EQ(ep(*t, udp_frame("2001:db9::9", 1, "2001:db9::1", 6000)), kNone);
  // The IPv6 address 2001:db8::1 and an IPv4 key with the same leading bytes stay apart.
  auto t4 = table({{1, "udp dst 32.1.13.184:5000"}});
  EXPECT_EQ(ep(*t4, udp_frame("2001:db8::9", 1, "2001:db8::", 5000)), kNone);
}

TEST_F(TableTest, VlanMatchesTheOuterVidOnly) {
  auto t = table({{1, "udp dst 10.0.0.1:5000 vlan 100"}, {2, "udp vlan 200"}});
  EXPECT_EQ(ep(*t, udp_frame("10.0.0.9", 1, "10.0.0.1", 5000, 100)), 1);
  EXPECT_EQ(ep(*t, udp_frame("10.0.0.9", 1, "10.0.0.1", 5000, 0x2000 | 100)), 1);  // PCP bits ignored
  EXPECT_EQ(ep(*t, udp_frame("10.0.0.9", 1, "10.0.0.1", 5000)), kNone);
  EXPECT_EQ(ep(*t, udp_frame("10.0.0.9", 1, "10.0.0.1", 5000, 101)), kNone);
  EXPECT_EQ(ep(*t, udp_frame("10.0.0.9", 1, "10.7.0.1", 9, 200)), 2);
}

TEST_F(TableTest, IngressPortRestrictsTheRule) {
  auto t = table({{1, "udp dst 10.0.0.1:5000 port p1"}, {2, "udp dst *:5000 port p0"}});
  EXPECT_EQ(ep(*t, udp_frame("10.0.0.9", 1, "10.0.0.1", 5000), 1), 1);
  EXPECT_EQ(ep(*t, udp_frame("10.0.0.9", 1, "10.0.0.1", 5000), 0), 2);
  EXPECT_EQ(ep(*t, udp_frame("10.0.0.9", 1, "10.0.0.2", 5000), 1), kNone);
}

TEST_F(TableTest, MulticastGroupsAreDestinationAddresses) {
  auto t = table({{1, "udp dst 239.1.1.1:5000"}, {2, "udp dst 224.0.0.0/4"}, {3, "udp dst [ff02::1]:5000"},
                  {4, "udp dst [ff00::/8]:*"}});
  EXPECT_EQ(ep(*t, udp_frame("10.0.0.9", 1, "239.1.1.1", 5000)), 1);
  EXPECT_EQ(ep(*t, udp_frame("10.0.0.9", 1, "239.1.1.2", 5000)), 2);
  EXPECT_EQ(ep(*t, udp_frame("fe80::1", 1, "ff02::1", 5000)), 3);
  EXPECT_EQ(ep(*t, udp_frame("fe80::1", 1, "ff05::1:3", 547)), 4);
  EXPECT_EQ(ep(*t, udp_frame("10.0.0.9", 1, "10.0.0.1", 5000)), kNone);
}

TEST_F(TableTest, DefaultActionDropOrCatchAll) {
  auto drop = table({{1, "udp dst 10.0.0.1:5000"}});
  EXPECT_EQ(classify(*drop, udp_frame("10.0.0.9", 1, "10.0.0.2", 5000)), std::make_pair(kNone, DropReason::kNoMatch));
  auto catch_all = table({{1, "udp dst 10.0.0.1:5000"}}, 9);
  EXPECT_EQ(classify(*catch_all, udp_frame("10.0.0.9", 1, "10.0.0.2", 5000)), std::make_pair(std::uint16_t{9}, DropReason::kNone));
  // Non-IP frames are not malformed: they follow the default too.
  Frame arp(60, 0);
  arp[12] = 0x08;
  arp[13] = 0x06;
  EXPECT_EQ(classify(*catch_all, arp), std::make_pair(std::uint16_t{9}, DropReason::kNone));
  EXPECT_EQ(classify(*drop, arp), std::make_pair(kNone, DropReason::kNoMatch));
  auto empty = table({});
  EXPECT_EQ(classify(*empty, udp_frame("10.0.0.9", 1, "10.0.0.2", 5000)), std::make_pair(kNone, DropReason::kNoMatch));
}

TEST_F(TableTest, MalformedPacketsKeepTheirParseReason) {
  auto t = table({{1, "udp dst *:*"}}, 9);
  Frame f = udp_frame("10.0.0.9", 1, "10.0.0.1", 5000);
  f[14] = 0x46;  // IHL 24 bytes: the header now claims bytes the total length does not cover
  f[16] = 0;
  f[17] = 22;
  EXPECT_EQ(classify(*t, f), std::make_pair(kNone, DropReason::kBadIpv4TotalLength));
}

TEST_F(TableTest, PortRulesNeedAnL4HeaderButAddressRulesDoNot) {
  auto t = table({{1, "udp dst 10.0.0.1:5000"}, {2, "udp dst 10.0.0.1"}});
  Frame f = udp_frame("10.0.0.9", 1, "10.0.0.1", 5000, -1, 64);
  EXPECT_EQ(ep(*t, f), 1);
  // A non-first fragment: same addresses, no UDP header.
  f[20] = 0x00;
  f[21] = 0x08;  // offset 64 bytes
  EXPECT_EQ(ep(*t, f), 2);
}

TEST_F(TableTest, FlowTagComesFromTheRule) {
  auto t = table({{7, "udp dst 10.0.0.1:5000"}});
  Mbuf* m = testing::load_frame(*pool_, udp_frame("10.0.0.9", 1, "10.0.0.1", 5000));
  parse_burst(&m, 1);
  t->classify_burst(&m, 1);
  EXPECT_EQ(m->endpoint, 7);
  EXPECT_EQ(m->flow_tag, 0xabcdu);
  EXPECT_TRUE(m->flags & pkt_flag::kFlowTag);
  mbuf_free(m);
}

TEST_F(TableTest, ThousandsOfExactFlowsAllFoundInOneBurst) {
  std::vector<std::pair<std::uint16_t, std::string>> rules;
  for (int i = 0; i < 4096; ++i)
    rules.push_back({static_cast<std::uint16_t>(i % 100), fmt::format("udp dst 10.{}.{}.1:{}", i / 256, i % 256, 1000 + i)});
  auto t = table(rules);
  EXPECT_EQ(t->exact3_count(), 4096u);
  std::vector<Mbuf*> burst;
  for (int i = 0; i < 256; ++i) {
    int flow = (i * 97) % 4096;
    burst.push_back(testing::load_frame(*pool_, udp_frame("1.2.3.4", 9, fmt::format("10.{}.{}.1", flow / 256, flow % 256), 1000 + flow)));
  }
  parse_burst(burst.data(), 256);
  t->classify_burst(burst.data(), 256);
  for (int i = 0; i < 256; ++i) EXPECT_EQ(burst[i]->endpoint, ((i * 97) % 4096) % 100) << i;
  mbuf_free_bulk(burst.data(), 256);
  EXPECT_EQ(pool_->in_use(), 0u);
}

// A burst classified at once must land exactly where one-by-one lookups put each packet, for
// tables that take the per-packet path (no 5-tuples: 3-tuples, some keys not pure, wildcards on
// every field) and for ones that do not, with runs of one key broken by other services, sources,
// VLANs, ingress ports, IPv6, fragments and packets parse dropped, and bursts of one frame
// throughout; flow tags included.
TEST_F(TableTest, BurstClassifyAgreesWithLookupPacketByPacket) {
  const std::vector<std::vector<std::pair<std::uint16_t, std::string>>> rule_sets = {
      {{1, "udp dst 10.0.0.1:5000"}},
      {{1, "udp dst 10.0.0.1:5000"}, {2, "udp dst 10.0.0.2:6000"}, {3, "udp dst 10.0.0.1:5000 vlan 7"},
       {4, "udp dst 10.0.0.2:6000 src 192.168.0.0/16"}, {5, "udp dst 10.0.0.0/8"}, {6, "udp dst [fd00::1]:5000"}},
      {{1, "udp dst 10.0.0.1:5000 src 10.9.9.9:40"}, {2, "udp dst 10.0.0.1:5000"}, {5, "udp"}},
      // Wildcards only, and 3-tuples beside wildcards, each wildcard examining a different field:
      // packets that differ in one field only follow each other in the bursts below.
      {{7, "udp dst *:5000"}},
      {{1, "udp dst *:5000 port p1"}, {2, "udp dst *:5000 vlan 7"}, {7, "udp dst *:6000 src 172.16.0.0/12"},
       {4, "udp src *:41"}, {5, "udp dst 10.0.0.0/31"}},
      {{7, "udp dst 10.0.0.2:6000"}, {2, "udp dst *:5000"}, {3, "udp dst [fd00::1]:5000"}, {4, "any dst 10.0.0.1"}},
  };
  const std::vector<Frame> frames = [] {
    std::vector<Frame> f;
    f.push_back(udp_frame("10.9.9.9", 40, "10.0.0.1", 5000));
    f.push_back(udp_frame("10.9.9.8", 41, "10.0.0.1", 5000));
    f.push_back(udp_frame("10.9.9.9", 40, "10.0.0.1", 5000, 7));
    f.push_back(udp_frame("192.168.1.1", 42, "10.0.0.2", 6000));
    f.push_back(udp_frame("172.16.1.1", 43, "10.0.0.2", 6000));
    f.push_back(udp_frame("172.16.1.1", 43, "10.0.0.3", 6000));
    f.push_back(udp_frame("172.16.1.1", 43, "11.0.0.3", 6000));
    f.push_back(udp_frame("172.16.1.1", 41, "10.0.0.2", 6000));
    f.push_back(udp_frame("192.168.1.1", 41, "10.0.0.2", 6000));
    f.push_back(udp_frame("10.9.9.9", 40, "10.0.0.1", 5000, 8));
    f.push_back(udp_frame("172.16.1.1", 43, "10.0.0.3", 5000));
    f.push_back(udp_frame("172.16.1.1", 43, "10.0.0.3", 5000, 7));
    f.push_back(udp_frame("fd00::9", 44, "fd00::1", 5000));
    f.push_back(icmp_frame("10.9.9.9", "10.0.0.1"));
    Frame frag = udp_frame("10.9.9.9", 40, "10.0.0.1", 5000);
    frag[21] = 0x08;  // a non-first fragment: no ports
    f.push_back(frag);
    Frame bad = udp_frame("10.9.9.9", 40, "10.0.0.1", 5000);
    bad[14] = 0x44;  // IHL 4: parse drops it
    f.push_back(bad);
    return f;
  }();
  std::uint32_t seed = 12345;
  auto next = [&seed] { return seed = seed * 1103515245u + 12345u, seed >> 8; };
  // One memo across every table, as an lcore keeps it while tables are swapped under it: what a
  // previous table found must never decide a packet of the next.
  ClassifyMemo memo;
  for (std::size_t set = 0; set < rule_sets.size(); ++set) {
    for (std::uint16_t dflt : {kNone, std::uint16_t{9}}) {
      auto t = table(rule_sets[set], dflt);
      for (int round = 0; round < 200; ++round) {
        std::vector<Mbuf*> burst;
        std::size_t pick = next() % frames.size();
        // Every fourth round (keyed, below) is one frame throughout: the burst of one key, which
        // classify settles with one lookup for all its packets.
        const bool one_frame = round % 4 == 1;
        for (int i = 0; i < 64; ++i) {
          if (!one_frame && next() % 4 == 0) pick = next() % frames.size();  // runs of one frame, then a change
          burst.push_back(testing::load_frame(*pool_, frames[pick], static_cast<std::uint16_t>(next() % 2)));
        }
        // Odd rounds as the lcore runs it: parse's keys handed to classify, and the burst's one
        // endpoint, when classify names one, true of every packet.
        std::uint16_t one = kNone;
        if (round % 2) {
          std::uint64_t keys[64];
          parse_burst(burst.data(), 64, keys);
          one = t->classify_burst(burst.data(), 64, keys, &memo);
        } else {
          parse_burst(burst.data(), 64);
          t->classify_burst(burst.data(), 64);
        }
        for (int i = 0; i < 64; ++i) {
          Mbuf* m = burst[i];
          if (one != kNone) {
            ASSERT_EQ(m->drop_reason, 0) << "rule set " << set << " round " << round << " packet " << i;
            ASSERT_EQ(m->endpoint, one) << "rule set " << set << " round " << round << " packet " << i;
          }
          if (m->drop_reason != 0 && m->drop_reason != static_cast<std::uint8_t>(DropReason::kNoMatch)) continue;
          const RuleHit* hit = t->lookup(m);
          ASSERT_EQ(m->endpoint, hit ? hit->endpoint : dflt) << "rule set " << set << " round " << round << " packet " << i;
          const bool dropped = !hit && dflt == kNone;
          ASSERT_EQ(m->drop_reason, dropped ? static_cast<std::uint8_t>(DropReason::kNoMatch) : 0) << set << " " << i;
          const bool tagged = hit && hit->flow_tag != 0;
          ASSERT_EQ((m->flags & pkt_flag::kFlowTag) != 0, tagged) << set << " " << i;
          if (tagged) {
            ASSERT_EQ(m->flow_tag, hit->flow_tag) << set << " " << i;
          }
        }
        mbuf_free_bulk(burst.data(), 64);
      }
    }
  }
  EXPECT_EQ(pool_->in_use(), 0u);
}

// The burst's one endpoint: named when every packet is a plain UDP frame that one rule matched,
// and not when a packet went elsewhere, matched nothing, was dropped by parse or came without a key.
TEST_F(TableTest, KeyedBurstNamesItsOneEndpointOnlyWhenEveryPacketWentThere) {
  auto t = table({{7, "udp dst *:5000"}, {2, "udp dst 10.0.0.2:6000"}});
  auto run = [&](const std::vector<Frame>& frames, bool keyed = true) {
    std::vector<Mbuf*> burst;
    for (int i = 0; i < 32; ++i) burst.push_back(testing::load_frame(*pool_, frames[i % frames.size()]));
    std::uint64_t keys[32];
    parse_burst(burst.data(), 32, keys);
    const std::uint16_t one = t->classify_burst(burst.data(), 32, keyed ? keys : nullptr);
    mbuf_free_bulk(burst.data(), 32);
    return one;
  };
  const Frame to_5000 = udp_frame("10.9.9.9", 40, "10.0.0.1", 5000);
  const Frame other_source = udp_frame("10.9.9.8", 41, "10.0.0.3", 5000);
  EXPECT_EQ(run({to_5000}), 7);
  EXPECT_EQ(run({to_5000, other_source}), 7);
  EXPECT_EQ(run({to_5000}, false), kNone);  // without keys the table does not tell
  EXPECT_EQ(run({to_5000, udp_frame("10.9.9.9", 40, "10.0.0.2", 6000)}), kNone);
  EXPECT_EQ(run({to_5000, udp_frame("10.9.9.9", 40, "10.0.0.2", 6001)}), kNone);  // no match
  // Nothing matched from the first packet on: every later packet finds the same (missing) rule.
  EXPECT_EQ(run({udp_frame("10.9.9.9", 40, "10.0.0.2", 6001)}), kNone);
  EXPECT_EQ(run({to_5000, udp_frame("10.9.9.9", 40, "10.0.0.1", 5000, 7)}), kNone);  // VLAN: no key
  Frame bad = to_5000;
  bad[14] = 0x44;  // IHL 4: parse drops it
  EXPECT_EQ(run({to_5000, bad}), kNone);
  EXPECT_EQ(pool_->in_use(), 0u);
}

TEST(TableBuild, UnresolvedPortNameIsRefused) {
  MatchRule m = parse_match_rule("udp port nosuch").value();
  auto t = ClassifyTable::build({{SteeringRule{m, 0, 0}, 1}}, {});
  ASSERT_FALSE(t);
  EXPECT_NE(t.message().find("port 'nosuch' was not resolved"), std::string::npos);
}

}  // namespace
}  // namespace rawpipe
