// `rawpipe run` resolves [run] user and group before it opens anything and refuses a user or
// group this host does not have, and root, which would drop nothing. The facts hold that same
// resolution, so doctor's verdict is the one the run will reach.
#include <fmt/format.h>

#include "services/doctor/checks.hh"

namespace rawpipe::doctor {

void check_run_user(const Needs* needs, const HostFacts& h, Report& r) {
  if (!needs || needs->run_user.empty() || !h.run_user_checked) return;
  if (!h.run_user_error.empty()) {
    std::string fix;
    if (!h.run_user_exists)
      fix = fmt::format("create it (sudo useradd --system --no-create-home --shell /usr/sbin/nologin {}) or name "
                        "another unprivileged user in [run] user of {}",
                        h.run_user, needs->config);
    else if (h.run_uid == 0)
      fix = fmt::format("name an unprivileged user in [run] user of {}, or remove the key (capabilities are dropped "
                        "either way)",
                        needs->config);
    else
      fix = fmt::format("create the group (sudo groupadd --system {}) or change [run] group in {}", h.run_group,
                        needs->config);
    r.fail("run user", h.run_user_error, fix);
    return;
  }
  r.ok("run user", fmt::format("after setup the run switches to user {} (uid {}), group {} (gid {}); what it writes "
                               "later (--json, capture taps) must be writable by it",
                               h.run_user, h.run_uid, h.run_group, h.run_gid));
}

}  // namespace rawpipe::doctor
