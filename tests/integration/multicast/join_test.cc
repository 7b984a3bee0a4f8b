// Multicast joins on every port type: an endpoint rule on a group makes the kernel report the
// membership on the port's interface (IGMPv3 for IPv4, MLDv2 for IPv6, any-source and
// source-specific), and stopping the port leaves (a CHANGE_TO_INCLUDE record, the v3/v2 leave).
// A capture socket in the peer namespace sees the reports as a snooping switch would. Root only.
#include <arpa/inet.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <thread>

#include "pipeline/buf/pool.hh"
#include "pipeline/classify/rule.hh"
#include "pipeline/config/section.hh"
#include "pipeline/port/registry.hh"
#include "tests/support/netns.hh"

namespace rawpipe {
namespace {

using namespace std::chrono_literals;

// IGMPv3 / MLDv2 group record types.
constexpr int kChangeToInclude = 3;  // a leave when the source list is empty
constexpr int kChangeToExclude = 4;  // a join (any source)
constexpr int kAllowNewSources = 5;  // a source-specific join

struct Record {
  int type;
  std::string group;
  std::set<std::string> sources;
};

// The group records of an IGMPv3 or MLDv2 report in an Ethernet frame, or nothing.
std::vector<Record> records(const std::uint8_t* f, std::size_t n) {
  std::vector<Record> out;
  if (n < 14) return out;
  const int type = f[12] << 8 | f[13];
  std::size_t off = 14, glen = 4;
  int af = AF_INET;
  if (type == 0x0800 && n >= off + 20 && f[off + 9] == 2) {
    off += (f[off] & 0xf) * 4u;
    if (n < off + 8 || f[off] != 0x22) return out;
  } else if (type == 0x86dd && n >= off + 48 && f[off + 6] == 0) {  // hop-by-hop (router alert)
    const std::size_t hbh = off + 40;
    if (f[hbh] != 58) return out;
    off = hbh + (f[hbh + 1] + 1) * 8u;
    if (n < off + 8 || f[off] != 143) return out;
    glen = 16;
    af = AF_INET6;
  } else {
    return out;
  }
  const int count = f[off + 6] << 8 | f[off + 7];
  std::size_t p = off + 8;
  char text[INET6_ADDRSTRLEN];
  for (int r = 0; r < count && p + 4 + glen <= n; ++r) {
    Record rec{f[p], "", {}};
    const int nsrc = f[p + 2] << 8 | f[p + 3];
    inet_ntop(af, f + p + 4, text, sizeof text);
    rec.group = text;
    std::size_t s = p + 4 + glen;
    for (int i = 0; i < nsrc && s + glen <= n; ++i, s += glen) {
      inet_ntop(af, f + s, text, sizeof text);
      rec.sources.insert(text);
    }
    p = s + f[p + 1] * 4u;
    out.push_back(std::move(rec));
  }
  return out;
}

class MulticastJoin : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (auto why = test::netns_unavailable_reason()) GTEST_SKIP() << *why;
    if (!find_pmd(GetParam())) GTEST_SKIP() << GetParam() << " driver not built";
    auto a = test::NetNs::create("rpmr");
    ASSERT_TRUE(a) << a.message();
    rx_ns_ = std::make_unique<test::NetNs>(std::move(a).value());
    auto b = test::NetNs::create("rpmt");
    ASSERT_TRUE(b) << b.message();
    tx_ns_ = std::make_unique<test::NetNs>(std::move(b).value());
    auto pair = test::VethPair::create({rx_ns_.get(), "", {"10.213.0.1/24", "fd13::1/64"}},
                                       {tx_ns_.get(), "", {"10.213.0.2/24", "fd13::2/64"}});
    ASSERT_TRUE(pair) << pair.message();
    veth_ = std::make_unique<test::VethPair>(std::move(pair).value());
    PoolConfig pc;
    pc.name = "mc";
    pc.count = 4096;
    pc.buf_size = 2048;
    pc.huge_pages = HugePages::kNever;
    pc.exact_stride = true;
    auto pool = Pool::create(pc);
    ASSERT_TRUE(pool) << pool.message();
    pool_ = std::move(pool).value();
    capture_ = tx_ns_->spawn([this] { capture(); });
  }
  void TearDown() override {
    done_ = true;
    if (capture_.joinable()) capture_.join();
    if (port_) (void)rx_ns_->run([&] { port_.reset(); });
    veth_.reset();
    tx_ns_.reset();
    rx_ns_.reset();
  }

  void capture() {
    int fd = socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, htons(ETH_P_ALL));
    sockaddr_ll sll{};
    sll.sll_family = AF_PACKET;
    sll.sll_protocol = htons(ETH_P_ALL);
    sll.sll_ifindex = static_cast<int>(if_nametoindex(veth_->b().name.c_str()));
    if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&sll), sizeof sll) != 0) return;
    ready_ = true;
    std::uint8_t buf[2048];
    while (!done_) {
      pollfd p{fd, POLLIN, 0};
      if (poll(&p, 1, 50) <= 0) continue;
      const ssize_t n = recv(fd, buf, sizeof buf, 0);
      if (n <= 0) continue;
      auto r = records(buf, static_cast<std::size_t>(n));
      std::lock_guard lock(mu_);
      for (auto& rec : r) seen_.push_back(std::move(rec));
    }
    close(fd);
  }

  // Waits until a record of one of `types` for `group` (with `source` in its list when given).
  bool saw(std::set<int> types, const std::string& group, const std::string& source = "",
           std::chrono::milliseconds limit = 4s) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < deadline) {
      {
        std::lock_guard lock(mu_);
        for (const Record& r : seen_)
          if (types.count(r.type) && r.group == group && (source.empty() || r.sources.count(source))) return true;
      }
      std::this_thread::sleep_for(20ms);
    }
    return false;
  }
  std::string seen_text() {
    std::lock_guard lock(mu_);
    std::string s;
    for (const Record& r : seen_) s += fmt::format("type {} group {} ({} sources)\n", r.type, r.group, r.sources.size());
    return s;
  }

  std::unique_ptr<test::NetNs> rx_ns_, tx_ns_;
  std::unique_ptr<test::VethPair> veth_;
  std::unique_ptr<Pool> pool_;
  std::unique_ptr<Port> port_;
  std::thread capture_;
  std::atomic<bool> done_{false}, ready_{false};
  std::mutex mu_;
  std::vector<Record> seen_;
};

TEST_P(MulticastJoin, RulesOnGroupsAreReportedAndLeftAtStop) {
  for (int i = 0; i < 100 && !ready_; ++i) std::this_thread::sleep_for(10ms);
  ASSERT_TRUE(ready_) << "the capture socket did not start";
  const std::string pmd = GetParam();
  std::string text = fmt::format("interface = '{}'\n", veth_->a().name);
  if (pmd == "af_xdp") text += "mode = 'all'\n";
  auto section = ConfigSection::parse_string(text, "join_test.toml");
  ASSERT_TRUE(section) << section.message();
  auto spec = find_pmd(pmd)->parse(section.value());
  ASSERT_TRUE(spec) << spec.message();
  SteeringRules rules;
  const char* texts[] = {"udp dst 239.1.2.3:5000", "udp dst [ff3e::4321]:6000", "udp src 10.213.0.2 dst 232.1.1.1:7000"};
  for (const char* t : texts) {
    auto r = parse_match_rule(t);
    ASSERT_TRUE(r) << r.message();
    rules.rules.push_back({r.value(), 0, 0});
  }
  PortEnv env;
  env.name = "mc0";
  env.pool = pool_.get();
  Status st;
  ASSERT_TRUE(rx_ns_->run([&] {
    auto port = spec.value()->open(env);
    if (!port) {
      st = port.status();
      return;
    }
    port_ = std::move(port).value();
    st = port_->update_steering(rules);
    if (st) st = port_->start();
  }));
  ASSERT_TRUE(st) << st.message();

  EXPECT_TRUE(saw({kChangeToExclude, 2}, "239.1.2.3")) << seen_text();
  EXPECT_TRUE(saw({kChangeToExclude, 2}, "ff3e::4321")) << seen_text();
  EXPECT_TRUE(saw({kAllowNewSources, 1}, "232.1.1.1", "10.213.0.2")) << seen_text();

  ASSERT_TRUE(rx_ns_->run([&] { port_->stop(); }));
  EXPECT_TRUE(saw({kChangeToInclude}, "239.1.2.3")) << "no leave\n" << seen_text();
  EXPECT_TRUE(saw({kChangeToInclude}, "ff3e::4321")) << "no leave\n" << seen_text();
}

INSTANTIATE_TEST_SUITE_P(Ports, MulticastJoin, ::testing::Values("af_packet", "af_xdp", "socket"));

}  // namespace
}  // namespace rawpipe
