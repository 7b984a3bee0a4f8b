// The namespace helper itself: what it creates exists, works, and is gone afterwards.
#include "tests/support/netns.hh"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

namespace rawpipe::test {
namespace {

TEST(NetNs, VethPairCarriesUdpBetweenNamespacesAndIsRemoved) {
  if (auto why = netns_unavailable_reason()) GTEST_SKIP() << *why;
  std::string ns_name, veth_name;
  {
    auto left = NetNs::create();
    ASSERT_TRUE(left) << left.message();
    auto right = NetNs::create();
    ASSERT_TRUE(right) << right.message();
    auto pair = VethPair::create({&left.value(), "", {"10.201.0.1/24"}},
                                 {&right.value(), "", {"10.201.0.2/24"}});
    ASSERT_TRUE(pair) << pair.message();
    ns_name = left.value().name();
    veth_name = pair.value().a().name;
    auto mac = pair.value().mac_a();
    ASSERT_TRUE(mac) << mac.message();
    EXPECT_EQ(mac.value().size(), 17u);

    int port = 0;
    int rx = -1;
    ASSERT_TRUE(right.value().run([&] {
      rx = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_port = htons(0);
      inet_pton(AF_INET, "10.201.0.2", &a.sin_addr);
      if (bind(rx, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) return;
      socklen_t len = sizeof(a);
      getsockname(rx, reinterpret_cast<sockaddr*>(&a), &len);
      port = ntohs(a.sin_port);
    }));
    ASSERT_GT(port, 0);
    ASSERT_TRUE(left.value().run([&] {
      int tx = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
      sockaddr_in d{};
      d.sin_family = AF_INET;
      d.sin_port = htons(static_cast<std::uint16_t>(port));
      inet_pton(AF_INET, "10.201.0.2", &d.sin_addr);
      sendto(tx, "hello", 5, 0, reinterpret_cast<sockaddr*>(&d), sizeof(d));
      close(tx);
    }));
    char buf[16] = {};
    timeval tv{2, 0};
    setsockopt(rx, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    ssize_t n = recv(rx, buf, sizeof(buf), 0);
    close(rx);
    EXPECT_EQ(n, 5);
    EXPECT_STREQ(buf, "hello");
  }
  auto list = command_output({"ip", "netns", "list"});
  ASSERT_TRUE(list) << list.message();
  EXPECT_EQ(list.value().find(ns_name), std::string::npos) << "namespace left behind";
  auto links = command_output({"ip", "-br", "link"});
  ASSERT_TRUE(links) << links.message();
  EXPECT_EQ(links.value().find(veth_name), std::string::npos) << "veth left behind";
}

TEST(NetNs, FailedCommandSaysWhatFailed) {
  Status st = run_command({"false"});
  EXPECT_FALSE(st);
  EXPECT_NE(st.message().find("false"), std::string::npos);
}

}  // namespace
}  // namespace rawpipe::test
