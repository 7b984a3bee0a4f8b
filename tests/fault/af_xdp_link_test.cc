// Fault: the interface under an AF_XDP port goes down, comes back, then disappears while the
// pipeline runs. The pipeline keeps running throughout; the port's counters and notices say what
// happened (link_up, interface_present, a sentence naming the interface); traffic resumes after
// the link comes back; after the interface is deleted, stop() still returns every buffer the
// kernel held and the accounting identity holds with the exact packet count.
//
// Root only (network namespaces, veth, XDP); skips with the reason otherwise.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "tests/fault/fault_support.hh"
#include "tests/support/netns.hh"
#include "pipeline/port/registry.hh"

namespace rawpipe::fault {
namespace {

using namespace std::chrono_literals;
using test::NetNs;
using test::VethPair;

constexpr const char* kRxIp = "10.211.0.1";
constexpr const char* kTxIp = "10.211.0.2";

class AfXdpLink : public ::testing::Test {
 protected:
  void SetUp() override {
    if (auto why = test::netns_unavailable_reason()) GTEST_SKIP() << *why;
    if (!find_pmd("af_xdp")) GTEST_SKIP() << "af_xdp driver not built";
    auto a = NetNs::create("rpfr");
    ASSERT_TRUE(a) << a.message();
    rx_ns_ = std::make_unique<NetNs>(std::move(a).value());
    auto b = NetNs::create("rpft");
    ASSERT_TRUE(b) << b.message();
    tx_ns_ = std::make_unique<NetNs>(std::move(b).value());
    auto pair = VethPair::create({rx_ns_.get(), "", {std::string(kRxIp) + "/24"}},
                                 {tx_ns_.get(), "", {std::string(kTxIp) + "/24"}});
    ASSERT_TRUE(pair) << pair.message();
    veth_ = std::make_unique<VethPair>(std::move(pair).value());
  }
  void TearDown() override {
    pipe_.reset();
    veth_.reset();
    tx_ns_.reset();
    rx_ns_.reset();
  }

  // Sends n datagrams to kRxIp:5000 from the peer namespace, at most 128 ahead of what the
  // consumer took, and drains the endpoint on this thread. Returns how many were received
  // before `limit` (each one checked to be ours).
  std::uint64_t send_and_consume(unsigned n, std::chrono::milliseconds limit = 20s) {
    std::atomic<std::uint64_t> got{0};
    std::atomic<bool> give_up{false};
    std::thread sender = tx_ns_->spawn([&] {
      int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
      sockaddr_in d{};
      d.sin_family = AF_INET;
      d.sin_port = htons(5000);
      inet_pton(AF_INET, kRxIp, &d.sin_addr);
      std::uint8_t payload[64] = {'f', 'a', 'u', 'l', 't'};
      for (unsigned i = 0; i < n && !give_up; ++i) {
        // Relaxed: flow control only.
        while (i - got.load(std::memory_order_relaxed) > 128 && !give_up) std::this_thread::sleep_for(50us);
        (void)sendto(s, payload, sizeof payload, 0, reinterpret_cast<sockaddr*>(&d), sizeof d);
      }
      close(s);
    });
    const auto deadline = std::chrono::steady_clock::now() + limit;
    Mbuf* burst[32];
    while (got < n && std::chrono::steady_clock::now() < deadline) {
      const unsigned k = pipe_->endpoint_receive(0, burst, 32);
      for (unsigned i = 0; i < k; ++i) EXPECT_EQ(burst[i]->data_len, 14u + 20 + 8 + 64);
      mbuf_free_bulk(burst, k);
      got += k;
      if (k == 0) std::this_thread::sleep_for(100us);
    }
    give_up = true;
    sender.join();
    return got;
  }

  // Sends one datagram every 20 ms until one is received (at most 10 s); returns how many of
  // them were received (0: none).
  std::uint64_t probe_until_received() {
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    std::uint64_t got = 0;
    while (got == 0 && std::chrono::steady_clock::now() < deadline) {
      got += send_and_consume(1, 20ms);
    }
    // A probe sent before the path was up may still arrive late: collect stragglers.
    std::this_thread::sleep_for(50ms);
    Mbuf* burst[32];
    while (unsigned k = pipe_->endpoint_receive(0, burst, 32)) {
      mbuf_free_bulk(burst, k);
      got += k;
    }
    return got;
  }

  PortStats port_stats() { return pipe_->port(0).stats(); }

  std::unique_ptr<NetNs> rx_ns_, tx_ns_;
  std::unique_ptr<VethPair> veth_;
  std::unique_ptr<Pipeline> pipe_;
};

TEST_F(AfXdpLink, LinkDownUpThenInterfaceRemovedWhileRunning) {
  const std::string ifname = veth_->a().name;
  const std::string text = fmt::format(R"([[pools]]
name = "rx"
count = 4096
huge_pages = "never"

[[ports]]
name = "x0"
pmd = "af_xdp"
interface = "{}"
rx_ring_size = 1024

[[endpoints]]
name = "feed"
match = ["udp dst {}:5000"]
ring_size = 1024

[[lcores]]
rx = ["x0:0"]
)",
                                       ifname, kRxIp);
  Status st;
  ASSERT_TRUE(rx_ns_->run([&] {
    pipe_ = make_pipeline(text, "af_xdp_link.toml");
    if (pipe_) st = pipe_->start();
  }));
  ASSERT_TRUE(pipe_);
  ASSERT_TRUE(st) << st.message();
  EXPECT_EQ(ext(port_stats(), "link_up"), 1u);
  EXPECT_EQ(ext(port_stats(), "interface_present"), 1u);
  EXPECT_TRUE(pipe_->port(0).notices().empty());

  // 1. Traffic flows.
  EXPECT_EQ(send_and_consume(500), 500u);

  // 2. Link down: nothing arrives, the pipeline keeps polling, the port says why.
  ASSERT_TRUE(veth_->exec_a({"ip", "link", "set", "dev", ifname, "down"}));
  ASSERT_TRUE(wait_for([&] { return ext(port_stats(), "link_up") == 0; }, 5s));
  EXPECT_EQ(ext(port_stats(), "interface_present"), 1u);
  EXPECT_EQ(send_and_consume(100, 500ms), 0u);
  EXPECT_TRUE(pipe_->running());
  auto down = pipe_->port(0).notices();
  ASSERT_FALSE(down.empty());
  EXPECT_NE(down[0].find(ifname + " is down"), std::string::npos) << down[0];

  // 3. Link up again: traffic resumes, exactly.
  ASSERT_TRUE(veth_->exec_a({"ip", "link", "set", "dev", ifname, "up"}));
  ASSERT_TRUE(wait_for([&] { return ext(port_stats(), "link_up") == 1; }, 5s));
  // The peer regains its carrier and resolves our address again (ARP passes through the XDP
  // program to the kernel); what it sends before that is lost on its side, before XDP sees it.
  // Single probes until one arrives, then an exact count.
  const std::uint64_t probes = probe_until_received();
  ASSERT_GT(probes, 0u) << "no traffic within 10 s of the link coming back";
  EXPECT_EQ(send_and_consume(500), 500u);
  const std::uint64_t before_delete = pipe_->accounting().rx_packets;
  EXPECT_EQ(before_delete, 1000u + probes);

  // 4. The interface disappears under the running port.
  ASSERT_TRUE(veth_->exec_a({"ip", "link", "del", "dev", ifname}));
  ASSERT_TRUE(wait_for([&] { return ext(port_stats(), "interface_present") == 0; }, 5s));
  std::this_thread::sleep_for(200ms);  // the lcore keeps polling the unbound socket
  EXPECT_TRUE(pipe_->running());
  EXPECT_FALSE(pipe_->stop_requested());
  auto gone = pipe_->port(0).notices();
  ASSERT_FALSE(gone.empty());
  EXPECT_NE(gone[0].find("interface " + ifname), std::string::npos) << gone[0];
  EXPECT_NE(gone[0].find("went away"), std::string::npos) << gone[0];

  ASSERT_TRUE(pipe_->stop());
  Accounting a = pipe_->accounting();
  EXPECT_EQ(a.rx_packets, 1000u + probes);
  EXPECT_EQ(a.delivered, 1000u + probes);
  EXPECT_EQ(a.dropped(), 0u);
  expect_balanced(a);
}

}  // namespace
}  // namespace rawpipe::fault
