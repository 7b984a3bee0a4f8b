// Config file -> validated, immutable Plan.
//
// The loader reads the TOML sections it owns ([run], [[pools]], [[ports]], [[endpoints]],
// [[lcores]]), hands each port's table to its driver's parse() after reading the generic port keys,
// rejects every unknown key, then checks the whole plan across sections (names unique, references
// resolve, every rx queue polled by exactly one lcore, CPUs exist, ring sizes are powers of two).
// Every error names the file, the line and the key; all errors are collected and the first is
// returned with a count of the others.
//
// pipeline/ does not depend on any driver: the lookup is a function pointer, by default the
// built-in driver set's (pipeline/port/registry.hh, defined by whatever drivers the library links).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "rawpipe/status.hh"
#include "rawpipe/plan.hh"
#include "rawpipe/api.h"

namespace rawpipe {

struct PmdDriver;  // a driver's registration (internal: pipeline/port/driver.hh)

// The drivers built into this library, by the name `pmd = "..."` takes.
RAWPIPE_API const PmdDriver* find_pmd(std::string_view name);

struct DriverInfo {
  std::string name;
  std::string summary;
};
// Every built-in driver in `rawpipe list-pmds` order.
RAWPIPE_API std::vector<DriverInfo> builtin_drivers();

using PmdLookupFn = const PmdDriver* (*)(std::string_view name);

struct LoadOptions {
  PmdLookupFn find_pmd = &rawpipe::find_pmd;
  // Driver names listed in the "unknown pmd" message; empty means the built-in drivers' names
  // when find_pmd is the built-in lookup, and none otherwise.
  std::vector<std::string_view> known_pmds;
  // CPUs an lcore may name (0..cpu_count-1); 0 means this machine's online CPU count.
  unsigned cpu_count = 0;
};

// [run] drop_privileges, user, group, plugin_dirs (rawpipe/privilege.hh applies them).
struct PrivilegeSettings {
  bool drop = true;
  std::string user;                      // empty: keep the uid
  std::string group;                     // empty: the user's primary group
  bool plugin_dirs_set = false;
  std::vector<std::string> plugin_dirs;
};

// Settings of the rawpipe app that live in the config's [run] table but are not part of the
// pipeline itself.
struct AppSettings {
  int consumer_cpu = -1;  // CPU of the thread that drains "ring" endpoints; -1: not pinned
  // [run] on_loss = "fail": frames a port lost before the pipeline (or a loss counter it could
  // not read) make `rawpipe run` exit non-zero; "warn" (default) reports them and exits 0.
  bool fail_on_loss = false;
  PrivilegeSettings privilege;  // [run] drop_privileges, user, group, plugin_dirs
};

struct LoadedConfig {
  Plan plan;
  AppSettings app;
  // Legal but suspicious parts, each "FILE:LINE: TABLE: key 'KEY': MESSAGE": a rule another
  // endpoint's rule shadows, an IPv6 address without brackets whose last group reads like a port.
  std::vector<std::string> warnings;
};

// Reads and validates a config file (or a string, for tests; `file` then only names it in
// messages).
RAWPIPE_API Result<LoadedConfig> load_config(const std::string& file, const LoadOptions& options = {});
RAWPIPE_API Result<LoadedConfig> load_config_string(std::string_view text, const std::string& file, const LoadOptions& options);

// The config reference: every key of every section and built-in driver (name, type, allowed values,
// default, meaning), from the tables the parsers themselves use. `which` names one section
// ("pools", "ports", ...) or driver ("synth", ...); empty means all. Markdown or plain text.
RAWPIPE_API Result<std::string> config_reference(std::string_view which = {}, bool markdown = false);

// The pipeline part only.
RAWPIPE_API Result<Plan> load_plan(const std::string& file, const LoadOptions& options = {});

// A one-screen description of a plan (pools, ports, endpoints, lcores), printed by `rawpipe check`
// and at the start of `rawpipe run`.
RAWPIPE_API std::string describe_plan(const Plan& plan);

// This machine's online CPU count, as the loader uses it when LoadOptions::cpu_count is 0.
RAWPIPE_API unsigned online_cpu_count();

}  // namespace rawpipe
