// The outcome of `rawpipe doctor`: one finding per check, each ok, warn or FAIL, with what is
// wrong and the exact fix (a command to run or a config change). A config can run when no
// finding is FAIL; warnings name something slower or riskier than it could be.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace rawpipe::doctor {

enum class Level { kOk, kWarn, kFail };

struct Finding {
  std::string check;   // "capabilities", "interface veth0", "mtu veth0", ...
  Level level = Level::kOk;
  std::string detail;  // what was found
  std::string fix;     // empty for ok
};

class Report {
 public:
  void ok(std::string check, std::string detail);
  void warn(std::string check, std::string detail, std::string fix);
  void fail(std::string check, std::string detail, std::string fix);

  const std::vector<Finding>& findings() const noexcept { return findings_; }
  // True when nothing is FAIL: `rawpipe doctor` exits 0 only then.
  bool can_run() const noexcept;
  // The findings of one check name (tests look a check up by name).
  std::vector<const Finding*> find(std::string_view check_prefix) const;

 private:
  std::vector<Finding> findings_;
};

std::string_view level_name(Level level);
// One line per finding ("  ok   capabilities: ..."), the fix indented under it, and a verdict.
std::string format_report(const Report& report);
nlohmann::json report_json(const Report& report);

}  // namespace rawpipe::doctor
