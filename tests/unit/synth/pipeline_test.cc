// End to end through the engine: synth ports -> parse -> classify -> dispatch -> endpoints, with
// exact counts per endpoint and per drop reason (synth's packet limits make the totals exact).
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "rawpipe/config.hh"
#include "rawpipe/pipeline.hh"
#include "pipeline/wire/wire.hh"
#include "pipeline/port/registry.hh"

namespace rawpipe {
namespace {

// Three generators polled by one lcore:
//  clean: 6400 packets over 64 flows (4 destinations x 16 source ports), 1600 per destination;
//  bad:   1000 packets of one flow, half malformed: 100 of each of the five kinds;
//  six:   300 IPv6 packets behind two VLAN tags.
const char* kConfig = R"(
[run]
default_action = "drop"

[[pools]]
name = "rx"
count = 4096

[[ports]]
name = "clean"
pmd = "synth"
packets = 6400
ipv4_dst = "239.1.1.1"
dst_addrs = 4
src_port = 10000
src_ports = 16

[[ports]]
name = "bad"
pmd = "synth"
packets = 1000
ipv4_dst = "239.9.9.9"
dst_port = 7000
frame_size = 100
malformed_fraction = 0.5
malformed_kinds = ["truncated", "bad_ihl", "bad_length", "bad_udp_length", "fragment"]

[[ports]]
name = "six"
pmd = "synth"
packets = 300
ipv6_fraction = 1
ipv6_dst = "ff15::1"
vlans = [100, 200]
frame_size = 128

[[endpoints]]
name = "first"
action = "ring"
ring_size = 2048
match = ["udp dst 239.1.1.1:5000"]

[[endpoints]]
name = "second"
action = "sink"
match = ["udp dst 239.1.1.2:5000"]

[[endpoints]]
name = "one_flow"
action = "ring"
ring_size = 128
match = ["udp dst 239.1.1.3:5000 src 10.0.0.1:10000"]

[[endpoints]]
name = "from_bad"
action = "sink"
match = ["udp dst 239.9.9.9:7000 port bad"]

[[endpoints]]
name = "v6"
action = "sink"
match = ["udp dst [ff15::1]:5000 vlan 100"]

[[lcores]]
rx = ["clean:0", "bad:0", "six:0"]
)";

LoadOptions options() {
  LoadOptions o;
  o.find_pmd = &find_pmd;
  o.cpu_count = 2;
  return o;
}

TEST(SynthPipeline, ExactCountsPerEndpointAndReason) {
  auto loaded = load_config_string(kConfig, "e2e.toml", options());
  ASSERT_TRUE(loaded) << loaded.message();
  auto created = Pipeline::create(loaded->plan);
  ASSERT_TRUE(created) << created.message();
  auto& pipe = *created.value();
  ASSERT_TRUE(pipe.start());

  constexpr std::uint64_t kTotal = 6400 + 1000 + 300;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  Accounting a;
  do {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    a = pipe.accounting();
  } while ((a.rx_packets < kTotal || a.delivered + a.transmitted + a.dropped() < kTotal) &&
           std::chrono::steady_clock::now() < deadline);
  ASSERT_EQ(a.rx_packets, kTotal);

  // The consumer's view of the ring endpoints: exactly the packets their rules select.
  Mbuf* burst[256];
  std::uint64_t first = 0, one_flow = 0;
  while (unsigned n = pipe.endpoint_receive(0, burst, 256)) {
    for (unsigned i = 0; i < n; ++i) {
      const std::uint8_t* ip = burst[i]->data() + burst[i]->l3_off;
      EXPECT_EQ(wire::load_be32(ip + 16), 0xef010101u);  // 239.1.1.1
      EXPECT_EQ(burst[i]->endpoint, 0);
    }
    first += n;
    mbuf_free_bulk(burst, n);
  }
  while (unsigned n = pipe.endpoint_receive(2, burst, 256)) {
    for (unsigned i = 0; i < n; ++i)
      EXPECT_EQ(wire::load_be16(burst[i]->data() + burst[i]->l4_off), 10000);
    one_flow += n;
    mbuf_free_bulk(burst, n);
  }
  EXPECT_EQ(first, 1600u);
  EXPECT_EQ(one_flow, 100u);

  ASSERT_TRUE(pipe.stop());
  a = pipe.accounting();
  EXPECT_EQ(a.rx_packets, kTotal);
  ASSERT_EQ(a.delivered_per_endpoint.size(), 5u);
  EXPECT_EQ(a.delivered_per_endpoint[0], 1600u);
  EXPECT_EQ(a.delivered_per_endpoint[1], 1600u);
  EXPECT_EQ(a.delivered_per_endpoint[2], 100u);   // one of dst .3's 16 flows
  EXPECT_EQ(a.delivered_per_endpoint[3], 500u);   // the well-formed half of "bad"
  EXPECT_EQ(a.delivered_per_endpoint[4], 300u);
  EXPECT_EQ(a.delivered, 4100u);
  EXPECT_EQ(a.transmitted, 0u);
  auto drop = [&](DropReason r) { return a.drops[static_cast<std::size_t>(r)]; };
  // dst .3's other 15 flows (1500), all of dst .4 (1600), and the 100 later fragments (no ports).
  EXPECT_EQ(drop(DropReason::kNoMatch), 1500u + 1600u + 100u);
  EXPECT_EQ(drop(DropReason::kTruncatedIpv4), 100u);
  EXPECT_EQ(drop(DropReason::kBadIpv4Ihl), 100u);
  EXPECT_EQ(drop(DropReason::kBadIpv4TotalLength), 100u);
  EXPECT_EQ(drop(DropReason::kBadUdpLength), 100u);
  EXPECT_EQ(a.dropped(), 3600u);
  EXPECT_EQ(a.drained, 0u);
  EXPECT_TRUE(a.balanced());
  EXPECT_EQ(a.outstanding(), 0u);
}

TEST(SynthPipeline, RingEndpointsLeftFullAreDrainedAtStop) {
  // Nobody consumes: the ring (64 slots) fills, the rest count as endpoint_ring_full, and stop()
  // frees what the ring still holds; nothing is lost from the books.
  const char* cfg = R"(
[[pools]]
name = "rx"
count = 1024
[[ports]]
name = "s"
pmd = "synth"
packets = 500
[[endpoints]]
name = "slow"
action = "ring"
ring_size = 64
match = ["udp dst *:5000"]
[[lcores]]
rx = ["s:0"]
)";
  auto loaded = load_config_string(cfg, "full.toml", options());
  ASSERT_TRUE(loaded) << loaded.message();
  auto created = Pipeline::create(loaded->plan);
  ASSERT_TRUE(created) << created.message();
  auto& pipe = *created.value();
  ASSERT_TRUE(pipe.start());
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (pipe.accounting().rx_packets < 500 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  ASSERT_TRUE(pipe.stop());
  Accounting a = pipe.accounting();
  EXPECT_EQ(a.rx_packets, 500u);
  EXPECT_EQ(a.delivered, 64u);
  EXPECT_EQ(a.drops[static_cast<std::size_t>(DropReason::kEndpointRingFull)], 436u);
  EXPECT_EQ(a.drained, 64u);
  EXPECT_TRUE(a.balanced());
  EXPECT_EQ(a.outstanding(), 0u);
}

}  // namespace
}  // namespace rawpipe
