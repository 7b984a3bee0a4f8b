// run_doctor (rawpipe/doctor.hh): the config's needs, this machine's facts, every check, one
// report in text and JSON.
#include <fmt/core.h>

#include "rawpipe/doctor.hh"
#include "services/doctor/checks.hh"

namespace rawpipe {

DoctorResult run_doctor(const std::string& config) {
  using namespace rawpipe::doctor;
  std::optional<Needs> needs;
  Report config_findings;
  if (!config.empty()) {
    auto n = needs_from_config(config, LoadOptions{});
    if (n)
      needs.emplace(std::move(n).value());
    else
      config_findings.fail("config", n.message(),
                           fmt::format("correct the key the message names; `rawpipe check {}` re-validates it", config));
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
  DoctorResult out;
  out.can_run = all.can_run();
  nlohmann::json j = report_json(all);
  j["config"] = config.empty() ? nlohmann::json(nullptr) : nlohmann::json(config);
  j["kernel"] = host.kernel;
  out.json = j.dump(2);
  out.text = fmt::format("rawpipe doctor: {} (kernel {})\n",
                         config.empty() ? std::string("this machine, no config") : config, host.kernel) +
             format_report(all);
  return out;
}

}  // namespace rawpipe
