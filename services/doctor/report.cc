#include "services/doctor/report.hh"

#include <fmt/format.h>

namespace rawpipe::doctor {

void Report::ok(std::string check, std::string detail) {
  findings_.push_back({std::move(check), Level::kOk, std::move(detail), {}});
}
void Report::warn(std::string check, std::string detail, std::string fix) {
  findings_.push_back({std::move(check), Level::kWarn, std::move(detail), std::move(fix)});
}
void Report::fail(std::string check, std::string detail, std::string fix) {
  findings_.push_back({std::move(check), Level::kFail, std::move(detail), std::move(fix)});
}

bool Report::can_run() const noexcept {
  for (const Finding& f : findings_)
    if (f.level == Level::kFail) return false;
  return true;
}

std::vector<const Finding*> Report::find(std::string_view prefix) const {
  std::vector<const Finding*> out;
  for (const Finding& f : findings_)
    if (std::string_view(f.check).starts_with(prefix)) out.push_back(&f);
  return out;
}

std::string_view level_name(Level level) {
  switch (level) {
    case Level::kOk: return "ok";
    case Level::kWarn: return "warn";
    case Level::kFail: return "FAIL";
  }
  return "?";
}

std::string format_report(const Report& r) {
  std::string out;
  std::size_t warns = 0, fails = 0;
  for (const Finding& f : r.findings()) {
    out += fmt::format("{:<5} {}: {}\n", level_name(f.level), f.check, f.detail);
    if (!f.fix.empty()) out += fmt::format("      fix: {}\n", f.fix);
    warns += f.level == Level::kWarn;
    fails += f.level == Level::kFail;
  }
  out += fails ? fmt::format("cannot run: {} problem(s) to fix, {} warning(s)\n", fails, warns)
               : fmt::format("can run ({} warning(s))\n", warns);
  return out;
}

nlohmann::json report_json(const Report& r) {
  nlohmann::json checks = nlohmann::json::array();
  for (const Finding& f : r.findings()) {
    nlohmann::json j = {{"check", f.check}, {"level", std::string(level_name(f.level))}, {"detail", f.detail}};
    if (!f.fix.empty()) j["fix"] = f.fix;
    checks.push_back(std::move(j));
  }
  return {{"can_run", r.can_run()}, {"checks", checks}};
}

}  // namespace rawpipe::doctor
