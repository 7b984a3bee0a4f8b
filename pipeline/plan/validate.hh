// Every check of a Plan, in one place.
//
// The config loader (pipeline/config/loader.cc) reads TOML into a Plan and resolves names to ids;
// whether that Plan can run is decided here, and only here. The loader records each problem at
// the key it came from (file, line, key), so `rawpipe check` refuses exactly what `rawpipe run`
// refuses; Pipeline::create() calls validate_plan() again for plans built in code, where the
// same problem reads the same way (at the element's table line).
//
// What needs a device (opening a port, the queue counts the hardware really has, a MAC from the
// link, pinning a thread) stays with the builder and run control: a Plan that passes here can
// still fail there, but never for a reason this file could have seen.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "rawpipe/mbuf.hh"
#include "rawpipe/plan.hh"
#include "rawpipe/status.hh"

namespace rawpipe {

inline constexpr std::uint32_t kMaxPortQueues = 256;
inline constexpr std::uint32_t kMaxRingSize = 1u << 20;
// An endpoint ring holds at least two: with one slot the lcore stalls on every packet the
// consumer has not taken yet.
inline constexpr std::uint32_t kMinEndpointRingSize = 2;
inline constexpr std::uint32_t kMaxIdleSleepUs = 1000000;
// Mbuf::kNoEndpoint (0xffff) marks "no endpoint" in a buffer's header.
inline constexpr std::size_t kMaxEndpointCount = Mbuf::kNoEndpoint;

// Which element of the Plan a problem belongs to; `index` is its position in its vector.
enum class PlanPart : std::uint8_t { kPlan, kRun, kPool, kPort, kEndpoint, kLcore, kTap, kFilter };

struct PlanProblem {
  PlanPart part = PlanPart::kPlan;
  std::size_t index = 0;
  std::string key;      // the config key the problem is about ("" = the whole table)
  std::string message;  // what is wrong and what to do, without the location
};

struct ValidateOptions {
  // CPUs an lcore may name (0..cpu_count-1); 0 leaves CPUs unchecked here (start() then reports
  // a pin that fails, with the CPUs this process may use).
  unsigned cpu_count = 0;
  // Refuse an endpoint with no rules that is not the default endpoint. A config file's endpoints
  // get their rules from the file, so one without is a forgotten match list; a plan built in code
  // may add its rules at run time (Pipeline::add_rule, the Extra API's add_conf_rule).
  bool endpoints_need_rules = false;
};

// Every problem, in plan order (pools, ports, endpoints, run, lcores, taps, filters). Never fails
// on malformed input: any Plan, however inconsistent, gets a list.
std::vector<PlanProblem> find_plan_problems(const Plan& plan, const ValidateOptions& options = {});

// The label the loader gives the element in messages: "ports[0] 'p0'", "lcores[1]", "[run]".
std::string plan_part_label(const Plan& plan, PlanPart part, std::size_t index);

// What a message about the element at `w` starts with, as the loader's errors do: "FILE:LINE: ",
// "FILE: " when the element has no line (a plan built in code names only its source), or nothing.
std::string location_prefix(const SourceLocation& w);

// The first problem formatted like the loader's errors ("FILE:LINE: LABEL: key 'KEY': MESSAGE
// (and N more errors)"), or ok.
Status validate_plan(const Plan& plan, const ValidateOptions& options = {});

}  // namespace rawpipe
