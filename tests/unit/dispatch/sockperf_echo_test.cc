// The sockperf echo format: only messages a sockperf server answers are rewritten (client flag
// cleared, nothing else), the UDP checksum stays valid (IPv4 and IPv6) or absent (IPv4 zero), and
// everything else is left byte for byte.
#include "pipeline/dispatch/sockperf_echo.hh"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "pipeline/buf/pool.hh"
#include "pipeline/dispatch/echo.hh"
#include "pipeline/parse/parse.hh"
#include "pipeline/wire/builder.hh"
#include "pipeline/wire/checksum.hh"

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
