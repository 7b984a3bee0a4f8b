// Capabilities each driver needs: AF_PACKET and AF_XDP sockets and raw-packet QPs need
// CAP_NET_RAW; attaching an XDP program needs CAP_NET_ADMIN and loading it CAP_BPF (kernels
// before 5.8, or without CAP_BPF: CAP_SYS_ADMIN). CAP_IPC_LOCK is judged with the memlock limit.
#include <linux/capability.h>

#include <fmt/format.h>

#include <set>

#include "services/doctor/checks.hh"

namespace rawpipe::doctor {
namespace {

struct Need {
  int cap;
  std::string why;
  std::set<std::string> ports;
};

std::string setcap_fix(const HostFacts& h, std::string_view caps) {
  return fmt::format("run as root, or grant the binary the capabilities: sudo setcap {}+ep {}", caps,
                     h.binary.empty() ? std::string("$(command -v rawpipe)") : h.binary);
}

}  // namespace

// setcap replaces a file's whole capability set, so one line per finding would undo the others:
// every finding offers the same line, with everything the config's ports need.
std::string config_setcap_caps(const Needs* needs) {
  bool raw = !needs, xdp = !needs, pin = !needs;
  if (needs)
    for (const PortNeed& p : needs->ports) {
      const bool is_auto = p.pmd == "auto";
      raw = raw || p.pmd == "af_packet" || p.pmd == "af_xdp" || p.pmd == "mlx5" || p.pmd == "mana" || is_auto;
      xdp = xdp || p.pmd == "af_xdp" || is_auto;
      pin = pin || p.pmd == "af_xdp" || p.pmd == "mlx5" || p.pmd == "mana" || is_auto;
    }
  std::string caps;
  auto add = [&](const char* c) { caps += fmt::format("{}{}", caps.empty() ? "" : ",", c); };
  if (raw) add("cap_net_raw");
  if (xdp) {
    add("cap_net_admin");
    add("cap_bpf");
    add("cap_perfmon");
  }
  if (pin) add("cap_ipc_lock");
  return caps;
}

void check_capabilities(const Needs* needs, const HostFacts& h, Report& r) {
  if (!h.caps_known) {
    r.warn("capabilities", "cannot read this process's capabilities (capget failed)",
           "check /proc/self/status (CapEff) by hand");
    return;
  }
  const int bpf = 39;  // CAP_BPF (5.8+); CAP_SYS_ADMIN covers it on every kernel
  auto has_bpf = [&] { return h.caps.has(bpf) || h.caps.has(CAP_SYS_ADMIN); };
  if (!needs) {
    std::string have;
    for (int c : {CAP_NET_RAW, CAP_NET_ADMIN, bpf, CAP_IPC_LOCK})
      if (h.caps.has(c)) have += fmt::format("{}{}", have.empty() ? "" : ", ", c == bpf ? "CAP_BPF" : host::capability_name(c));
    if (h.caps.has(CAP_NET_RAW) && h.caps.has(CAP_NET_ADMIN) && has_bpf())
      r.ok("capabilities", fmt::format("effective: {} (every driver can open)", have));
    else
      r.warn("capabilities",
             fmt::format("effective: {}; af_packet, af_xdp, mlx5 and mana ports need more (synth, pcap and socket "
                         "ports run without)",
                         have.empty() ? std::string("none of CAP_NET_RAW, CAP_NET_ADMIN, CAP_BPF, CAP_IPC_LOCK") : have),
             setcap_fix(h, config_setcap_caps(nullptr)));
    return;
  }
  std::vector<Need> wanted = {{CAP_NET_RAW, "raw sockets and raw-packet queues", {}},
                              {CAP_NET_ADMIN, "attaching the XDP program", {}},
                              {bpf, "loading the XDP program", {}},
                              // Without it the verifier refuses the program's packet-pointer
                              // arithmetic for a process that is not root.
                              {CAP_PERFMON, "the verifier to accept the XDP program", {}}};
  for (const PortNeed& p : needs->ports) {
    const bool is_auto = p.pmd == "auto";
    if (p.pmd == "af_packet" || p.pmd == "af_xdp" || p.pmd == "mlx5" || p.pmd == "mana" || is_auto)
      wanted[0].ports.insert(p.name);
    if (p.pmd == "af_xdp" || is_auto) {
      wanted[1].ports.insert(p.name);
      wanted[2].ports.insert(p.name);
      wanted[3].ports.insert(p.name);
    }
  }
  bool needed_any = false;
  for (const Need& w : wanted) {
    if (w.ports.empty()) continue;
    needed_any = true;
    const std::string name = w.cap == bpf ? "CAP_BPF" : w.cap == CAP_PERFMON ? "CAP_PERFMON" : std::string(host::capability_name(w.cap));
    const std::string grant = config_setcap_caps(needs);
    const bool have = w.cap == bpf ? has_bpf() : w.cap == CAP_PERFMON ? h.caps.has(CAP_PERFMON) || h.caps.has(CAP_SYS_ADMIN) : h.caps.has(w.cap);
    std::string ports;
    bool only_auto = true;
    for (const std::string& n : w.ports) {
      ports += fmt::format("{}{}", ports.empty() ? "" : ", ", n);
      for (const PortNeed& p : needs->ports)
        if (p.name == n && p.pmd != "auto") only_auto = false;
    }
    const std::string check = fmt::format("capability {}", name);
    if (have)
      r.ok(check, fmt::format("held ({} for port {})", w.why, ports));
    else if (only_auto)
      r.warn(check,
             fmt::format("missing: pmd = \"auto\" on port {} skips the rungs that need it ({}) and falls back to a "
                         "slower one",
                         ports, w.why),
             setcap_fix(h, grant));
    else
      r.fail(check, fmt::format("missing: port {} needs it for {}", ports, w.why), setcap_fix(h, grant));
  }
  if (!needed_any) r.ok("capabilities", "no port of this config needs a capability");
}

}  // namespace rawpipe::doctor
