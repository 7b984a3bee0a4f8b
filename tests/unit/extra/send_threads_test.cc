// The send path's threading rules: one sending thread per port (a second one gets EBUSY, never a
// race on the hand-off ring), stop() waits for a send in progress and later sends get ENETDOWN,
// and every datagram handed over is accounted for: taken by the port's tx queue (its driver
// counts the same number) or counted as failed, with every buffer back in its pool.
#include <gtest/gtest.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include "pipeline/extra/extra.hh"
#include "pipeline/port/registry.hh"
#include "pipeline/send/send_port.hh"
#include "rawpipe/config.hh"
#include "rawpipe/pipeline.hh"

namespace rawpipe {
namespace {

constexpr const char* kConfig = R"(
[[pools]]
name = "rx"
count = 8192
huge_pages = "never"

[[ports]]
name = "s0"
pmd = "synth"
rate_pps = 1000
addresses = ["10.7.0.1"]
next_hop_mac = "02:00:00:00:07:02"

[[endpoints]]
name = "sink"
action = "sink"
match = ["udp dst 239.1.1.1:5000"]

[[lcores]]
rx = ["s0:0"]
)";

struct Fixture {
  std::unique_ptr<Pipeline> p;
  rawpipe_pipeline* h = nullptr;
  const rawpipe_api_t* api = rawpipe_get_api(RAWPIPE_EXTRA_ABI_VERSION);
  rawpipe_addr dst{};

  void open() {
    LoadOptions opt;
    opt.find_pmd = &find_pmd;
    auto cfg = load_config_string(kConfig, "send_threads.toml", opt);
    ASSERT_TRUE(cfg) << cfg.message();
    auto pl = Pipeline::create(cfg->plan);
    ASSERT_TRUE(pl) << pl.message();
    p = std::move(pl).value();
    ASSERT_TRUE(p->start());
    h = extra_wrap(*p);
    ASSERT_NE(h, nullptr);
    dst.family = 4;
    dst.port = 7000;
    const std::uint8_t ip[4] = {10, 7, 0, 2};
    std::memcpy(dst.addr, ip, 4);
  }
  ~Fixture() {
    if (h) api->destroy(h);
  }
  rawpipe_stats stats() {
    rawpipe_stats s{};
    s.size = sizeof s;
    EXPECT_EQ(api->get_stats(h, &s), 0);
    return s;
  }
  std::uint64_t driver_tx() { return p->port_stats(0).tx_queues.at(0).tx_packets; }
};

TEST(SendThreads, ASecondSenderOnTheSamePortGetsEbusy) {
  Fixture f;
  ASSERT_NO_FATAL_FAILURE(f.open());
  const char msg[] = "x";
  // Another thread is inside a send call on port 0 (its flag is what that call holds).
  f.p->send_port(0)->busy.store(true);
  errno = 0;
  EXPECT_EQ(f.api->sendto(f.h, 0, msg, 1, &f.dst, nullptr, 0), -1);
  EXPECT_EQ(errno, EBUSY);
  EXPECT_NE(std::string(f.api->last_error(f.h)).find("one thread per port"), std::string::npos) << f.api->last_error(f.h);
  rawpipe_tx_buf b;
  ASSERT_EQ(f.api->alloc_tx(f.h, 0, &b, 1), 1);
  b.len = 60;
  std::memset(b.data, 0, 60);
  errno = 0;
  EXPECT_EQ(f.api->send_burst(f.h, 0, &b, 1, 0), -1);
  EXPECT_EQ(errno, EBUSY);
  f.p->send_port(0)->busy.store(false);
  EXPECT_EQ(f.api->send_burst(f.h, 0, &b, 1, 0), 1);  // the refused call left the buffer with us
  EXPECT_EQ(f.api->sendto(f.h, 0, msg, 1, &f.dst, nullptr, 0), 1);
}

TEST(SendThreads, TwoThreadsOnOnePortLoseNothingAndCorruptNothing) {
  Fixture f;
  ASSERT_NO_FATAL_FAILURE(f.open());
  constexpr int kEach = 20000;
  std::atomic<std::uint64_t> ok{0}, busy{0}, nobufs{0}, other{0};
  auto sender = [&] {
    for (int i = 0; i < kEach; ++i) {
      errno = 0;
      const long r = f.api->sendto(f.h, 0, &i, sizeof i, &f.dst, nullptr, 0);
      if (r == long(sizeof i)) ok++;
      else if (errno == EBUSY) busy++;
      else if (errno == ENOBUFS) nobufs++;
      else other++;
    }
  };
  std::thread a(sender), b(sender);
  a.join();
  b.join();
  EXPECT_EQ(ok + busy + nobufs + other, 2u * kEach);
  EXPECT_EQ(other, 0u);
  ASSERT_EQ(f.api->stop(f.h), 0);
  const rawpipe_stats s = f.stats();
  // ENOBUFS here is a full hand-off ring (the pool is larger than the ring and the port's rx ring
  // together): that datagram was refused and counted in send_refused, never in sent or failed.
  EXPECT_EQ(s.sent + s.send_failed, ok) << "busy " << busy << " sent " << s.sent << " failed " << s.send_failed;
  EXPECT_EQ(s.send_refused, nobufs);
  EXPECT_EQ(f.driver_tx(), s.sent);
  const Accounting acc = f.p->accounting();
  EXPECT_TRUE(acc.balanced()) << "outstanding " << acc.outstanding();
}

TEST(SendThreads, StopWaitsForTheSenderAndLaterSendsGetEnetdown) {
  Fixture f;
  ASSERT_NO_FATAL_FAILURE(f.open());
  std::atomic<std::uint64_t> ok{0}, nobufs{0};
  std::atomic<int> last_errno{0};
  std::atomic<bool> go{true};
  std::thread t([&] {
    const char msg[] = "keep sending";
    while (go) {
      errno = 0;
      if (f.api->sendto(f.h, 0, msg, sizeof msg, &f.dst, nullptr, 0) == long(sizeof msg)) ok++;
      else if (errno == ENOBUFS) nobufs++;
      else if (errno == ENETDOWN) {
        last_errno = ENETDOWN;
        break;
      }
    }
  });
  while (ok < 1000) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ASSERT_EQ(f.api->stop(f.h), 0);
  t.join();
  go = false;
  EXPECT_EQ(last_errno.load(), ENETDOWN);
  const rawpipe_stats s = f.stats();
  EXPECT_EQ(s.sent + s.send_failed, ok);
  EXPECT_EQ(s.send_refused, nobufs);
  EXPECT_EQ(f.driver_tx(), s.sent);
  const Accounting acc = f.p->accounting();
  EXPECT_TRUE(acc.balanced()) << "outstanding " << acc.outstanding();
}

}  // namespace
}  // namespace rawpipe
