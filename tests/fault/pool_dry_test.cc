// Fault: the receive pool runs dry. A filter HOLDs every packet until the pool is empty; the port
// must count the buffers it could not get (rx_nombuf), keep every buffer accounted for, and
// resume once another thread frees the held buffers. Run on the synth generator and on both
// device models, whose drivers meet the empty pool in their refill paths:
//   synth     the frames wait: rx_burst generates nothing until buffers come back;
//   mana      the RQ runs short of posted WQEs and the model's wire (paced by them) waits;
//   mlx5      like a NIC and DPDK's mlx5 PMD: a completed frame with no replacement buffer is
//             dropped and counted in rx_nombuf, its buffer stays posted (the ring never runs dry),
//             so injected == rx + rx_nombuf exactly.
#include <gtest/gtest.h>

#include "tests/fault/fault_support.hh"
#include "pipeline/port/registry.hh"

namespace rawpipe::fault {
namespace {

struct DryCase {
  const char* name;
  const char* pmd;
  const char* keys;        // the driver's keys in the [[ports]] table
  std::uint64_t frames;    // what the port produces in total
  std::uint32_t ring;      // rx_ring_size (buffers a device keeps posted)
  bool lossy;              // frames arriving while the pool is dry are dropped (and counted)
};

class PoolDry : public ::testing::TestWithParam<DryCase> {};

TEST_P(PoolDry, HeldBuffersEmptyThePoolThenEverythingArrivesOnceFreed) {
  const DryCase& c = GetParam();
  if (!find_pmd(c.pmd)) GTEST_SKIP() << "driver " << c.pmd << " not built";
  constexpr std::uint32_t kPool = 256;
  const std::string text = fmt::format(R"([[pools]]
name = "rx"
count = {}
cache_size = 0
huge_pages = "never"

[[ports]]
name = "p0"
pmd = "{}"
{}
rx_ring_size = {}

[[endpoints]]
name = "held"
action = "sink"
match = ["udp"]

[[lcores]]
rx = ["p0:0"]
)",
                                       kPool, c.pmd, c.keys, c.ring);
  auto pipe = make_pipeline(text, std::string("pool_dry_") + c.name + ".toml");
  ASSERT_TRUE(pipe);
  Holder holder(4096);
  ASSERT_TRUE(pipe->filters().set_endpoint_filter(0, FilterFn{&Holder::filter, nullptr, &holder}));
  ASSERT_TRUE(pipe->start());

  // Phase 1: everything is held, the pool empties and the port starts counting.
  ASSERT_TRUE(wait_for([&] { return rx_nombuf(pipe->port(0).stats()) > 0; }))
      << "the port never reported an empty pool; rx " << pipe->accounting().rx_packets;
  // The held count settles once the driver has posted (or generated into) every free buffer.
  std::uint64_t held = 0;
  for (int same = 0; same < 50; std::this_thread::sleep_for(std::chrono::milliseconds(2))) {
    const std::uint64_t now = holder.held.load();
    same = now == held ? same + 1 : 0;
    held = now;
  }
  Accounting mid = pipe->accounting();
  EXPECT_EQ(mid.rx_packets, held);
  EXPECT_EQ(mid.delivered, held) << "a HOLD counts as delivered";
  EXPECT_EQ(mid.dropped(), 0u);
  EXPECT_LE(held, kPool);
  // All-or-nothing bulk allocation may leave less than one burst unclaimed in the pool.
  EXPECT_LT(pipe->pool("rx")->available(), kMaxBurst) << "held plus posted buffers are (nearly) the whole pool";
  EXPECT_LT(held, c.frames) << "the pool must run dry before the traffic ends";

  // Phase 2: a second thread frees what is held, and keeps freeing until the traffic ends; the
  // filter stops holding, so later packets go straight to the sink.
  holder.holding = false;
  std::atomic<bool> done{false};
  std::thread releaser([&] {
    while (!done.load(std::memory_order_relaxed)) {
      if (holder.release() == 0) std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  });
  // Every frame the port produced has an outcome: received, or (lossy drivers) dropped for lack
  // of a buffer.
  auto produced = [&] {
    PortStats s = pipe->port(0).stats();
    return c.lossy ? ext(s, "model_frames_injected") : rx_packets(s);
  };
  const bool all = wait_for([&] {
    PortStats s = pipe->port(0).stats();
    const std::uint64_t accounted = rx_packets(s) + (c.lossy ? rx_nombuf(s) : 0);
    return produced() == c.frames && accounted == c.frames && pipe->accounting().rx_packets == rx_packets(s);
  });
  done = true;
  releaser.join();
  ASSERT_TRUE(all) << "rx " << pipe->accounting().rx_packets << " of " << c.frames << " after the pool refilled";
  ASSERT_TRUE(pipe->stop());
  holder.release();
  const PortStats s = pipe->port(0).stats();
  const std::uint64_t nombuf = rx_nombuf(s);

  Accounting a = pipe->accounting();
  const std::uint64_t lost = c.lossy ? nombuf : 0;
  EXPECT_EQ(a.rx_packets + lost, c.frames) << (c.lossy ? "each dropped frame is counted" : "nothing was lost");
  EXPECT_GT(a.rx_packets, held) << "traffic resumed once the buffers came back";
  EXPECT_EQ(a.delivered, a.rx_packets);
  EXPECT_EQ(a.delivered_per_endpoint.at(0), a.rx_packets);
  EXPECT_EQ(a.dropped(), 0u);
  EXPECT_EQ(holder.held.load(), held);
  EXPECT_EQ(holder.released.load(), held);
  EXPECT_GT(nombuf, 0u);
  expect_balanced(a);
}

INSTANTIATE_TEST_SUITE_P(
    Ports, PoolDry,
    // mlx5: the wire is paced (60000 frames over 0.6 s) so that it still carries frames when the
    // buffers come back; while the pool is dry the driver drops what completes.
    ::testing::Values(DryCase{"synth", "synth", "packets = 3000", 3000, 1024, false},
                      DryCase{"mlx5_model", "mlx5-model", "inject_count = 60000\ninject_flows = 8\ninject_rate_pps = 100000",
                              60000, 64, true},
                      DryCase{"mana_model", "mana-model", "frames = 3000\nflows = 8", 3000, 64, false}),
    [](const ::testing::TestParamInfo<DryCase>& i) { return std::string(i.param.name); });

}  // namespace
}  // namespace rawpipe::fault
