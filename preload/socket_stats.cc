#include "preload/socket_stats.hh"

#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace rawpipe::preload {
namespace {

// Socket inode -> the kernel's drop count for it: the last column of /proc/net/udp and udp6,
// which counts what the socket's buffer could not take (the kernel's own loss on that socket).
std::map<unsigned long, std::uint64_t> kernel_udp_drops() {
  std::map<unsigned long, std::uint64_t> drops;
  for (const char* path : {"/proc/net/udp", "/proc/net/udp6"}) {
    FILE* f = std::fopen(path, "re");
    if (!f) continue;
    char line[512];
    if (!std::fgets(line, sizeof line, f)) {  // the heading
      std::fclose(f);
      continue;
    }
    while (std::fgets(line, sizeof line, f)) {
      // sl local rem st tx:rx tr:when retrnsmt uid timeout inode ref pointer drops
      unsigned long inode = 0;
      unsigned long long dropped = 0;
      if (std::sscanf(line, "%*s %*s %*s %*s %*s %*s %*s %*s %*s %lu %*s %*s %llu", &inode, &dropped) == 2)
        drops[inode] = dropped;
    }
    std::fclose(f);
  }
  return drops;
}

nlohmann::json offloaded_row(const Runtime& rt, const Slot& s, const EndpointFigures& f) {
  nlohmann::json row = {{"fd", s.first_fd},
                        {"proto", "udp"},
                        {"local", addr_text(s.local)},
                        {"offloaded", f.offloaded},
                        {"endpoint", "socket" + std::to_string(&s - rt.slots)},
                        {"rx_packets", s.rx_packets.load(std::memory_order_relaxed)},
                        {"rx_bytes", s.rx_bytes.load(std::memory_order_relaxed)},
                        {"rx_truncated", s.rx_truncated.load(std::memory_order_relaxed)},
                        {"rx_kernel", s.rx_kernel.load(std::memory_order_relaxed)},
                        {"tx_packets", s.tx_packets.load(std::memory_order_relaxed)},
                        {"tx_kernel", s.tx_kernel.load(std::memory_order_relaxed)},
                        {"queued", f.queued},
                        {"drops",
                         {{"ring_full", ring_full_since_bind(s, f)},
                          {"not_connected_peer", s.rx_not_peer.load(std::memory_order_relaxed)}}}};
  if (!f.offloaded) row["why"] = "the application turned its offload off (offload(fd, 0)): the kernel serves it";
  return row;
}

// Called with the control lock held: the slots' control state is stable. rt null: nothing is
// offloaded, every row is a kernel socket.
std::string sockets_json(const Runtime* rt) {
  nlohmann::json rows = nlohmann::json::array();
  for (unsigned i = 0; rt && i < rt->n_slots; ++i) {
    const Slot& s = rt->slots[i];
    if (s.in_use.load(std::memory_order_acquire)) rows.push_back(offloaded_row(*rt, s, endpoint_figures(*rt, s.endpoint)));
  }
  std::map<unsigned long, std::uint64_t> kernel_drops;
  bool drops_read = false;
  for (int fd = 0, high = fd_high_water(); fd < high; ++fd) {
    const FdEntry* e = fd_entry(fd);
    if (!e) break;
    if (e->kind.load(std::memory_order_acquire) != FdKind::kUdp) continue;
    nlohmann::json row = {{"fd", fd}, {"proto", "udp"}, {"offloaded", false},
                          {"why", kernel_why_text(e->why.load(std::memory_order_relaxed))}};
    sockaddr_storage ss{};
    socklen_t len = sizeof ss;
    rawpipe_addr local{};
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) == 0 &&
        to_rawpipe_addr(reinterpret_cast<sockaddr*>(&ss), len, &local))
      row["local"] = addr_text(local);
    if (struct stat st{}; fstat(fd, &st) == 0) {
      if (!drops_read) kernel_drops = kernel_udp_drops();
      drops_read = true;
      if (const auto it = kernel_drops.find(st.st_ino); it != kernel_drops.end()) row["drops"] = {{"kernel", it->second}};
    }
    rows.push_back(std::move(row));
  }
  return rows.dump();
}

long sockets_section(void* ctx, char* buf, std::size_t cap) {
  const std::string& rows = sockets_now(static_cast<const Runtime*>(ctx));
  if (rows.size() <= cap) std::memcpy(buf, rows.data(), rows.size());
  return static_cast<long>(rows.size());
}

}  // namespace

const std::string& sockets_now(const Runtime* rt) {
  // One publishing thread calls this at a time (the pipeline's, or the kernel-only one). While a
  // bind or close holds the control lock the previous rows are published again rather than making
  // the publisher wait for it. Never destroyed: the last call comes from the exit handler that
  // destroys the pipeline, after the exit-time destructors of statics made since it was
  // registered have run.
  static std::string& last = *new std::string("[]");
  if (std::unique_lock lock = try_control_lock(); lock.owns_lock()) last = sockets_json(rt);
  return last;
}

EndpointFigures endpoint_figures(const Runtime& rt, std::uint16_t endpoint) {
  std::vector<rawpipe_endpoint_stats> eps(endpoint + 1u);
  rawpipe_stats st{};
  st.size = sizeof st;
  st.endpoints = eps.data();
  st.endpoints_max = static_cast<std::uint32_t>(eps.size());
  EndpointFigures f;
  if (rt.api->get_stats(rt.pipeline, &st) != 0 || st.n_endpoints <= endpoint) return f;
  f.known = true;
  f.offloaded = eps[endpoint].offloaded != 0;
  f.ring_full = eps[endpoint].ring_full;
  f.queued = eps[endpoint].queued;
  return f;
}

std::uint64_t ring_full_since_bind(const Slot& s, const EndpointFigures& f) {
  return f.known && f.ring_full > s.ring_full_at_bind ? f.ring_full - s.ring_full_at_bind : 0;
}

const char* kernel_why_text(KernelWhy why) {
  switch (why) {
    case KernelWhy::kNotBound: return "not bound (offload is decided at bind)";
    case KernelWhy::kNoRuleMatches: return "no offload rule matches its address";
    case KernelWhy::kRuleSaysKernel: return "an offload rule gives it to the kernel (os)";
    case KernelWhy::kLoopback: return "a loopback address (never crosses the interface)";
    case KernelWhy::kNotStarted: return "the pipeline did not start (see the line on stderr)";
    case KernelWhy::kOtherInterface: return "an address of another interface";
    case KernelWhy::kNoFreeEndpoint: return "every socket endpoint was in use (raise RAWPIPE_SOCKETS)";
    case KernelWhy::kRuleRefused: return "the pipeline refused its steering rule (see the line on stderr)";
    case KernelWhy::kForkedChild: return "a forked child's sockets stay on the kernel";
    case KernelWhy::kNoAddress: return "bound to no IPv4 or IPv6 address";
  }
  return "unknown";
}

void publish_sockets(Runtime& rt) {
  if (!(rt.api->caps & RAWPIPE_CAP_STATS_SECTION)) return;
  // A pipeline without a stats segment ([metrics] stats_segment = false) has nowhere to put them.
  (void)rt.api->stats_section(rt.pipeline, "sockets", &sockets_section, &rt);
}

}  // namespace rawpipe::preload
