// The interface a port names: it exists here, its driver is one the port's PMD drives, its link
// is up, its MTU fits an AF_XDP frame and the driver's native XDP limit, and it has the queues the
// port binds to (`ethtool -l`).
#include <fmt/format.h>

#include <algorithm>

#include "services/doctor/checks.hh"
#include "services/doctor/xdp_limits.hh"
#include "rawpipe/mbuf.hh"

namespace rawpipe::doctor {
namespace {

std::string list(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names) out += fmt::format("{}{}", out.empty() ? "" : ", ", n);
  return out.empty() ? std::string("none") : out;
}

void check_mtu(const PortNeed& p, const NetdevFacts& n, Report& r) {
  const bool is_auto = p.pmd == "auto";
  const std::string check = fmt::format("mtu {}", n.name);
  const std::uint32_t buf = p.pool ? p.pool->buf_size : 2048;
  const std::uint32_t frame_mtu = af_xdp_frame_mtu(buf, kMbufHeaderSize);
  const std::uint32_t native = native_xdp_max_mtu(n.driver);
  bool fine = true;
  if (n.mtu > frame_mtu) {
    fine = false;
    // A UMEM frame is at most a page, so a bigger buffer helps only up to 4096 bytes.
    const std::uint32_t page_mtu = af_xdp_frame_mtu(kPageSize, kMbufHeaderSize);
    const std::uint32_t lower = native ? std::min(frame_mtu, native) : frame_mtu;
    std::string fix = fmt::format("lower the MTU: sudo ip link set dev {} mtu {}", n.name, lower);
    if (buf < kPageSize && p.pool)
      fix += n.mtu <= page_mtu
                 ? fmt::format(", or set buf_size = 4096 in pool '{}' ({})", p.pool->name, p.pool->where)
                 : fmt::format(" (a 4096-byte buffer, the largest AF_XDP frame, would still only fit MTU {})", page_mtu);
    fix += is_auto ? "" : "; or use pmd = \"af_packet\" for jumbo frames";
    const std::string detail =
        fmt::format("MTU {} does not fit an AF_XDP frame: a {}-byte pool buffer leaves room for MTU {} after the "
                    "{}-byte buffer header, {} bytes of XDP headroom and {} bytes of Ethernet/VLAN headers",
                    n.mtu, buf, frame_mtu, kMbufHeaderSize, kXdpHeadroom, kL2Overhead);
    if (is_auto)
      r.warn(check, detail + "; pmd = \"auto\" skips af_xdp for af_packet", fix);
    else
      r.fail(check, detail, fix);
  }
  if (native && n.mtu > native && p.attach != "generic") {
    fine = false;
    const std::string detail = fmt::format(
        "MTU {} is above what native XDP accepts on driver {} ({}: one page minus XDP headroom and skb tail{})", n.mtu,
        n.driver, native, n.driver == "veth" ? "; veth checks the peer's MTU, keep both ends equal" : "");
    const std::string fix = fmt::format("sudo ip link set dev {} mtu {}{}", n.name, native,
                                        p.attach == "native" ? ", or set attach = \"auto\" to accept generic XDP" : "");
    if (p.attach == "native" && !is_auto)
      r.fail(check, detail, fix);
    else
      r.warn(check, detail + "; the program attaches in generic (skb) mode instead: slower, copy mode only", fix);
  }
  if (fine)
    r.ok(check, fmt::format("MTU {} fits the AF_XDP frame (up to {}){}", n.mtu, frame_mtu,
                            native ? fmt::format(" and native XDP on {} (up to {})", n.driver, native)
                                   : fmt::format("; native XDP limit of driver '{}' not known here", n.driver)));
}

void check_queues(const PortNeed& p, const NetdevFacts& n, Report& r) {
  const std::string check = fmt::format("queues {}", n.name);
  const std::uint32_t need = p.queue_offset + std::max<std::uint32_t>(p.rx_queues, p.tx_queues);
  if (!n.channels_known) {
    if (need > 1)
      r.warn(check, fmt::format("port {} binds device queues {}..{} but the driver does not report its channels ({})",
                                p.name, p.queue_offset, need - 1, n.channels_error),
             fmt::format("check `ethtool -l {}` by hand", n.name));
    else
      r.ok(check, fmt::format("port {} binds queue {} (the driver does not report channels; queue 0 always exists)",
                              p.name, p.queue_offset));
    return;
  }
  const std::uint32_t have = n.channels.rx_queues(), max = n.channels.max_rx_queues();
  const char* kind = n.channels.max_combined ? "combined" : "rx";
  if (need <= have) {
    r.ok(check, fmt::format("port {} binds device queues {}..{}; {} has {} (max {})", p.name, p.queue_offset, need - 1,
                            n.name, have, max));
    return;
  }
  const std::string detail = fmt::format("port {} binds device queues {}..{} but {} has {} {} queue(s) (max {})",
                                         p.name, p.queue_offset, need - 1, n.name, have, kind, max);
  const std::string fix =
      need <= max ? fmt::format("sudo ethtool -L {} {} {}", n.name, kind, need)
                  : fmt::format("lower rx_queues/tx_queues/queue_offset of port '{}' ({}) to fit {} queue(s)", p.name,
                                p.where, max);
  if (p.pmd == "auto")
    r.warn(check, detail + "; pmd = \"auto\" skips af_xdp", fix);
  else
    r.fail(check, detail, fix);
}

}  // namespace

void check_interfaces(const Needs* needs, const HostFacts& h, Report& r) {
  if (!needs) {
    for (const auto& [name, n] : h.netdevs)
      r.ok(fmt::format("interface {}", name),
           fmt::format("driver {}, MTU {}, {}{}", n.driver.empty() ? std::string("none (virtual)") : n.driver, n.mtu,
                       n.up ? "up" : "down",
                       n.channels_known ? fmt::format(", {} queue(s) (max {})", n.channels.rx_queues(),
                                                      n.channels.max_rx_queues())
                                        : std::string()));
    return;
  }
  for (const PortNeed& p : needs->ports) {
    if (p.interface.empty() || !pmd_uses_interface(p.pmd)) continue;
    auto it = h.netdevs.find(p.interface);
    if (it == h.netdevs.end()) continue;
    const NetdevFacts& n = it->second;
    const std::string check = fmt::format("interface {}", p.interface);
    if (!n.exists) {
      r.fail(check,
             fmt::format("port '{}' names interface '{}', which does not exist in this network namespace", p.name,
                         p.interface),
             fmt::format("set interface = \"<name>\" in port '{}' ({}) to one of: {}; or create the interface, or run "
                         "rawpipe in its namespace (ip netns exec <ns> rawpipe ...)",
                         p.name, p.where, list(h.interfaces)));
      continue;
    }
    const std::string driver = n.driver.empty() ? std::string("none (a virtual interface)") : n.driver;
    if ((p.pmd == "mlx5" && n.driver != "mlx5_core") || (p.pmd == "mana" && n.driver != "mana")) {
      r.fail(check,
             fmt::format("port '{}' uses pmd {} but {} has driver {}, not {}", p.name, p.pmd, p.interface, driver,
                         p.pmd == "mlx5" ? "mlx5_core" : "mana"),
             fmt::format("set pmd = \"auto\" (or \"af_xdp\") in port '{}' ({}), or name a {} interface", p.name, p.where,
                         p.pmd == "mlx5" ? "ConnectX (mlx5_core)" : "MANA"));
      continue;
    }
    if (p.pmd == "af_xdp" || p.pmd == "auto") {
      const bool zc = driver_has_xsk_zero_copy(n.driver);
      std::string detail = fmt::format("driver {}: AF_XDP {}", driver,
                                       zc ? "zero-copy supported" : "copy mode only (no zero-copy in this driver)");
      if (!zc && p.zero_copy == "require")
        r.warn(check, detail + "; zero_copy = \"require\" will fail to bind unless the driver gained support",
               fmt::format("set zero_copy = \"auto\" in port '{}' ({}) to accept copy mode", p.name, p.where));
      else
        r.ok(check, detail);
    } else {
      r.ok(check, fmt::format("exists, driver {}", driver));
    }
    if (!n.up && p.pmd != "mana")
      r.warn(fmt::format("link {}", p.interface), fmt::format("{} is down: no packets will arrive", p.interface),
             fmt::format("sudo ip link set dev {} up", p.interface));
    if (p.pmd == "af_xdp" || p.pmd == "auto") {
      check_mtu(p, n, r);
      check_queues(p, n, r);
    }
  }
}

}  // namespace rawpipe::doctor
