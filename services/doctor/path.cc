// The path report before running: which driver and mode each port will run in, and for
// pmd = "auto" why each rung above the chosen one is skipped. mlx5 and mana use the ladder's own
// probes (the same functions `rawpipe run` calls); af_xdp and af_packet are predicted from the
// facts the other checks judge (capabilities, MTU, queues), since opening them would attach a
// program. `rawpipe run` and `rawpipe stat` print the path the port really took.
#include <linux/capability.h>

#include <fmt/format.h>

#include <algorithm>

#include "services/doctor/checks.hh"
#include "services/doctor/xdp_limits.hh"
#include "rawpipe/mbuf.hh"

namespace rawpipe::doctor {
namespace {

bool has_bpf(const HostFacts& h) { return h.caps.has(39) || h.caps.has(CAP_SYS_ADMIN); }

// Why the af_xdp rung would not open, or "" when it should.
std::string af_xdp_blocker(const PortNeed& p, const NetdevFacts& n, const HostFacts& h) {
  if (!n.exists) return "the interface does not exist";
  if (!h.af_xdp_built) return "the af_xdp driver is not built into this binary";
  if (!h.xdp_object_error.empty()) return "its XDP program object is missing";
  if (!h.caps.has(CAP_NET_RAW) || !h.caps.has(CAP_NET_ADMIN) || !has_bpf(h))
    return "needs CAP_NET_RAW, CAP_NET_ADMIN and CAP_BPF";
  const std::uint32_t buf = p.pool ? p.pool->buf_size : 2048;
  if (n.mtu > af_xdp_frame_mtu(buf, kMbufHeaderSize)) return fmt::format("MTU {} does not fit a {}-byte buffer", n.mtu, buf);
  const std::uint32_t need = p.queue_offset + std::max<std::uint32_t>(p.rx_queues, p.tx_queues);
  if (n.channels_known && need > n.channels.rx_queues())
    return fmt::format("needs {} queues, the interface has {}", need, n.channels.rx_queues());
  return {};
}

std::string af_xdp_mode(const PortNeed& p, const NetdevFacts& n) {
  const std::uint32_t native = native_xdp_max_mtu(n.driver);
  const bool generic = p.attach == "generic" || (p.attach == "auto" && native && n.mtu > native);
  const bool zc = p.zero_copy != "never" && !generic && driver_has_xsk_zero_copy(n.driver);
  const std::uint32_t last = p.queue_offset + std::max<std::uint32_t>(p.rx_queues, p.tx_queues) - 1;
  return fmt::format("AF_XDP on {} queue{} {}{}: XDP {}, {}", n.name, last > p.queue_offset ? "s" : "", p.queue_offset,
                     last > p.queue_offset ? fmt::format("..{}", last) : std::string(), generic ? "generic" : "native",
                     zc ? "zero-copy" : fmt::format("copy mode ({})", p.zero_copy == "never" ? "zero_copy = \"never\""
                                                                     : generic ? "generic XDP"
                                                                               : "driver " + (n.driver.empty() ? std::string("none") : n.driver) + " has no zero-copy"));
}

std::string software_path(std::string_view pmd) {
  if (pmd == "synth") return "synth: the built-in generator (software)";
  if (pmd == "pcap") return "pcap: replays a capture file (software)";
  if (pmd == "socket") return "socket: kernel UDP sockets (unprivileged, one copy and a syscall per burst)";
  if (pmd == "dpdk") return "dpdk: a DPDK ethdev through the EAL";
  if (pmd == "mlx5-model" || pmd == "mana-model") return fmt::format("{}: the in-memory device model", pmd);
  return fmt::format("{}", pmd);
}

void auto_path(const std::string& check, const PortNeed* p, const NetdevFacts& n, const HostFacts& h, Report& r) {
  PortNeed defaults;
  defaults.interface = n.name;
  const PortNeed& need = p ? *p : defaults;
  std::string skipped;
  std::string chosen;
  for (std::string_view rung : {"mlx5", "mana", "af_xdp", "af_packet", "socket"}) {
    std::string why;
    if (rung == "mlx5" || rung == "mana") {
      const std::string_view want = rung == "mlx5" ? "mlx5_core" : "mana";
      auto it = n.probes.find(std::string(rung));
      // The probe's own message on a driver mismatch is written for a user who chose that pmd.
      why = n.driver != want ? fmt::format("driver {} is not {}", n.driver.empty() ? "none" : n.driver, want)
            : it == n.probes.end() ? std::string("not probed")
                                   : it->second;
    } else if (rung == "af_xdp") {
      why = af_xdp_blocker(need, n, h);
    } else if (rung == "af_packet") {
      why = !n.exists ? "the interface does not exist" : !h.caps.has(CAP_NET_RAW) ? "needs CAP_NET_RAW" : "";
    }
    if (why.empty()) {
      chosen = rung == "af_xdp" ? af_xdp_mode(need, n) : std::string(rung);
      break;
    }
    skipped += fmt::format("; skips {}: {}", rung, why);
  }
  r.ok(check, fmt::format("auto on {} would choose {}{}", n.name, chosen, skipped));
}

}  // namespace

void check_paths(const Needs* needs, const HostFacts& h, Report& r) {
  if (!needs) {
    for (const auto& [name, n] : h.netdevs)
      if (n.exists && name != "lo") auto_path(fmt::format("path {}", name), nullptr, n, h, r);
    return;
  }
  for (const PortNeed& p : needs->ports) {
    const std::string check = fmt::format("path {}", p.name);
    auto it = h.netdevs.find(p.interface);
    if (!pmd_uses_interface(p.pmd) || p.interface.empty() || it == h.netdevs.end()) {
      r.ok(check, software_path(p.pmd));
      continue;
    }
    const NetdevFacts& n = it->second;
    if (!n.exists) continue;  // interface.cc reported it
    if (p.pmd == "auto") {
      auto_path(check, &p, n, h, r);
    } else if (p.pmd == "af_xdp") {
      r.ok(check, af_xdp_mode(p, n));
    } else if (p.pmd == "af_packet") {
      r.ok(check, fmt::format("AF_PACKET on {}: one copy into the pool, {} socket(s) in a fanout group", n.name,
                              p.rx_queues));
    } else if (p.pmd == "mlx5" || p.pmd == "mana") {
      auto probe = n.probes.find(p.pmd);
      const bool ready = probe != n.probes.end() && probe->second.empty();
      const bool driver_ok = n.driver == (p.pmd == "mlx5" ? "mlx5_core" : "mana");
      r.ok(check, fmt::format("{} direct verbs on {} (RDMA device {}){}", p.pmd, n.name,
                              n.rdma_devices.empty() ? std::string("none") : n.rdma_devices.front(),
                              ready       ? ""
                              : driver_ok ? ": cannot start, see the rdma check"
                                          : ": cannot start, see the interface check"));
    } else {
      r.ok(check, software_path(p.pmd));
    }
  }
}

}  // namespace rawpipe::doctor
