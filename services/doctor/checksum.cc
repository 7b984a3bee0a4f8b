// Frames whose sender left the UDP/TCP checksum to offload. A kernel socket on a veth peer (or on
// this host, through lo) with tx-checksumming on hands the frame over CHECKSUM_PARTIAL: the
// checksum field holds only the pseudo-header sum. The kernel's own stack trusts the skb flag, a
// raw-packet reader sees a wrong checksum. What each port does with them:
//   af_packet  the ring marks them TP_STATUS_CSUMNOTREADY and the port completes them;
//   af_xdp     rx_checksum = "verify" (default) completes them in software, "off" delivers them
//              as they are (consumers, taps and echo see wrong checksums);
//   socket     the kernel delivers payloads only;
//   mlx5/mana  on a NIC the sender's hardware finished them on the wire.
#include <fmt/format.h>

#include "services/doctor/checks.hh"

namespace rawpipe::doctor {

void check_checksum_offload(const Needs* needs, const HostFacts& h, Report& r) {
  if (!needs) return;
  for (const PortNeed& p : needs->ports) {
    if (p.interface.empty() || !(p.pmd == "af_xdp" || p.pmd == "af_packet" || p.pmd == "auto")) continue;
    auto it = h.netdevs.find(p.interface);
    if (it == h.netdevs.end() || !it->second.exists) continue;
    const NetdevFacts& n = it->second;
    const std::string check = fmt::format("checksums {}", p.interface);
    const bool delivers_partial = p.pmd == "af_xdp" && p.rx_checksum == "off";
    if (!n.peer_known) {
      if (n.peer_error.empty()) continue;  // a NIC: checksums arrive finished
      if (delivers_partial)
        r.warn(check,
               fmt::format("cannot tell whether {}'s sender leaves checksums to offload ({}); with rx_checksum = "
                           "\"off\" port '{}' would deliver such frames unfinished",
                           p.interface, n.peer_error, p.name),
               fmt::format("set rx_checksum = \"verify\" in port '{}' ({})", p.name, p.where));
      else
        r.ok(check, fmt::format("the peer's offloads are unknown ({}); port '{}' completes partial checksums in "
                                "software either way",
                                n.peer_error, p.name));
      continue;
    }
    const std::string from = n.name == "lo" ? std::string("lo (locally sent frames)") : "its peer " + n.peer_name;
    if (!n.peer_tx_csum) {
      r.ok(check, fmt::format("{} has tx-checksumming off: frames arrive with finished checksums", from));
      continue;
    }
    const std::string partial =
        fmt::format("{} has tx-checksumming on: UDP/TCP frames its kernel sends arrive with partial checksums", from);
    if (delivers_partial) {
      r.warn(check,
             partial + fmt::format(", and port '{}' (af_xdp, rx_checksum = \"off\") delivers them unfinished: "
                                   "consumers and taps see wrong checksums, echo and forward send them on and "
                                   "the peer's stack drops them (UdpInCsumErrors)",
                                   p.name),
             fmt::format("set rx_checksum = \"verify\" in port '{}' ({}), or turn the offload off: {}ethtool -K {} tx "
                         "off",
                         p.name, p.where, n.peer_exec, n.peer_ifname));
    } else if (p.pmd == "af_packet") {
      r.ok(check, partial + "; af_packet sees them flagged (TP_STATUS_CSUMNOTREADY) and completes them in software");
    } else {
      r.ok(check, partial + "; af_xdp completes them in software (rx_checksum = \"verify\")" +
                      (p.pmd == "auto" ? ", af_packet does the same" : ""));
    }
  }
}

}  // namespace rawpipe::doctor
