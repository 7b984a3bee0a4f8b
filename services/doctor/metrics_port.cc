// The [metrics] address: the run stops when it cannot serve /metrics there, so a taken port is a
// FAIL naming the process that listens on it.
#include <fmt/format.h>

#include "services/doctor/checks.hh"

namespace rawpipe::doctor {

void check_metrics_port(const Needs* needs, const HostFacts& h, Report& r) {
  if (!needs || !h.metrics_checked) return;
  const ListenFacts& m = h.metrics;
  if (m.bind_error.empty()) {
    r.ok("metrics", fmt::format("{} is free for /metrics", m.listen));
    return;
  }
  if (m.in_use) {
    r.fail("metrics",
           fmt::format("[metrics] listen = \"{}\": the address is in use{}", m.listen,
                       m.owner.empty() ? " (by a process this user cannot see; try doctor as root)"
                                       : ", listening: " + m.owner),
           "stop that process or change [metrics] listen (port 0 picks a free one)");
    return;
  }
  r.fail("metrics", fmt::format("[metrics] listen = \"{}\": cannot listen there: {}", m.listen, m.bind_error),
         "change [metrics] listen to an address of this host (127.0.0.1:PORT)");
}

}  // namespace rawpipe::doctor
