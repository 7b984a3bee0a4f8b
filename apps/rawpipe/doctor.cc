// `rawpipe doctor [CONFIG] [--json]`: checks that this machine can run the config (or, without
// one, what it offers in general) and prints each problem with its fix. Exit code 0 only when the
// config can run.
#include <fmt/core.h>

#include "apps/rawpipe/commands.hh"
#include "apps/rawpipe/doctor/checks.hh"
#include "apps/rawpipe/report.hh"

namespace rawpipe::app {

int doctor_command(const DoctorOptions& options) {
  using namespace rawpipe::doctor;
  std::optional<Needs> needs;
  Report config_findings;
  if (!options.config.empty()) {
    auto n = needs_from_config(options.config, default_load_options());
    if (n)
      needs.emplace(std::move(n).value());
    else
      config_findings.fail("config", n.message(),
                           fmt::format("correct the key the message names; `rawpipe check {}` re-validates it",
                                       options.config));
  }
  const Needs* np = needs ? &*needs : nullptr;
  const HostFacts host = gather_host(gather_options_for(np));
  Report report = run_checks(np, host);
  // A config that does not load cannot run; the machine checks still follow it.
  Report all = config_findings;
  for (const Finding& f : report.findings()) {
    if (f.level == Level::kOk) all.ok(f.check, f.detail);
    else if (f.level == Level::kWarn) all.warn(f.check, f.detail, f.fix);
    else all.fail(f.check, f.detail, f.fix);
  }
  if (options.json) {
    nlohmann::json j = report_json(all);
    j["config"] = options.config.empty() ? nlohmann::json(nullptr) : nlohmann::json(options.config);
    j["kernel"] = host.kernel;
    fmt::print("{}\n", j.dump(2));
  } else {
    fmt::print("rawpipe doctor: {} (kernel {})\n",
               options.config.empty() ? std::string("this machine, no config") : options.config, host.kernel);
    fmt::print("{}", format_report(all));
  }
  return all.can_run() ? 0 : 1;
}

}  // namespace rawpipe::app
