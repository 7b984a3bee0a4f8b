// The synth generator: exact counts, flows, VLAN tags, IPv4/IPv6 mix, IMIX, malformed frames
// (checked through the real parse stage), queues, rate and count limits, transmit.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <map>
#include <set>
#include <thread>
#include <vector>

#include "pipeline/buf/pool.hh"
#include "pipeline/config/section.hh"
#include "pipeline/parse/parse.hh"
#include "pipeline/wire/checksum.hh"
#include "pmd/drivers.hh"
#include "pmd/synth/synth.hh"
#include "pipeline/port/registry.hh"
#include "pipeline/port/driver.hh"

namespace rawpipe {
namespace {

using namespace rawpipe::wire;

struct Harness {
  std::unique_ptr<Pool> pool;
  std::unique_ptr<Port> port;
};

Result<std::unique_ptr<PortSpec>> parse_spec(const std::string& toml) {
  auto root = ConfigSection::parse_string(toml, "synth.toml");
  if (!root) return root.status();
  auto spec = kSynthDriver.parse(root.value());
  Status fin = root->finish();
  if (!fin) return fin;
  return spec;
}

Harness open(const std::string& toml, std::uint16_t rx_queues = 1, std::uint32_t pool_count = 4096) {
  Harness h;
  PoolConfig pc;
  pc.name = "synth-test";
  pc.count = pool_count;
  pc.huge_pages = HugePages::kNever;
  auto pool = Pool::create(pc);
  EXPECT_TRUE(pool) << pool.message();
  h.pool = std::move(pool).value();
  auto spec = parse_spec(toml);
  EXPECT_TRUE(spec) << spec.message();
  if (!spec) return h;
  PortEnv env;
  env.port_id = 3;
  env.name = "s0";
  env.rx_queues = rx_queues;
  env.tx_queues = 1;
  env.pool = h.pool.get();
  auto port = spec.value()->open(env);
  EXPECT_TRUE(port) << port.message();
  if (!port) return h;
  h.port = std::move(port).value();
  Status st = h.port->start();
  EXPECT_TRUE(st) << st.message();
  return h;
}

// Receives until the port returns nothing (count-limited configs), parsing every burst.
std::vector<Mbuf*> drain(Port& port, std::uint16_t queue = 0, std::size_t max = 100000) {
  std::vector<Mbuf*> all;
  RxQueueHandle rx = port.rx_queue(queue);
  Mbuf* burst[32];
  for (;;) {
    std::uint16_t n = rx(burst, 32);
    if (n == 0) break;
    parse_burst(burst, n);
    all.insert(all.end(), burst, burst + n);
    if (all.size() > max) break;
  }
  return all;
}

void free_all(std::vector<Mbuf*>& v) {
  mbuf_free_bulk(v.data(), static_cast<unsigned>(v.size()));
  v.clear();
}

// Frees as it goes, for runs larger than the pool; returns drop-reason counts.
std::map<DropReason, std::uint64_t> count_reasons(Port& port, std::uint64_t* fragments = nullptr) {
  std::map<DropReason, std::uint64_t> out;
  RxQueueHandle rx = port.rx_queue(0);
  Mbuf* burst[32];
  while (std::uint16_t n = rx(burst, 32)) {
    parse_burst(burst, n);
    for (unsigned i = 0; i < n; ++i) {
      ++out[static_cast<DropReason>(burst[i]->drop_reason)];
      if (fragments && (burst[i]->flags & pkt_flag::kIpFragment)) ++*fragments;
    }
    mbuf_free_bulk(burst, n);
  }
  return out;
}

std::string key(const Mbuf* m) {
  const std::uint8_t* d = m->data();
  const unsigned alen = m->l3_type == L3Type::kIpv4 ? 4 : 16;
  const unsigned aoff = m->l3_off + (m->l3_type == L3Type::kIpv4 ? 12 : 8);
  return std::string(reinterpret_cast<const char*>(d + aoff), 2 * alen) +
         std::string(reinterpret_cast<const char*>(d + m->l4_off), 4);
}

void expect_checksums_ok(const Mbuf* m) {
  const std::uint8_t* d = m->data();
  const std::uint8_t* ip = d + m->l3_off;
  const std::uint8_t* l4 = d + m->l4_off;
  const std::size_t l4_len = m->data_len - m->l4_off;
  if (m->l3_type == L3Type::kIpv4) {
    EXPECT_TRUE(ipv4_header_checksum_ok(ip, 20));
    EXPECT_EQ(l4_checksum_ipv4(ip + 12, ip + 16, m->l4_proto, l4, l4_len), 0);
  } else {
    EXPECT_EQ(l4_checksum_ipv6(ip + 8, ip + 24, m->l4_proto, l4, l4_len), 0);
  }
}

TEST(Synth, DriverIsRegistered) {
  ASSERT_EQ(find_pmd("synth"), &kSynthDriver);
}

TEST(Synth, CountLimitGivesExactlyThatManyPackets) {
  auto h = open("packets = 1000\n");
  auto pkts = drain(*h.port);
  EXPECT_EQ(pkts.size(), 1000u);
  EXPECT_EQ(h.pool->in_use(), 1000u);
  Mbuf* more[32];
  EXPECT_EQ(h.port->rx_queue(0)(more, 32), 0);
  PortStats st = h.port->stats();
  EXPECT_EQ(st.rx_queues[0].rx_packets, 1000u);
  EXPECT_EQ(st.rx_queues[0].rx_bytes, 64000u);
  for (Mbuf* m : pkts) {
    ASSERT_EQ(m->drop_reason, 0);
    EXPECT_EQ(m->data_len, 64u);
    EXPECT_EQ(m->port, 3);
    EXPECT_EQ(m->l3_type, L3Type::kIpv4);
    EXPECT_EQ(m->l4_proto, kIpProtoUdp);
    EXPECT_EQ(m->payload_len, 64 - 42);
    EXPECT_TRUE(m->flags & pkt_flag::kRssHash);
  }
  free_all(pkts);
  h.port->stop();
  EXPECT_EQ(h.pool->in_use(), 0u);
}

TEST(Synth, DefaultFrameIsTheDocumentedOne) {
  auto h = open("packets = 1\n");
  auto pkts = drain(*h.port);
  ASSERT_EQ(pkts.size(), 1u);
  const std::uint8_t* d = pkts[0]->data();
  const std::uint8_t expected_head[] = {
      0x02, 0, 0, 0, 0, 0x02, 0x02, 0, 0, 0, 0, 0x01, 0x08, 0x00,  // dst mac, src mac, IPv4
      0x45, 0x00, 0x00, 50, 0x00, 0x00, 0x00, 0x00, 64, 17,         // ver/ihl, tos, len 50, id, frag, ttl, udp
  };
  EXPECT_EQ(std::vector<std::uint8_t>(d, d + sizeof expected_head),
            std::vector<std::uint8_t>(expected_head, expected_head + sizeof expected_head));
  const std::uint8_t addrs_ports[] = {10, 0, 0, 1, 198, 18, 0, 1, 0x04, 0x00, 0x13, 0x88, 0, 30};
  EXPECT_EQ(std::vector<std::uint8_t>(d + 26, d + 40), std::vector<std::uint8_t>(addrs_ports, addrs_ports + 14));
  EXPECT_EQ(d[42], 42);  // payload byte i of the frame is i
  expect_checksums_ok(pkts[0]);
  free_all(pkts);
}

TEST(Synth, EveryFlowOncePerCycleWithValidChecksums) {
  // 2 x 2 x 4 x 2 = 32 flows.
  auto h = open("packets = 320\nsrc_addrs = 2\ndst_addrs = 2\nsrc_ports = 4\ndst_ports = 2\ndst_port = 7000\n"
                "ipv4_dst = \"239.1.1.1\"\nseed = 7\n");
  auto pkts = drain(*h.port);
  ASSERT_EQ(pkts.size(), 320u);
  for (std::size_t cycle = 0; cycle < 10; ++cycle) {
    std::set<std::string> seen;
    for (std::size_t i = 0; i < 32; ++i) seen.insert(key(pkts[cycle * 32 + i]));
    EXPECT_EQ(seen.size(), 32u) << "cycle " << cycle;
  }
  std::set<std::uint16_t> dports, sports;
  std::set<std::string> dsts;
  for (Mbuf* m : pkts) {
    ASSERT_EQ(m->drop_reason, 0);
    expect_checksums_ok(m);
    EXPECT_TRUE(m->flags & pkt_flag::kMulticast);
    const std::uint8_t* d = m->data();
    sports.insert(load_be16(d + m->l4_off));
    dports.insert(load_be16(d + m->l4_off + 2));
    dsts.insert(std::string(reinterpret_cast<const char*>(d + m->l3_off + 16), 4));
  }
  EXPECT_EQ(sports, (std::set<std::uint16_t>{1024, 1025, 1026, 1027}));
  EXPECT_EQ(dports, (std::set<std::uint16_t>{7000, 7001}));
  EXPECT_EQ(dsts, (std::set<std::string>{std::string("\xef\x01\x01\x01", 4), std::string("\xef\x01\x01\x02", 4)}));
  free_all(pkts);
}

TEST(Synth, SameSeedSameFramesOtherSeedOtherOrder) {
  const std::string cfg = "packets = 64\ndst_ports = 64\n";
  auto a = open(cfg + "seed = 5\n");
  auto b = open(cfg + "seed = 5\n");
  auto c = open(cfg + "seed = 6\n");
  auto pa = drain(*a.port), pb = drain(*b.port), pc = drain(*c.port);
  ASSERT_EQ(pa.size(), 64u);
  bool all_same = true, c_differs = false;
  for (std::size_t i = 0; i < 64; ++i) {
    all_same &= std::memcmp(pa[i]->data(), pb[i]->data(), 64) == 0;
    c_differs |= std::memcmp(pa[i]->data(), pc[i]->data(), 64) != 0;
  }
  EXPECT_TRUE(all_same);
  EXPECT_TRUE(c_differs);
  free_all(pa);
  free_all(pb);
  free_all(pc);
}

TEST(Synth, TwoVlanTags) {
  auto h = open("packets = 10\nvlans = [100, 200]\n");
  auto pkts = drain(*h.port);
  ASSERT_EQ(pkts.size(), 10u);
  for (Mbuf* m : pkts) {
    ASSERT_EQ(m->drop_reason, 0);
    EXPECT_EQ(m->vlan_count, 2);
    EXPECT_EQ(m->vlan_tci[0] & 0xfff, 100);
    EXPECT_EQ(m->vlan_tci[1] & 0xfff, 200);
    EXPECT_TRUE(m->flags & pkt_flag::kQinQ);
    EXPECT_EQ(load_be16(m->data() + 12), kEtherTypeQinQ);
    EXPECT_EQ(m->l3_off, 22);
    expect_checksums_ok(m);
  }
  free_all(pkts);
}

TEST(Synth, IPv6MixIsExactPerFlow) {
  // 8 flows, a quarter IPv6: 2 flows, so 200 of 800 packets.
  auto h = open("packets = 800\ndst_ports = 8\nipv6_fraction = 0.25\nvlans = [7]\nframe_size = 128\n");
  auto pkts = drain(*h.port);
  ASSERT_EQ(pkts.size(), 800u);
  std::size_t v6 = 0;
  for (Mbuf* m : pkts) {
    ASSERT_EQ(m->drop_reason, 0);
    EXPECT_EQ(m->vlan_count, 1);
    if (m->l3_type == L3Type::kIpv6) {
      ++v6;
      EXPECT_EQ(m->l4_off, 18 + 40);
    }
    expect_checksums_ok(m);
  }
  EXPECT_EQ(v6, 200u);
  EXPECT_EQ(h.port->stats().extended.at("ipv6_packets"), 200u);
  free_all(pkts);
}

TEST(Synth, TcpFramesHaveValidChecksums) {
  auto h = open("packets = 20\nprotocol = \"tcp\"\nframe_size = 80\nipv6_fraction = 0.5\ndst_ports = 2\n");
  auto pkts = drain(*h.port);
  ASSERT_EQ(pkts.size(), 20u);
  for (Mbuf* m : pkts) {
    ASSERT_EQ(m->drop_reason, 0);
    EXPECT_EQ(m->l4_proto, kIpProtoTcp);
    expect_checksums_ok(m);
  }
  free_all(pkts);
}

TEST(Synth, ImixSizesFollowTheWeights) {
  auto h = open("packets = 1200\nimix = [[64, 7], [576, 4], [1500, 1]]\n", 1, 2048);
  std::map<std::uint32_t, std::uint64_t> sizes;
  RxQueueHandle rx = h.port->rx_queue(0);
  Mbuf* burst[32];
  std::uint64_t bytes = 0;
  while (std::uint16_t n = rx(burst, 32)) {
    parse_burst(burst, n);
    for (unsigned i = 0; i < n; ++i) {
      EXPECT_EQ(burst[i]->drop_reason, 0);
      ++sizes[burst[i]->data_len];
      bytes += burst[i]->data_len;
    }
    mbuf_free_bulk(burst, n);
  }
  EXPECT_EQ(sizes, (std::map<std::uint32_t, std::uint64_t>{{64, 700}, {576, 400}, {1500, 100}}));
  EXPECT_EQ(h.port->stats().rx_queues[0].rx_bytes, bytes);
}

TEST(Synth, PrebuiltFlowFramesAreThePatchedTemplates) {
  // Whether whole flow frames are prebuilt depends on the machine's L2 cache (prebuild_budget),
  // so a config must make the same bytes either way, flow for flow.
  synth::Spec spec;
  spec.sizes = {1518};
  spec.weights = {1};
  spec.ipv4_src = {10, 0, 0, 1};
  spec.ipv4_dst = {198, 18, 0, 1};
  spec.src_port = 10000;
  spec.src_ports = 64;
  spec.dst_port = 5000;
  spec.dst_ports = 2;
  spec.ipv6_fraction = 0.5;
  constexpr std::uint32_t kDataRoom = 1792;
  auto prebuilt = synth::build_frames(spec, kDataRoom, std::size_t{64} << 20);
  auto patched = synth::build_frames(spec, kDataRoom, 0);
  ASSERT_TRUE(prebuilt) << prebuilt.message();
  ASSERT_TRUE(patched) << patched.message();
  const synth::SynthFrames& whole = *prebuilt.value();
  const synth::SynthFrames& parts = *patched.value();
  ASSERT_NE(whole.flow_frames, nullptr);
  ASSERT_EQ(parts.flow_frames, nullptr);
  ASSERT_EQ(parts.flows.size(), 128u);
  std::vector<std::uint8_t> frame(kDataRoom);
  for (std::size_t i = 0; i < parts.flows.size(); ++i) {
    const synth::Flow& f = parts.flows[i];
    const synth::Template& t = parts.at(synth::Malformed::kNone, f.ipv6, 0);
    ASSERT_EQ(t.len, whole.flow_len);
    std::memcpy(frame.data(), t.bytes, t.len);
    synth::patch_flow(t, f, frame.data());
    EXPECT_EQ(std::memcmp(frame.data(), whole.flow_frames + i * whole.flow_stride, t.len), 0) << "flow " << i;
  }
  // A budget for more lcores is never smaller, and never more than the cap.
  EXPECT_GE(synth::prebuild_budget(2), synth::prebuild_budget(1));
  EXPECT_LE(synth::prebuild_budget(64), std::size_t{8} << 20);
}

TEST(Synth, PatchedTemplatesHaveValidChecksums) {
  // IMIX and malformed frames take the template-and-patch path (not whole prebuilt flow frames);
  // every well-formed frame it makes must still carry correct checksums.
  auto h = open("packets = 600\nimix = [[100, 1], [300, 1]]\nipv6_fraction = 0.5\ndst_ports = 6\n"
                "malformed_fraction = 0.1\nmalformed_kinds = [\"truncated\"]\nprotocol = \"tcp\"\n");
  auto pkts = drain(*h.port);
  ASSERT_EQ(pkts.size(), 600u);
  std::size_t good = 0;
  for (Mbuf* m : pkts) {
    if (m->drop_reason != 0) continue;
    ++good;
    expect_checksums_ok(m);
  }
  EXPECT_EQ(good, 540u);
  free_all(pkts);
}

TEST(Synth, PayloadPrefixStartsEveryPayload) {
  // A sockperf header (sequence 1, no flags, length 0x56): prebuilt flow frames (one size, few
  // flows) and patched templates (IMIX, TCP), IPv4 and IPv6, all with valid checksums.
  const std::string prefix = "0000000000000001000000000056";
  const std::vector<std::uint8_t> want = {0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0x56};
  for (const std::string shape : {"frame_size = 128\n", "imix = [[100, 1], [300, 1]]\nprotocol = \"tcp\"\n"}) {
    SCOPED_TRACE(shape);
    auto h = open("packets = 200\nsrc_ports = 8\nipv6_fraction = 0.5\n" + shape + "payload_prefix = \"" + prefix + "\"\n");
    auto pkts = drain(*h.port);
    ASSERT_EQ(pkts.size(), 200u);
    std::set<L3Type> families;
    for (Mbuf* m : pkts) {
      ASSERT_EQ(m->drop_reason, 0);
      families.insert(m->l3_type);
      const std::uint8_t* payload = m->data() + m->payload_off;
      ASSERT_GE(m->payload_len, want.size());
      EXPECT_EQ(std::vector<std::uint8_t>(payload, payload + want.size()), want);
      // After the prefix the counting pattern goes on: byte i of the frame is i.
      EXPECT_EQ(payload[want.size()], static_cast<std::uint8_t>(m->payload_off + want.size()));
      expect_checksums_ok(m);
    }
    EXPECT_EQ(families, (std::set<L3Type>{L3Type::kIpv4, L3Type::kIpv6}));
    free_all(pkts);
  }
}

TEST(Synth, MalformedIPv4FramesGetTheirDropReasons) {
  auto h = open("packets = 1000\nmalformed_fraction = 0.1\nframe_size = 128\n");
  std::uint64_t fragments = 0;
  auto reasons = count_reasons(*h.port, &fragments);
  // 100 malformed, five kinds taking turns: 20 each. Fragments parse fine (no L4 header).
  EXPECT_EQ(reasons[DropReason::kTruncatedIpv4], 20u);
  EXPECT_EQ(reasons[DropReason::kBadIpv4Ihl], 20u);
  EXPECT_EQ(reasons[DropReason::kBadIpv4TotalLength], 20u);
  EXPECT_EQ(reasons[DropReason::kBadUdpLength], 20u);
  EXPECT_EQ(reasons[DropReason::kNone], 900u + 20u);
  EXPECT_EQ(fragments, 20u);
  auto st = h.port->stats();
  EXPECT_EQ(st.extended.at("malformed_truncated"), 20u);
  EXPECT_EQ(st.extended.at("malformed_fragment"), 20u);
}

TEST(Synth, MalformedIPv6FramesGetTheirDropReasons) {
  auto h = open("packets = 1000\nmalformed_fraction = 0.1\nipv6_fraction = 1\nframe_size = 128\n");
  std::uint64_t fragments = 0;
  auto reasons = count_reasons(*h.port, &fragments);
  EXPECT_EQ(reasons[DropReason::kTruncatedIpv6], 20u);
  EXPECT_EQ(reasons[DropReason::kBadIpv6ExtHeader], 20u);
  EXPECT_EQ(reasons[DropReason::kBadIpv6PayloadLength], 20u);
  EXPECT_EQ(reasons[DropReason::kBadUdpLength], 20u);
  EXPECT_EQ(reasons[DropReason::kNone], 920u);
  EXPECT_EQ(fragments, 20u);
}

TEST(Synth, ChosenMalformedKindsOnly) {
  auto h = open("packets = 400\nmalformed_fraction = 0.5\nmalformed_kinds = [\"bad_ihl\"]\n");
  auto reasons = count_reasons(*h.port);
  EXPECT_EQ(reasons[DropReason::kBadIpv4Ihl], 200u);
  EXPECT_EQ(reasons[DropReason::kNone], 200u);
  EXPECT_EQ(reasons.size(), 2u);
}

TEST(Synth, QueuesSplitFlowsAndPackets) {
  auto h = open("packets = 1001\ndst_ports = 8\n", 4);
  std::vector<std::set<std::string>> flows(4);
  std::uint64_t total = 0;
  for (std::uint16_t q = 0; q < 4; ++q) {
    auto pkts = drain(*h.port, q);
    EXPECT_EQ(pkts.size(), q == 0 ? 251u : 250u);
    total += pkts.size();
    for (Mbuf* m : pkts) {
      EXPECT_EQ(m->queue, q);
      flows[q].insert(key(m));
    }
    EXPECT_EQ(flows[q].size(), 2u);
    free_all(pkts);
  }
  EXPECT_EQ(total, 1001u);
  std::set<std::string> all;
  for (auto& f : flows) all.insert(f.begin(), f.end());
  EXPECT_EQ(all.size(), 8u);
}

TEST(Synth, EmptyPoolCountsNoMbuf) {
  auto h = open("", 1, 64);
  Mbuf* burst[64];
  ASSERT_EQ(h.port->rx_queue(0)(burst, 64), 64);
  Mbuf* more[32];
  EXPECT_EQ(h.port->rx_queue(0)(more, 32), 0);
  EXPECT_EQ(h.port->stats().rx_queues[0].rx_nombuf, 32u);
  EXPECT_EQ(h.port->stats().rx_queues[0].rx_packets, 64u);
  mbuf_free_bulk(burst, 64);
}

TEST(Synth, RateLimitNeverExceedsTheBucket) {
  // 20000 pps; whatever the timing, the packets seen can never exceed rate x elapsed + one bucket.
  auto h = open("rate_pps = 20000\n");
  RxQueueHandle rx = h.port->rx_queue(0);
  Mbuf* burst[32];
  std::uint64_t got = 0;
  auto t0 = std::chrono::steady_clock::now();
  while (std::chrono::steady_clock::now() - t0 < std::chrono::milliseconds(100)) {
    std::uint16_t n = rx(burst, 32);
    got += n;
    mbuf_free_bulk(burst, n);
  }
  double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_GT(got, 0u);
  EXPECT_LE(double(got), 20000.0 * elapsed + 32);
}

TEST(Synth, TransmitCountsAndFrees) {
  auto h = open("packets = 50\n");
  auto pkts = drain(*h.port);
  ASSERT_EQ(pkts.size(), 50u);
  TxQueueHandle tx = h.port->tx_queue(0);
  EXPECT_EQ(tx(pkts.data(), 50), 50);
  EXPECT_EQ(h.pool->in_use(), 0u);
  EXPECT_EQ(h.port->stats().tx_queues[0].tx_packets, 50u);
  EXPECT_EQ(h.port->stats().tx_queues[0].tx_bytes, 50u * 64);
}

TEST(Synth, FrameTooSmallForItsHeaders) {
  auto r = parse_spec("frame_size = 64\nipv6_fraction = 0.5\nvlans = [1, 2]\n");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.message(), "synth.toml:1: top level: key 'frame_size': 64-byte frames cannot hold the 70 bytes of "
                         "headers this port generates (IPv6, 2 VLAN tags, UDP)");
}

TEST(Synth, FrameLargerThanTheBuffer) {
  auto h = open("frame_size = 1500\n", 1, 64);  // fine: 2048-byte buffers hold 1792 data bytes
  ASSERT_TRUE(h.port);
  PoolConfig pc;
  pc.name = "small";
  pc.count = 64;
  pc.buf_size = 1024;
  pc.huge_pages = HugePages::kNever;
  auto pool = Pool::create(pc);
  ASSERT_TRUE(pool);
  auto spec = parse_spec("frame_size = 1500\n");
  ASSERT_TRUE(spec);
  PortEnv env;
  env.name = "s1";
  env.pool = pool.value().get();
  auto port = spec.value()->open(env);
  ASSERT_TRUE(port);
  Status st = port.value()->start();
  ASSERT_FALSE(st);
  EXPECT_EQ(st.message(), "synth port 's1': 1500-byte frames do not fit the pool's 768 bytes of data room per buffer; "
                          "raise the pool's buf_size or lower the frame size");
}

TEST(Synth, ConfigErrorsNameTheKey) {
  EXPECT_EQ(parse_spec("frame_size = 64\nimix = [[64, 1]]\n").message(),
            "synth.toml:2: top level: key 'imix': set either frame_size (one size) or imix (weighted sizes), not both");
  EXPECT_EQ(parse_spec("malformed_fraction = 0.1\nmalformed_kinds = [\"bent\"]\n").message(),
            "synth.toml:2: top level: key 'malformed_kinds': unknown kind \"bent\"; expected some of \"truncated\", "
            "\"bad_ihl\", \"bad_length\", \"bad_udp_length\", \"fragment\"");
  EXPECT_EQ(parse_spec("dst_port = 65000\ndst_ports = 1000\n").message(),
            "synth.toml:2: top level: key 'dst_ports': 1000 ports from 65000 run past 65535");
  EXPECT_EQ(parse_spec("ipv4_dst = \"239.1.1\"\n").message(),
            "synth.toml:1: top level: key 'ipv4_dst': expected an IPv4 address, got \"239.1.1\"");
  EXPECT_EQ(parse_spec("vlans = [1, 2, 3]\n").message(),
            "synth.toml:1: top level: key 'vlans': at most 2 VLAN ids (outer, inner), got 3");
  EXPECT_EQ(parse_spec("rate = 5\n").message(), "synth.toml:1:1: top level: unknown key 'rate'");
  EXPECT_EQ(parse_spec("payload_prefix = \"0g\"\n").message(),
            "synth.toml:1: top level: key 'payload_prefix': expected at most 256 bytes as pairs of hex digits "
            "(\"0001ff\"), got \"0g\"");
  EXPECT_EQ(parse_spec("payload_prefix = \"abc\"\n").message(),
            "synth.toml:1: top level: key 'payload_prefix': expected at most 256 bytes as pairs of hex digits "
            "(\"0001ff\"), got \"abc\"");
  // 23 bytes: one more than a 64-byte IPv4 UDP frame carries.
  EXPECT_EQ(parse_spec("payload_prefix = \"" + std::string(46, '0') + "\"\n").message(),
            "synth.toml:1: top level: key 'payload_prefix': 23 bytes do not fit the 22-byte payload of the 64-byte "
            "frames");
}

}  // namespace
}  // namespace rawpipe
