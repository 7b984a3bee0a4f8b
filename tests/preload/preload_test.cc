// Unmodified UDP programs under librawpipe-preload.so (`rawpipe exec`), over a veth pair between
// two namespaces the test creates: sockperf server offloaded on af_packet and af_xdp ports with
// ping-pong and under-load from the peer (no loss, the sockets' endpoints counted the traffic,
// the program's summary says offloaded); the kernel fallback without an interface; an epoll set
// mixing an offloaded and a kernel socket; poll and select; close while another thread blocks in
// recv; fork. Runs only in builds without sanitizers (an ASan library cannot be preloaded into
// an unsanitized program), and skips without root.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/build_tree.hh"
#include "tests/support/netns.hh"
#include "tests/support/process.hh"
#include "tests/support/scratch_dir.hh"

namespace rawpipe {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

constexpr const char* kOurIp = "10.86.0.1";
constexpr const char* kPeerIp = "10.86.0.2";
constexpr const char* kOurIp6 = "fd00:86::1";
constexpr const char* kPeerIp6 = "fd00:86::2";

fs::path app() { return test::build_dir() / "tests" / "preload" / "preload_udp_app"; }

struct Net {
  std::optional<test::NetNs> ours, peer;
  std::optional<test::VethPair> veth;
};

Status make_net(Net& n) {
  auto a = test::NetNs::create("rppa");
  if (!a) return a.status();
  n.ours.emplace(std::move(a).value());
  auto b = test::NetNs::create("rppb");
  if (!b) return b.status();
  n.peer.emplace(std::move(b).value());
  auto v = test::VethPair::create({&*n.ours, "", {std::string(kOurIp) + "/24", std::string(kOurIp6) + "/64"}},
                                  {&*n.peer, "", {std::string(kPeerIp) + "/24", std::string(kPeerIp6) + "/64"}});
  if (!v) return v.status();
  n.veth.emplace(std::move(v).value());
  return Status::ok();
}

// One datagram from the peer namespace to kOurIp:port.
void peer_send(const test::NetNs& peer, int port, const std::string& text) {
  EXPECT_TRUE(peer.run([&] {
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    inet_pton(AF_INET, kOurIp, &a.sin_addr);
    sendto(fd, text.data(), text.size(), 0, reinterpret_cast<sockaddr*>(&a), sizeof a);
    close(fd);
  }));
}

// One datagram from the peer namespace, from source port `from`, to kOurIp:port.
void peer_send_from(const test::NetNs& peer, int from, int port, const std::string& text) {
  EXPECT_TRUE(peer.run([&] {
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in src{}, a{};
    src.sin_family = a.sin_family = AF_INET;
    src.sin_port = htons(static_cast<uint16_t>(from));
    a.sin_port = htons(static_cast<uint16_t>(port));
    inet_pton(AF_INET, kOurIp, &a.sin_addr);
    if (bind(fd, reinterpret_cast<sockaddr*>(&src), sizeof src) == 0)
      sendto(fd, text.data(), text.size(), 0, reinterpret_cast<sockaddr*>(&a), sizeof a);
    close(fd);
  }));
}

bool wait_for(const fs::path& file, const std::string& text, std::chrono::milliseconds limit = 10s) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < end) {
    if (test::slurp(file).find(text) != std::string::npos) return true;
    std::this_thread::sleep_for(20ms);
  }
  return false;
}

class Preload : public ::testing::Test {
 protected:
  void SetUp() override {
    if (auto why = test::netns_unavailable_reason()) GTEST_SKIP() << *why;
    ASSERT_TRUE(fs::exists(app())) << app();
    scratch_ = test::make_scratch_dir("rawpipe-preload-test");
    Status s = make_net(net_);
    ASSERT_TRUE(s) << s.message();
  }
  void TearDown() override {
    std::error_code ec;
    if (!scratch_.empty() && !HasFailure()) fs::remove_all(scratch_, ec);
  }

  // `ip netns exec OURS env RAWPIPE_PMD=pmd rawpipe exec -i IF [--no-lcore] -- argv...`; a pmd
  // ending in "-no-lcore" runs without an lcore thread.
  std::vector<std::string> under_preload(std::string pmd, const std::vector<std::string>& argv) const {
    if (pmd.ends_with("-config")) {
      // The same port from a config file (rawpipe exec --config) instead of --interface.
      pmd.resize(pmd.size() - std::strlen("-config"));
      const fs::path config = scratch_ / "preload.toml";
      std::ofstream(config) << ("[run]\nduration = 0\ndefault_action = \"drop\"\ndrop_privileges = false\n"
                               "[[pools]]\nname = \"rx\"\ncount = 20480\n"
                               "[[ports]]\nname = \"p0\"\npmd = \"" + pmd + "\"\ninterface = \"" + net_.veth->a().name +
                               "\"\n[[lcores]]\nrx = [\"p0:0\"]\n");
      std::vector<std::string> out = {"ip", "netns", "exec", net_.ours->name(), "env", "RAWPIPE_SPIN_US=20",
                                      test::rawpipe_binary().string(), "exec", "--config", config.string(), "--"};
      out.insert(out.end(), argv.begin(), argv.end());
      return out;
    }
    const bool no_lcore = pmd.ends_with("-no-lcore");
    if (no_lcore) pmd.resize(pmd.size() - std::strlen("-no-lcore"));
    std::vector<std::string> out = {"ip", "netns", "exec", net_.ours->name(), "env", "RAWPIPE_PMD=" + pmd,
                                    "RAWPIPE_SPIN_US=20", test::rawpipe_binary().string(), "exec", "-i",
                                    net_.veth->a().name};
    if (no_lcore) out.push_back("--no-lcore");
    out.push_back("--");
    out.insert(out.end(), argv.begin(), argv.end());
    return out;
  }

  // The program in our namespace: on kernel sockets for pmd "kernel" (the reference run), else
  // under the preload library.
  pid_t start_app(const std::string& pmd, const std::vector<std::string>& argv, const fs::path& out,
                  const fs::path& err) const {
    std::vector<std::string> cmd = {"ip", "netns", "exec", net_.ours->name()};
    cmd.insert(cmd.end(), argv.begin(), argv.end());
    return test::start_process(pmd == "kernel" ? cmd : under_preload(pmd, argv), out, err);
  }

  void epoll_set_mixes_offloaded_and_kernel_sockets(const std::string& pmd);
  void poll_and_select_wake_for_an_offloaded_socket(const std::string& pmd);
  void recvmmsg_honours_flags_and_timeout(const std::string& pmd);
  void recvmmsg_waitforone_as_the_kernel(const std::string& pmd);
  void connected_socket_receives_only_its_peer(const std::string& pmd);
  void listener_and_connected_socket_share_a_port(const std::string& pmd);
  void datagram_queued_before_connect_is_still_read(const std::string& pmd);
  void local_senders_reach_an_offloaded_socket(const std::string& pmd, const std::string& how);
  void socketxtreme_poll_sleeps_on_the_ring_descriptor(const std::string& pmd);

  Net net_;
  fs::path scratch_;
};

TEST_F(Preload, KernelFallbackWithoutInterfaceSaysSo) {
  const std::vector<std::string> argv = {"ip", "netns", "exec", net_.ours->name(), "env", "-u", "RAWPIPE_INTERFACE",
                                         "-u", "RAWPIPE_CONFIG", test::rawpipe_binary().string(), "exec", "--",
                                         app().string(), "selftest", "7101"};
  test::ProcessOutput r = test::run_process(argv, scratch_, {.timeout = 20s});
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("selftest got loopback hello"), std::string::npos) << r.out;
  // One line, and only one, says why nothing is offloaded.
  const std::regex why("rawpipe-preload: nothing is offloaded: neither RAWPIPE_INTERFACE nor RAWPIPE_CONFIG");
  EXPECT_EQ(std::distance(std::sregex_iterator(r.err.begin(), r.err.end(), why), std::sregex_iterator()), 1) << r.err;
  EXPECT_EQ(r.err.find("offloaded: rx"), std::string::npos) << r.err;
}

// A process that offloads nothing still has a stats segment: `rawpipe stat` says why nothing is
// offloaded and lists its sockets, each the kernel's with why; the segment goes with the process.
TEST_F(Preload, KernelOnlyProcessShowsItsSocketsInStat) {
  const fs::path out = scratch_ / "out", err = scratch_ / "err";
  const std::vector<std::string> argv = {"ip", "netns", "exec", net_.ours->name(), "env", "-u", "RAWPIPE_INTERFACE",
                                         "-u", "RAWPIPE_CONFIG", test::rawpipe_binary().string(), "exec", "--",
                                         app().string(), "stat", "7130"};
  const pid_t pid = test::start_process(argv, out, err);
  ASSERT_GT(pid, 0);
  const bool ready = wait_for(out, "ready");
  // The rows come with the first publication after the binds.
  nlohmann::json doc;
  std::string view;
  auto has_row = [](const nlohmann::json& d) {
    return d.is_object() && d.contains("sections") && d["sections"]["sockets"].size() == 4;
  };
  for (int i = 0; ready && i < 50 && !has_row(doc); ++i) {
    auto r = test::command_output({test::rawpipe_binary().string(), "stat", "--once", "--json", std::to_string(pid)});
    doc = r ? nlohmann::json::parse(*r, nullptr, false) : nlohmann::json();
    if (!has_row(doc)) std::this_thread::sleep_for(100ms);
  }
  if (auto v = test::command_output({test::rawpipe_binary().string(), "stat", "--once", std::to_string(pid)})) view = *v;
  peer_send(*net_.peer, 7130, "stop");  // the kernel socket gets it
  const int status = test::wait_process(pid, {.timeout = 20s});
  const std::string o = test::slurp(out), e = test::slurp(err);
  ASSERT_TRUE(ready) << o << e;
  EXPECT_EQ(status, 0) << o << e;

  ASSERT_TRUE(has_row(doc)) << doc.dump(2) << e;
  EXPECT_NE(doc["nothing_offloaded"].get<std::string>().find("neither RAWPIPE_INTERFACE nor RAWPIPE_CONFIG"),
            std::string::npos)
      << doc.dump(2);
  EXPECT_EQ(doc["pid"], pid);
  bool bound_row = false, unbound_row = false;
  for (const auto& r : doc["sections"]["sockets"]) {
    EXPECT_FALSE(r["offloaded"].get<bool>()) << r.dump();
    const std::string why = r.value("why", "");
    if (r.value("local", "") == "*:7130") {
      bound_row = true;
      EXPECT_NE(why.find("did not start"), std::string::npos) << r.dump();
      EXPECT_EQ(r["drops"]["kernel"], 0u) << r.dump();  // read from /proc/net/udp
    }
    unbound_row |= why.starts_with("not bound");
  }
  EXPECT_TRUE(bound_row && unbound_row) << doc.dump(2);
  EXPECT_TRUE(std::regex_search(view, std::regex(R"(no pipeline\n\s+nothing is offloaded: neither)"))) << view;
  EXPECT_TRUE(std::regex_search(view, std::regex(R"(\*:7130\s+no\s+-\s+-\s+0\s+the pipeline did not start)"))) << view;
  // Gone with the process: no stale segment, no name link.
  EXPECT_FALSE(fs::exists("/dev/shm/rawpipe." + std::to_string(pid)));
  EXPECT_FALSE(fs::exists("/dev/shm/rawpipe-name.rawpipe-preload-" + std::to_string(pid)));
}

// A dual-stack IPv6 socket: IPv6 and IPv4 peers (the latter as IPv4-mapped addresses), both
// answered through the pipeline's send path (af_packet: the port has the interface's addresses).
TEST_F(Preload, DualStackIpv6SocketReceivesAndAnswersBothFamilies) {
  const fs::path out = scratch_ / "out", err = scratch_ / "err";
  pid_t pid = test::start_process(under_preload("af_packet", {app().string(), "echo6", "7114", "2"}), out, err);
  ASSERT_GT(pid, 0);
  const bool ready = wait_for(out, "ready");
  std::string replies;
  if (ready) {
    EXPECT_TRUE(net_.peer->run([&] {
      for (const char* ip : {kOurIp6, kOurIp}) {
        const bool v6 = std::strchr(ip, ':') != nullptr;
        int fd = socket(v6 ? AF_INET6 : AF_INET, SOCK_DGRAM, 0);
        sockaddr_storage d{};
        socklen_t len;
        if (v6) {
          auto* s6 = reinterpret_cast<sockaddr_in6*>(&d);
          s6->sin6_family = AF_INET6;
          s6->sin6_port = htons(7114);
          inet_pton(AF_INET6, ip, &s6->sin6_addr);
          len = sizeof *s6;
        } else {
          auto* s4 = reinterpret_cast<sockaddr_in*>(&d);
          s4->sin_family = AF_INET;
          s4->sin_port = htons(7114);
          inet_pton(AF_INET, ip, &s4->sin_addr);
          len = sizeof *s4;
        }
        timeval tv{5, 0};
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        const std::string text = std::string("hello ") + ip;
        sendto(fd, text.data(), text.size(), 0, reinterpret_cast<sockaddr*>(&d), len);
        char buf[128];
        const ssize_t n = recv(fd, buf, sizeof buf, 0);
        replies += (n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string("none")) + "\n";
        close(fd);
      }
    }));
  }
  const int status = test::wait_process(pid, {.timeout = 20s});
  const std::string o = test::slurp(out), e = test::slurp(err);
  ASSERT_TRUE(ready) << o << e;
  EXPECT_EQ(status, 0) << o << e;
  EXPECT_EQ(replies, std::string("hello ") + kOurIp6 + "\nhello " + kOurIp + "\n") << o << e;
  EXPECT_NE(o.find(std::string("from ") + kPeerIp6), std::string::npos) << o;
  EXPECT_NE(o.find(std::string("from ::ffff:") + kPeerIp), std::string::npos) << o;
  EXPECT_NE(e.find("udp *:7114 offloaded: rx 2 packets, tx 2 (0 more through the kernel)"), std::string::npos) << e;
}

void Preload::epoll_set_mixes_offloaded_and_kernel_sockets(const std::string& pmd) {
  const fs::path out = scratch_ / "out", err = scratch_ / "err";
  pid_t pid = test::start_process(under_preload(pmd, {app().string(), "epoll", "7102", "7103"}), out, err);
  ASSERT_GT(pid, 0);
  const bool waiting = wait_for(out, "waiting offloaded");
  if (waiting) peer_send(*net_.peer, 7102, "from the peer");
  const int status = test::wait_process(pid, {.timeout = 20s});
  const std::string o = test::slurp(out), e = test::slurp(err);
  ASSERT_TRUE(waiting) << o << e;
  EXPECT_EQ(status, 0) << o << e;
  EXPECT_NE(o.find("woke kernel kernel datagram"), std::string::npos) << o << e;
  EXPECT_NE(o.find("woke offloaded from the peer"), std::string::npos) << o << e;
  EXPECT_NE(o.find("then 0"), std::string::npos) << o << e;
  // The datagram came through the endpoint, not the kernel socket.
  EXPECT_TRUE(std::regex_search(e, std::regex(R"(udp \*:7102 offloaded: rx 1 packets)"))) << e;
}

TEST_F(Preload, EpollSetMixesOffloadedAndKernelSockets) { epoll_set_mixes_offloaded_and_kernel_sockets("af_packet"); }
// Without an lcore the sleeping epoll_wait is woken by the port's queue (in the set beside the
// sockets): the datagram reaches the ring only through the waiting thread's own pass.
TEST_F(Preload, EpollSetWakesWithoutAnLcore) { epoll_set_mixes_offloaded_and_kernel_sockets("af_xdp-no-lcore"); }

void Preload::poll_and_select_wake_for_an_offloaded_socket(const std::string& pmd) {
  const fs::path out = scratch_ / "out", err = scratch_ / "err";
  pid_t pid = test::start_process(under_preload(pmd, {app().string(), "poll", "7104"}), out, err);
  ASSERT_GT(pid, 0);
  const bool ready = wait_for(out, "ready");
  if (ready) {
    std::this_thread::sleep_for(300ms);  // into poll's sleep, past its spin
    peer_send(*net_.peer, 7104, "first");
  }
  const bool polled = ready && wait_for(out, "poll 1");
  if (polled) {
    std::this_thread::sleep_for(300ms);
    peer_send(*net_.peer, 7104, "second");
  }
  const int status = test::wait_process(pid, {.timeout = 20s});
  const std::string o = test::slurp(out), e = test::slurp(err);
  EXPECT_EQ(status, 0) << o << e;
  EXPECT_NE(o.find("poll 1 first"), std::string::npos) << o << e;
  EXPECT_NE(o.find("select 1 second"), std::string::npos) << o << e;
  EXPECT_TRUE(std::regex_search(e, std::regex(R"(udp \*:7104 offloaded: rx 2 packets)"))) << e;
}

TEST_F(Preload, PollAndSelectWakeForAnOffloadedSocket) { poll_and_select_wake_for_an_offloaded_socket("af_packet"); }
TEST_F(Preload, PollAndSelectWakeWithoutAnLcore) { poll_and_select_wake_for_an_offloaded_socket("af_xdp-no-lcore"); }

// recvmmsg as the kernel's: MSG_WAITFORONE returns what is there after the first datagram; without
// it the call waits for more until its timeout, which also ends a wait with nothing coming (the
// kernel only checks it after a datagram); the time left is written back on success only, as the
// kernel's __sys_recvmmsg does.
void Preload::recvmmsg_honours_flags_and_timeout(const std::string& pmd) {
  const fs::path out = scratch_ / "out", err = scratch_ / "err";
  pid_t pid = test::start_process(under_preload(pmd, {app().string(), "mmsg", "7107"}), out, err);
  ASSERT_GT(pid, 0);
  const bool ready = wait_for(out, "ready");
  if (ready)
    for (const char* d : {"a", "b", "c"}) peer_send(*net_.peer, 7107, d);
  const bool two = ready && wait_for(out, "send two");
  if (two) {
    std::this_thread::sleep_for(100ms);
    peer_send(*net_.peer, 7107, "d");
    peer_send(*net_.peer, 7107, "e");
  }
  const int status = test::wait_process(pid, {.timeout = 20s});
  const std::string o = test::slurp(out), e = test::slurp(err);
  EXPECT_EQ(status, 0) << o << e;
  EXPECT_NE(o.find("waitforone got 3"), std::string::npos) << o << e;
  EXPECT_NE(o.find("quiet -1 Resource temporarily unavailable waited timeout untouched"), std::string::npos) << o << e;
  EXPECT_NE(o.find("bounded 2 d,e waited left 0"), std::string::npos) << o << e;
  EXPECT_TRUE(std::regex_search(e, std::regex(R"(udp \*:7107 offloaded: rx 5 packets)"))) << e;
}

TEST_F(Preload, RecvmmsgHonoursFlagsAndTimeout) { recvmmsg_honours_flags_and_timeout("af_packet"); }
TEST_F(Preload, RecvmmsgHonoursFlagsAndTimeoutWithoutAnLcore) { recvmmsg_honours_flags_and_timeout("af_xdp-no-lcore"); }

// The part of recvmmsg's behaviour the kernel defines without its timeout bug, against the
// reference: MSG_WAITFORONE with a timeout, on kernel sockets and offloaded, prints the same
// (three datagrams, and the time left written back after each successful call).
void Preload::recvmmsg_waitforone_as_the_kernel(const std::string& pmd) {
  const fs::path out = scratch_ / "out", err = scratch_ / "err";
  const std::vector<std::string> argv = {app().string(), "mmsg", "7109", "waitforone"};
  pid_t pid = start_app(pmd, argv, out, err);
  ASSERT_GT(pid, 0);
  if (wait_for(out, "ready"))
    for (const char* d : {"a", "b", "c"}) peer_send(*net_.peer, 7109, d);
  const int status = test::wait_process(pid, {.timeout = 20s});
  const std::string o = test::slurp(out), e = test::slurp(err);
  EXPECT_EQ(status, 0) << o << e;
  EXPECT_EQ(o, "ready\nwaitforone got 3 timeout written back\n") << e;
  if (pmd != "kernel") {
    EXPECT_NE(e.find("udp *:7109 offloaded: rx 3 packets"), std::string::npos) << e;
  }
}

TEST_F(Preload, RecvmmsgWaitforoneOnKernelSockets) { recvmmsg_waitforone_as_the_kernel("kernel"); }
TEST_F(Preload, RecvmmsgWaitforoneAsTheKernel) { recvmmsg_waitforone_as_the_kernel("af_packet"); }

// A connected socket receives its peer's datagrams only: the same program on kernel sockets (the
// reference) and offloaded, with a stranger's datagram sent first.
void Preload::connected_socket_receives_only_its_peer(const std::string& pmd) {
  const fs::path out = scratch_ / "out", err = scratch_ / "err";
  const std::vector<std::string> argv = {app().string(), "connected", "7108", kPeerIp, "7208"};
  pid_t pid = start_app(pmd, argv, out, err);
  ASSERT_GT(pid, 0);
  const bool ready = wait_for(out, "ready");
  if (ready) {
    std::this_thread::sleep_for(100ms);
    peer_send_from(*net_.peer, 7209, 7108, "stranger");
    peer_send_from(*net_.peer, 7208, 7108, "friend");
    peer_send_from(*net_.peer, 7209, 7108, "stranger");
    peer_send_from(*net_.peer, 7208, 7108, "friend again");
  }
  const int status = test::wait_process(pid, {.timeout = 20s});
  const std::string o = test::slurp(out), e = test::slurp(err);
  EXPECT_EQ(status, 0) << o << e;
  EXPECT_EQ(o, "ready\ngot friend\ngot friend again\n") << e;
  if (pmd != "kernel") {
    // The strangers never reached its ring: its rule names the peer.
    EXPECT_NE(e.find("udp *:7108 offloaded: rx 2 packets"), std::string::npos) << e;
    EXPECT_EQ(e.find("not from the connected peer"), std::string::npos) << e;
  }
}

TEST_F(Preload, ConnectedSocketReceivesOnlyItsPeerOnKernelSockets) { connected_socket_receives_only_its_peer("kernel"); }
TEST_F(Preload, ConnectedSocketReceivesOnlyItsPeer) { connected_socket_receives_only_its_peer("af_packet"); }

// A listener and a connected socket on one port, as a QUIC or DNS server has them: the
// connected socket gets its peer's datagrams, the listener everyone else's, as on the kernel.
void Preload::listener_and_connected_socket_share_a_port(const std::string& pmd) {
  const fs::path out = scratch_ / "out", err = scratch_ / "err";
  const std::vector<std::string> argv = {app().string(), "shared", "7124", kPeerIp, "7208"};
  pid_t pid = start_app(pmd, argv, out, err);
  ASSERT_GT(pid, 0);
  if (wait_for(out, "ready")) {
    peer_send_from(*net_.peer, 7209, 7124, "stranger");
    peer_send_from(*net_.peer, 7208, 7124, "friend");
    peer_send_from(*net_.peer, 7210, 7124, "other");
    peer_send_from(*net_.peer, 7208, 7124, "friend again");
  }
  const int status = test::wait_process(pid, {.timeout = 20s});
  const std::string o = test::slurp(out), e = test::slurp(err);
  EXPECT_EQ(status, 0) << o << e;
  EXPECT_EQ(o, "ready\nlistener: stranger,other\nconnected: friend,friend again\n") << e;
  if (pmd != "kernel") {
    // Both offloaded: the traffic came through their endpoints.
    EXPECT_TRUE(std::regex_search(e, std::regex(R"(udp \*:7124 offloaded: rx 2 packets.*socket0)"))) << e;
    EXPECT_TRUE(std::regex_search(e, std::regex(R"(udp \*:7124 offloaded: rx 2 packets.*socket1)"))) << e;
  }
}

// What arrived before connect stays readable after it: the kernel does not purge the queue.
void Preload::datagram_queued_before_connect_is_still_read(const std::string& pmd) {
  const fs::path out = scratch_ / "out", err = scratch_ / "err";
  const std::vector<std::string> argv = {app().string(), "connect-late", "7125", kPeerIp, "7208"};
  pid_t pid = start_app(pmd, argv, out, err);
  ASSERT_GT(pid, 0);
  if (wait_for(out, "bound")) peer_send_from(*net_.peer, 7209, 7125, "early stranger");
  if (wait_for(out, "connected")) {
    peer_send_from(*net_.peer, 7209, 7125, "late stranger");
    peer_send_from(*net_.peer, 7208, 7125, "friend");
  }
  const int status = test::wait_process(pid, {.timeout = 20s});
  const std::string o = test::slurp(out), e = test::slurp(err);
  EXPECT_EQ(status, 0) << o << e;
  EXPECT_EQ(o, "bound\nconnected\ngot early stranger\ngot friend\n") << e;
}

TEST_F(Preload, DatagramQueuedBeforeConnectIsStillReadOnKernelSockets) { datagram_queued_before_connect_is_still_read("kernel"); }
TEST_F(Preload, DatagramQueuedBeforeConnectIsStillRead) { datagram_queued_before_connect_is_still_read("af_packet"); }

TEST_F(Preload, ListenerAndConnectedSocketShareAPortOnKernelSockets) { listener_and_connected_socket_share_a_port("kernel"); }
TEST_F(Preload, ListenerAndConnectedSocketShareAPort) { listener_and_connected_socket_share_a_port("af_packet"); }

// Datagrams the pipeline never sees reach an offloaded socket through its kernel side: sent on
// this host to 127.0.0.1 or to the interface's own address (both cross lo). Each is read once,
// beside the peer's through the ring, whether the program sleeps in recv, poll or epoll_wait;
// on af_packet the kernel side holds no copy of the ring's datagrams.
void Preload::local_senders_reach_an_offloaded_socket(const std::string& pmd, const std::string& how) {
  const fs::path out = scratch_ / "out", err = scratch_ / "err";
  const std::vector<std::string> argv = {app().string(), "any-path", "7127", "4", how};
  pid_t pid = start_app(pmd, argv, out, err);
  ASSERT_GT(pid, 0);
  auto local_send = [this](const char* ip, const std::string& text) {
    EXPECT_TRUE(net_.ours->run([&] {
      int fd = socket(AF_INET, SOCK_DGRAM, 0);
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_port = htons(7127);
      inet_pton(AF_INET, ip, &a.sin_addr);
      sendto(fd, text.data(), text.size(), 0, reinterpret_cast<sockaddr*>(&a), sizeof a);
      close(fd);
    }));
  };
  if (wait_for(out, "ready")) {
    // Each after the program went to sleep (past its 20 us spin).
    std::this_thread::sleep_for(300ms);
    peer_send(*net_.peer, 7127, "from the peer");
    std::this_thread::sleep_for(300ms);
    local_send("127.0.0.1", "over loopback");
    std::this_thread::sleep_for(300ms);
    local_send(kOurIp, "to our own address");
    std::this_thread::sleep_for(300ms);
    peer_send(*net_.peer, 7127, "from the peer again");
  }
  const int status = test::wait_process(pid, {.timeout = 20s});
  const std::string o = test::slurp(out), e = test::slurp(err);
  EXPECT_EQ(status, 0) << o << e;
  EXPECT_EQ(o, "ready\ngot from the peer\ngot over loopback\ngot to our own address\ngot from the peer again\nthen -1\n") << e;
  if (pmd != "kernel") {
    EXPECT_NE(e.find("udp *:7127 offloaded: rx 2 packets (2 more from the kernel)"), std::string::npos) << e;
  }
}

TEST_F(Preload, LocalSendersReachAKernelSocket) { local_senders_reach_an_offloaded_socket("kernel", "recv"); }
TEST_F(Preload, LocalSendersReachAnOffloadedSocketInRecv) { local_senders_reach_an_offloaded_socket("af_packet", "recv"); }
TEST_F(Preload, LocalSendersReachAnOffloadedSocketInPoll) { local_senders_reach_an_offloaded_socket("af_packet", "poll"); }
TEST_F(Preload, LocalSendersReachAnOffloadedSocketInEpoll) { local_senders_reach_an_offloaded_socket("af_packet", "epoll"); }
TEST_F(Preload, LocalSendersReachAnOffloadedSocketOnAfXdp) { local_senders_reach_an_offloaded_socket("af_xdp", "epoll"); }
// With a config file the library learns the port's interface and driver from its [[ports]].
TEST_F(Preload, LocalSendersReachAnOffloadedSocketWithAConfig) {
  local_senders_reach_an_offloaded_socket("af_packet-config", "epoll");
}
TEST_F(Preload, LocalSendersReachAnOffloadedSocketWithoutAnLcore) {
  local_senders_reach_an_offloaded_socket("af_xdp-no-lcore", "poll");
}

// A ring that never empties does not starve the kernel side: with 500 datagrams from the peer
// waiting in the ring, a local one sent at the same time is read within the first 101, not last.
TEST_F(Preload, LocalSenderIsReadWhileTheRingHasABacklog) {
  const fs::path out = scratch_ / "out", err = scratch_ / "err";
  pid_t pid = start_app("af_packet", {app().string(), "backlog", "7128"}, out, err);
  ASSERT_GT(pid, 0);
  if (wait_for(out, "ready")) {
    EXPECT_TRUE(net_.peer->run([&] {
      int fd = socket(AF_INET, SOCK_DGRAM, 0);
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_port = htons(7128);
      inet_pton(AF_INET, kOurIp, &a.sin_addr);
      for (int i = 0; i < 500; ++i) {
        sendto(fd, "peer", 4, 0, reinterpret_cast<sockaddr*>(&a), sizeof a);
        if (i % 50 == 49) std::this_thread::sleep_for(1ms);  // within the port's ring
      }
      close(fd);
    }));
    EXPECT_TRUE(net_.ours->run([&] {
      int fd = socket(AF_INET, SOCK_DGRAM, 0);
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_port = htons(7128);
      inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
      sendto(fd, "local", 5, 0, reinterpret_cast<sockaddr*>(&a), sizeof a);
      close(fd);
    }));
    wait_for(out, "never printed", 1500ms);  // the program reads once its second is up
    peer_send(*net_.peer, 7128, "last");
  }
  const int status = test::wait_process(pid, {.timeout = 20s});
  const std::string o = test::slurp(out), e = test::slurp(err);
  EXPECT_EQ(status, 0) << o << e;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(o, m, std::regex(R"(local at (-?\d+) of (\d+))"))) << o << e;
  EXPECT_EQ(m[2], "502") << o << e;  // nothing lost, nothing twice
  EXPECT_GE(std::stoi(m[1]), 1) << o;
  EXPECT_LE(std::stoi(m[1]), 101) << o;
}

// rawpipe stat on a preloaded process: a row per UDP socket, offloaded with what it read and
// lost, or the kernel's with why. A reader that stops while 3000 datagrams arrive loses what its
// ring cannot hold, and every datagram is either read, counted against the socket, or counted
// lost before the pipeline.
TEST_F(Preload, StatShowsEachSocketOffloadedOrWhyNot) {
  const fs::path out = scratch_ / "out", err = scratch_ / "err";
  std::vector<std::string> argv = under_preload("af_packet", {app().string(), "stat", "7120"});
  // After `env`: the third port's rule says os; everything else is offloaded.
  argv.insert(std::find(argv.begin(), argv.end(), "env") + 1, "RAWPIPE_OFFLOAD=use os udp *:7122; use rawpipe udp *:*");
  pid_t pid = test::start_process(argv, out, err);
  ASSERT_GT(pid, 0);
  auto row = [](const nlohmann::json& doc, const std::string& local) {
    if (doc.is_object() && doc.contains("sections") && doc["sections"].contains("sockets"))
      for (const auto& r : doc["sections"]["sockets"])
        if (r.value("local", "") == local) return r;
    return nlohmann::json();
  };
  // The document is published once a second: the first one with the socket's row showing
  // `rx` datagrams read.
  auto stat_json = [pid, &row](std::uint64_t rx) {
    nlohmann::json doc;
    for (int i = 0; i < 50; ++i) {
      auto r = test::command_output({test::rawpipe_binary().string(), "stat", "--once", "--json", std::to_string(pid)});
      doc = r ? nlohmann::json::parse(*r, nullptr, false) : nlohmann::json();
      const nlohmann::json off = row(doc, "*:7120");
      if (off.is_object() && off.value("rx_packets", std::uint64_t{0}) == rx) break;
      std::this_thread::sleep_for(100ms);
    }
    return doc;
  };
  const bool ready = wait_for(out, "ready");
  unsigned sent = 0;
  nlohmann::json first, second;
  std::string view;
  if (ready) {
    for (int i = 0; i < 5; ++i) peer_send(*net_.peer, 7120, "x");
    peer_send(*net_.peer, 7120, "sync");
    sent = 6;
    if (wait_for(out, "count 6")) {
      first = stat_json(6);
      auto v = test::command_output({test::rawpipe_binary().string(), "stat", "--once", std::to_string(pid)});
      view = v ? *v : v.message();
    }
    peer_send(*net_.peer, 7120, "pause");
    ++sent;
    if (wait_for(out, "paused")) {
      EXPECT_TRUE(net_.peer->run([&] {
        int fd = socket(AF_INET, SOCK_DGRAM, 0);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_port = htons(7120);
        inet_pton(AF_INET, kOurIp, &a.sin_addr);
        for (int i = 0; i < 3000; ++i)
          if (sendto(fd, "y", 1, 0, reinterpret_cast<sockaddr*>(&a), sizeof a) == 1) ++sent;
        close(fd);
      }));
    }
    if (wait_for(out, "resumed")) {
      std::this_thread::sleep_for(500ms);  // it reads what its ring held
      peer_send(*net_.peer, 7120, "sync");
      ++sent;
      std::smatch m;
      std::string text;
      for (int i = 0; i < 100 && !std::regex_search(text = test::slurp(out), m, std::regex(R"(resumed\ncount (\d+))")); ++i)
        std::this_thread::sleep_for(50ms);
      second = stat_json(m.empty() ? 0 : std::stoull(m[1]));
    }
    peer_send(*net_.peer, 7120, "stop");
  }
  const int status = test::wait_process(pid, {.timeout = 20s});
  const std::string o = test::slurp(out), e = test::slurp(err);
  ASSERT_TRUE(ready) << o << e;
  EXPECT_EQ(status, 0) << o << e;

  const nlohmann::json off = row(first, "*:7120");
  ASSERT_TRUE(off.is_object()) << first.dump(2) << o << e;
  EXPECT_TRUE(off["offloaded"].get<bool>()) << off.dump();
  EXPECT_EQ(off["endpoint"], "socket0") << off.dump();
  EXPECT_EQ(off["rx_packets"], 6u) << off.dump();
  EXPECT_EQ(off["drops"]["ring_full"], 0u) << off.dump();
  const nlohmann::json loop = row(first, "127.0.0.1:7121"), os = row(first, "*:7122");
  ASSERT_TRUE(loop.is_object() && os.is_object()) << first.dump(2);
  EXPECT_FALSE(loop["offloaded"].get<bool>());
  EXPECT_NE(loop["why"].get<std::string>().find("loopback"), std::string::npos) << loop.dump();
  EXPECT_EQ(loop["drops"]["kernel"], 0u) << loop.dump();  // the kernel's own count, read from /proc/net/udp
  EXPECT_FALSE(os["offloaded"].get<bool>());
  EXPECT_NE(os["why"].get<std::string>().find("rule gives it to the kernel"), std::string::npos) << os.dump();
  bool unbound = false;
  for (const auto& r : first["sections"]["sockets"]) unbound |= r.value("why", "").starts_with("not bound");
  EXPECT_TRUE(unbound) << first.dump(2);
  // The same rows in the view people read.
  EXPECT_TRUE(std::regex_search(view, std::regex(R"(\d+ udp\s+\*:7120\s+yes\s+6\s+0\s+0\s+socket0)"))) << view;
  EXPECT_TRUE(std::regex_search(view, std::regex(R"(127\.0\.0\.1:7121\s+no\s+-\s+-\s+0\s+a loopback address)"))) << view;

  // After the pause: the ring held what it could, the rest is counted against the socket.
  const nlohmann::json after = row(second, "*:7120");
  ASSERT_TRUE(after.is_object()) << second.dump(2) << o << e;
  const std::uint64_t read = after["rx_packets"], ring_full = after["drops"]["ring_full"];
  const std::uint64_t lost_before = second.value("lost_before_pipeline", std::uint64_t{0});
  EXPECT_GT(ring_full, 0u) << after.dump();
  EXPECT_LE(read + ring_full, sent) << after.dump();
  EXPECT_GE(read + ring_full + lost_before, sent) << after.dump() << " lost before the pipeline " << lost_before;
  EXPECT_NE(o.find("count " + std::to_string(read)), std::string::npos) << o << after.dump();
  EXPECT_TRUE(std::regex_search(e, std::regex(R"(udp \*:7120 offloaded: rx \d+ packets.*; \d+ lost: its ring was full)"))) << e;
}

TEST_F(Preload, CloseWakesAThreadBlockedInRecv) {
  test::ProcessOutput r =
      test::run_process(under_preload("af_packet", {app().string(), "close-blocked", "7105"}), scratch_, {.timeout = 20s});
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("recv returned -1 Bad file descriptor"), std::string::npos) << r.out << r.err;
  EXPECT_NE(r.err.find("udp *:7105 offloaded"), std::string::npos) << r.err;
}

TEST_F(Preload, ForkedChildReceivesOnItsKernelSocket) {
  const fs::path out = scratch_ / "out", err = scratch_ / "err";
  pid_t pid = test::start_process(under_preload("af_packet", {app().string(), "fork", "7106"}), out, err);
  ASSERT_GT(pid, 0);
  const bool ready = wait_for(out, "ready");
  if (ready) {
    std::this_thread::sleep_for(300ms);
    peer_send(*net_.peer, 7106, "to the child");
  }
  const int status = test::wait_process(pid, {.timeout = 20s});
  const std::string o = test::slurp(out), e = test::slurp(err);
  EXPECT_EQ(status, 0) << o << e;
  EXPECT_NE(o.find("child got to the child"), std::string::npos) << o << e;
}

// A child inherits its parent's epoll set (the same kernel object): it must never be handed the
// records the library keeps in it for the parent's offloaded socket, only its own events.
TEST_F(Preload, ForkedChildSeesOnlyItsOwnEventsInAnInheritedEpollSet) {
  const fs::path out = scratch_ / "out", err = scratch_ / "err";
  pid_t pid = test::start_process(under_preload("af_packet", {app().string(), "fork-epoll", "7126"}), out, err);
  ASSERT_GT(pid, 0);
  if (wait_for(out, "child ready")) {
    std::this_thread::sleep_for(300ms);
    peer_send(*net_.peer, 7126, "to the parent");
  }
  const int status = test::wait_process(pid, {.timeout = 20s});
  const std::string o = test::slurp(out), e = test::slurp(err);
  EXPECT_EQ(status, 0) << o << e;
  EXPECT_NE(o.find("parent got to the parent"), std::string::npos) << o << e;
  EXPECT_NE(o.find("child event 222"), std::string::npos) << o << e;
  EXPECT_FALSE(std::regex_search(o, std::regex(R"(child event (?!222\b)\d+)"))) << o << e;
  // From 0.3 s to 1.5 s the parent's datagram waits unread, so the parent's record in the set is
  // ready all along: the child must sleep through it, not call epoll_wait in a loop.
  std::smatch cpu;
  ASSERT_TRUE(std::regex_search(o, cpu, std::regex(R"(child cpu (\d+) ms of (\d+) ms)"))) << o << e;
  std::printf("%s\n", cpu.str(0).c_str());
  EXPECT_LT(std::stol(cpu[1]) * 4, std::stol(cpu[2])) << "the child spun while its parent's record was ready: " << o;
}

fs::path source(const char* name) { return test::source_dir() / "tests" / "preload" / name; }

TEST_F(Preload, PythonMulticastReceiverGetsEveryDatagramAndTheKernelReportsTheGroup) {
  if (system("tcpdump --version >/dev/null 2>&1") != 0) GTEST_SKIP() << "tcpdump is not installed (Debian package tcpdump)";
  if (system("python3 --version >/dev/null 2>&1") != 0) GTEST_SKIP() << "python3 is not installed";
  constexpr const char* kGroup = "239.86.0.7";
  constexpr int kPort = 7110, kCount = 300;
  // The peer watches for the IGMP report the kernel sends when the preloaded receiver joins.
  const fs::path dump_out = scratch_ / "dump.out", dump_err = scratch_ / "dump.err";
  pid_t dump = test::start_process({"ip", "netns", "exec", net_.peer->name(), "tcpdump", "-i", net_.veth->b().name,
                                    "-n", "-l", "-p", "-v", "--immediate-mode", "igmp"},
                                   dump_out, dump_err);
  ASSERT_GT(dump, 0);
  ASSERT_TRUE(wait_for(dump_err, "listening on")) << test::slurp(dump_err);
  const fs::path out = scratch_ / "out", err = scratch_ / "err";
  pid_t pid = test::start_process(
      under_preload("af_packet", {"python3", source("mcast_receiver.py").string(), kGroup, std::to_string(kPort),
                                  std::to_string(kCount), kOurIp}),
      out, err);
  ASSERT_GT(pid, 0);
  const bool joined = wait_for(out, "joined", 30s);
  if (joined) {
    EXPECT_TRUE(net_.peer->run([&] {
      int fd = socket(AF_INET, SOCK_DGRAM, 0);
      in_addr local{};
      inet_pton(AF_INET, kPeerIp, &local);
      setsockopt(fd, IPPROTO_IP, IP_MULTICAST_IF, &local, sizeof local);
      sockaddr_in g{};
      g.sin_family = AF_INET;
      g.sin_port = htons(kPort);
      inet_pton(AF_INET, kGroup, &g.sin_addr);
      for (int i = 0; i < kCount; ++i) {
        const std::string text = "tick " + std::to_string(i);
        sendto(fd, text.data(), text.size(), 0, reinterpret_cast<sockaddr*>(&g), sizeof g);
        if (i % 16 == 15) std::this_thread::sleep_for(1ms);  // a feed's pace, not a flood
      }
      close(fd);
    }));
  }
  const int status = test::wait_process(pid, {.timeout = 30s});
  // tcpdump exits on SIGINT without printing what it has not read yet: let it print the report
  // (the kernel repeats it, and the leave follows the receiver's exit) before stopping it.
  (void)wait_for(dump_out, kGroup, 5s);
  kill(dump, SIGINT);
  test::wait_process(dump, {.timeout = 10s});
  const std::string o = test::slurp(out), e = test::slurp(err), d = test::slurp(dump_out);
  ASSERT_TRUE(joined) << o << e;
  EXPECT_EQ(status, 0) << o << e;
  EXPECT_NE(o.find("received 300 distinct 300"), std::string::npos) << o << e;
  EXPECT_TRUE(std::regex_search(e, std::regex(R"(udp \*:7110 offloaded: rx 300 packets)"))) << e;
  // With -v tcpdump prints the group records: [gaddr 239.86.0.7 is_ex { }] (v3) or the group (v2).
  EXPECT_TRUE(std::regex_search(d, std::regex(R"(igmp v[23] report)"))) << d;
  EXPECT_NE(d.find(kGroup), std::string::npos) << d;
}

TEST_F(Preload, Iperf3UdpCompletes) {
  if (system("iperf3 --version >/dev/null 2>&1") != 0) GTEST_SKIP() << "iperf3 is not installed (Debian package iperf3)";
  const fs::path out = scratch_ / "out", err = scratch_ / "err";
  pid_t pid = test::start_process(under_preload("af_packet", {"iperf3", "-s", "-1", "--forceflush", "-B", kOurIp, "-p", "5211"}), out, err);
  ASSERT_GT(pid, 0);
  const bool listening = wait_for(out, "Server listening");
  std::string client;
  if (listening) {
    auto r = test::output_in(&*net_.peer, {"timeout", "30", "iperf3", "-u", "-c", kOurIp, "-p", "5211", "-b", "20M",
                                           "-t", "2", "-l", "1200"});
    client = r ? *r : r.message();
  }
  const int status = test::wait_process(pid, {.timeout = 30s});
  const std::string o = test::slurp(out), e = test::slurp(err);
  ASSERT_TRUE(listening) << o << e;
  EXPECT_EQ(status, 0) << o << e;
  EXPECT_NE(client.find("iperf Done."), std::string::npos) << client;
  // The UDP data socket was served by rawpipe (the TCP control connection by the kernel).
  // iperf3 opens the UDP socket more than once (a probe, then the data socket): add them up.
  const std::regex line(R"(udp [0-9.*]+:5211 offloaded: rx (\d+) packets)");
  unsigned long rx = 0;
  for (auto it = std::sregex_iterator(e.begin(), e.end(), line); it != std::sregex_iterator(); ++it)
    rx += std::stoul((*it)[1]);
  EXPECT_GT(rx, 1000u) << o << e;
}

TEST_F(Preload, ExtraApiThroughASocketHoldsAndZeroCopyReceives) {
  const fs::path out = scratch_ / "out", err = scratch_ / "err";
  const fs::path prog = test::build_dir() / "tests" / "preload" / "preload_extra_fd";
  pid_t pid = test::start_process(under_preload("af_packet", {prog.string(), "7112", "200"}), out, err);
  ASSERT_GT(pid, 0);
  const bool ready = wait_for(out, "ready");
  if (ready) {
    for (int i = 0; i < 200; ++i) {
      peer_send(*net_.peer, 7112, "zero copy " + std::to_string(i));
    }
    // offload(fd, 0): the kernel serves it; offload(fd, 1): the ring again.
    if (wait_for(out, "offload off")) peer_send(*net_.peer, 7112, "the kernel's");
    if (wait_for(out, "offload on")) peer_send(*net_.peer, 7112, "the ring's");
  }
  const int status = test::wait_process(pid, {.timeout = 30s});
  const std::string o = test::slurp(out), e = test::slurp(err);
  ASSERT_TRUE(ready) << o << e;
  EXPECT_EQ(status, 0) << o << e;
  EXPECT_TRUE(std::regex_search(o, std::regex(R"(held 100 received 100 kernel-fd-refused 1)"))) << o << e;
  // The packet it freed twice: refused, and said at exit.
  EXPECT_NE(o.find("second free refused 1"), std::string::npos) << o << e;
  EXPECT_NE(e.find("rawpipe-preload: frees refused because the buffer was already free: 1 "), std::string::npos) << e;
  EXPECT_NE(e.find("offloaded on endpoint"), std::string::npos) << e;
  // 100 zero-copy receives of "zero copy N" (11 to 13 bytes each): counted with their bytes.
  EXPECT_TRUE(std::regex_search(e, std::regex(R"(offloaded on endpoint 0: rx 100 packets 1[1-3][0-9][0-9] bytes)"))) << e;
  EXPECT_NE(o.find("offload off\noff got the kernel's\noffload on\non got the ring's\n"), std::string::npos) << o << e;
  // The one read while offload was off came from the kernel side, the other through the ring.
  EXPECT_TRUE(std::regex_search(e, std::regex(R"(udp \*:7112 offloaded: rx \d+ packets \(1 more from the kernel\))"))) << e;
}

// SocketXtreme the VMA way: the ring descriptor after bind, socketxtreme_poll until empty, then
// epoll_wait on the ring descriptor (armed by the empty poll) until the next packet; add_conf_rule
// keeps the next port's socket on the kernel. Datagrams are sent one at a time, each after the
// program has gone back to sleep, so every one of them is a wake-up.
void Preload::socketxtreme_poll_sleeps_on_the_ring_descriptor(const std::string& pmd) {
  const fs::path out = scratch_ / "out", err = scratch_ / "err";
  const fs::path prog = test::build_dir() / "tests" / "preload" / "preload_xtreme_fd";
  pid_t pid = test::start_process(under_preload(pmd, {prog.string(), "7115", "20"}), out, err);
  ASSERT_GT(pid, 0);
  const bool ready = wait_for(out, "ready");
  if (ready)
    for (int i = 0; i < 20; ++i) {
      std::this_thread::sleep_for(20ms);
      peer_send(*net_.peer, 7115, "xtreme " + std::to_string(i));
    }
  const int status = test::wait_process(pid, {.timeout = 30s});
  const std::string o = test::slurp(out), e = test::slurp(err);
  ASSERT_TRUE(ready) << o << e;
  EXPECT_EQ(status, 0) << o << e;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(o, m, std::regex(R"(xtreme received 20 sleeps (\d+) foreign 0 refs 1 bad-rule-refused 1 kernel-socket 1 not-a-ring 1)")))
      << o << e;
  EXPECT_GE(std::stoul(m[1]), 10u) << o;  // it slept between most datagrams
  EXPECT_NE(e.find("udp *:7115 offloaded: rx 20 packets"), std::string::npos) << e;
  EXPECT_NE(e.find("add_conf_rule"), std::string::npos) << e;  // the refused rule, said why
}

TEST_F(Preload, SocketxtremePollSleepsOnTheRingDescriptor) { socketxtreme_poll_sleeps_on_the_ring_descriptor("af_packet"); }
TEST_F(Preload, SocketxtremePollSleepsOnTheRingDescriptorWithoutAnLcore) {
  socketxtreme_poll_sleeps_on_the_ring_descriptor("af_xdp-no-lcore");
}

TEST(PreloadAbsent, SocketApiIsTheKernelsAnswerWithoutTheLibrary) {
  const fs::path prog = test::build_dir() / "tests" / "preload" / "preload_extra_fd";
  const fs::path scratch = fs::temp_directory_path() / ("rawpipe-preload-absent-" + std::to_string(getpid()));
  fs::create_directories(scratch);
  test::ProcessOutput r = test::run_process({prog.string(), "7113", "1"}, scratch, {.timeout = 10s});
  EXPECT_EQ(r.status, 3) << r.out << r.err;
  EXPECT_NE(r.out.find("plain sockets"), std::string::npos) << r.out;
  std::error_code ec;
  fs::remove_all(scratch, ec);
}

// sockperf server under the preload library; ping-pong and under-load from the peer.
class PreloadSockperf : public Preload, public ::testing::WithParamInterface<std::string> {};

TEST_P(PreloadSockperf, ServerIsOffloadedWithoutLoss) {
  if (system("sockperf --version >/dev/null 2>&1") != 0) GTEST_SKIP() << "sockperf is not installed (Debian package sockperf)";
  const fs::path out = scratch_ / "out", err = scratch_ / "err";
  pid_t pid = test::start_process(under_preload(GetParam(), {"sockperf", "server", "-i", kOurIp, "-p", "7007"}), out, err);
  ASSERT_GT(pid, 0);
  // `ip netns exec`, env and rawpipe exec all exec: the pid is sockperf's, and the stats segment
  // of its pipeline is named after it.
  const std::string name = "rawpipe-preload-" + std::to_string(pid);
  bool up = false;
  for (int i = 0; i < 500 && !up && test::slurp(err).find("nothing is offloaded") == std::string::npos; ++i) {
    auto list = test::command_output({test::rawpipe_binary().string(), "stat", "--list"});
    up = list && list->find(name) != std::string::npos;
    if (!up) std::this_thread::sleep_for(20ms);
  }
  std::string pp, ul;
  if (up) {
    auto r = test::output_in(&*net_.peer, {"timeout", "30", "sockperf", "ping-pong", "-i", kOurIp, "-p", "7007", "-t", "2"});
    pp = r ? *r : r.message();
    r = test::output_in(&*net_.peer, {"timeout", "30", "sockperf", "under-load", "-i", kOurIp, "-p", "7007", "-t", "2",
                                      "--mps", "2000"});
    ul = r ? *r : r.message();
  }
  auto stat = test::command_output({test::rawpipe_binary().string(), "stat", "--once", name});
  const std::string stat_text = stat ? *stat : stat.message();
  // The threads of the process: an lcore thread is named rawpipe-lc0.
  std::string threads;
  std::error_code ec;
  for (const auto& task : fs::directory_iterator(fs::path("/proc") / std::to_string(pid) / "task", ec))
    threads += test::slurp(task.path() / "comm");
  kill(pid, SIGINT);
  test::wait_process(pid, {.timeout = 20s});
  const std::string e = test::slurp(err);
  ASSERT_TRUE(up) << "the preloaded sockperf never started a pipeline\n" << test::slurp(out) << e;
  for (const std::string* text : {&pp, &ul}) {
    std::smatch m;
    ASSERT_TRUE(std::regex_search(*text, m, std::regex(R"(SentMessages=(\d+); ReceivedMessages=(\d+))"))) << *text;
    EXPECT_GT(std::stoul(m[1]), 100u) << *text;
    ASSERT_TRUE(std::regex_search(*text, m, std::regex(R"(# dropped messages = (\d+);)"))) << *text;
    EXPECT_EQ(m[1], "0") << *text;
  }
  // The server's socket endpoint delivered the traffic (sockperf's own socket is socket0).
  std::smatch m;
  ASSERT_TRUE(std::regex_search(stat_text, m, std::regex(R"(socket0\s+(\d+))"))) << stat_text;
  EXPECT_GT(std::stoul(m[1]), 100u) << stat_text;
  // Its socket's row: offloaded, with the datagrams it read.
  ASSERT_TRUE(std::regex_search(stat_text, m, std::regex(std::string(R"(\d+ udp\s+)") + kOurIp + R"(:7007\s+yes\s+(\d+))")))
      << stat_text;
  EXPECT_GT(std::stoul(m[1]), 100u) << stat_text;
  ASSERT_FALSE(threads.empty());
  if (GetParam().ends_with("-no-lcore"))
    EXPECT_EQ(threads.find("rawpipe-lc"), std::string::npos) << "an lcore thread runs in no-lcore mode:\n" << threads;
  else
    EXPECT_NE(threads.find("rawpipe-lc0"), std::string::npos) << threads;
}

INSTANTIATE_TEST_SUITE_P(Ports, PreloadSockperf,
                         ::testing::Values("af_packet", "af_xdp", "af_packet-no-lcore", "af_xdp-no-lcore"),
                         [](const auto& info) {
                           std::string name = info.param;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

}  // namespace
}  // namespace rawpipe
