// Offload off on an AF_XDP port in steering mode: the endpoint's rule leaves the XDP program's
// steering map, so its datagrams reach a kernel socket instead of the pipeline; offload on takes
// them back. A veth pair between two namespaces; kernel UDP sockets on both ends.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <thread>

#include "rawpipe/config.hh"
#include "rawpipe/pipeline.hh"
#include "pipeline/port/registry.hh"
#include "tests/support/netns.hh"

namespace rawpipe {
namespace {

using namespace std::chrono_literals;
using test::NetNs;
using test::VethPair;

constexpr const char* kRxIp4 = "10.211.0.1";
constexpr const char* kTxIp4 = "10.211.0.2";
constexpr std::uint16_t kPort = 5000;

class AfXdpOffload : public ::testing::Test {
 protected:
  void SetUp() override {
    if (auto why = test::netns_unavailable_reason()) GTEST_SKIP() << *why;
    if (!find_pmd("af_xdp")) GTEST_SKIP() << "af_xdp driver not built";
    auto a = NetNs::create("rpor");
    ASSERT_TRUE(a) << a.message();
    rx_ns_ = std::make_unique<NetNs>(std::move(a).value());
    auto b = NetNs::create("rpot");
    ASSERT_TRUE(b) << b.message();
    tx_ns_ = std::make_unique<NetNs>(std::move(b).value());
    auto pair = VethPair::create({rx_ns_.get(), "", {std::string(kRxIp4) + "/24"}},
                                 {tx_ns_.get(), "", {std::string(kTxIp4) + "/24"}});
    ASSERT_TRUE(pair) << pair.message();
    veth_ = std::make_unique<VethPair>(std::move(pair).value());
  }

  void TearDown() override {
    if (pipeline_) (void)rx_ns_->run([&] { pipeline_.reset(); });
    veth_.reset();
    tx_ns_.reset();
    rx_ns_.reset();
  }

  void send(unsigned n) {
    ASSERT_TRUE(tx_ns_->run([&] {
      int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_port = htons(kPort);
      inet_pton(AF_INET, kRxIp4, &a.sin_addr);
      for (unsigned i = 0; i < n; ++i) {
        sendto(s, "offload", 7, 0, reinterpret_cast<sockaddr*>(&a), sizeof(a));
        std::this_thread::sleep_for(200us);  // the kernel socket's buffer and the ring keep up
      }
      close(s);
    }));
  }

  std::uint64_t delivered() const { return pipeline_->snapshot().delivered_per_endpoint[0]; }

  std::unique_ptr<NetNs> rx_ns_, tx_ns_;
  std::unique_ptr<VethPair> veth_;
  std::unique_ptr<Pipeline> pipeline_;
};

TEST_F(AfXdpOffload, OffPassesTheEndpointsTrafficToTheKernelAndOnTakesItBack) {
  const std::string text = fmt::format(R"(
[[pools]]
name = "rx"
count = 4096
huge_pages = "never"

[[ports]]
name = "x0"
pmd = "af_xdp"
interface = "{}"

[[endpoints]]
name = "md"
action = "sink"
match = ["udp dst {}:{}"]

[[lcores]]
rx = ["x0:0"]
)",
                                       veth_->a().name, kRxIp4, kPort);
  Status st;
  int ks = -1;
  ASSERT_TRUE(rx_ns_->run([&] {
    LoadOptions opt;
    opt.find_pmd = &find_pmd;
    auto cfg = load_config_string(text, "af_xdp_offload.toml", opt);
    if (!cfg) {
      st = cfg.status();
      return;
    }
    auto p = Pipeline::create(cfg->plan);
    if (!p) {
      st = p.status();
      return;
    }
    pipeline_ = std::move(p).value();
    st = pipeline_->start();
    // The kernel's own receiver of the same port, on the XDP side.
    ks = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(kPort);
    inet_pton(AF_INET, kRxIp4, &a.sin_addr);
    if (bind(ks, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) st = Status::errorf("bind: {}", std::strerror(errno));
    timeval tv{0, 300000};
    setsockopt(ks, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  }));
  ASSERT_TRUE(st) << st.message();
  auto kernel_received = [&] {
    int got = 0;
    char buf[16];
    while (recv(ks, buf, sizeof(buf), 0) == 7) ++got;
    return got;
  };
  auto wait_delivered = [&](std::uint64_t n) {
    auto deadline = std::chrono::steady_clock::now() + 5s;
    while (delivered() < n && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(1ms);
  };

  // Offloaded: the pipeline has the datagrams, the kernel socket none.
  send(20);
  wait_delivered(20);
  EXPECT_EQ(delivered(), 20u);
  EXPECT_EQ(kernel_received(), 0);

  // Off: the kernel socket gets them; the pipeline neither delivers nor drops any.
  ASSERT_TRUE(pipeline_->set_endpoint_offload(0, false));
  send(20);
  EXPECT_EQ(kernel_received(), 20) << "with offload off the endpoint's traffic must reach the kernel";
  EXPECT_EQ(delivered(), 20u);
  EXPECT_EQ(pipeline_->snapshot().total.drops[static_cast<unsigned>(DropReason::kEndpointOffloadOff)], 0u);

  // On again: back to the pipeline.
  ASSERT_TRUE(pipeline_->set_endpoint_offload(0, true));
  send(20);
  wait_delivered(40);
  EXPECT_EQ(delivered(), 40u);
  EXPECT_EQ(kernel_received(), 0);
  close(ks);

  ASSERT_TRUE(rx_ns_->run([&] { (void)pipeline_->stop(); }));
  Accounting acc = pipeline_->accounting();
  EXPECT_EQ(acc.rx_packets, 40u) << "steering let something else through (or lost some)";
  EXPECT_TRUE(acc.balanced());
}

}  // namespace
}  // namespace rawpipe
