#include "pipeline/classify/rule.hh"

#include <gtest/gtest.h>

namespace rawpipe {
namespace {

MatchRule ok(std::string_view text) {
  auto r = parse_match_rule(text);
  EXPECT_TRUE(r) << text << ": " << r.message();
  return r ? r.value() : MatchRule{};
}

std::string err(std::string_view text) {
  auto r = parse_match_rule(text);
  EXPECT_FALSE(r) << text << " parsed but should not";
  return r ? std::string() : r.message();
}

TEST(RuleGrammar, FullIpv4RuleWithEveryClause) {
  MatchRule r = ok("udp dst 239.1.1.1:5000 src 10.0.0.0/8:* vlan 100 port eth0");
  EXPECT_EQ(r.ip_proto, 17);
  ASSERT_TRUE(r.dst_ip);
  EXPECT_EQ(r.dst_ip->family, L3Type::kIpv4);
  EXPECT_EQ(r.dst_ip->len, 32);
  EXPECT_EQ(r.dst_ip->addr[0], 239);
  EXPECT_EQ(r.dst_ip->addr[3], 1);
  EXPECT_EQ(r.dst_ip->addr[4], 0);
  EXPECT_EQ(r.dst_port, 5000);
  ASSERT_TRUE(r.src_ip);
  EXPECT_EQ(r.src_ip->len, 8);
  EXPECT_EQ(r.src_ip->addr[0], 10);
  EXPECT_FALSE(r.src_port);
  EXPECT_EQ(r.vlan, 100);
  EXPECT_EQ(r.ingress_port_name, "eth0");
  EXPECT_FALSE(r.ingress_port);  // the engine resolves names
  EXPECT_EQ(r.text, "udp dst 239.1.1.1:5000 src 10.0.0.0/8:* vlan 100 port eth0");
  EXPECT_EQ(r.family(), L3Type::kIpv4);
}

TEST(RuleGrammar, Ipv6BracketsPrefixesAndBareAddresses) {
  MatchRule a = ok("udp dst [ff02::1]:5000");
  ASSERT_TRUE(a.dst_ip);
  EXPECT_EQ(a.dst_ip->family, L3Type::kIpv6);
  EXPECT_EQ(a.dst_ip->len, 128);
  EXPECT_EQ(a.dst_ip->addr[0], 0xff);
  EXPECT_EQ(a.dst_ip->addr[1], 0x02);
  EXPECT_EQ(a.dst_ip->addr[15], 0x01);
  EXPECT_EQ(a.dst_port, 5000);

  MatchRule b = ok("udp dst [2001:db8::/32]:*");
  EXPECT_EQ(b.dst_ip->len, 32);
  EXPECT_FALSE(b.dst_port);
  MatchRule c = ok("udp dst [2001:db8::]/32:7");
  EXPECT_EQ(c.dst_ip->len, 32);
  EXPECT_EQ(c.dst_port, 7);
  MatchRule d = ok("any src fe80::/10");
  EXPECT_EQ(d.ip_proto, kIpProtoAny);
  EXPECT_EQ(d.src_ip->len, 10);
  EXPECT_EQ(d.family(), L3Type::kIpv6);
}

TEST(RuleGrammar, WildcardsAndPortsOnly) {
  MatchRule a = ok("udp dst *:9000");
  EXPECT_FALSE(a.dst_ip);
  EXPECT_EQ(a.dst_port, 9000);
  EXPECT_EQ(a.family(), L3Type::kNone);
  MatchRule b = ok("tcp");
  EXPECT_EQ(b.ip_proto, 6);
  EXPECT_FALSE(b.dst_ip || b.src_ip || b.dst_port || b.src_port || b.vlan);
  MatchRule c = ok("  udp   dst  224.0.0.0/4  ");
  EXPECT_EQ(c.dst_ip->len, 4);
  EXPECT_FALSE(c.dst_port);
  MatchRule d = ok("udp dst 0.0.0.0/0:53");
  EXPECT_EQ(d.dst_ip->len, 0);  // any IPv4 address: still restricts the family
  EXPECT_EQ(d.family(), L3Type::kIpv4);
}

TEST(RuleGrammar, CanonicalFormRoundTrips) {
  for (std::string_view text : {"udp dst 239.1.1.1:5000 src 10.0.0.0/8:* vlan 100 port eth0",
                                "udp dst [ff02::1]:5000", "udp dst *:9000", "tcp dst [2001:db8::/32]:*",
                                "any dst 224.0.0.0/4", "udp src 192.168.1.7:1234"}) {
    MatchRule r = ok(text);
    std::string canon = format_match_rule(r);
    MatchRule again = ok(canon);
    again.text = r.text;
    EXPECT_EQ(format_match_rule(again), canon) << text;
    EXPECT_EQ(again.dst_ip, r.dst_ip) << text;
    EXPECT_EQ(again.src_ip, r.src_ip) << text;
    EXPECT_EQ(again.dst_port, r.dst_port) << text;
    EXPECT_EQ(again.src_port, r.src_port) << text;
    EXPECT_EQ(again.vlan, r.vlan) << text;
  }
  EXPECT_EQ(format_match_rule(ok("udp dst 10.0.0.1:5")), "udp dst 10.0.0.1:5");
}

TEST(RuleGrammar, ErrorsNameTheTokenAndWhatWasExpected) {
  EXPECT_NE(err("").find("expected a protocol"), std::string::npos);
  EXPECT_NE(err("sctp dst 1.2.3.4:5").find("'sctp': expected a protocol first: udp, tcp or any"), std::string::npos);
  EXPECT_NE(err("udp dest 1.2.3.4:5").find("'dest': expected one of the clauses dst, src, vlan, port"),
            std::string::npos);
  EXPECT_NE(err("udp dst 1.2.3.4:5 dst 1.2.3.5:6").find("'dst' appears twice"), std::string::npos);
  EXPECT_NE(err("udp dst").find("'dst' at the end: expected an address"), std::string::npos);
  EXPECT_NE(err("udp vlan").find("expected a VLAN id"), std::string::npos);
  EXPECT_NE(err("udp dst 1.2.3:5").find("'1.2.3:5': expected an IPv4 address"), std::string::npos);
  EXPECT_NE(err("udp dst 1.2.3.4/33").find("a prefix length from 0 to 32"), std::string::npos);
  EXPECT_NE(err("udp dst [ff02::1]/129").find("a prefix length from 0 to 128"), std::string::npos);
  EXPECT_NE(err("udp dst 10.1.0.0/8").find("did you mean 10.0.0.0/8?"), std::string::npos);
  EXPECT_NE(err("udp dst 1.2.3.4:65536").find("a port number 0..65535"), std::string::npos);
  EXPECT_NE(err("udp dst 1.2.3.4:").find("a port number or * after ':'"), std::string::npos);
  EXPECT_NE(err("udp dst 1.2.3.4:x").find("'1.2.3.4:x'"), std::string::npos);
  EXPECT_NE(err("udp vlan 4096").find("'4096': expected a VLAN id 0..4095"), std::string::npos);
  EXPECT_NE(err("udp dst [ff02::1:5000").find("']' closing the IPv6 address"), std::string::npos);
  EXPECT_NE(err("udp dst [ff02::1]5000").find("':PORT' or ':*'"), std::string::npos);
  EXPECT_NE(err("udp dst [1.2.3.4]:5").find("an IPv6 address"), std::string::npos);
  EXPECT_NE(err("udp dst 1.2.3.4 src [::1]").find("different address families"), std::string::npos);
  EXPECT_NE(err("any dst 1.2.3.4:5").find("start the rule with udp or tcp"), std::string::npos);
  EXPECT_NE(err("udp dst */8:5").find("no prefix length after '*'"), std::string::npos);
  // Every message quotes the whole rule so a config with many rules points at the right one.
  EXPECT_NE(err("udp dst 1.2.3.4:99999").find("rule 'udp dst 1.2.3.4:99999'"), std::string::npos);
}

TEST(IpPrefix, ContainsChecksOnlyThePrefixBits) {
  IpPrefix p = ok("udp dst 10.128.0.0/9").dst_ip.value();
  const std::uint8_t in[4] = {10, 200, 1, 1}, out[4] = {10, 100, 1, 1};
  EXPECT_TRUE(p.contains(in));
  EXPECT_FALSE(p.contains(out));
  IpPrefix any = ok("udp dst 0.0.0.0/0").dst_ip.value();
  EXPECT_TRUE(any.contains(out));
}

}  // namespace
}  // namespace rawpipe
