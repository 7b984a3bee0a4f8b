// An af_xdp port attaches xdp_steer.bpf.o, which ships beside the binary (build tree or install
// prefix) or is named by RAWPIPE_XDP_OBJ; the driver's own lookup says where it looked.
#include <fmt/format.h>

#include "services/doctor/checks.hh"

namespace rawpipe::doctor {

void check_xdp_program(const Needs* needs, const HostFacts& h, Report& r) {
  bool wanted = !needs, only_auto = true;
  if (needs)
    for (const PortNeed& p : needs->ports)
      if (p.pmd == "af_xdp" || p.pmd == "auto") {
        wanted = true;
        only_auto = only_auto && p.pmd == "auto";
      }
  if (!wanted) return;
  auto report = [&](std::string detail, std::string fix) {
    if (!needs || only_auto)
      r.warn("xdp program", std::move(detail), std::move(fix));
    else
      r.fail("xdp program", std::move(detail), std::move(fix));
  };
  if (!h.af_xdp_built)
    report("the af_xdp driver is not built into this binary",
           "install libxdp-dev, libbpf-dev and clang, then reconfigure and rebuild (meson setup --reconfigure)");
  else if (!h.xdp_object_error.empty())
    report(h.xdp_object_error, "ninja -C <build dir> (builds pmd/af_xdp/xdp_steer.bpf.o), or install rawpipe, or "
                               "export RAWPIPE_XDP_OBJ=/path/to/xdp_steer.bpf.o");
  else
    r.ok("xdp program", h.xdp_object);

  // What the run will meet on each af_xdp interface (pmd/af_xdp/program.cc decides the same way).
  if (!needs) return;
  for (const PortNeed& p : needs->ports) {
    if (p.pmd != "af_xdp" || p.interface.empty()) continue;
    auto it = h.netdevs.find(p.interface);
    if (it == h.netdevs.end() || !it->second.exists) continue;
    const NetdevFacts& f = it->second;
    const std::string check = fmt::format("xdp on {}", p.interface);
    if (!f.xdp_query_error.empty())
      r.warn(check, fmt::format("cannot tell which XDP program is attached: {}", f.xdp_query_error),
             "run doctor as root (or with CAP_NET_ADMIN and CAP_BPF)");
    else if (f.xdp_prog_id == 0)
      r.ok(check, "no XDP program attached; the run attaches its own through a bpf_link");
    else if (!f.xdp_prog_rawpipe)
      r.fail(check,
             fmt::format("another XDP program ('{}', id {}{}) is attached: the run cannot attach its own",
                         f.xdp_prog_name, f.xdp_prog_id,
                         f.xdp_prog_holders.empty() ? "" : ", held by " + f.xdp_prog_holders),
             fmt::format("if nothing needs it: ip link set dev {} xdp off", p.interface));
    else if (!f.xdp_prog_holders.empty())
      r.fail(check,
             fmt::format("a running pipeline owns rawpipe's XDP program here (id {}, held by {})", f.xdp_prog_id,
                         f.xdp_prog_holders),
             "stop that pipeline (its program goes with it); do not remove the program under it");
    else
      r.ok(check, fmt::format("a leftover rawpipe XDP program (id {}) that no process holds: the run removes it "
                              "before it attaches",
                              f.xdp_prog_id));
  }
}

}  // namespace rawpipe::doctor
