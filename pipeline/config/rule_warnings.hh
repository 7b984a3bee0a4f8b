// Rules that load but starve (shadowed by another endpoint's rule) or mean something else than
// they seem to (an unbracketed IPv6 address ending in what looks like a port). Warnings, never
// errors: the config is valid and runs.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "rawpipe/plan.hh"

namespace rawpipe {

struct RuleWarning {
  std::size_t endpoint = 0, rule = 0;  // the rule the warning is about
  std::size_t other_endpoint = SIZE_MAX, other_rule = SIZE_MAX;  // the rule that shadows it, if any
  std::string message;
};

std::vector<RuleWarning> find_rule_warnings(const Plan& plan);

}  // namespace rawpipe
