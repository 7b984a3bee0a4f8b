// Fault: a transmit ring fills. tx_burst takes fewer packets than offered; dispatch counts the
// rest as tx_failed and frees them (the caller owns what tx_burst did not take), the lcore keeps
// going, and transmission resumes once the ring has room again.
#include <gtest/gtest.h>

#include "tests/fault/fault_support.hh"
#include "tests/fault/gated_port.hh"

namespace rawpipe::fault {
namespace {

TEST(TxRingFull, RefusedPacketsAreCountedAndFreedAndTransmitResumes) {
  Gates gates;
  gates.allow_tx = 300;
  EndpointPlan fwd;
  fwd.name = "out";
  fwd.action = EndpointAction::kForward;
  fwd.forward_port = "g0";
  fwd.forward_port_id = 0;
  fwd.match = {"udp dst *:5000"};
  auto created = Pipeline::create(gated_plan(&gates, {fwd}));
  ASSERT_TRUE(created) << created.message();
  Pipeline& p = *created.value();
  ASSERT_TRUE(p.start());

  gates.allow_rx = 1000;
  ASSERT_TRUE(wait_for([&] {
    PipelineSnapshot s = p.snapshot();
    return s.total.rx_packets == 1000 && s.total.transmitted + s.total.dropped() == 1000;
  }));
  Accounting full = p.accounting();
  EXPECT_EQ(full.transmitted, 300u);
  EXPECT_EQ(full.transmitted_per_port.at(0), 300u);
  EXPECT_EQ(drops(full, DropReason::kTxFailed), 700u);
  EXPECT_EQ(ext(p.port(0).stats(), "tx_refused"), 700u);
  EXPECT_EQ(p.pool("rx")->in_use(), 0u) << "refused packets went back to the pool";

  // Room again: the next 500 frames all leave.
  gates.allow_tx = 300 + 500;
  gates.allow_rx = 1500;
  ASSERT_TRUE(wait_for([&] {
    PipelineSnapshot s = p.snapshot();
    return s.total.rx_packets == 1500 && s.total.transmitted + s.total.dropped() == 1500;
  }));
  ASSERT_TRUE(p.stop());
  Accounting a = p.accounting();
  EXPECT_EQ(a.rx_packets, 1500u);
  EXPECT_EQ(a.transmitted, 800u);
  EXPECT_EQ(drops(a, DropReason::kTxFailed), 700u);
  EXPECT_EQ(a.delivered, 0u);
  expect_balanced(a);
}

}  // namespace
}  // namespace rawpipe::fault
