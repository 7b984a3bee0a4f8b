// The preload library's offload rules (libvma.conf / add_conf_rule grammar): what parses, what is
// refused with which message, and which rule decides (the first that matches).
#include <arpa/inet.h>

#include <gtest/gtest.h>

#include "preload/rules.hh"

namespace rawpipe::preload {
namespace {

std::vector<OffloadRule> rules(const char* text) {
  std::vector<OffloadRule> out;
  std::string error;
  EXPECT_TRUE(parse_offload_rules(text, &out, &error)) << error;
  return out;
}

std::string refusal(const char* text) {
  std::vector<OffloadRule> out;
  std::string error;
  EXPECT_FALSE(parse_offload_rules(text, &out, &error)) << text;
  return error;
}

Decision decide4(const std::vector<OffloadRule>& r, const char* ip, std::uint16_t port) {
  std::uint8_t a[16] = {};
  inet_pton(AF_INET, ip, a);
  return decide(r, 4, a, port, nullptr);
}

Decision decide6(const std::vector<OffloadRule>& r, const char* ip, std::uint16_t port) {
  std::uint8_t a[16] = {};
  inet_pton(AF_INET6, ip, a);
  return decide(r, 6, a, port, nullptr);
}

TEST(PreloadRules, FirstMatchingRuleDecides) {
  auto r = rules("use os udp 239.1.1.9:*; use rawpipe udp 239.1.1.0/24:5000-5010\n# a comment\nuse vma udp *:7007");
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(decide4(r, "239.1.1.9", 5000), Decision::kKernel);
  EXPECT_EQ(decide4(r, "239.1.1.8", 5000), Decision::kOffload);
  EXPECT_EQ(decide4(r, "239.1.1.8", 5011), Decision::kNoRule);
  EXPECT_EQ(decide4(r, "239.1.2.8", 5005), Decision::kNoRule);
  EXPECT_EQ(decide4(r, "10.0.0.1", 7007), Decision::kOffload);
  EXPECT_EQ(decide6(r, "fd00::1", 7007), Decision::kOffload);  // * is either family
}

TEST(PreloadRules, Ipv6InBrackets) {
  auto r = rules("use rawpipe udp_r [ff02::1]:5000; use os udp [fd00::]/16:*");
  EXPECT_EQ(decide6(r, "ff02::1", 5000), Decision::kOffload);
  EXPECT_EQ(decide6(r, "ff02::2", 5000), Decision::kNoRule);
  EXPECT_EQ(decide6(r, "fd00:1::5", 9), Decision::kKernel);
  EXPECT_EQ(decide4(r, "10.0.0.1", 5000), Decision::kNoRule);  // an IPv6 rule never matches IPv4
}

TEST(PreloadRules, RefusalsSayWhatIsWrong) {
  EXPECT_NE(refusal("use rawpipe tcp *:80").find("only udp and udp_r"), std::string::npos);
  EXPECT_NE(refusal("use onload udp *:80").find("not rawpipe, vma or os"), std::string::npos);
  EXPECT_NE(refusal("use rawpipe udp 10.0.0.300:80").find("not an IPv4 or IPv6 address"), std::string::npos);
  EXPECT_NE(refusal("use rawpipe udp 10.0.0.0/33:80").find("prefix length"), std::string::npos);
  EXPECT_NE(refusal("use rawpipe udp *:9-3").find("ports '9-3'"), std::string::npos);
  EXPECT_NE(refusal("use rawpipe udp *").find("<address>:<ports>"), std::string::npos);
  EXPECT_NE(refusal("offload everything").find("expected 'use"), std::string::npos);
  EXPECT_NE(refusal("use rawpipe udp [ff02::1:5000").find("without ']'"), std::string::npos);
}

}  // namespace
}  // namespace rawpipe::preload
