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
}

}  // namespace rawpipe::doctor
