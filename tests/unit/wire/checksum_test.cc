#include "pipeline/wire/checksum.hh"
#include "pipeline/wire/rx_checksum.hh"

#include <gtest/gtest.h>

#include <vector>

#include "tests/support/golden_frames.hh"

namespace rawpipe::wire {
namespace {

namespace g = testing::golden;

TEST(Checksum, Rfc1071Example) {
  // RFC 1071 section 3: the words 0001 f203 f4f5 f6f7 sum to ddf2 (after the end-around carry).
  const std::uint8_t data[] = {0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7};
  EXPECT_EQ(csum_fold(csum_add(0, data, sizeof data)), static_cast<std::uint16_t>(~0xddf2));
}

TEST(Checksum, OddLengthPadsTheLastByteWithZero) {
  const std::uint8_t odd[] = {0x12, 0x34, 0x56};
  const std::uint8_t even[] = {0x12, 0x34, 0x56, 0x00};
  EXPECT_EQ(csum_fold(csum_add(0, odd, 3)), csum_fold(csum_add(0, even, 4)));
  EXPECT_EQ(csum_fold(csum_add(0, odd, 3)), static_cast<std::uint16_t>(~(0x1234 + 0x5600)));
}

TEST(Checksum, LongInputsFoldEveryCarry) {
  std::vector<std::uint8_t> ones(9001, 0xff);
  // 4500 words of ffff plus ff00: ones' complement sum is ffff + ... = ff00 after folding twice.
  std::uint32_t ref = 0;
  for (std::size_t i = 0; i + 1 < ones.size(); i += 2) ref += 0xffff;
  ref += 0xff00;
  while (ref >> 16) ref = (ref & 0xffff) + (ref >> 16);
  EXPECT_EQ(csum_fold(csum_add(0, ones.data(), ones.size())), static_cast<std::uint16_t>(~ref));
}

TEST(Checksum, GoldenIpv4HeadersVerify) {
  for (auto f : {std::span<const std::uint8_t>(g::kUdp4), std::span<const std::uint8_t>(g::kUdp4Options),
                 std::span<const std::uint8_t>(g::kUdp4FragMiddle), std::span<const std::uint8_t>(g::kTcp4Mss)}) {
    const std::uint8_t* ip = f.data() + 14;
    const std::size_t ihl = (ip[0] & 0xf) * 4u;
    EXPECT_TRUE(ipv4_header_checksum_ok(ip, ihl));
    EXPECT_EQ(ipv4_header_checksum(ip, ihl), load_be16(ip + 10));
  }
  std::vector<std::uint8_t> bad(g::kUdp4, g::kUdp4 + sizeof g::kUdp4);
  bad[22] ^= 1;  // TTL
  EXPECT_FALSE(ipv4_header_checksum_ok(bad.data() + 14, 20));
}

TEST(Checksum, GoldenL4ChecksumsVerifyToZero) {
  // A segment with its correct checksum in place sums to 0 with the pseudo header.
  EXPECT_EQ(l4_checksum_ipv4(g::kUdp4 + 26, g::kUdp4 + 30, 17, g::kUdp4 + 34, 16), 0);
  EXPECT_EQ(l4_checksum_ipv4(g::kTcp4 + 26, g::kTcp4 + 30, 6, g::kTcp4 + 34, 28), 0);
  EXPECT_EQ(l4_checksum_ipv4(g::kTcp4Mss + 26, g::kTcp4Mss + 30, 6, g::kTcp4Mss + 34, 32), 0);
  EXPECT_EQ(icmpv4_checksum(g::kIcmp4 + 34, 16), 0);
  EXPECT_EQ(l4_checksum_ipv6(g::kUdp6 + 22, g::kUdp6 + 38, 17, g::kUdp6 + 54, 16), 0);
  EXPECT_EQ(l4_checksum_ipv6(g::kUdp6Chain + 22, g::kUdp6Chain + 38, 17, g::kUdp6Chain + 94, 16), 0);
  EXPECT_EQ(l4_checksum_ipv6(g::kTcp6 + 22, g::kTcp6 + 38, 6, g::kTcp6 + 54, 20), 0);
  EXPECT_EQ(l4_checksum_ipv6(g::kIcmp6 + 22, g::kIcmp6 + 38, 58, g::kIcmp6 + 54, 12), 0);
  // And a wrong protocol in the pseudo header does not.
  EXPECT_NE(l4_checksum_ipv6(g::kUdp6 + 22, g::kUdp6 + 38, 6, g::kUdp6 + 54, 16), 0);
}

TEST(Checksum, UdpSendsZeroAsAllOnes) {
  EXPECT_EQ(udp_checksum_on_wire(0), 0xffff);
  EXPECT_EQ(udp_checksum_on_wire(0x1234), 0x1234);
}

// What a veth or local sender hands over under CHECKSUM_PARTIAL: the folded pseudo-header sum
// in the checksum field. The receiver completes it to exactly the golden checksum.
void expect_completes(const std::uint8_t* golden, std::size_t size, std::size_t l4, std::size_t field,
                      std::uint64_t pseudo) {
  std::vector<std::uint8_t> f(golden, golden + size);
  EXPECT_EQ(verify_or_complete_l4(f.data(), static_cast<std::uint32_t>(f.size())), RxL4Csum::kGood);
  EXPECT_EQ(f, std::vector<std::uint8_t>(golden, golden + size)) << "a good frame is left alone";
  const std::uint16_t partial = static_cast<std::uint16_t>(~csum_fold(pseudo));
  store_be16(f.data() + l4 + field, partial);
  EXPECT_EQ(verify_or_complete_l4(f.data(), static_cast<std::uint32_t>(f.size())), RxL4Csum::kCompleted);
  EXPECT_EQ(f, std::vector<std::uint8_t>(golden, golden + size)) << "completed to the golden checksum";
  f[l4 + 9] ^= 0x40;  // a payload byte: the checksum is now wrong and is not a pseudo-header sum
  EXPECT_EQ(verify_or_complete_l4(f.data(), static_cast<std::uint32_t>(f.size())), RxL4Csum::kBad);
}

TEST(RxChecksum, GoodIsKeptPartialIsCompletedCorruptIsBad) {
  expect_completes(g::kUdp4, sizeof g::kUdp4, 34, 6, ipv4_pseudo_sum(g::kUdp4 + 26, g::kUdp4 + 30, 17, 16));
  expect_completes(g::kTcp4, sizeof g::kTcp4, 34, 16, ipv4_pseudo_sum(g::kTcp4 + 26, g::kTcp4 + 30, 6, 28));
  expect_completes(g::kUdp6, sizeof g::kUdp6, 54, 6, ipv6_pseudo_sum(g::kUdp6 + 22, g::kUdp6 + 38, 17, 16));
}

TEST(RxChecksum, WhatCannotBeCheckedIsSaidSo) {
  std::vector<std::uint8_t> f(g::kUdp4, g::kUdp4 + sizeof g::kUdp4);
  EXPECT_EQ(verify_or_complete_l4(f.data(), 30), RxL4Csum::kNotChecked) << "cut short";
  f[34 + 6] = f[34 + 7] = 0;  // UDP over IPv4 without a checksum
  EXPECT_EQ(verify_or_complete_l4(f.data(), static_cast<std::uint32_t>(f.size())), RxL4Csum::kNotChecked);
  std::vector<std::uint8_t> frag(g::kUdp4FragFirst, g::kUdp4FragFirst + sizeof g::kUdp4FragFirst);
  EXPECT_EQ(verify_or_complete_l4(frag.data(), static_cast<std::uint32_t>(frag.size())), RxL4Csum::kNotChecked);
  std::vector<std::uint8_t> icmp(g::kIcmp4, g::kIcmp4 + sizeof g::kIcmp4);
  EXPECT_EQ(verify_or_complete_l4(icmp.data(), static_cast<std::uint32_t>(icmp.size())), RxL4Csum::kNotChecked);
}

TEST(ByteOrder, LoadsAndStoresAreBigEndianAtAnyAlignment) {
  std::uint8_t buf[7] = {};
  store_be16(buf + 1, 0x1234);
  store_be32(buf + 3, 0xdeadbeef);
  EXPECT_EQ(buf[1], 0x12);
  EXPECT_EQ(buf[2], 0x34);
  EXPECT_EQ(buf[3], 0xde);
  EXPECT_EQ(buf[6], 0xef);
  EXPECT_EQ(load_be16(buf + 1), 0x1234);
  EXPECT_EQ(load_be32(buf + 3), 0xdeadbeefu);
  static_assert(hton16(0x0800) == 0x0008);
  static_assert(ntoh32(hton32(0x01020304)) == 0x01020304);
}

TEST(WireStructs, FieldOffsetsMatchTheProtocols) {
  static_assert(offsetof(EthernetHeader, ether_type) == 12);
  static_assert(offsetof(Ipv4Header, protocol) == 9);
  static_assert(offsetof(Ipv4Header, dst) == 16);
  static_assert(offsetof(Ipv6Header, next_header) == 6);
  static_assert(offsetof(Ipv6Header, dst) == 24);
  static_assert(offsetof(Ipv6FragmentHeader, offset_flags) == 2);
  static_assert(offsetof(UdpHeader, length) == 4);
  static_assert(offsetof(TcpHeader, data_off) == 12);
  static_assert(offsetof(ArpHeader, tpa) == 24);
  // Reading through a packed struct at an odd address gives the wire values.
  const auto* ip = reinterpret_cast<const Ipv4Header*>(g::kUdp4Vlan + 18);
  EXPECT_EQ(ntoh16(ip->total_length), 36);
  EXPECT_EQ(ip->protocol, kIpProtoUdp);
  const auto* udp = reinterpret_cast<const UdpHeader*>(g::kUdp4Vlan + 38);
  EXPECT_EQ(ntoh16(udp->dst_port), 5000);
}

}  // namespace
}  // namespace rawpipe::wire
