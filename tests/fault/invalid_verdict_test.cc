// Fault: a filter returns something that is not a verdict. A real plugin (.so, loaded through
// the plugin loader) on an endpoint and a burst callback on a queue both misbehave; every such
// packet is dropped as filter_invalid_verdict, counted exactly, freed, and the others pass.
#include <gtest/gtest.h>

#include <cstdlib>

#include "pipeline/filter/plugin.hh"
#include "tests/fault/fault_support.hh"
#include "tests/fault/gated_port.hh"

namespace rawpipe::fault {
namespace {

EndpointPlan sink(const char* name) {
  EndpointPlan e;
  e.name = name;
  e.action = EndpointAction::kSink;
  e.match = {"udp dst *:5000"};
  return e;
}

std::string plugin_path() {
  const char* p = std::getenv("RAWPIPE_FAULT_PLUGIN");
  return p ? p : "";
}

class InvalidVerdict : public ::testing::TestWithParam<int> {};

TEST_P(InvalidVerdict, PluginOnAnEndpointDropsEveryBadVerdictAsFilterInvalidVerdict) {
  if (plugin_path().empty()) GTEST_SKIP() << "RAWPIPE_FAULT_PLUGIN is not set (meson test sets it)";
  const int value = GetParam();
  auto plugin = FilterPlugin::load(plugin_path(), nullptr, {{"every", "3"}, {"value", std::to_string(value)}});
  ASSERT_TRUE(plugin) << plugin.message();
  Gates gates;
  auto created = Pipeline::create(gated_plan(&gates, {sink("ep")}));
  ASSERT_TRUE(created) << created.message();
  Pipeline& p = *created.value();
  ASSERT_TRUE(p.filters().set_endpoint_filter(0, plugin.value()->filter()));
  ASSERT_TRUE(p.start());
  gates.allow_rx = 3000;
  ASSERT_TRUE(wait_for([&] {
    PipelineSnapshot s = p.snapshot();
    return s.total.rx_packets == 3000 && s.total.delivered + s.total.dropped() == 3000;
  }));
  ASSERT_TRUE(p.stop());
  Accounting a = p.accounting();
  EXPECT_EQ(drops(a, DropReason::kFilterInvalidVerdict), 1000u) << "every third packet, value " << value;
  EXPECT_EQ(drops(a, DropReason::kFilterDrop), 0u) << "an invalid verdict is not a DROP";
  EXPECT_EQ(a.delivered, 2000u);
  EXPECT_EQ(plugin.value()->report(), "bad=1000 good=2000");
  expect_balanced(a);
}

// 7 and -1 are no verdict at all; 3 is one past RAWPIPE_HOLD.
INSTANTIATE_TEST_SUITE_P(Values, InvalidVerdict, ::testing::Values(7, -1, 3));

// A burst callback on the rx queue writes a bad value for one packet in four; the endpoint's
// well-behaved per-packet filter then sees only the survivors.
std::atomic<std::uint64_t> g_endpoint_seen{0};

void bad_burst(const rawpipe_packet*, int* verdicts, unsigned n, void* ctx) {
  auto* count = static_cast<std::atomic<std::uint64_t>*>(ctx);
  for (unsigned i = 0; i < n; ++i)
    if (count->fetch_add(1, std::memory_order_relaxed) % 4 == 3) verdicts[i] = 1000;
}

int count_endpoint(const rawpipe_packet*, void*) {
  g_endpoint_seen.fetch_add(1, std::memory_order_relaxed);
  return RAWPIPE_RECV;
}

TEST(InvalidVerdictBurst, QueueFilterBadValuesAreDroppedBeforeEndpointFilters) {
  Gates gates;
  auto created = Pipeline::create(gated_plan(&gates, {sink("ep")}));
  ASSERT_TRUE(created) << created.message();
  Pipeline& p = *created.value();
  std::atomic<std::uint64_t> seen{0};
  ASSERT_TRUE(p.filters().set_queue_filter(0, 0, FilterFn{nullptr, &bad_burst, &seen}));
  ASSERT_TRUE(p.filters().set_endpoint_filter(0, FilterFn{&count_endpoint, nullptr, nullptr}));
  ASSERT_TRUE(p.start());
  gates.allow_rx = 4000;
  ASSERT_TRUE(wait_for([&] {
    PipelineSnapshot s = p.snapshot();
    return s.total.rx_packets == 4000 && s.total.delivered + s.total.dropped() == 4000;
  }));
  ASSERT_TRUE(p.stop());
  Accounting a = p.accounting();
  EXPECT_EQ(seen.load(), 4000u);
  EXPECT_EQ(drops(a, DropReason::kFilterInvalidVerdict), 1000u);
  EXPECT_EQ(g_endpoint_seen.load(), 3000u) << "dropped packets are not shown to later filters";
  EXPECT_EQ(a.delivered, 3000u);
  expect_balanced(a);
}

}  // namespace
}  // namespace rawpipe::fault
