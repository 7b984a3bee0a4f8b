// Fault: the kernel's AF_PACKET ring overflows. A 64-frame ring, an lcore that sleeps 200 ms
// whenever a poll comes back empty, and bursts of datagrams from the peer namespace far larger
// than the ring. The run's verdict must turn lossy with exact counts: every frame the receiving
// interface took is either one the pipeline received or one the ring dropped (tp_drops), the
// summary says LOSSY (never a bare OK), the JSON says "lossless": false with the loss by port and
// reason, and [run] on_loss = "fail" makes the exit status 3. Root only.
#include <iostream>

#include "tests/fault/netns_run.hh"

namespace rawpipe::fault {
namespace {

// Frames the receiving interface has taken so far (`ip -s -j link`), in its namespace.
std::uint64_t rx_frames(const test::NetNs& ns, const std::string& ifname) {
  auto o = test::output_in(&ns, {"ip", "-s", "-j", "link", "show", "dev", ifname});
  EXPECT_TRUE(o) << o.message();
  if (!o) return 0;
  auto j = nlohmann::json::parse(o.value(), nullptr, false);
  EXPECT_FALSE(j.is_discarded()) << o.value();
  return j.is_array() && !j.empty() ? j[0]["stats64"]["rx"]["packets"].get<std::uint64_t>() : 0;
}

using KernelRingOverflow = NetnsRun;

TEST_F(KernelRingOverflow, VerdictTurnsLossyWithExactCounts) {
  // Nothing but the test's datagrams on the wire: no IPv6 (router/neighbour solicitations, MLD)
  // and no ARP (static entries), so the interface's counter is the test's traffic.
  for (const test::NetNs* ns : {rx_ns_.get(), tx_ns_.get()})
    ASSERT_TRUE(test::exec_in(ns, {"sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1"}));
  auto rx_mac = veth_->mac_a(), tx_mac = veth_->mac_b();
  ASSERT_TRUE(rx_mac && tx_mac);
  ASSERT_TRUE(veth_->exec_b({"ip", "neigh", "replace", kRxIp, "lladdr", rx_mac.value(), "dev", veth_->b().name,
                             "nud", "permanent"}));
  ASSERT_TRUE(veth_->exec_a({"ip", "neigh", "replace", kTxIp, "lladdr", tx_mac.value(), "dev", ifname_, "nud",
                             "permanent"}));

  const fs::path cfg = config("overflow", "[run]\non_loss = \"fail\"\n"
                                          "[[pools]]\nname = \"rx\"\ncount = 4096\nbuf_size = 2048\n"
                                          "[[ports]]\nname = \"p0\"\npmd = \"af_packet\"\ninterface = \"" +
                                              ifname_ +
                                              "\"\ntpacket_version = 2\nrx_ring_size = 64\ntx_queues = 0\n"
                                              "[[endpoints]]\nname = \"udp\"\naction = \"sink\"\nmatch = [\"udp dst "
                                              "*:5000\"]\n"
                                              "[[lcores]]\nrx = [\"p0:0\"]\nidle_sleep_us = 200000\n");
  const fs::path json = tmp_ / "overflow.json";
  const pid_t pid = start("run", cfg, {"--duration", "3", "--json", json.string()});
  ASSERT_GT(pid, 0);
  ASSERT_TRUE(wait_for("run", "af_packet " + ifname_)) << out("run") << err("run");
  const std::uint64_t before = rx_frames(*rx_ns_, ifname_);
  for (int burst = 0; burst < 3; ++burst) {
    send_udp(4000, 5000);
    std::this_thread::sleep_for(300ms);  // the lcore wakes, drains the ring, sleeps again
  }
  const int status = test::wait_process(pid, {.timeout = 30s});
  const std::uint64_t arrived = rx_frames(*rx_ns_, ifname_) - before;

  auto j = read_json(json);
  ASSERT_FALSE(j.is_discarded()) << out("run") << err("run");
  EXPECT_EQ(status, 3) << "on_loss = \"fail\" with losses exits 3\n" << out("run") << err("run");
  EXPECT_TRUE(j["ok"].get<bool>()) << "the pipeline's own accounting still balances";
  EXPECT_FALSE(j["lossless"].get<bool>()) << j.dump(2);
  const auto& losses = j["ports"]["p0"]["losses"];
  ASSERT_TRUE(losses.contains("kernel_ring_full")) << losses.dump();
  ASSERT_TRUE(losses["kernel_ring_full"].is_number()) << "unknown, not counted: " << losses.dump();
  const std::uint64_t ring_full = losses["kernel_ring_full"].get<std::uint64_t>();
  const std::uint64_t rx = j["rx_packets"].get<std::uint64_t>();
  EXPECT_GT(ring_full, 0u) << "the ring never overflowed: the test proves nothing\n" << j.dump(2);
  // Exact: every frame the interface took reached the pipeline or is counted as lost.
  EXPECT_EQ(rx + ring_full, arrived) << "rx " << rx << " + kernel_ring_full " << ring_full;
  EXPECT_EQ(j["lost_before_pipeline"].get<std::uint64_t>(), ring_full) << j.dump(2);
  EXPECT_EQ(j["delivered"].get<std::uint64_t>(), rx) << "every received frame was a test datagram";
  std::cout << "interface took " << arrived << " frames: pipeline rx " << rx << ", kernel_ring_full " << ring_full
            << "\n";
  const std::string o = out("run");
  EXPECT_NE(o.find(fmt::format("port p0 lost before the pipeline: kernel_ring_full {}", ring_full)), std::string::npos)
      << o;
  EXPECT_NE(o.find(fmt::format("LOSSY: {} frames lost before the pipeline", ring_full)), std::string::npos) << o;
  EXPECT_EQ(o.find("  OK:"), std::string::npos) << "a lossy run printed OK:\n" << o;
}

}  // namespace
}  // namespace rawpipe::fault
