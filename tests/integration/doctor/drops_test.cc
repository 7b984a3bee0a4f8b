// Kernel-side drops reach the drop tree: an af_packet port with a 64-frame ring on a veth, an
// lcore that sleeps 200 ms whenever a poll comes back empty, and a sender in the peer namespace
// that bursts far more datagrams than the ring holds. The kernel drops the overflow (tp_drops);
// `rawpipe run --json` must show it under drops_tree.port, beside a balanced pipeline. Needs root.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "tests/support/netns.hh"
#include "tests/support/process.hh"

namespace {

namespace fs = std::filesystem;
using rawpipe::test::rawpipe_binary;
using rawpipe::test::NetNs;
using rawpipe::test::VethEnd;
using rawpipe::test::VethPair;

TEST(DropTree, KernelRingOverflowIsAttributedToThePort) {
  if (auto why = rawpipe::test::netns_unavailable_reason()) GTEST_SKIP() << *why;
  const fs::path bin = rawpipe_binary();
  ASSERT_TRUE(fs::exists(bin)) << bin << " is not built";
  auto rx_ns = NetNs::create("rpdrx");
  ASSERT_TRUE(rx_ns) << rx_ns.message();
  auto tx_ns = NetNs::create("rpdtx");
  ASSERT_TRUE(tx_ns) << tx_ns.message();
  const std::string ifname = rawpipe::test::unique_name("rpdr");
  auto veth = VethPair::create(VethEnd{&*rx_ns, ifname, {"10.78.0.1/24"}, "", 0},
                               VethEnd{&*tx_ns, "", {"10.78.0.2/24"}, "", 0});
  ASSERT_TRUE(veth) << veth.message();

  const fs::path dir = fs::temp_directory_path() / ("rawpipe-drops-test-" + std::to_string(getpid()));
  fs::create_directories(dir);
  const fs::path cfg = dir / "drops.toml", json = dir / "summary.json", out = dir / "out.txt";
  std::ofstream(cfg) << "[[pools]]\nname = \"rx\"\ncount = 4096\nbuf_size = 2048\n\n"
                     << "[[ports]]\nname = \"p0\"\npmd = \"af_packet\"\ninterface = \"" << ifname << "\"\n"
                     << "tpacket_version = 2\nrx_ring_size = 64\ntx_queues = 0\n\n"
                     << "[[endpoints]]\nname = \"udp\"\naction = \"sink\"\nmatch = [\"udp dst *:5000\"]\n\n"
                     << "[[lcores]]\nrx = [\"p0:0\"]\nidle_sleep_us = 200000\n";

  std::thread runner([&] {
    const std::string cmd = "ip netns exec " + rx_ns->name() + " " + bin.string() + " run " + cfg.string() +
                            " --duration 4 --json " + json.string() + " > " + out.string() + " 2>&1";
    EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  });
  // The path report is printed once the port has started: from then on its ring receives.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(3);
  for (;;) {
    std::stringstream so_far;
    so_far << std::ifstream(out).rdbuf();
    if (so_far.str().find(ifname) != std::string::npos || std::chrono::steady_clock::now() > deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  // Bursts far larger than the ring, spaced so that each one lands while the lcore sleeps.
  constexpr int kBursts = 4, kPerBurst = 5000, kSent = kBursts * kPerBurst;
  rawpipe::Status sent = tx_ns->run([&] {
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    ASSERT_GE(fd, 0);
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_port = htons(5000);
    inet_pton(AF_INET, "10.78.0.1", &to.sin_addr);
    char payload[64] = {};
    for (int b = 0; b < kBursts; ++b) {
      for (int i = 0; i < kPerBurst; ++i)
        (void)sendto(fd, payload, sizeof(payload), 0, reinterpret_cast<sockaddr*>(&to), sizeof(to));
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
    }
    close(fd);
  });
  runner.join();  // before any assertion can return: a joinable thread must not be destroyed
  ASSERT_TRUE(sent) << sent.message();

  std::ifstream in(json);
  auto j = nlohmann::json::parse(in, nullptr, false);
  std::stringstream log;
  log << std::ifstream(out).rdbuf();
  ASSERT_FALSE(j.is_discarded()) << "no JSON summary; rawpipe printed:\n" << log.str();
  EXPECT_TRUE(j["ok"].get<bool>()) << log.str();
  ASSERT_TRUE(j.contains("drops_tree")) << j.dump(2);
  const auto& tree = j["drops_tree"];
  ASSERT_TRUE(tree["port"].contains("p0")) << tree.dump(2);
  const std::uint64_t kernel = tree["port"]["p0"].value("kernel_drops", std::uint64_t(0));
  EXPECT_GT(kernel, 0u) << tree.dump(2);
  // What reached the pipeline plus what the ring dropped cannot exceed what was sent.
  EXPECT_LE(j["rx_packets"].get<std::uint64_t>() + kernel, std::uint64_t(kSent) + 64) << j.dump(2);
  EXPECT_EQ(tree["pipeline_total"].get<std::uint64_t>(), j["dropped"].get<std::uint64_t>());
  // The interface's own counters are reported too (zero or not, the key is there).
  EXPECT_TRUE(j["ports"]["p0"]["extended"].contains("if_rx_dropped")) << j["ports"]["p0"].dump(2);
  fs::remove_all(dir);
}

}  // namespace
