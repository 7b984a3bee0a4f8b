// The Extra API's send path on the device models, end to end through the pipeline: zero-copy
// bursts (checksums filled by RAWPIPE_SEND_CSUM) and sendto datagrams (addressed to the port's
// next_hop_mac) reach the model's wire byte for byte, read back from its wire_pcap; a dummy send
// on mlx5-model becomes NOP WQEs that the model completes and does not put on the wire, while
// mana-model (no such WQE) counts the dummies and posts nothing.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include "pipeline/extra/extra.hh"
#include "pipeline/port/registry.hh"
#include "pipeline/wire/checksum.hh"
#include "pipeline/wire/wire.hh"
#include "rawpipe/config.hh"
#include "rawpipe/pipeline.hh"

namespace rawpipe {
namespace {

constexpr unsigned kZeroCopy = 16;
constexpr unsigned kDatagrams = 4;
constexpr unsigned kDummies = 8;
const std::uint8_t kNextHop[6] = {0x02, 0x00, 0x00, 0x00, 0x00, 0x09};

std::vector<std::vector<std::uint8_t>> read_pcap(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::vector<std::vector<std::uint8_t>> out;
  std::uint32_t gh[6];
  if (!f.read(reinterpret_cast<char*>(gh), sizeof gh)) return out;
  std::uint32_t rh[4];
  while (f.read(reinterpret_cast<char*>(rh), sizeof rh)) {
    std::vector<std::uint8_t> frame(rh[2]);
    if (!f.read(reinterpret_cast<char*>(frame.data()), rh[2])) break;
    out.push_back(std::move(frame));
  }
  return out;
}

bool checksums_ok(const std::vector<std::uint8_t>& f) {
  if (f.size() < 42 || wire::load_be16(f.data() + 12) != wire::kEtherTypeIpv4) return false;
  const std::uint8_t* ip = f.data() + 14;
  if (!wire::ipv4_header_checksum_ok(ip, 20)) return false;
  const std::size_t ulen = wire::load_be16(ip + 24);
  return wire::load_be16(ip + 26) != 0 && wire::l4_checksum_ipv4(ip + 12, ip + 16, 17, ip + 20, ulen) == 0;
}

std::uint64_t extended(const Pipeline& p, const char* key) {
  const PortStats s = p.port_stats(0);
  auto it = s.extended.find(key);
  return it == s.extended.end() ? 0 : it->second;
}

class SendModel : public ::testing::TestWithParam<std::string> {};

TEST_P(SendModel, FramesReachTheWireAndDummiesDoNot) {
  const std::string pmd = GetParam();
  const bool mlx5 = pmd == "mlx5-model";
  const std::string wire = (std::filesystem::temp_directory_path() /
                            fmt::format("rawpipe-send-{}-{}.pcap", pmd, ::getpid()))
                               .string();
  const std::string text = fmt::format(R"(
[[pools]]
name = "rx"
count = 2048
huge_pages = "never"

[[ports]]
name = "m0"
pmd = "{}"
{}
wire_pcap = "{}"
addresses = ["10.9.0.1"]
mac = "02:00:00:00:00:01"
next_hop_mac = "02:00:00:00:00:09"

[[endpoints]]
name = "sink"
action = "sink"
match = ["udp dst 10.9.0.1:9"]

[[lcores]]
rx = ["m0:0"]
)",
                                       pmd, mlx5 ? "inject_count = 0" : "frames = 1", wire);
  LoadOptions opt;
  opt.find_pmd = &find_pmd;
  auto cfg = load_config_string(text, "send.toml", opt);
  ASSERT_TRUE(cfg) << cfg.message();
  auto p = Pipeline::create(cfg->plan);
  ASSERT_TRUE(p) << p.message();
  Pipeline& pl = *p.value();  // valid until the reset below
  ASSERT_TRUE(pl.start());
  const rawpipe_api_t* api = rawpipe_get_api(RAWPIPE_EXTRA_ABI_VERSION);
  rawpipe_pipeline* h = extra_wrap(pl);
  ASSERT_NE(h, nullptr);

  // Zero-copy frames, checksums left to the library.
  rawpipe_tx_buf bufs[kZeroCopy];
  ASSERT_EQ(api->alloc_tx(h, 0, bufs, kZeroCopy), int(kZeroCopy)) << api->last_error(h);
  std::vector<std::vector<std::uint8_t>> expect;
  for (unsigned i = 0; i < kZeroCopy; ++i) {
    std::uint8_t* f = bufs[i].data;
    const std::uint32_t payload = 30 + 37 * i;
    std::memset(f, 0, 42);
    std::memcpy(f, kNextHop, 6);
    f[6] = 0x02, f[11] = 0x01, f[12] = 0x08;
    std::uint8_t* ip = f + 14;
    ip[0] = 0x45;
    wire::store_be16(ip + 2, static_cast<std::uint16_t>(28 + payload));
    ip[8] = 64, ip[9] = 17;
    ip[12] = 10, ip[13] = 9, ip[15] = 1, ip[16] = 10, ip[17] = 9, ip[19] = 2;
    wire::store_be16(ip + 20, 5555);
    wire::store_be16(ip + 22, 6666);
    wire::store_be16(ip + 24, static_cast<std::uint16_t>(8 + payload));
    for (std::uint32_t b = 0; b < payload; ++b) ip[28 + b] = static_cast<std::uint8_t>(b * 7 + i);
    bufs[i].len = 42 + payload;
    expect.emplace_back(f, f + bufs[i].len);
  }
  ASSERT_EQ(api->send_burst(h, 0, bufs, kZeroCopy, RAWPIPE_SEND_CSUM), int(kZeroCopy)) << api->last_error(h);
  rawpipe_addr dst{};
  dst.family = 4;
  dst.port = 7000;
  const std::uint8_t peer[4] = {10, 9, 0, 2};
  std::memcpy(dst.addr, peer, 4);
  for (unsigned i = 0; i < kDatagrams; ++i) {
    const std::string msg = fmt::format("datagram {}", i);
    EXPECT_EQ(api->sendto(h, 0, msg.data(), msg.size(), &dst, nullptr, 0), long(msg.size())) << api->last_error(h);
  }
  // The dummies come last, so the frames before them are on the wire whatever a dummy does.
  rawpipe_tx_buf dummies[kDummies];
  ASSERT_EQ(api->alloc_tx(h, 0, dummies, kDummies), int(kDummies));
  for (unsigned i = 0; i < kDummies; ++i) {
    std::memcpy(dummies[i].data, expect[0].data(), expect[0].size());
    dummies[i].len = static_cast<std::uint32_t>(expect[0].size());
  }
  ASSERT_EQ(api->send_burst(h, 0, dummies, kDummies, RAWPIPE_SEND_DUMMY), int(kDummies)) << api->last_error(h);

  const std::uint64_t want_sent = kZeroCopy + kDatagrams + (mlx5 ? kDummies : 0);
  rawpipe_stats s{};
  s.size = sizeof s;
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < end) {
    ASSERT_EQ(api->get_stats(h, &s), 0);
    if (s.sent >= want_sent && extended(pl, "model_tx_frames") >= kZeroCopy + kDatagrams &&
        (!mlx5 || extended(pl, "model_tx_nops") >= kDummies))
      break;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  EXPECT_EQ(s.sent, want_sent);
  EXPECT_EQ(s.dummy_sends, kDummies);
  EXPECT_EQ(s.dummies_posted, mlx5 ? kDummies : 0u);
  EXPECT_EQ(s.send_failed, 0u);
  EXPECT_EQ(extended(pl, "model_tx_frames"), kZeroCopy + kDatagrams) << "a dummy reached the wire";
  if (mlx5) {
    EXPECT_EQ(extended(pl, "model_tx_nops"), kDummies) << "each dummy is one NOP WQE the model completes";
    EXPECT_EQ(extended(pl, "tx_dummy_sends"), kDummies);
  }
  ASSERT_EQ(api->stop(h), 0);
  EXPECT_EQ(api->destroy(h), 0);
  const Accounting a = pl.accounting();
  EXPECT_TRUE(a.balanced()) << "outstanding " << a.outstanding();

  p.value().reset();  // the models write wire_pcap by the time the port is closed
  const auto frames = read_pcap(wire);
  std::filesystem::remove(wire);
  ASSERT_EQ(frames.size(), kZeroCopy + kDatagrams);
  for (unsigned i = 0; i < kZeroCopy; ++i) {
    ASSERT_EQ(frames[i].size(), expect[i].size()) << i;
    EXPECT_TRUE(checksums_ok(frames[i])) << i;
    std::vector<std::uint8_t> got = frames[i];
    std::memset(got.data() + 24, 0, 2);  // the checksums the library filled
    std::memset(got.data() + 40, 0, 2);
    EXPECT_EQ(got, expect[i]) << "frame " << i;
  }
  for (unsigned i = 0; i < kDatagrams; ++i) {
    const auto& f = frames[kZeroCopy + i];
    EXPECT_EQ(std::memcmp(f.data(), kNextHop, 6), 0);
    EXPECT_TRUE(checksums_ok(f));
    const std::string msg = fmt::format("datagram {}", i);
    EXPECT_EQ(std::string(reinterpret_cast<const char*>(f.data() + 42), msg.size()), msg);
  }
}

INSTANTIATE_TEST_SUITE_P(Models, SendModel, ::testing::Values("mlx5-model", "mana-model"),
                         [](const auto& info) { return info.param == "mlx5-model" ? std::string("mlx5") : std::string("mana"); });

}  // namespace
}  // namespace rawpipe
