// The Extra API's send path against a kernel peer over a veth pair in namespaces this test
// creates: sendto over IPv4 and IPv6 with the destination resolved by the pipeline's neighbour
// cache (our end has no IP: the ARP request / neighbour solicitation comes from rawpipe and the
// reply is learnt from the wire), and a zero-copy burst of application-built frames with
// checksums filled in software. The peer's kernel UDP sockets must receive every datagram, byte
// for byte, and its UdpInCsumErrors / Udp6InCsumErrors must not move. On af_packet and on af_xdp
// in whole-queue mode (mode = "all": the ARP reply and the advertisement reach the pipeline).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <set>
#include <thread>

#include "pipeline/extra/extra.hh"
#include "pipeline/port/registry.hh"
#include "rawpipe/config.hh"
#include "rawpipe/pipeline.hh"
#include "tests/support/netns.hh"

namespace rawpipe {
namespace {

constexpr const char* kOurIp = "10.85.0.1";
constexpr const char* kPeerIp = "10.85.0.2";
constexpr const char* kOurIp6 = "fd00:85::1";
constexpr const char* kPeerIp6 = "fd00:85::2";
constexpr std::uint16_t kPeerPort = 7100;
constexpr unsigned kDatagrams = 40;
constexpr unsigned kZeroCopy = 20;

struct Net {
  std::optional<test::NetNs> ours, peer;
  std::optional<test::VethPair> veth;
};

Status make_net(Net& n) {
  auto a = test::NetNs::create("rpsq");
  if (!a) return a.status();
  n.ours.emplace(std::move(a).value());
  auto b = test::NetNs::create("rpsp");
  if (!b) return b.status();
  n.peer.emplace(std::move(b).value());
  auto v = test::VethPair::create({&*n.ours, "", {}},
                                  {&*n.peer, "", {std::string(kPeerIp) + "/24", std::string(kPeerIp6) + "/64"}});
  if (!v) return v.status();
  n.veth.emplace(std::move(v).value());
  return Status::ok();
}

std::string config(const std::string& pmd, const std::string& ifname) {
  return fmt::format(R"(
[[pools]]
name = "rx"
count = 4096
huge_pages = "never"

[[ports]]
name = "p0"
pmd = "{}"
interface = "{}"
{}
addresses = ["{}", "{}"]

[[endpoints]]
name = "sink"
action = "sink"
match = ["udp dst {}:9"]

[[lcores]]
rx = ["p0:0"]
)",
                     pmd, ifname, pmd == "af_xdp" ? "mode = \"all\"" : "", kOurIp, kOurIp6, kOurIp);
}

Result<std::unique_ptr<Pipeline>> start_pipeline(const test::NetNs& ns, const std::string& text) {
  Result<std::unique_ptr<Pipeline>> out = Status::error("not run");
  Status st = ns.run([&] {
    LoadOptions opt;
    opt.find_pmd = &find_pmd;
    auto cfg = load_config_string(text, "send.toml", opt);
    if (!cfg) {
      out = cfg.status();
      return;
    }
    out = Pipeline::create(cfg->plan);
    if (!out) return;
    Status s = out.value()->start();
    if (!s) out = s;
  });
  if (!st) return st;
  return out;
}

// Kernel UDP sockets in the peer, IPv4 and IPv6 on kPeerPort, collecting payloads until `want`
// arrived or 10 s passed.
struct Receiver {
  std::set<std::string> got4, got6;
  std::atomic<bool> ready{false};
  std::thread thread;

  void start(const test::NetNs& peer, unsigned want) {
    thread = peer.spawn([this, want] {
      int s4 = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
      int s6 = socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0);
      int on = 1;
      setsockopt(s6, IPPROTO_IPV6, IPV6_V6ONLY, &on, sizeof on);
      sockaddr_in a4{};
      a4.sin_family = AF_INET;
      a4.sin_port = htons(kPeerPort);
      sockaddr_in6 a6{};
      a6.sin6_family = AF_INET6;
      a6.sin6_port = htons(kPeerPort);
      EXPECT_EQ(bind(s4, reinterpret_cast<sockaddr*>(&a4), sizeof a4), 0);
      EXPECT_EQ(bind(s6, reinterpret_cast<sockaddr*>(&a6), sizeof a6), 0);
      ready = true;
      const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      pollfd pf[2] = {{s4, POLLIN, 0}, {s6, POLLIN, 0}};
      while (got4.size() + got6.size() < want && std::chrono::steady_clock::now() < end) {
        if (poll(pf, 2, 100) <= 0) continue;
        char buf[2048];
        for (int i = 0; i < 2; ++i) {
          if (!(pf[i].revents & POLLIN)) continue;
          ssize_t r = recv(pf[i].fd, buf, sizeof buf, MSG_DONTWAIT);
          if (r >= 0) (i == 0 ? got4 : got6).insert(std::string(buf, static_cast<std::size_t>(r)));
        }
      }
      close(s4);
      close(s6);
    });
    while (!ready) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
};

// sendto with the EAGAIN an unresolved destination gives until the neighbour answers.
long send_resolving(const rawpipe_api_t* api, rawpipe_pipeline* h, const std::string& payload, const rawpipe_addr& dst) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  for (;;) {
    errno = 0;
    long r = api->sendto(h, 0, payload.data(), payload.size(), &dst, nullptr, 0);
    if (r >= 0 || errno != EAGAIN || std::chrono::steady_clock::now() > end) return r;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

class SendVeth : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (auto why = test::netns_unavailable_reason()) GTEST_SKIP() << *why;
    if (!find_pmd(GetParam())) GTEST_SKIP() << GetParam() << " is not built";
    ASSERT_TRUE(make_net(net_));
  }
  Net net_;
};

TEST_P(SendVeth, KernelPeerReceivesEveryDatagramWithGoodChecksums) {
  auto p = start_pipeline(*net_.ours, config(GetParam(), net_.veth->a().name));
  ASSERT_TRUE(p) << p.message();
  const auto csum_before = test::udp_csum_errors(*net_.peer);
  ASSERT_TRUE(csum_before) << csum_before.message();
  Receiver rx;
  rx.start(*net_.peer, 2 * kDatagrams + kZeroCopy);

  const rawpipe_api_t* api = rawpipe_get_api(RAWPIPE_EXTRA_ABI_VERSION);
  rawpipe_pipeline* h = extra_wrap(*p.value());
  ASSERT_NE(h, nullptr);
  rawpipe_addr d4{};
  d4.family = 4;
  d4.port = kPeerPort;
  inet_pton(AF_INET, kPeerIp, d4.addr);
  rawpipe_addr d6{};
  d6.family = 6;
  d6.port = kPeerPort;
  inet_pton(AF_INET6, kPeerIp6, d6.addr);
  std::set<std::string> sent4, sent6;
  for (unsigned i = 0; i < kDatagrams; ++i) {
    std::string v4 = fmt::format("v4 datagram {} {}", i, std::string(i * 13 % 700, 'a' + i % 26));
    std::string v6 = fmt::format("v6 datagram {} {}", i, std::string(i * 17 % 900, 'A' + i % 26));
    EXPECT_EQ(send_resolving(api, h, v4, d4), long(v4.size())) << api->last_error(h);
    EXPECT_EQ(send_resolving(api, h, v6, d6), long(v6.size())) << api->last_error(h);
    sent4.insert(v4);
    sent6.insert(v6);
  }

  // Zero-copy: frames the application writes into buffers of the port's pool, checksums left
  // to RAWPIPE_SEND_CSUM, addressed to the peer's MAC.
  auto peer_mac_text = net_.veth->mac_b();
  ASSERT_TRUE(peer_mac_text);
  std::uint8_t peer_mac[6];
  ASSERT_EQ(std::sscanf(peer_mac_text->c_str(), "%hhx:%hhx:%hhx:%hhx:%hhx:%hhx", &peer_mac[0], &peer_mac[1],
                        &peer_mac[2], &peer_mac[3], &peer_mac[4], &peer_mac[5]),
            6);
  auto our_mac_text = net_.veth->mac_a();
  ASSERT_TRUE(our_mac_text);
  std::uint8_t our_mac[6];
  std::sscanf(our_mac_text->c_str(), "%hhx:%hhx:%hhx:%hhx:%hhx:%hhx", &our_mac[0], &our_mac[1], &our_mac[2],
              &our_mac[3], &our_mac[4], &our_mac[5]);
  rawpipe_tx_buf bufs[kZeroCopy];
  ASSERT_EQ(api->alloc_tx(h, 0, bufs, kZeroCopy), int(kZeroCopy)) << api->last_error(h);
  for (unsigned i = 0; i < kZeroCopy; ++i) {
    std::string payload = fmt::format("zero-copy {} {}", i, std::string(i * 31 % 1000, 'z'));
    std::uint8_t* f = bufs[i].data;
    std::memset(f, 0, 42);
    std::memcpy(f, peer_mac, 6);
    std::memcpy(f + 6, our_mac, 6);
    f[12] = 0x08;
    std::uint8_t* ip = f + 14;
    ip[0] = 0x45;
    const std::size_t ip_len = 28 + payload.size();
    ip[2] = std::uint8_t(ip_len >> 8), ip[3] = std::uint8_t(ip_len);
    ip[8] = 64, ip[9] = 17;
    inet_pton(AF_INET, kOurIp, ip + 12);
    inet_pton(AF_INET, kPeerIp, ip + 16);
    std::uint8_t* udp = ip + 20;
    udp[0] = 0x1f, udp[1] = 0x40;  // 8000
    udp[2] = std::uint8_t(kPeerPort >> 8), udp[3] = std::uint8_t(kPeerPort & 0xff);
    udp[4] = std::uint8_t((8 + payload.size()) >> 8), udp[5] = std::uint8_t(8 + payload.size());
    std::memcpy(udp + 8, payload.data(), payload.size());
    bufs[i].len = static_cast<std::uint32_t>(14 + ip_len);
    sent4.insert(payload);
  }
  EXPECT_EQ(api->send_burst(h, 0, bufs, kZeroCopy, RAWPIPE_SEND_CSUM), int(kZeroCopy)) << api->last_error(h);

  rx.thread.join();
  EXPECT_EQ(rx.got4, sent4);
  EXPECT_EQ(rx.got6, sent6);
  const auto csum_after = test::udp_csum_errors(*net_.peer);
  ASSERT_TRUE(csum_after) << csum_after.message();
  EXPECT_EQ(csum_after.value(), csum_before.value()) << "the peer dropped datagrams for bad checksums";

  rawpipe_stats s{};
  s.size = sizeof s;
  ASSERT_EQ(api->get_stats(h, &s), 0);
  EXPECT_EQ(s.sent, 2 * kDatagrams + kZeroCopy + s.neigh_solicits);
  EXPECT_GE(s.neigh_solicits, 2u) << "one ARP request and one neighbour solicitation at least";
  EXPECT_GE(s.neigh_learned, 2u);
  EXPECT_EQ(s.send_failed, 0u);
  ASSERT_EQ(api->stop(h), 0);
  EXPECT_EQ(api->destroy(h), 0);
  Accounting a = p.value()->accounting();
  EXPECT_TRUE(a.balanced()) << "rx " << a.rx_packets << " delivered " << a.delivered << " transmitted "
                            << a.transmitted << " dropped " << a.dropped() << " outstanding " << a.outstanding();
}

INSTANTIATE_TEST_SUITE_P(Ports, SendVeth, ::testing::Values("af_packet", "af_xdp"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace rawpipe
