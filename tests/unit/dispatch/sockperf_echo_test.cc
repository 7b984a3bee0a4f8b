// The sockperf echo format: only messages a sockperf server answers are rewritten (client flag
// cleared, nothing else), the UDP checksum stays valid (IPv4 and IPv6) or absent (IPv4 zero), and
// everything else is left byte for byte.
#include "pipeline/dispatch/sockperf_echo.hh"

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <thread>
#include <vector>

#include "pipeline/buf/pool.hh"
#include "pipeline/dispatch/echo.hh"
#include "pipeline/parse/parse.hh"
#include "pipeline/wire/builder.hh"
#include "pipeline/wire/checksum.hh"
#include "tests/support/netns.hh"
#include "tests/support/process.hh"

namespace rawpipe {
namespace {

// sockperf header: u64 sequence, u16 flags, u32 length (network order), then message bytes.
std::vector<std::uint8_t> message(std::uint16_t flags, std::size_t size = 64) {
  std::vector<std::uint8_t> p(size, 0x5a);
  for (int i = 0; i < 8; ++i) p[i] = std::uint8_t(0x10 + i);
  wire::store_be16(p.data() + 8, flags);
  wire::store_be32(p.data() + 10, static_cast<std::uint32_t>(size));
  return p;
}

// A pong request whose length field says one byte more than the datagram carries.
std::vector<std::uint8_t> longer_than_sent() {
  auto p = message(kSockperfClient | kSockperfPong);
  wire::store_be32(p.data() + 10, static_cast<std::uint32_t>(p.size() + 1));
  return p;
}

std::vector<std::uint8_t> frame(int ip_version, const std::vector<std::uint8_t>& payload, bool checksum = true) {
  wire::FrameSpec s;
  s.eth.src = {2, 0, 0, 0, 0, 1};
  s.eth.dst = {2, 0, 0, 0, 0, 2};
  s.ip_version = static_cast<std::uint8_t>(ip_version);
  s.ipv4.src = wire::ipv4(10, 0, 0, 2);
  s.ipv4.dst = wire::ipv4(10, 0, 0, 1);
  s.ipv6.src = {0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2};
  s.ipv6.dst = {0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
  s.udp = {40000, 7007, checksum};
  s.payload = payload.data();
  s.payload_len = static_cast<std::uint16_t>(payload.size());
  std::vector<std::uint8_t> out(2048);
  out.resize(wire::write_frame(s, out.data(), out.size()));
  return out;
}

class SockperfEcho : public ::testing::Test {
 protected:
  void SetUp() override {
    PoolConfig c;
    c.count = 64;
    c.cache_size = 0;
    c.huge_pages = HugePages::kNever;
    pool_ = std::move(Pool::create(c)).value();
  }
  Mbuf* load(const std::vector<std::uint8_t>& f) {
    Mbuf* m = pool_->alloc();
    std::memcpy(m->data(), f.data(), f.size());
    m->data_len = static_cast<std::uint32_t>(f.size());
    parse_burst(&m, 1);
    EXPECT_EQ(m->drop_reason, 0);
    return m;
  }
  static bool l4_checksum_ok(const Mbuf* m) {
    const std::uint8_t* d = m->data();
    const std::uint8_t* l3 = d + m->l3_off;
    const std::uint8_t* l4 = d + m->l4_off;
    const std::size_t len = wire::load_be16(l4 + 4);
    return m->l3_type == L3Type::kIpv4 ? wire::l4_checksum_ipv4(l3 + 12, l3 + 16, 17, l4, len) == 0
                                       : wire::l4_checksum_ipv6(l3 + 8, l3 + 24, 17, l4, len) == 0;
  }
  std::unique_ptr<Pool> pool_;
};

TEST_F(SockperfEcho, PongRequestGetsTheClientFlagClearedAndAValidChecksum) {
  for (int v : {4, 6}) {
    SCOPED_TRACE(v);
    for (std::uint16_t flags : {std::uint16_t(kSockperfClient | kSockperfPong), std::uint16_t(0x0103)}) {
      auto f = frame(v, message(flags));
      Mbuf* m = load(f);
      ASSERT_TRUE(echo_swap(m));
      ASSERT_TRUE(sockperf_reply(m));
      std::vector<std::uint8_t> got(m->data(), m->data() + m->data_len);
      // Only the flags word and the UDP checksum differ from the swapped request.
      Mbuf* ref = load(f);
      ASSERT_TRUE(echo_swap(ref));
      std::vector<std::uint8_t> want(ref->data(), ref->data() + ref->data_len);
      const std::size_t flags_at = m->payload_off + 8, check_at = m->l4_off + 6;
      EXPECT_EQ(wire::load_be16(got.data() + flags_at), flags & ~kSockperfClient);
      for (std::size_t i = 0; i < got.size(); ++i)
        if (i != flags_at && i != flags_at + 1 && i != check_at && i != check_at + 1) {
          ASSERT_EQ(got[i], want[i]) << i;
        }
      EXPECT_TRUE(l4_checksum_ok(m));
      mbuf_free(m);
      mbuf_free(ref);
    }
  }
}

TEST_F(SockperfEcho, NoChecksumStaysNone) {
  Mbuf* m = load(frame(4, message(kSockperfClient | kSockperfPong), false));
  ASSERT_EQ(wire::load_be16(m->data() + m->l4_off + 6), 0);
  ASSERT_TRUE(sockperf_reply(m));
  EXPECT_EQ(wire::load_be16(m->data() + m->l4_off + 6), 0);
  EXPECT_EQ(wire::load_be16(m->data() + m->payload_off + 8), kSockperfPong);
  mbuf_free(m);
}

TEST_F(SockperfEcho, WhatASockperfServerDoesNotAnswerIsLeftAlone) {
  struct Case {
    std::vector<std::uint8_t> payload;
    const char* why;
  };
  for (const Case& c : {Case{message(kSockperfPong), "server's own message (no client flag)"},
                        Case{message(kSockperfClient), "no pong requested"},
                        Case{message(kSockperfClient | kSockperfPong | kSockperfWarmup), "warm-up"},
                        Case{std::vector<std::uint8_t>(13, 0xff), "shorter than the header"},
                        Case{longer_than_sent(), "length beyond the datagram (incomplete)"}}) {
    SCOPED_TRACE(c.why);
    auto f = frame(4, c.payload);
    Mbuf* m = load(f);
    EXPECT_FALSE(sockperf_reply(m));
    EXPECT_EQ(std::vector<std::uint8_t>(m->data(), m->data() + m->data_len), f);
    mbuf_free(m);
  }
}

// The reference: the installed `sockperf server` on loopback gets each payload as a datagram, and
// the echo must answer exactly those it answers. The incomplete message goes last, because the
// server keeps it and reads the next datagram as its continuation.
TEST_F(SockperfEcho, AnswersWhatTheInstalledSockperfServerAnswers) {
  if (!test::command_output({"sockperf", "--version"})) GTEST_SKIP() << "sockperf is not installed (apt-get install sockperf)";
  const int fd = socket(AF_INET, SOCK_DGRAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in me{};
  me.sin_family = AF_INET;
  me.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof me;
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&me), sizeof me), 0);
  ASSERT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&me), &len), 0);
  // A port nobody uses: the one this socket got, plus one, checked by the server's reply below.
  const unsigned port = ntohs(me.sin_port) + 1u;
  const auto scratch = std::filesystem::temp_directory_path() / ("rawpipe-sockperf-" + std::to_string(getpid()));
  std::filesystem::create_directories(scratch);
  const pid_t server = test::start_process({"sockperf", "server", "-i", "127.0.0.1", "-p", std::to_string(port)},
                                           scratch / "out", scratch / "err");
  ASSERT_GT(server, 0);
  timeval wait{0, 300000};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &wait, sizeof wait);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  to.sin_port = htons(static_cast<std::uint16_t>(port));
  auto server_answers = [&](const std::vector<std::uint8_t>& payload) {
    (void)sendto(fd, payload.data(), payload.size(), 0, reinterpret_cast<const sockaddr*>(&to), sizeof to);
    std::uint8_t reply[2048];
    return recv(fd, reply, sizeof reply, 0) > 0;
  };
  // Up to 3 s for the server to bind: a pong request is answered once it has.
  bool up = false;
  for (int i = 0; i < 10 && !up; ++i) up = server_answers(message(kSockperfClient | kSockperfPong));
  ASSERT_TRUE(up) << "sockperf server never answered: " << test::slurp(scratch / "err");

  std::vector<std::uint8_t> counting(22);  // synth's payload of a 64-byte frame: byte i of the frame is i
  for (std::size_t i = 0; i < counting.size(); ++i) counting[i] = static_cast<std::uint8_t>(42 + i);
  struct Case {
    std::vector<std::uint8_t> payload;
    const char* what;
  };
  for (const Case& c : {Case{message(kSockperfClient | kSockperfPong), "pong request"},
                        Case{message(kSockperfPong), "no client flag"},
                        Case{message(kSockperfClient), "no pong requested"},
                        Case{message(kSockperfClient | kSockperfPong | kSockperfWarmup), "warm-up"},
                        Case{counting, "synth's counting payload (length 0x34353637)"},
                        Case{message(0, 22), "a server's message of 22 bytes (tools/bench/ndr's background)"},
                        Case{longer_than_sent(), "length beyond the datagram"}}) {
    SCOPED_TRACE(c.what);
    Mbuf* m = load(frame(4, c.payload));
    ASSERT_TRUE(echo_swap(m));
    EXPECT_EQ(sockperf_reply(m), server_answers(c.payload));
    mbuf_free(m);
  }
  close(fd);
  kill(server, SIGTERM);
  (void)test::wait_process(server, {.timeout = std::chrono::seconds(10)});
  std::filesystem::remove_all(scratch);
}

TEST(SockperfChecksum, IncrementalUpdateMatchesRecomputation) {
  // A word changes under a known checksum: the update equals a full recomputation.
  std::uint8_t seg[8] = {0x12, 0x34, 0x00, 0x03, 0xab, 0xcd, 0x00, 0x00};
  const std::uint16_t c0 = wire::csum_fold(wire::csum_add(0, seg, 8));
  seg[3] = 0x02;
  const std::uint16_t c1 = wire::csum_fold(wire::csum_add(0, seg, 8));
  EXPECT_EQ(udp_checksum_update(c0, 0x0003, 0x0002), c1 ? c1 : 0xffff);
}

}  // namespace
}  // namespace rawpipe
