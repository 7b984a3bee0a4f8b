// Fault: an endpoint's consumer stalls. Its ring fills, the lcore keeps running and drops the
// overflow as endpoint_ring_full (never blocks, never leaks), and once the consumer drains the
// ring, delivery resumes. Traffic is released in exact steps by the gated test port.
#include <gtest/gtest.h>

#include "tests/fault/fault_support.hh"
#include "tests/fault/gated_port.hh"

namespace rawpipe::fault {
namespace {

constexpr std::uint32_t kRing = 256;

EndpointPlan ring_endpoint(const char* name) {
  EndpointPlan e;
  e.name = name;
  e.action = EndpointAction::kRing;
  e.ring_size = kRing;
  e.match = {"udp dst *:5000"};
  return e;
}

// Takes everything the endpoint holds right now; returns how many (each checked and freed).
std::uint64_t drain(Pipeline& p, std::uint16_t ep) {
  std::uint64_t got = 0;
  Mbuf* burst[64];
  while (unsigned n = p.endpoint_receive(ep, burst, 64)) {
    for (unsigned i = 0; i < n; ++i) EXPECT_EQ(burst[i]->endpoint, ep);
    mbuf_free_bulk(burst, n);
    got += n;
  }
  return got;
}

TEST(EndpointStall, RingFillsOverflowIsCountedAndDeliveryResumesAfterTheDrain) {
  Gates gates;
  auto created = Pipeline::create(gated_plan(&gates, {ring_endpoint("slow")}));
  ASSERT_TRUE(created) << created.message();
  Pipeline& p = *created.value();
  ASSERT_TRUE(p.start());

  // Stalled consumer: 1000 frames arrive, the ring takes kRing, the rest overflow.
  gates.allow_rx = 1000;
  ASSERT_TRUE(wait_for([&] {
    PipelineSnapshot s = p.snapshot();
    return s.total.rx_packets == 1000 && s.total.delivered + s.total.dropped() == 1000;
  }));
  Accounting stalled = p.accounting();
  EXPECT_EQ(stalled.delivered, kRing);
  EXPECT_EQ(drops(stalled, DropReason::kEndpointRingFull), 1000u - kRing);
  EXPECT_EQ(stalled.dropped(), 1000u - kRing);
  EXPECT_EQ(p.pool("rx")->in_use(), kRing) << "exactly the queued packets are out of the pool";
  EXPECT_TRUE(p.running()) << "a stalled consumer must not stop the lcore";

  // The consumer wakes up and drains what waited.
  EXPECT_EQ(drain(p, 0), kRing);
  EXPECT_EQ(p.pool("rx")->in_use(), 0u);

  // Recovery: 4 steps of 200 frames, each drained before the next; nothing overflows now.
  std::uint64_t consumed = 0;
  for (int step = 1; step <= 4; ++step) {
    gates.allow_rx = 1000 + 200u * step;
    ASSERT_TRUE(wait_for([&] {
      consumed += drain(p, 0);
      return consumed == 200u * step;
    })) << "step " << step << ": consumed " << consumed;
  }
  ASSERT_TRUE(p.stop());
  Accounting a = p.accounting();
  EXPECT_EQ(a.rx_packets, 1800u);
  EXPECT_EQ(a.delivered, kRing + 800u);
  EXPECT_EQ(a.delivered_per_endpoint.at(0), kRing + 800u);
  EXPECT_EQ(drops(a, DropReason::kEndpointRingFull), 1000u - kRing) << "no overflow after the drain";
  EXPECT_EQ(a.drained, 0u);
  expect_balanced(a);
}

}  // namespace
}  // namespace rawpipe::fault
