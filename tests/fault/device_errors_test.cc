// Fault: the device reports errors. The mlx5 model completes every N-th frame with an error CQE
// and flushes the rest of the receive queue (a WR_FLUSH storm of up to a ring's worth of CQEs),
// which the driver must count, recover from by resetting the queue, and survive without losing a
// buffer; the MANA model turns runs of frames into CQE_RX_TRUNCATED completions. Both run as
// ports of a real pipeline on an lcore, configured with the models' injection keys.
#include <gtest/gtest.h>

#include "tests/fault/fault_support.hh"
#include "pipeline/port/registry.hh"

namespace rawpipe::fault {
namespace {

std::string config(const std::string& port_keys) {
  return fmt::format(R"([[pools]]
name = "rx"
count = 4096
huge_pages = "never"

[[ports]]
name = "dev"
{}

[[endpoints]]
name = "all"
action = "sink"
match = ["udp"]

[[lcores]]
rx = ["dev:0"]
)",
                     port_keys);
}

TEST(DeviceErrors, Mlx5ErrorCqesAndFlushStormsAreCountedAndTheQueueRecovers) {
  if (!find_pmd("mlx5-model")) GTEST_SKIP() << "mlx5-model driver not built";
  constexpr std::uint64_t kFrames = 20000, kEvery = 1000;
  auto p = make_pipeline(config(fmt::format("pmd = \"mlx5-model\"\ninject_count = {}\ninject_flows = 8\n"
                                            "inject_rx_error_every = {}\nrx_ring_size = 256",
                                            kFrames, kEvery)),
                         "mlx5_errors.toml");
  ASSERT_TRUE(p);
  ASSERT_TRUE(p->start());
  // Every injected frame ends as a packet, an error CQE, or a drop while the queue was in error.
  auto settled = [&] {
    PortStats s = p->port(0).stats();
    return ext(s, "model_frames_injected") == kFrames &&
           rx_packets(s) + rx_errors(s) + ext(s, "model_rx_queue_error_drops") == kFrames &&
           p->accounting().rx_packets == rx_packets(s);
  };
  ASSERT_TRUE(wait_for(settled)) << "injected " << ext(p->port(0).stats(), "model_frames_injected");
  ASSERT_TRUE(p->stop());
  PortStats s = p->port(0).stats();
  Accounting a = p->accounting();

  const std::uint64_t errors = rx_errors(s);
  const std::uint64_t lost_in_error_state = ext(s, "model_rx_queue_error_drops");
  // The model fails every kEvery-th frame that finds a posted WQE: the packets plus the failed ones.
  EXPECT_EQ(errors, (a.rx_packets + errors) / kEvery);
  EXPECT_GE(errors, (kFrames - lost_in_error_state) / kEvery);
  EXPECT_GT(errors, 0u);
  EXPECT_EQ(errors, ext(s, "model_rx_error_cqes"));
  EXPECT_EQ(ext(s, "rx_error_syndrome_0x04"), errors) << "local protection error, the injected (critical) syndrome";
  EXPECT_EQ(ext(s, "rx_error_syndrome_0x05"), ext(s, "model_rx_flush_cqes")) << "every flush CQE was consumed";
  // How many WQEs were still posted when an error hit depends on how far the driver was behind
  // the model; at least some were, and each one came back as a flush CQE the driver consumed.
  EXPECT_GT(ext(s, "model_rx_flush_cqes"), 0u);
  EXPECT_EQ(ext(s, "rx_queue_resets"), errors) << "one reset per error";
  // The model counts what arrived while the RQ was in the error state; a NIC gives the driver no
  // such count, so the port reports that loss as unknown and the verdict cannot be lossless.
  ASSERT_EQ(s.losses.count("rx_queue_error_state"), 1u);
  EXPECT_FALSE(s.losses.at("rx_queue_error_state").has_value());
  EXPECT_FALSE(loss_totals(lost_before_pipeline(s)).lossless());
  EXPECT_EQ(a.rx_packets + errors + lost_in_error_state, kFrames);
  EXPECT_EQ(a.delivered, a.rx_packets);
  expect_balanced(a);
}

TEST(DeviceErrors, ManaErrorCqeRunsAreCountedAndTheirWqesRetired) {
  if (!find_pmd("mana-model")) GTEST_SKIP() << "mana-model driver not built";
  // Runs of 16 bad completions start at frames 1000, 2000, ..., 20000: 20 runs, all inside the
  // 20500 frames.
  constexpr std::uint64_t kFrames = 20500, kEvery = 1000, kRun = 16, kBad = 20 * kRun;
  auto p = make_pipeline(config(fmt::format("pmd = \"mana-model\"\nframes = {}\nflows = 8\ninject_rx_error_every = {}\n"
                                            "inject_rx_error_run = {}\nrx_ring_size = 256",
                                            kFrames, kEvery, kRun)),
                         "mana_errors.toml");
  ASSERT_TRUE(p);
  ASSERT_TRUE(p->start());
  ASSERT_TRUE(wait_for([&] {
    PipelineSnapshot snap = p->snapshot();
    return snap.total.rx_packets == kFrames - kBad && snap.total.delivered == kFrames - kBad &&
           ext(p->port(0).stats(), "model_rx_errors_injected") == kBad;
  })) << "rx " << p->accounting().rx_packets;
  ASSERT_TRUE(p->stop());
  PortStats s = p->port(0).stats();
  Accounting a = p->accounting();
  EXPECT_EQ(ext(s, "model_rx_errors_injected"), kBad);
  EXPECT_EQ(ext(s, "rx_truncated"), kBad);
  EXPECT_EQ(rx_errors(s), kBad);
  EXPECT_EQ(ext(s, "rx_cq_overflow"), 0u);
  EXPECT_EQ(ext(s, "model_violations"), 0u);
  EXPECT_EQ(a.rx_packets, kFrames - kBad);
  EXPECT_EQ(a.delivered, kFrames - kBad);
  expect_balanced(a);
}

TEST(DeviceErrors, InjectionKeysAreCheckedLikeEveryOtherKey) {
  if (!find_pmd("mana-model") || !find_pmd("mlx5-model")) GTEST_SKIP() << "model drivers not built";
  LoadOptions o;
  o.find_pmd = &find_pmd;
  o.cpu_count = 2;
  auto run_only = load_config_string(config("pmd = \"mana-model\"\ninject_rx_error_run = 4"), "keys.toml", o);
  ASSERT_FALSE(run_only);
  EXPECT_NE(run_only.message().find("keys.toml:"), std::string::npos) << run_only.message();
  EXPECT_NE(run_only.message().find("inject_rx_error_run"), std::string::npos) << run_only.message();
  auto long_run = load_config_string(
      config("pmd = \"mana-model\"\ninject_rx_error_every = 4\ninject_rx_error_run = 5"), "keys.toml", o);
  ASSERT_FALSE(long_run);
  EXPECT_NE(long_run.message().find("inject_rx_error_run"), std::string::npos) << long_run.message();
  auto negative = load_config_string(config("pmd = \"mlx5-model\"\ninject_rx_error_every = -1"), "keys.toml", o);
  ASSERT_FALSE(negative);
  EXPECT_NE(negative.message().find("inject_rx_error_every"), std::string::npos) << negative.message();
}

}  // namespace
}  // namespace rawpipe::fault
