// An ordinary UDP program (plain sockets, no rawpipe header) that the preload tests run under
// librawpipe-preload.so. Each mode prints what happened on stdout; the test reads it.
//
//   selftest PORT            bind *:PORT, send itself a datagram over loopback, receive it
//   epoll PORT1 PORT2        one epoll set: *:PORT1 (offloaded) and 127.0.0.1:PORT2 (kernel);
//                            a blocking epoll_wait wakes for each in turn
//   close-blocked PORT       a thread blocks in recv on *:PORT, another closes the socket
//   fork PORT                bind *:PORT, fork: the child receives one datagram on its copy
//   fork-epoll PORT          bind *:PORT into an epoll set, fork; the parent waits in the set
//                            for *:PORT from 2 s on, the child adds a kernel socket
//                            127.0.0.1:PORT+1 to the inherited set, prints every event it gets
//                            until that one's (sent at 1.5 s), and the CPU time it used meanwhile
//   poll PORT                bind *:PORT; poll and select on it wake for one datagram each
//   echo6 PORT COUNT         a dual-stack IPv6 socket on [::]:PORT echoes COUNT datagrams
//   connected PORT IP PEER   bind *:PORT, connect to IP:PEER; print the first two datagrams received
//   connect-late PORT IP PEER  bind *:PORT, print "bound", connect to IP:PEER 500 ms later, print
//                            "connected"; print the first two datagrams received
//   shared PORT IP PEER      two sockets on *:PORT (SO_REUSEADDR): a listener, and one connected to
//                            IP:PEER; after 4 datagrams, what each received
//   any-path PORT N MODE     bind *:PORT; receive N datagrams, sleeping in recv, poll or epoll_wait
//                            (MODE) before each; print each
//   backlog PORT             bind *:PORT, print "ready", sleep 1 s, then read until "last": print
//                            after how many datagrams "local" came and how many there were
//   stat PORT                *:PORT (offloaded), 127.0.0.1:PORT+1 and *:PORT+2 (kernel), one
//                            socket never bound; reads *:PORT: "pause" stops reading for 2 s,
//                            "sync" prints how many datagrams it read, "stop" ends
//   mmsg PORT [waitforone]   recvmmsg on *:PORT: MSG_WAITFORONE until 3 datagrams came (only that
//                            with `waitforone`), a timeout with nothing coming, then a timeout
//                            that ends a batch of 2
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <chrono>
#include <string>
#include <thread>

namespace {

// reuse: SO_REUSEADDR first, so that another socket can share the port.
int bound(const char* ip, int port, bool reuse = false) {
  int fd = socket(AF_INET, SOCK_DGRAM, 0);
  const int one = 1;
  if (reuse) setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, ip, &a.sin_addr);
  if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    printf("bind %s:%d failed: %s\n", ip, port, strerror(errno));
    exit(2);
  }
  return fd;
}

void send_to(const char* ip, int port, const char* text) {
  int fd = socket(AF_INET, SOCK_DGRAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, ip, &a.sin_addr);
  sendto(fd, text, strlen(text), 0, reinterpret_cast<sockaddr*>(&a), sizeof a);
  close(fd);
}

void say(const std::string& line) {
  printf("%s\n", line.c_str());
  fflush(stdout);
}

// Adds fd to the epoll set ep for input, with `data` as its epoll data.
void watch(int ep, int fd, std::uint64_t data) {
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = data;
  epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
}

int selftest(int port) {
  int fd = bound("0.0.0.0", port);
  timeval tv{5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  send_to("127.0.0.1", port, "loopback hello");
  char buf[64] = {};
  ssize_t n = recv(fd, buf, sizeof buf - 1, 0);
  say(n > 0 ? std::string("selftest got ") + buf : std::string("selftest failed: ") + strerror(errno));
  close(fd);
  return n > 0 ? 0 : 1;
}

int epoll_mixed(int port1, int port2) {
  int off = bound("0.0.0.0", port1);
  int ker = bound("127.0.0.1", port2);
  int ep = epoll_create1(0);
  watch(ep, off, 111);
  watch(ep, ker, 222);
  std::thread later([port2] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    send_to("127.0.0.1", port2, "kernel datagram");
  });
  char buf[128];
  for (int round = 0; round < 2; ++round) {
    if (round == 1) say("waiting offloaded");
    epoll_event got[4];
    int n = epoll_wait(ep, got, 4, 8000);
    if (n != 1) {
      say("epoll_wait returned " + std::to_string(n));
      if (round == 0) later.join();
      return 1;
    }
    int fd = got[0].data.u64 == 111 ? off : got[0].data.u64 == 222 ? ker : -1;
    ssize_t r = fd < 0 ? -1 : recv(fd, buf, sizeof buf - 1, MSG_DONTWAIT);
    buf[r > 0 ? r : 0] = 0;
    say(std::string("woke ") + (fd == off ? "offloaded" : fd == ker ? "kernel" : "unknown") + " " + buf);
    if (round == 0) later.join();
  }
  // Both drained: a short wait must time out, not report a stale wake.
  epoll_event got[4];
  say("then " + std::to_string(epoll_wait(ep, got, 4, 200)));
  close(ep);
  close(off);
  close(ker);
  return 0;
}

int close_blocked(int port) {
  int fd = bound("0.0.0.0", port);
  std::atomic<int> result{0}, err{0};
  std::atomic<bool> done{false};
  std::thread reader([&] {
    char buf[64];
    result = static_cast<int>(recv(fd, buf, sizeof buf, 0));
    err = errno;
    done = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  close(fd);
  for (int i = 0; i < 300 && !done; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  if (!done) {
    say("recv still blocked 3 s after close");
    reader.detach();
    _exit(1);
  }
  reader.join();
  say("recv returned " + std::to_string(result.load()) + " " + strerror(err.load()));
  return 0;
}

int fork_child(int port) {
  int fd = bound("0.0.0.0", port);
  say("ready");
  pid_t pid = fork();
  if (pid == 0) {
    timeval tv{8, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    char buf[64] = {};
    ssize_t n = recv(fd, buf, sizeof buf - 1, 0);
    say(n > 0 ? std::string("child got ") + buf : std::string("child recv failed: ") + strerror(errno));
    _exit(n > 0 ? 0 : 1);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  close(fd);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

int fork_epoll(int port) {
  int off = bound("0.0.0.0", port);
  int ep = epoll_create1(0);
  watch(ep, off, 111);
  pid_t pid = fork();
  if (pid == 0) {
    int k = bound("127.0.0.1", port + 1);
    watch(ep, k, 222);
    say("child ready");
    const auto start = std::chrono::steady_clock::now();
    // While the parent leaves its datagram unread, its record in the shared set stays ready.
    const auto cpu_ms = [] {
      rusage u{};
      getrusage(RUSAGE_SELF, &u);
      return (u.ru_utime.tv_sec + u.ru_stime.tv_sec) * 1000 + (u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1000;
    };
    const long cpu_start = cpu_ms();
    bool sent = false;
    while (std::chrono::steady_clock::now() - start < std::chrono::seconds(5)) {
      // Its own datagram once the parent's has had time to arrive and wake the shared set.
      if (!sent && std::chrono::steady_clock::now() - start > std::chrono::milliseconds(1500)) {
        send_to("127.0.0.1", port + 1, "loop");
        sent = true;
      }
      epoll_event got[4];
      const int n = epoll_wait(ep, got, 4, 100);
      for (int i = 0; i < n; ++i) {
        say("child event " + std::to_string(got[i].data.u64));
        if (got[i].data.u64 == 222) {
          const auto wall = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start);
          say("child cpu " + std::to_string(cpu_ms() - cpu_start) + " ms of " + std::to_string(wall.count()) + " ms");
          _exit(0);
        }
      }
    }
    _exit(1);
  }
  char buf[64] = {};
  std::this_thread::sleep_for(std::chrono::seconds(2));
  for (int round = 0; round < 50; ++round) {
    epoll_event got[4];
    const int n = epoll_wait(ep, got, 4, 100);
    bool mine = false;
    for (int i = 0; i < n; ++i) mine |= got[i].data.u64 == 111;
    if (mine && recv(off, buf, sizeof buf - 1, MSG_DONTWAIT) > 0) break;
  }
  say(std::string("parent got ") + buf);
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

int poll_select(int port) {
  int fd = bound("0.0.0.0", port);
  say("ready");
  char buf[64];
  pollfd p{fd, POLLIN, 0};
  int n = poll(&p, 1, 8000);
  ssize_t r = n == 1 ? recv(fd, buf, sizeof buf - 1, MSG_DONTWAIT) : -1;
  buf[r > 0 ? r : 0] = 0;
  say("poll " + std::to_string(n) + " " + buf);
  fd_set rd;
  FD_ZERO(&rd);
  FD_SET(fd, &rd);
  timeval tv{8, 0};
  n = select(fd + 1, &rd, nullptr, nullptr, &tv);
  r = n == 1 && FD_ISSET(fd, &rd) ? recv(fd, buf, sizeof buf - 1, MSG_DONTWAIT) : -1;
  buf[r > 0 ? r : 0] = 0;
  say("select " + std::to_string(n) + " " + buf);
  close(fd);
  return 0;
}

int echo6(int port, int count) {
  int fd = socket(AF_INET6, SOCK_DGRAM, 0);
  int off = 0;
  setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof off);
  sockaddr_in6 a{};
  a.sin6_family = AF_INET6;
  a.sin6_port = htons(static_cast<uint16_t>(port));
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    say(std::string("bind failed: ") + strerror(errno));
    return 2;
  }
  say("ready");
  timeval tv{8, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  for (int i = 0; i < count; ++i) {
    char buf[256];
    sockaddr_in6 from{};
    socklen_t len = sizeof from;
    ssize_t n = recvfrom(fd, buf, sizeof buf, 0, reinterpret_cast<sockaddr*>(&from), &len);
    if (n < 0) {
      say(std::string("recvfrom failed: ") + strerror(errno));
      return 1;
    }
    char host[INET6_ADDRSTRLEN];
    inet_ntop(AF_INET6, &from.sin6_addr, host, sizeof host);
    say(std::string("from ") + host);
    sendto(fd, buf, static_cast<size_t>(n), 0, reinterpret_cast<sockaddr*>(&from), len);
  }
  close(fd);
  return 0;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

int mmsg(int port, bool waitforone_only) {
  int fd = bound("0.0.0.0", port);
  char bufs[8][64];
  iovec iov[8];
  mmsghdr msgs[8];
  auto reset = [&] {
    for (int i = 0; i < 8; ++i) {
      iov[i] = {bufs[i], sizeof bufs[i]};
      msgs[i] = {};
      msgs[i].msg_hdr.msg_iov = &iov[i];
      msgs[i].msg_hdr.msg_iovlen = 1;
    }
  };
  say("ready");
  int got = 0;
  bool written_back = true;
  while (got < 3) {
    reset();
    timespec limit{5, 0};
    const int n = recvmmsg(fd, msgs, 8, MSG_WAITFORONE, &limit);
    if (n <= 0) {
      say(std::string("waitforone failed: ") + strerror(errno));
      return 1;
    }
    got += n;
    written_back &= limit.tv_sec < 5;  // the time left, written back on success
  }
  say("waitforone got " + std::to_string(got) + (written_back ? " timeout written back" : " timeout untouched"));
  if (waitforone_only) {
    close(fd);
    return 0;
  }
  reset();
  timespec t{0, 200000000};
  auto t0 = std::chrono::steady_clock::now();
  int n = recvmmsg(fd, msgs, 8, 0, &t);
  const int err = errno;
  say("quiet " + std::to_string(n) + " " + (n < 0 ? strerror(err) : "") + (seconds_since(t0) >= 0.19 ? " waited" : " early") +
      (t.tv_sec == 0 && t.tv_nsec == 200000000 ? " timeout untouched" : " timeout changed"));
  say("send two");
  reset();
  t = {2, 0};
  t0 = std::chrono::steady_clock::now();
  n = recvmmsg(fd, msgs, 8, 0, &t);
  const double took = seconds_since(t0);
  say("bounded " + std::to_string(n) + " " + std::string(bufs[0], n > 0 ? msgs[0].msg_len : 0) + "," +
      std::string(bufs[1], n > 1 ? msgs[1].msg_len : 0) + (took >= 1.9 ? " waited" : " early") +
      (t.tv_sec == 0 && t.tv_nsec < 100000000 ? " left 0" : " left more"));
  close(fd);
  return 0;
}

// late: "bound" first, the connect 500 ms later, then "connected" (else "ready" after it).
int connected(int port, const char* ip, int peer_port, bool late) {
  int fd = bound("0.0.0.0", port);
  if (late) {
    say("bound");
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  sockaddr_in peer{};
  peer.sin_family = AF_INET;
  peer.sin_port = htons(static_cast<uint16_t>(peer_port));
  inet_pton(AF_INET, ip, &peer.sin_addr);
  if (connect(fd, reinterpret_cast<sockaddr*>(&peer), sizeof peer) != 0) {
    say(std::string("connect failed: ") + strerror(errno));
    return 2;
  }
  timeval tv{2, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  say(late ? "connected" : "ready");
  for (int i = 0; i < 2; ++i) {
    char buf[64] = {};
    const ssize_t n = recv(fd, buf, sizeof buf - 1, 0);
    say(n >= 0 ? std::string("got ") + buf : std::string("recv: ") + strerror(errno));
  }
  close(fd);
  return 0;
}

int shared_port(int port, const char* ip, int peer_port) {
  int fds[2] = {bound("0.0.0.0", port, true), bound("0.0.0.0", port, true)};
  sockaddr_in peer{};
  peer.sin_family = AF_INET;
  peer.sin_port = htons(static_cast<uint16_t>(peer_port));
  inet_pton(AF_INET, ip, &peer.sin_addr);
  if (connect(fds[1], reinterpret_cast<sockaddr*>(&peer), sizeof peer) != 0) {
    say(std::string("connect failed: ") + strerror(errno));
    return 2;
  }
  say("ready");
  std::string got[2];
  for (int n = 0; n < 4;) {
    pollfd p[2] = {{fds[0], POLLIN, 0}, {fds[1], POLLIN, 0}};
    if (poll(p, 2, 3000) <= 0) break;
    for (int i = 0; i < 2; ++i) {
      if (!(p[i].revents & POLLIN)) continue;
      char buf[64] = {};
      if (recv(fds[i], buf, sizeof buf - 1, MSG_DONTWAIT) < 0) continue;
      got[i] += std::string(got[i].empty() ? "" : ",") + buf;
      ++n;
    }
  }
  say("listener: " + got[0]);
  say("connected: " + got[1]);
  close(fds[0]);
  close(fds[1]);
  return 0;
}

int any_path(int port, int count, const std::string& how) {
  int fd = bound("0.0.0.0", port);
  int ep = epoll_create1(0);
  watch(ep, fd, 7);
  say("ready");
  for (int i = 0; i < count; ++i) {
    if (how == "poll") {
      pollfd p{fd, POLLIN, 0};
      if (poll(&p, 1, 8000) != 1 || !(p.revents & POLLIN)) return say("poll woke for nothing"), 1;
    } else if (how == "epoll") {
      epoll_event got{};
      if (epoll_wait(ep, &got, 1, 8000) != 1 || got.data.u64 != 7) return say("epoll_wait woke for nothing"), 1;
    }
    char buf[64] = {};
    const ssize_t n = recv(fd, buf, sizeof buf - 1, how == "recv" ? 0 : MSG_DONTWAIT);
    say(n >= 0 ? std::string("got ") + buf : std::string("recv: ") + strerror(errno));
  }
  // Nothing more: no datagram was received twice.
  char buf[64];
  say("then " + std::to_string(recv(fd, buf, sizeof buf, MSG_DONTWAIT)));
  close(ep);
  close(fd);
  return 0;
}

int backlog(int port) {
  int fd = bound("0.0.0.0", port);
  say("ready");
  std::this_thread::sleep_for(std::chrono::seconds(1));
  int local_at = -1, count = 0;
  for (;;) {
    char buf[64] = {};
    if (recv(fd, buf, sizeof buf - 1, 0) < 0) return say(std::string("recv: ") + strerror(errno)), 1;
    ++count;
    if (strcmp(buf, "local") == 0) local_at = count;
    if (strcmp(buf, "last") == 0) break;
  }
  say("local at " + std::to_string(local_at) + " of " + std::to_string(count));
  close(fd);
  return 0;
}

int stat_sockets(int port) {
  int off = bound("0.0.0.0", port);
  int loop = bound("127.0.0.1", port + 1);
  int os = bound("0.0.0.0", port + 2);
  int unbound = socket(AF_INET, SOCK_DGRAM, 0);
  say("ready");
  char buf[64];
  long count = 0;
  for (;;) {
    const ssize_t n = recv(off, buf, sizeof buf - 1, 0);
    if (n < 0) {
      say(std::string("recv: ") + strerror(errno));
      return 1;
    }
    buf[n] = 0;
    ++count;
    if (strcmp(buf, "stop") == 0) break;
    if (strcmp(buf, "pause") == 0) {
      say("paused");
      std::this_thread::sleep_for(std::chrono::seconds(2));
      say("resumed");
    }
    if (strcmp(buf, "sync") == 0) say("count " + std::to_string(count));
  }
  for (int fd : {off, loop, os, unbound}) close(fd);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  const int a = argc > 2 ? atoi(argv[2]) : 0;
  const int b = argc > 3 ? atoi(argv[3]) : 0;
  if (mode == "selftest") return selftest(a);
  if (mode == "epoll") return epoll_mixed(a, b);
  if (mode == "close-blocked") return close_blocked(a);
  if (mode == "fork") return fork_child(a);
  if (mode == "fork-epoll") return fork_epoll(a);
  if (mode == "poll") return poll_select(a);
  if (mode == "echo6") return echo6(a, b);
  if (mode == "connect-late" && argc > 4) return connected(a, argv[3], atoi(argv[4]), true);
  if (mode == "shared" && argc > 4) return shared_port(a, argv[3], atoi(argv[4]));
  if (mode == "any-path" && argc > 4) return any_path(a, b, argv[4]);
  if (mode == "backlog") return backlog(a);
  if (mode == "stat") return stat_sockets(a);
  if (mode == "mmsg") return mmsg(a, argc > 3 && std::string(argv[3]) == "waitforone");
  if (mode == "connected" && argc > 4) return connected(a, argv[3], atoi(argv[4]), false);
  fprintf(stderr, "usage: preload_udp_app selftest|epoll|close-blocked|fork|poll|echo6|connected|stat|mmsg PORT ...\n");
  return 2;
}
