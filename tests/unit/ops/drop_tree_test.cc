// The drop tree shared by `rawpipe stat --drops` and `rawpipe run --json`: pipeline reasons grouped
// by stage, port-side losses (pool, device, kernel/NIC counters) by port.
#include <gtest/gtest.h>

#include "rawpipe/drop_tree.hh"

namespace rawpipe::ops {
namespace {

TEST(DropTree, GroupsReasonsByStageAndPortLossesByPort) {
  std::array<std::uint64_t, kDropReasonCount> drops{};
  drops[static_cast<std::size_t>(DropReason::kNoMatch)] = 3;
  drops[static_cast<std::size_t>(DropReason::kFilterDrop)] = 2;
  drops[static_cast<std::size_t>(DropReason::kTruncatedUdp)] = 1;
  drops[static_cast<std::size_t>(DropReason::kEndpointRingFull)] = 4;
  std::vector<NamedPortStats> ports(2);
  ports[0].name = "p0";
  ports[0].stats.rx_queues.resize(2);
  ports[0].stats.rx_queues[0].rx_nombuf = 5;
  ports[0].stats.rx_queues[1].rx_nombuf = 1;
  ports[0].stats.rx_queues[1].rx_errors = 2;
  ports[0].stats.extended = {{"kernel_drops", 7}, {"xdp_passed", 9}, {"if_rx_dropped", 0}, {"if_rx_missed_errors", 6}};
  ports[1].name = "quiet";
  ports[1].stats.rx_queues.resize(1);
  ports[1].stats.extended = {{"rx_packets_seen", 100}};

  const nlohmann::json t = drop_tree_json(drops, ports);
  EXPECT_EQ(t["pipeline_total"], 10u);
  EXPECT_EQ(t["pipeline"]["classify"]["no_match"], 3u);
  EXPECT_EQ(t["pipeline"]["filter"]["filter_drop"], 2u);
  EXPECT_EQ(t["pipeline"]["parse"]["truncated_udp"], 1u);
  EXPECT_EQ(t["pipeline"]["endpoint"]["endpoint_ring_full"], 4u);
  EXPECT_FALSE(t["pipeline"].contains("transmit"));
  EXPECT_EQ(t["port_total"], 8u);  // nombuf 6 + errors 2; driver counters are listed, not summed
  const auto& p0 = t["port"]["p0"];
  EXPECT_EQ(p0["pool_exhausted (rx_nombuf)"], 6u);
  EXPECT_EQ(p0["device_errors (rx_errors)"], 2u);
  EXPECT_EQ(p0["kernel_drops"], 7u);
  EXPECT_EQ(p0["if_rx_missed_errors"], 6u);
  EXPECT_FALSE(p0.contains("xdp_passed"));     // not a loss
  EXPECT_FALSE(p0.contains("if_rx_dropped"));  // zero
  EXPECT_FALSE(t["port"].contains("quiet"));
}

TEST(DropTree, StageOfEveryReason) {
  EXPECT_EQ(drop_stage(DropReason::kBadIpv4Ihl), "parse");
  EXPECT_EQ(drop_stage(DropReason::kFilterInvalidVerdict), "filter");
  EXPECT_EQ(drop_stage(DropReason::kEndpointOffloadOff), "endpoint");
  EXPECT_EQ(drop_stage(DropReason::kNotForUs), "transmit");
  EXPECT_EQ(drop_stage(DropReason::kTxFailed), "transmit");
}

}  // namespace
}  // namespace rawpipe::ops
