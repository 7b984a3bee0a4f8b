#include "preload/runtime.hh"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include "preload/copy_interfaces.hh"
#include "preload/kernel_only_stats.hh"
#include "preload/kernel_side.hh"
#include "preload/libc.hh"
#include "preload/rules.hh"
#include "preload/socket_stats.hh"
#include "preload/wait.hh"

namespace rawpipe::preload {
namespace {

enum class State { kUnstarted, kRunning, kKernelOnly };

struct Control {
  std::mutex mu;  // control path only: bind, close, joins, epoll_ctl of offloaded sockets
  State state = State::kUnstarted;
  std::vector<OffloadRule> rules;
  bool rules_loaded = false;
  std::string interface;                 // RAWPIPE_INTERFACE (empty with a config file)
  // Which ports' datagrams the kernel also receives (preload/kernel_side.hh); known: every port's
  // driver says whether it does.
  bool kernel_side_known = false;
  CopyInterfaces copies;
  std::vector<rawpipe_addr> if_addrs;    // its addresses: binds to others stay on the kernel
  bool forked_child = false;
};

Control& control() {
  static Control* c = new Control;  // lives for the process: calls arrive during exit
  return *c;
}

Runtime g_runtime;
std::atomic<Runtime*> g_running{nullptr};
std::atomic<Runtime*> g_inherited{nullptr};  // in a forked child: the parent's, see inherited()
__attribute__((tls_model("initial-exec"))) thread_local bool t_inside = false;

void note(const std::string& line) {
  const std::string out = "rawpipe-preload: " + line + "\n";
  (void)!libc().write(2, out.data(), out.size());
}

// The process stays on the kernel for good: the line on stderr says why, and so does the stats
// segment `rawpipe stat` reads.
void kernel_only(const std::string& line) {
  note(line);
  publish_kernel_only(line);
}

}  // namespace

std::string addr_text(const rawpipe_addr& a) {
  char buf[INET6_ADDRSTRLEN] = "?";
  if (a.family == 4) inet_ntop(AF_INET, a.addr, buf, sizeof buf);
  if (a.family == 6) inet_ntop(AF_INET6, a.addr, buf, sizeof buf);
  const bool any4 = a.family == 4 && std::memcmp(a.addr, "\0\0\0\0", 4) == 0;
  const bool any6 = a.family == 6 && std::all_of(a.addr, a.addr + 16, [](std::uint8_t b) { return b == 0; });
  std::string host = a.family == 6 ? (any6 ? "*" : std::string("[") + buf + "]") : (any4 ? "*" : buf);
  return host + std::string(":") + std::to_string(a.port);
}

namespace {

bool is_multicast(const rawpipe_addr& a) {
  return (a.family == 4 && (a.addr[0] & 0xf0) == 0xe0) || (a.family == 6 && a.addr[0] == 0xff);
}
bool is_wildcard(const rawpipe_addr& a) {
  const unsigned n = a.family == 4 ? 4 : 16;
  for (unsigned i = 0; i < n; ++i)
    if (a.addr[i]) return false;
  return true;
}
bool is_loopback(const rawpipe_addr& a) {
  if (a.family == 4) return a.addr[0] == 127;
  static const std::uint8_t one[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
  return std::memcmp(a.addr, one, 16) == 0;
}

void load_rules(Control& c) {
  if (c.rules_loaded) return;
  c.rules_loaded = true;
  std::string error;
  if (const char* env = std::getenv("RAWPIPE_OFFLOAD"); env && *env) {
    if (!parse_offload_rules(env, &c.rules, &error)) {
      kernel_only("RAWPIPE_OFFLOAD: " + error + "; nothing is offloaded");
      c.state = State::kKernelOnly;
      return;
    }
  }
  if (const char* file = std::getenv("RAWPIPE_OFFLOAD_FILE"); file && *file) {
    std::ifstream in(file);
    if (!in) {
      kernel_only(std::string("RAWPIPE_OFFLOAD_FILE: cannot read ") + file + ": " + std::strerror(errno) +
           "; nothing is offloaded");
      c.state = State::kKernelOnly;
      return;
    }
    std::stringstream text;
    text << in.rdbuf();
    if (!parse_offload_rules(text.str(), &c.rules, &error)) {
      kernel_only(std::string(file) + ": " + error + "; nothing is offloaded");
      c.state = State::kKernelOnly;
    }
  }
}

std::vector<rawpipe_addr> interface_addresses(const std::string& name) {
  std::vector<rawpipe_addr> out;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return out;
  for (ifaddrs* i = list; i; i = i->ifa_next) {
    if (!i->ifa_addr || name != i->ifa_name) continue;
    rawpipe_addr a{};
    if (i->ifa_addr->sa_family == AF_INET) {
      a.family = 4;
      std::memcpy(a.addr, &reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr, 4);
    } else if (i->ifa_addr->sa_family == AF_INET6) {
      const auto* s6 = reinterpret_cast<sockaddr_in6*>(i->ifa_addr);
      if (IN6_IS_ADDR_LINKLOCAL(&s6->sin6_addr)) continue;  // needs a scope the port does not take
      a.family = 6;
      std::memcpy(a.addr, &s6->sin6_addr, 16);
    } else {
      continue;
    }
    out.push_back(a);
  }
  freeifaddrs(list);
  return out;
}

unsigned slot_count() {
  const char* env = std::getenv("RAWPIPE_SOCKETS");
  long n = env ? std::strtol(env, nullptr, 10) : 16;
  if (n < 1) n = 1;
  if (n > static_cast<long>(kMaxSlots)) n = kMaxSlots;
  return static_cast<unsigned>(n);
}

// The config the pipeline is created from, with the socket endpoints appended.
bool build_config(Control& c, std::string* text, std::string* why) {
  const char* config = std::getenv("RAWPIPE_CONFIG");
  const char* ifname = std::getenv("RAWPIPE_INTERFACE");
  if (config && *config) {
    std::ifstream in(config);
    if (!in) {
      *why = std::string("cannot read RAWPIPE_CONFIG ") + config + ": " + std::strerror(errno);
      return false;
    }
    std::stringstream s;
    s << in.rdbuf();
    *text = s.str() + "\n";
    c.kernel_side_known = copy_interfaces(*text, &c.copies);
  } else if (ifname && *ifname) {
    bool no_lcore = false;
    if (const char* lcore = std::getenv("RAWPIPE_LCORE"); lcore && *lcore) {
      no_lcore = std::strcmp(lcore, "none") == 0;
      if (!no_lcore && std::strcmp(lcore, "thread") != 0) {
        *why = std::string("RAWPIPE_LCORE is \"") + lcore + "\"; expected \"thread\" (one lcore thread polls the port) or "
               "\"none\" (the application's threads poll it while they wait)";
        return false;
      }
    }
    c.interface = ifname;
    if (if_nametoindex(ifname) == 0) {
      *why = std::string("RAWPIPE_INTERFACE ") + ifname + " is not an interface here";
      return false;
    }
    c.if_addrs = interface_addresses(c.interface);
    // The interface's addresses become the port's own (its ARP/ND answers, sendto's source and
    // neighbour cache) only on af_packet, where the pipeline sees every frame beside the kernel.
    // af_xdp (and auto, which may pick it) steers only the sockets' traffic and leaves ARP/ND to
    // the kernel: there sends go out through each socket's kernel twin.
    const std::string pmd = std::getenv("RAWPIPE_PMD") ? std::getenv("RAWPIPE_PMD") : "auto";
    c.kernel_side_known = true;
    if (pmd != "af_xdp") c.copies = {1, {static_cast<int>(if_nametoindex(ifname))}};
    std::string addrs;
    for (const rawpipe_addr& a : c.if_addrs) {
      char buf[INET6_ADDRSTRLEN];
      inet_ntop(a.family == 4 ? AF_INET : AF_INET6, a.addr, buf, sizeof buf);
      addrs += std::string(addrs.empty() ? "" : ", ") + "\"" + buf + "\"";
    }
    // Every socket's ring can fill with the pool still holding buffers for the rest: a socket
    // whose application stops reading loses its own datagrams (ring_full, counted against it),
    // not the port's receive buffers, which would stall every other socket.
    const unsigned pool = 2048 + kSocketRingSize * slot_count();
    *text = "[run]\nduration = 0\ndefault_action = \"drop\"\ndrop_privileges = false\n"
            "[[pools]]\nname = \"rx\"\ncount = " + std::to_string(pool) + "\n"
            "[[ports]]\nname = \"p0\"\npmd = \"" +
            pmd + "\"\ninterface = \"" + c.interface + "\"\n" + (addrs.empty() || pmd != "af_packet" ? "" : "addresses = [" + addrs + "]\n") +
            // TPACKET_V2 hands frames over one at a time: V3's block timeout would add its
            // latency to every datagram of a ping-pong.
            (pmd == "af_packet" ? "tpacket_version = 2\n" : "") + "[[lcores]]\nrx = [\"p0:0\"]\n" +
            (no_lcore ? "thread = false\n" : "");
  } else {
    *why = "neither RAWPIPE_INTERFACE nor RAWPIPE_CONFIG is set (rawpipe exec --interface IF or --config FILE)";
    return false;
  }
  const unsigned n = slot_count();
  for (unsigned i = 0; i < n; ++i)
    // An endpoint needs a rule; this one names a 5-tuple no host sends (source 0.0.0.0:0 to
    // 0.0.0.0:0), so the endpoint receives nothing until bind adds the socket's rule.
    *text += std::string("[[endpoints]]\nname = \"socket") + std::to_string(i) +
             "\"\naction = \"ring\"\nring_size = " + std::to_string(kSocketRingSize) +
             "\nmatch = [\"udp dst 0.0.0.0:0 src 0.0.0.0:0\"]\n";
  return true;
}

void summary(const Slot& s) {
  const std::uint64_t ring_full = ring_full_since_bind(s, endpoint_figures(g_runtime, s.endpoint));
  note(std::string("fd ") + std::to_string(s.first_fd) + std::string(" udp ") + addr_text(s.local) +
       std::string(" offloaded: rx ") + std::to_string(s.rx_packets.load()) + std::string(" packets") +
       (s.rx_kernel.load() ? " (" + std::to_string(s.rx_kernel.load()) + " more from the kernel)" : std::string()) +
       std::string(", tx ") +
       std::to_string(s.tx_packets.load()) + std::string(" (") + std::to_string(s.tx_kernel.load()) +
       " more through the kernel), endpoint socket" + std::to_string(&s - g_runtime.slots) +
       (s.rx_not_peer.load() ? "; " + std::to_string(s.rx_not_peer.load()) + " not from the connected peer dropped" : "") +
       (ring_full ? "; " + std::to_string(ring_full) + " lost: its ring was full (the application did not keep up)" : ""));
}

void shutdown_at_exit() {
  Runtime* rt = g_running.exchange(nullptr);
  if (!rt) return;
  for (unsigned i = 0; i < rt->n_slots; ++i) {
    Slot& s = rt->slots[i];
    if (s.in_use.load()) summary(s);
  }
  // Stops the lcores, detaches the port and removes the stats segment; buffers an application
  // thread still holds stay valid (destroy keeps their pools).
  t_inside = true;
  rt->api->destroy(rt->pipeline);
  t_inside = false;
  // A buffer freed while already free (refused, so the pool stays whole) means a packet was
  // handed out twice somewhere: said once here, after the drain at destroy, where a user sees it.
  rawpipe_api_counters c{};
  c.size = sizeof c;
  if (rt->api->api_counters && rt->api->api_counters(&c) == 0 && c.free_already_free)
    note("frees refused because the buffer was already free: " + std::to_string(c.free_already_free) +
         " (the application's zero-copy calls or the library freed a packet twice)");
}

// Starts the pipeline; on failure the process stays on the kernel (one line says why).
bool start_locked(Control& c) {
  if (c.state == State::kRunning) return true;
  if (c.state == State::kKernelOnly) return false;
  c.state = State::kKernelOnly;
  std::string text, why;
  if (!build_config(c, &text, &why)) {
    kernel_only("nothing is offloaded: " + why + "; every socket is the kernel's");
    return false;
  }
  const rawpipe_api_t* api = rawpipe_get_api(RAWPIPE_EXTRA_ABI_VERSION);
  if (!api || !(api->caps & RAWPIPE_CAP_WAIT) || !(api->caps & RAWPIPE_CAP_SEND)) {
    kernel_only(std::string("nothing is offloaded: ") + (api ? "the library lacks waiting or sending" : rawpipe_api_error()) +
         "; every socket is the kernel's");
    return false;
  }
  // A file named after the process: the stats segment (rawpipe stat) takes the config's stem.
  char path[96];
  std::snprintf(path, sizeof path, "/tmp/rawpipe-preload-%d.toml", static_cast<int>(getpid()));
  {
    std::ofstream out(path, std::ios::trunc);
    out << text;
    if (!out) {
      kernel_only(std::string("nothing is offloaded: cannot write ") + path + "; every socket is the kernel's");
      return false;
    }
  }
  t_inside = true;
  rawpipe_pipeline* p = api->create(path);
  std::string error = p ? "" : api->last_error(nullptr);
  ::unlink(path);
  if (p && api->start(p) != 0) {
    error = api->last_error(p);
    api->destroy(p);
    p = nullptr;
  }
  t_inside = false;
  if (!p) {
    kernel_only("nothing is offloaded: the pipeline did not start: " + error + "; every socket is the kernel's");
    return false;
  }
  Runtime& rt = g_runtime;
  rt.api = api;
  rt.pipeline = p;
  if (const char* port = std::getenv("RAWPIPE_PORT"); port && *port) {
    const int id = api->port_id(p, port);
    rt.port = id < 0 ? 0 : static_cast<std::uint16_t>(id);
  }
  const unsigned n = slot_count();
  for (unsigned i = 0; i < n; ++i) {
    Slot& s = rt.slots[i];
    const int ep = api->endpoint_id(p, (std::string("socket") + std::to_string(i)).c_str());
    const int fd = ep < 0 ? -1 : api->endpoint_fd(p, static_cast<std::uint16_t>(ep));
    if (fd < 0) {
      const std::string why = std::string("nothing is offloaded: endpoint socket") + std::to_string(i) + ": " +
                              api->last_error(p);
      // The pipeline's segment has this process's path: gone before the kernel-only one is made.
      api->destroy(p);
      kernel_only(why);
      return false;
    }
    s.endpoint = static_cast<std::uint16_t>(ep);
    s.wake_fd = fd;
  }
  rt.n_slots = n;
  rt.read_kernel = c.kernel_side_known;
  rt.copies = c.copies;
  if (api->caps & RAWPIPE_CAP_PROGRESS) {
    // Threadless lcores give their queues' descriptors (0: every lcore has a thread).
    const int q = api->progress_fds(p, rt.queue_fds, kMaxQueueFds);
    rt.drive = q != 0;
    rt.n_queue_fds = q > kMaxQueueFds ? -1 : q;
    if (q < 0) note(std::string("no lcore: ") + api->last_error(p) + "; waiting threads wake every millisecond to poll");
  }
  for (unsigned i = 0; i < n; ++i) {
    Slot& s = rt.slots[i];
    s.ring_fd = s.wake_fd;
    if (!rt.drive || rt.n_queue_fds <= 0) continue;
    const int ep = libc().epoll_create1(EPOLL_CLOEXEC);
    if (ep < 0) continue;  // the socket's ring descriptor stays its eventfd
    epoll_event ev{};
    ev.events = EPOLLIN;
    bool ok = libc().epoll_ctl(ep, EPOLL_CTL_ADD, s.wake_fd, &ev) == 0;
    for (int q = 0; ok && q < rt.n_queue_fds; ++q) ok = libc().epoll_ctl(ep, EPOLL_CTL_ADD, rt.queue_fds[q], &ev) == 0;
    if (ok) s.ring_fd = ep;
    else libc().close(ep);
  }
  publish_sockets(rt);
  c.state = State::kRunning;
  g_running.store(&rt, std::memory_order_release);
  std::atexit(shutdown_at_exit);
  return true;
}

// "udp dst DST[ src PEER]" for the slot's socket: a connected socket's rules name its peer, so
// that, as in the kernel's socket lookup, its peer's datagrams go to it and everyone else's to
// another socket on the port (a more specific rule wins, docs/rules.md).
std::string rule_text(const Runtime& rt, const Slot& s, const rawpipe_addr& dst, const rawpipe_addr* peer) {
  std::string rule = std::string("socket") + std::to_string(&s - rt.slots) + ": udp dst ";
  char buf[INET6_ADDRSTRLEN];
  if (is_wildcard(dst)) {
    // A dual-stack IPv6 socket also takes IPv4; an IPv4 one only IPv4.
    rule += s.family == AF_INET ? "0.0.0.0/0" : "*";
  } else if (dst.family == 4) {
    inet_ntop(AF_INET, dst.addr, buf, sizeof buf);
    rule += buf;
  } else {
    inet_ntop(AF_INET6, dst.addr, buf, sizeof buf);
    rule += std::string("[") + buf + "]";
  }
  rule += std::string(":") + std::to_string(dst.port);
  if (peer) rule += " src " + addr_text(*peer);
  return rule;
}

long add_rule_text(Runtime& rt, const std::string& rule, std::string* error) {
  t_inside = true;
  const long id = rt.api->add_conf_rule(rt.pipeline, rule.c_str());
  t_inside = false;
  if (id <= 0) *error = rt.api->last_error(rt.pipeline);
  return id;
}

bool add_rule_locked(Runtime& rt, Slot& s, const rawpipe_addr& dst, std::string* error) {
  if (s.n_rules == kMaxRules) {
    *error = std::string("more than ") + std::to_string(kMaxRules) + " addresses on one socket";
    return false;
  }
  const bool connected = s.connected.load(std::memory_order_relaxed);
  const long id = add_rule_text(rt, rule_text(rt, s, dst, connected ? &s.peer : nullptr), error);
  if (id <= 0) return false;
  s.rules[s.n_rules] = id;
  s.rule_groups[s.n_rules] = dst;
  ++s.n_rules;
  return true;
}

}  // namespace

Runtime* running() { return g_running.load(std::memory_order_acquire); }
Runtime* inherited() { return g_inherited.load(std::memory_order_relaxed); }

std::unique_lock<std::mutex> try_control_lock() { return std::unique_lock(control().mu, std::try_to_lock); }

bool add_offload_rule(const char* line, std::string* error) {
  OffloadRule rule;
  if (!line || !parse_offload_rule(line, &rule, error)) {
    if (!line) *error = "the rule is NULL";
    return false;
  }
  Control& c = control();
  std::lock_guard lock(c.mu);
  load_rules(c);  // the environment's rules first, so that this one goes above them
  c.rules.insert(c.rules.begin(), std::move(rule));
  return true;
}
bool inside() { return t_inside; }

long spin_ns() {
  static const long ns = [] {
    const char* env = std::getenv("RAWPIPE_SPIN_US");
    long us = env ? std::strtol(env, nullptr, 10) : 100;
    return us < 0 ? 0 : us * 1000;
  }();
  return ns;
}

bool to_rawpipe_addr(const sockaddr* sa, socklen_t len, rawpipe_addr* out) {
  *out = rawpipe_addr{};
  if (!sa) return false;
  if (sa->sa_family == AF_INET && len >= sizeof(sockaddr_in)) {
    sockaddr_in in;
    std::memcpy(&in, sa, sizeof in);
    out->family = 4;
    out->port = ntohs(in.sin_port);
    std::memcpy(out->addr, &in.sin_addr, 4);
    return true;
  }
  if (sa->sa_family == AF_INET6 && len >= sizeof(sockaddr_in6)) {
    sockaddr_in6 in6;
    std::memcpy(&in6, sa, sizeof in6);
    out->port = ntohs(in6.sin6_port);
    if (IN6_IS_ADDR_V4MAPPED(&in6.sin6_addr)) {
      out->family = 4;
      std::memcpy(out->addr, &in6.sin6_addr.s6_addr[12], 4);
    } else {
      out->family = 6;
      std::memcpy(out->addr, &in6.sin6_addr, 16);
    }
    return true;
  }
  return false;
}

socklen_t to_sockaddr(const rawpipe_addr& a, int socket_family, sockaddr_storage* out) {
  std::memset(out, 0, sizeof *out);
  if (socket_family == AF_INET6) {
    sockaddr_in6 in6{};
    in6.sin6_family = AF_INET6;
    in6.sin6_port = htons(a.port);
    if (a.family == 4) {
      in6.sin6_addr.s6_addr[10] = 0xff;
      in6.sin6_addr.s6_addr[11] = 0xff;
      std::memcpy(&in6.sin6_addr.s6_addr[12], a.addr, 4);
    } else {
      std::memcpy(&in6.sin6_addr, a.addr, 16);
    }
    std::memcpy(out, &in6, sizeof in6);
    return sizeof in6;
  }
  sockaddr_in in{};
  in.sin_family = AF_INET;
  in.sin_port = htons(a.port);
  std::memcpy(&in.sin_addr, a.addr, 4);
  std::memcpy(out, &in, sizeof in);
  return sizeof in;
}

void offer_bind(int fd, FdEntry& e) {
  if (t_inside) return;
  Control& c = control();
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  auto stays = [&e](KernelWhy why) { e.why.store(why, std::memory_order_relaxed); };
  stays(KernelWhy::kNoAddress);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return;
  rawpipe_addr local{};
  if (!to_rawpipe_addr(reinterpret_cast<sockaddr*>(&ss), len, &local)) return;
  const int family = ss.ss_family;

  std::lock_guard lock(c.mu);
  if (c.forked_child) return stays(KernelWhy::kForkedChild);
  load_rules(c);
  if (c.state == State::kKernelOnly) return stays(KernelWhy::kNotStarted);
  if (is_loopback(local)) return stays(KernelWhy::kLoopback);
  const OffloadRule* matched = nullptr;
  const Decision d = decide(c.rules, local.family, local.addr, local.port, &matched);
  if (d == Decision::kKernel) return stays(KernelWhy::kRuleSaysKernel);
  if (d == Decision::kNoRule && !c.rules.empty()) return stays(KernelWhy::kNoRuleMatches);
  if (!start_locked(c)) return stays(KernelWhy::kNotStarted);
  // With an interface from the environment, a unicast bind to another interface's address stays
  // on the kernel (with a config file the ports' addresses are the config's business).
  if (!c.interface.empty() && !is_wildcard(local) && !is_multicast(local)) {
    bool ours = false;
    for (const rawpipe_addr& a : c.if_addrs)
      ours |= a.family == local.family && std::memcmp(a.addr, local.addr, a.family == 4 ? 4 : 16) == 0;
    if (!ours) return stays(KernelWhy::kOtherInterface);
  }
  Runtime& rt = g_runtime;
  Slot* s = nullptr;
  for (unsigned i = 0; i < rt.n_slots && !s; ++i)
    if (!rt.slots[i].in_use.load(std::memory_order_relaxed)) s = &rt.slots[i];
  if (!s) {
    note(std::string("fd ") + std::to_string(fd) + std::string(" udp ") + addr_text(local) + " stays on the kernel: all " +
         std::to_string(rt.n_slots) + " socket endpoints are in use (raise RAWPIPE_SOCKETS)");
    return stays(KernelWhy::kNoFreeEndpoint);
  }
  s->family = family;
  s->local = local;
  s->local_specific = !is_wildcard(local) && !is_multicast(local);
  s->first_fd = fd;
  s->timestamp.store(0);
  s->rcvtimeo_ms.store(-1);
  s->connected.store(false);
  s->filter_peer.store(false);
  s->n_rules = 0;
  for (EpollLink& l : s->epolls) l = EpollLink{};
  s->rx_packets = s->rx_bytes = s->rx_truncated = s->rx_not_peer = s->tx_packets = s->tx_kernel = s->rx_kernel = 0;
  s->since_kernel_look = 0;
  s->ring_full_at_bind = endpoint_figures(rt, s->endpoint).ring_full;
  // Nothing can be addressed to the new socket yet: whatever the ring holds is the previous
  // owner's (see drop_fd).
  {
    rawpipe_packet stale[32];
    while (s->consumer.exchange(true, std::memory_order_acquire)) sched_yield();
    t_inside = true;
    for (int n; (n = rt.api->recvfrom_zcopy(rt.pipeline, s->endpoint, stale, 32)) > 0;)
      rt.api->free_packets(rt.pipeline, stale, static_cast<unsigned>(n));
    t_inside = false;
    s->consumer.store(false, std::memory_order_release);
  }
  // The kernel socket keeps the port. What reaches it that the pipeline never sees is read too,
  // once copies of the ring's datagrams are kept out of it; where that cannot be done it holds
  // nothing to read, and its buffer only needs to be small. The filter goes in before the rule,
  // so that no datagram reaches both the ring and the kernel side.
  const bool filtered = rt.read_kernel && rt.copies.n && drop_copies_from(fd, rt.copies);
  const bool read_kernel = rt.read_kernel && (rt.copies.n == 0 || filtered);
  std::string error;
  if (!add_rule_locked(rt, *s, local, &error)) {
    if (filtered) keep_copies(fd);  // a kernel socket again: it must get everything
    note(std::string("fd ") + std::to_string(fd) + std::string(" udp ") + addr_text(local) + " stays on the kernel: " + error);
    return stays(KernelWhy::kRuleRefused);
  }
  s->read_kernel.store(read_kernel, std::memory_order_relaxed);
  if (!read_kernel) {
    const int small = 4096;
    libc().setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
  }
  s->fds.store(1, std::memory_order_relaxed);
  s->in_use.store(true, std::memory_order_relaxed);
  e.slot.store(static_cast<std::uint16_t>(s - rt.slots), std::memory_order_relaxed);
  e.gen.store(s->gen.load(std::memory_order_relaxed), std::memory_order_relaxed);
  // Release: a thread that sees kOffloaded sees the slot filled in.
  e.kind.store(FdKind::kOffloaded, std::memory_order_release);
}

Slot* slot_of(const FdEntry& e, std::uint32_t* gen) {
  Runtime* rt = running();
  if (!rt || e.kind.load(std::memory_order_acquire) != FdKind::kOffloaded) return nullptr;
  Slot& s = rt->slots[e.slot.load(std::memory_order_relaxed)];
  const std::uint32_t g = e.gen.load(std::memory_order_relaxed);
  if (s.gen.load(std::memory_order_acquire) != g) return nullptr;
  if (gen) *gen = g;
  return &s;
}

bool consumer_enter(Slot& s, std::uint32_t gen) {
  while (s.consumer.exchange(true, std::memory_order_acquire)) sched_yield();
  if (s.gen.load(std::memory_order_relaxed) != gen) {
    s.consumer.store(false, std::memory_order_release);
    return false;
  }
  return true;
}
void consumer_leave(Slot& s) { s.consumer.store(false, std::memory_order_release); }

void add_fd(Slot& s) { s.fds.fetch_add(1, std::memory_order_relaxed); }

void drop_fd(Slot& s) {
  if (s.fds.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
  Runtime& rt = g_runtime;
  Control& c = control();
  std::lock_guard lock(c.mu);
  summary(s);
  // New generation first: a thread blocked in recv on this socket wakes (below), sees it and
  // returns EBADF instead of taking the next socket's packets.
  s.gen.fetch_add(1, std::memory_order_acq_rel);
  const std::uint64_t one = 1;
  (void)!libc().write(s.wake_fd, &one, sizeof one);
  while (s.consumer.exchange(true, std::memory_order_acquire)) sched_yield();
  t_inside = true;
  for (unsigned i = 0; i < s.n_rules; ++i) rt.api->remove_rule(rt.pipeline, static_cast<std::uint32_t>(s.rules[i]));
  s.n_rules = 0;
  // What the ring still holds belongs to nobody now: drain it after remove_rule, which returns
  // once no lcore classifies with the socket's rules. A packet of the burst an lcore was
  // finishing can still land after this drain; the next owner drains again before its rule goes
  // in (offer_bind).
  rawpipe_packet pkts[32];
  if (s.has_stash) rt.api->free_packets(rt.pipeline, &s.stash, 1);
  s.has_stash = false;
  for (int n; (n = rt.api->recvfrom_zcopy(rt.pipeline, s.endpoint, pkts, 32)) > 0;)
    rt.api->free_packets(rt.pipeline, pkts, static_cast<unsigned>(n));
  for (EpollLink& l : s.epolls) {
    if (l.epfd >= 0) libc().epoll_ctl(l.epfd, EPOLL_CTL_DEL, s.wake_fd, nullptr);
    l = EpollLink{};
  }
  // The eventfd stays readable: a waiter may not have run yet, and must still wake. The next
  // owner's first arm drains it; until then its waits see a spurious wake and look again.
  t_inside = false;
  s.consumer.store(false, std::memory_order_release);
  s.in_use.store(false, std::memory_order_release);
}

void join_group(Slot& s, const rawpipe_addr& group) {
  Runtime* rt = running();
  if (!rt) return;
  Control& c = control();
  std::lock_guard lock(c.mu);
  rawpipe_addr dst = group;
  dst.port = s.local.port;
  for (unsigned i = 0; i < s.n_rules; ++i)
    if (std::memcmp(&s.rule_groups[i], &dst, sizeof dst) == 0) return;
  std::string error;
  if (!add_rule_locked(*rt, s, dst, &error))
    note(std::string("fd ") + std::to_string(s.first_fd) + std::string(": group ") + addr_text(dst) + " not steered to rawpipe: " + error);
}

void set_peer(Slot& s, const rawpipe_addr* peer) {
  Runtime* rt = running();
  if (!rt) return;
  Control& c = control();
  std::lock_guard lock(c.mu);
  // Receivers compare against the peer only while filter_peer reads true (acquire). What was
  // queued before connect stays readable, as in the kernel, which does not purge the queue.
  s.filter_peer.store(false, std::memory_order_relaxed);
  s.connected.store(false, std::memory_order_relaxed);
  if (peer) s.peer = *peer;
  s.connected.store(peer != nullptr, std::memory_order_release);
  // Each rule is replaced by its twin naming (or no longer naming) the peer: the new one goes in
  // before the old one goes, so no datagram for the socket finds neither.
  for (unsigned i = 0; i < s.n_rules; ++i) {
    std::string error;
    const long id = add_rule_text(*rt, rule_text(*rt, s, s.rule_groups[i], peer), &error);
    if (id <= 0) {
      note(std::string("fd ") + std::to_string(s.first_fd) + " udp " + addr_text(s.local) +
           ": its rules do not name the connected peer (" + error +
           "); datagrams from others are dropped as they are read, not handed to another socket on the port");
      s.filter_peer.store(peer != nullptr, std::memory_order_release);
      return;
    }
    t_inside = true;
    rt->api->remove_rule(rt->pipeline, static_cast<std::uint32_t>(s.rules[i]));
    t_inside = false;
    s.rules[i] = id;
  }
}

void leave_group(Slot& s, const rawpipe_addr& group) {
  Runtime* rt = running();
  if (!rt) return;
  Control& c = control();
  std::lock_guard lock(c.mu);
  rawpipe_addr dst = group;
  dst.port = s.local.port;
  for (unsigned i = 1; i < s.n_rules; ++i) {  // rule 0 is the bind's
    if (std::memcmp(&s.rule_groups[i], &dst, sizeof dst) != 0) continue;
    t_inside = true;
    rt->api->remove_rule(rt->pipeline, static_cast<std::uint32_t>(s.rules[i]));
    t_inside = false;
    s.rules[i] = s.rules[s.n_rules - 1];
    s.rule_groups[i] = s.rule_groups[s.n_rules - 1];
    --s.n_rules;
    return;
  }
}

namespace {
// The parent and the child share every socket. The child's copies are plain kernel sockets and
// must get everything the kernel receives, so the child takes away the filter that kept copies
// of the ring's datagrams out of them; from then on the parent's kernel sides hold those copies
// and the parent stops reading them (the ring has them already).
void parent_after_fork() {
  Runtime* rt = g_running.load(std::memory_order_acquire);
  if (!rt) return;
  bool any = false;
  for (unsigned i = 0; i < rt->n_slots; ++i) any |= rt->slots[i].read_kernel.exchange(false, std::memory_order_relaxed);
  if (!any) return;
  epoll_forget_kernel_sides();
  note("fork: the child shares the offloaded sockets; datagrams sent to them from this host now reach the child only");
}

// The child of a fork has no lcores: its sockets become plain kernel sockets (each is a real,
// bound kernel socket already) and it offloads nothing new.
void child_after_fork() {
  Runtime* rt = g_running.load(std::memory_order_relaxed);
  g_inherited.store(rt, std::memory_order_relaxed);
  g_running.store(nullptr, std::memory_order_release);
  Control& c = control();
  new (&c.mu) std::mutex;  // another thread may have held it at fork
  c.forked_child = true;
  for (int fd = 0, high = fd_high_water(); fd < high; ++fd) {
    FdEntry* e = fd_entry(fd);
    if (!e) break;
    FdKind k = e->kind.load(std::memory_order_relaxed);
    if (k != FdKind::kOffloaded) continue;
    const Slot& slot = g_runtime.slots[e->slot.load(std::memory_order_relaxed)];
    if (rt && rt->copies.n && slot.read_kernel.load(std::memory_order_relaxed)) keep_copies(fd);
    e->why.store(KernelWhy::kForkedChild, std::memory_order_relaxed);
    e->kind.store(FdKind::kUdp, std::memory_order_relaxed);
  }
}
__attribute__((constructor)) void install_fork_handler() { pthread_atfork(nullptr, parent_after_fork, child_after_fork); }
}  // namespace

}  // namespace rawpipe::preload
