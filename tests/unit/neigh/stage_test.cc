// The ARP/ND responder in the pipeline: requests for the port's addresses are answered on the
// ingress port's tx queue (bytes equal to the responder's), counted as transmitted; requests for
// other addresses and everything else go on as before; accounting stays exact. Config keys.
#include "pipeline/neigh/stage.hh"

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <thread>

#include "rawpipe/config.hh"
#include "rawpipe/pipeline.hh"
#include "pipeline/neigh/port_keys.hh"
#include "pipeline/wire/builder.hh"
#include "pipeline/port/registry.hh"
#include "tests/support/test_port.hh"

namespace rawpipe {
namespace {

using testing::Frame;
using testing::TestPort;
using testing::TestPortConfig;
using testing::udp_frame;

const wire::MacAddr kOurMac = {0x02, 0xaa, 0xbb, 0xcc, 0xdd, 0x01};
const wire::MacAddr kPeerMac = {0x02, 0, 0, 0, 0, 0x02};

Frame arp_request(std::uint8_t target_last) {
  wire::ArpSpec s;
  s.eth.dst = wire::kBroadcastMac;
  s.eth.src = kPeerMac;
  s.sha = kPeerMac;
  s.spa = wire::ipv4(10, 0, 0, 2);
  s.tpa = wire::ipv4(10, 0, 0, target_last);
  Frame f(128);
  f.resize(wire::write_arp(s, f.data(), f.size()));
  return f;
}

Frame neighbour_solicit(std::uint8_t target_last) {
  const wire::Ipv6Addr src = {0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2};
  const wire::Ipv6Addr target = {0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, target_last};
  std::uint8_t body[24] = {};
  std::memcpy(body, target.data(), 16);
  body[16] = 1;
  body[17] = 1;
  std::memcpy(body + 18, kPeerMac.data(), 6);
  wire::FrameSpec s;
  s.eth.dst = {0x33, 0x33, 0xff, 0, 0, target_last};
  s.eth.src = kPeerMac;
  s.ip_version = 6;
  s.ipv6.src = src;
  s.ipv6.dst = {0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0xff, 0, 0, target_last};
  s.ipv6.hop_limit = 255;
  s.l4 = wire::L4Kind::kIcmp;
  s.icmp.type = wire::kIcmpv6NeighborSolicit;
  s.payload = body;
  s.payload_len = 24;
  Frame f(256);
  f.resize(wire::write_frame(s, f.data(), f.size()));
  return f;
}

Frame expected_reply(const Frame& request) {
  auto a = parse_neigh_address("10.0.0.1", kOurMac);
  auto b = parse_neigh_address("fd00::1", kOurMac);
  auto t = NeighTable::create({a.value(), b.value()});
  std::uint8_t out[128];
  NeighResult r = neigh_respond(t.value(), request.data(), static_cast<std::uint32_t>(request.size()), out, sizeof out);
  EXPECT_EQ(r.outcome, NeighOutcome::kReplied);
  return Frame(out, out + r.len);
}

Plan plan_with(TestPortConfig cfg, std::vector<std::string> addresses, std::string mac, bool catch_all = false) {
  Plan plan;
  plan.source = "neigh.toml";
  PoolPlan pp;
  pp.config.name = "rx";
  pp.config.count = 512;
  pp.config.huge_pages = HugePages::kNever;
  plan.pools.push_back(pp);
  PortPlan p;
  p.name = "p0";
  p.pmd = "test";
  p.spec = std::make_shared<testing::TestPortSpec>(std::move(cfg));
  p.pool = "rx";
  p.neigh.addresses = std::move(addresses);
  p.neigh.mac = std::move(mac);
  p.where = {"neigh.toml", 7};
  plan.ports.push_back(p);
  EndpointPlan e;
  e.name = "sink";
  e.action = EndpointAction::kSink;
  e.match = {"udp dst 10.0.0.1:6000"};
  plan.endpoints.push_back(e);
  if (catch_all) {
    plan.default_action = DefaultAction::kEndpoint;
    plan.default_endpoint = 0;
  }
  LcorePlan l;
  l.rx = {{0, 0}};
  plan.lcores.push_back(l);
  return plan;
}

Accounting run(Pipeline& p, std::uint64_t expect_rx) {
  EXPECT_TRUE(p.start());
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  for (;;) {
    PipelineSnapshot s = p.snapshot();
    if (s.total.rx_packets == expect_rx && s.total.delivered + s.total.transmitted + s.total.dropped() == expect_rx) break;
    if (std::chrono::steady_clock::now() > deadline) {
      ADD_FAILURE() << "rx " << s.total.rx_packets << " of " << expect_rx;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_TRUE(p.stop());
  return p.accounting();
}

TEST(NeighStage, AnswersOurAddressesOnTheIngressPortAndCountsTheRest) {
  // Per pass: 3 ARP for us, 2 ARP for 10.0.0.9, 1 NS for fd00::1, 1 NS for fd00::9, 4 UDP.
  std::vector<Frame> q;
  for (int i = 0; i < 3; ++i) q.push_back(arp_request(1));
  for (int i = 0; i < 2; ++i) q.push_back(arp_request(9));
  q.push_back(neighbour_solicit(1));
  q.push_back(neighbour_solicit(9));
  for (int i = 0; i < 4; ++i) q.push_back(udp_frame("10.0.0.2", 1, "10.0.0.1", 6000));
  TestPortConfig cfg;
  cfg.rx_frames = {q};
  cfg.repeat = 5;
  auto created = Pipeline::create(plan_with(cfg, {"10.0.0.1", "fd00::1"}, "02:aa:bb:cc:dd:01"));
  ASSERT_TRUE(created) << created.message();
  Pipeline& p = *created.value();
  Accounting a = run(p, 11 * 5);
  EXPECT_TRUE(a.balanced());
  EXPECT_EQ(a.transmitted, 4u * 5);
  EXPECT_EQ(a.transmitted_per_port[0], 4u * 5);
  EXPECT_EQ(a.delivered, 4u * 5);
  EXPECT_EQ(a.drops[static_cast<unsigned>(DropReason::kNoMatch)], 3u * 5);
  NeighStats ns = p.neigh_stats();
  EXPECT_EQ(ns.replies, 4u * 5);
  EXPECT_EQ(ns.ignored, 3u * 5);
  EXPECT_EQ(ns.malformed, 0u);
  EXPECT_EQ(ns.tx_failed, 0u);
  auto& port = dynamic_cast<TestPort&>(p.port(0));
  const auto& sent = port.transmitted(0);
  ASSERT_EQ(sent.size(), 4u * 5);
  const Frame arp_reply = expected_reply(arp_request(1));
  const Frame na = expected_reply(neighbour_solicit(1));
  for (std::size_t i = 0; i < sent.size(); ++i) EXPECT_EQ(sent[i], i % 4 == 3 ? na : arp_reply) << i;
}

TEST(NeighStage, ACatchAllEndpointDoesNotSwallowRequestsForUs) {
  TestPortConfig cfg;
  cfg.rx_frames = {{arp_request(1), arp_request(9), udp_frame("10.0.0.2", 1, "10.0.0.5", 1)}};
  auto created = Pipeline::create(plan_with(cfg, {"10.0.0.1"}, "02:aa:bb:cc:dd:01", true));
  ASSERT_TRUE(created) << created.message();
  Accounting a = run(*created.value(), 3);
  EXPECT_TRUE(a.balanced());
  EXPECT_EQ(a.transmitted, 1u);
  EXPECT_EQ(a.delivered, 2u);  // the foreign ARP and the UDP frame reach the catch-all endpoint
}

TEST(NeighStage, TxRefusalDropsTheReplyAsTxFailed) {
  TestPortConfig cfg;
  cfg.rx_frames = {{arp_request(1), arp_request(1), arp_request(1)}};
  cfg.tx_capacity = 1;
  auto created = Pipeline::create(plan_with(cfg, {"10.0.0.1"}, "02:aa:bb:cc:dd:01"));
  ASSERT_TRUE(created) << created.message();
  Accounting a = run(*created.value(), 3);
  EXPECT_TRUE(a.balanced());
  EXPECT_EQ(a.transmitted, 1u);
  EXPECT_EQ(a.drops[static_cast<unsigned>(DropReason::kTxFailed)], 2u);
  EXPECT_EQ(created.value()->neigh_stats().tx_failed, 2u);
}

TEST(NeighStage, APortWithoutAMacNeedsTheMacKey) {
  auto created = Pipeline::create(plan_with(TestPortConfig{}, {"10.0.0.1"}, ""));
  ASSERT_FALSE(created);
  EXPECT_NE(created.message().find("neigh.toml:7"), std::string::npos) << created.message();
  EXPECT_NE(created.message().find("set mac"), std::string::npos) << created.message();
}

Result<LoadedConfig> load(const std::string& port_keys) {
  LoadOptions o;
  o.find_pmd = &find_pmd;
  return load_config_string("[[pools]]\nname = 'rx'\ncount = 1024\n"
                            "[[ports]]\nname = 's0'\npmd = 'synth'\n" +
                                port_keys +
                                "[[endpoints]]\nname = 'e'\naction = 'sink'\nmatch = ['udp dst *:5000']\n"
                                "[[lcores]]\nrx = ['s0:0']\n",
                            "neigh.toml", o);
}

TEST(NeighPortKeys, ReadAndChecked) {
  auto ok = load("addresses = ['10.0.0.2', 'fd00::2']\nmac = '02:00:00:00:00:02'\n");
  ASSERT_TRUE(ok) << ok.message();
  EXPECT_EQ(ok->plan.ports[0].neigh.addresses, (std::vector<std::string>{"10.0.0.2", "fd00::2"}));
  EXPECT_EQ(ok->plan.ports[0].neigh.mac, "02:00:00:00:00:02");
  struct Case {
    std::string keys, expect;
  };
  for (const Case& x : {Case{"addresses = ['10.0.0.300']\n", "neigh.toml:7"},
                        Case{"addresses = ['224.0.0.1']\n", "multicast"},
                        Case{"addresses = ['10.0.0.2', '10.0.0.2']\n", "twice"},
                        Case{"addresses = ['10.0.0.2']\nmac = '02:00:00:00:00'\n", "'mac'"},
                        Case{"addresses = ['10.0.0.2']\nmac = '03:00:00:00:00:01'\n", "multicast"},
                        Case{"mac = '02:00:00:00:00:01'\n", "lists none"}}) {
    auto c = load(x.keys);
    ASSERT_FALSE(c) << x.keys;
    EXPECT_NE(c.message().find(x.expect), std::string::npos) << c.message();
  }
}

}  // namespace
}  // namespace rawpipe
