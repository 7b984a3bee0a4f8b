// rawpipe: run a packet pipeline from a config file, check a config, list the built-in drivers.
#include <CLI/CLI.hpp>
#include <fmt/core.h>

#include <cstdlib>
#include <cstring>
#include <iostream>

#include "commands.hh"
#include "log.hh"
#include "stat.hh"
#include "version.hh"
#include "rawpipe/dissect.hh"

namespace {

constexpr const char* kExitCodes =
    "Exit status:\n"
    "  0  success (run: every packet accounted for, every buffer back in its pool)\n"
    "  1  error: bad arguments, a bad config, a device, file or permission that is missing\n"
    "  2  run: the accounting did not balance or buffers were left outstanding\n"
    "  3  run: [run] on_loss = \"fail\" and a port lost frames before the pipeline\n";

// `--version` (or -V) anywhere before `--` answers at once, whatever else the line holds: a
// subcommand's required arguments must not stand between a user and the version.
bool asks_for_version(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--") == 0) return false;
    if (std::strcmp(argv[i], "--version") == 0 || std::strcmp(argv[i], "-V") == 0) return true;
  }
  return false;
}

// CLI11's NonNegativeNumber prints its range as 0 to 1.79769e+308 spelled out; say it plainly.
// `zero`: what 0 means for this option.
CLI::Validator seconds_validator(std::string zero) {
  return CLI::Validator(
      [zero](std::string& s) -> std::string {
        double v = 0;
        std::size_t used = 0;
        try {
          v = std::stod(s, &used);
        } catch (...) {
          used = 0;
        }
        if (used != s.size() || s.empty()) return "expected a number of seconds, got '" + s + "'";
        if (!(v >= 0) || v > 31536000)
          return "expected 0 (" + zero + ") or a number of seconds up to 31536000 (a year), got " + s;
        return {};
      },
      "SECONDS");
}

}  // namespace

int main(int argc, char** argv) {
  using namespace rawpipe::app;
  if (asks_for_version(argc, argv)) {
    fmt::print("{}", version_text());
    return 0;
  }
  CLI::App cli{"rawpipe: a poll-mode packet pipeline (parse, classify, dispatch to endpoints)", "rawpipe"};
  cli.set_version_flag("-V,--version", [] { return version_text(); }, "Print the version, commit, build and libraries, and exit");
  cli.footer(kExitCodes);
  cli.require_subcommand(1);
  // Every subcommand lists --version in its own help; asks_for_version answers it.
  auto add_version = [](CLI::App* sub) {
    sub->set_version_flag("-V,--version", [] { return version_text(); }, "Print the version, commit, build and libraries, and exit");
    sub->footer(kExitCodes);
    return sub;
  };

  RunOptions run;
  double duration = 0;
  std::string log_level;
  CLI::App* run_cmd = add_version(cli.add_subcommand("run", "Run the pipeline a config describes; Ctrl-C stops it"));
  run_cmd->add_option("config", run.config, "TOML config file (see configs/)")->required()->check(CLI::ExistingFile);
  CLI::Option* duration_opt =
      run_cmd->add_option("-d,--duration", duration, "Seconds to run (overrides [run] duration; 0 = until Ctrl-C)")
          ->check(seconds_validator("run until Ctrl-C"));
  run_cmd->add_option("-j,--json", run.json_file,
                      "Write the final summary as JSON to this file; '-' writes it to stdout (the rest of the "
                      "output then goes to stderr)");
  run_cmd->add_flag("-q,--quiet", run.quiet, "Print only warnings and errors (no live line, no summary)");
  run_cmd->add_flag("--reasons", run.reasons, "Follow every live line with the drop and loss reasons so far");
  run_cmd->add_option("--reasons-every", run.reasons_every_s, "Print the drop and loss reasons every N seconds")
      ->check(seconds_validator("never"));
  run_cmd->add_option("--log-level", log_level, "error, warn, info (default) or debug; also RAWPIPE_LOG_LEVEL")
      ->check(CLI::IsMember({"error", "warn", "info", "debug"}));

  GenOptions gen;
  int gen_cpu = -1;
  std::uint16_t gen_burst = 32;
  CLI::App* gen_cmd = add_version(cli.add_subcommand(
      "gen", "Transmit a config's synth frames (sizes, IMIX, flows, VLAN, malformed share) on a port, at a rate or flat out"));
  gen_cmd->add_option("config", gen.config, "TOML config with the synth port and the transmit port")
      ->required()->check(CLI::ExistingFile);
  gen_cmd->add_option("-p,--port", gen.port, "Port to transmit on")->required();
  gen_cmd->add_option("--source", gen.source, "Port whose rx queue 0 makes the frames (default: the only synth port)");
  gen_cmd->add_option("--queue", gen.queue, "tx queue of --port");
  gen_cmd->add_option("-r,--rate", gen.rate_pps, "Frames per second (token bucket); 0 = flat out")
      ->check(CLI::NonNegativeNumber);
  gen_cmd->add_option("-n,--count", gen.count, "Frames to send, then stop; 0 = no limit");
  gen_cmd->add_option("-d,--duration", gen.duration_s, "Seconds to run; 0 = until --count or Ctrl-C")
      ->check(CLI::NonNegativeNumber);
  gen_cmd->add_option("--interval", gen.interval_s, "Seconds between rate lines")->check(CLI::PositiveNumber);
  CLI::Option* gen_cpu_opt = gen_cmd->add_option("--cpu", gen_cpu, "CPU for the sending thread (default: the lcore's)");
  CLI::Option* gen_burst_opt =
      gen_cmd->add_option("--burst", gen_burst, "Frames per burst, 1-256 (default: the lcore's)")->check(CLI::Range(1, 256));
  gen_cmd->add_option("-j,--json", gen.json_file, "Write the final counts as JSON to this file");

  CheckOptions check;
  CLI::App* check_cmd = add_version(cli.add_subcommand("check", "Validate a config and print the plan, without running it"));
  check_cmd->add_option("config", check.config, "TOML config file")->required();
  check_cmd->add_option("--json", check.json_file, "Also write the plan and its warnings as JSON to this file (- for stdout)");

  ConfigRefOptions config_ref;
  CLI::App* config_ref_cmd = add_version(
      cli.add_subcommand("config-ref", "Print every config key (type, allowed values, default, meaning)"));
  config_ref_cmd->add_option("name", config_ref.which, "Only this section (run, pools, ports, ...) or driver (synth, ...)");
  config_ref_cmd->add_flag("--markdown", config_ref.markdown, "Markdown tables (docs/config.md is this output)");

  DoctorOptions doctor;
  CLI::App* doctor_cmd = add_version(
      cli.add_subcommand("doctor", "Check that this machine can run a config (or what it offers) and print each fix"));
  doctor_cmd->add_option("config", doctor.config, "TOML config file; without one, checks the machine in general");
  doctor_cmd->add_flag("--json", doctor.json, "Print the findings as JSON");

  CLI::App* list_cmd = add_version(cli.add_subcommand("list-pmds", "List the poll-mode drivers built into this binary"));

  StatOptions stat;
  CLI::App* stat_cmd =
      add_version(cli.add_subcommand("stat", "Show the live counters of a running pipeline (by pid or config name)"));
  stat_cmd->add_option("target", stat.target, "pid or name (the config file's stem); default: the only one running");
  stat_cmd->add_flag("--once", stat.once, "Print once and exit");
  stat_cmd->add_flag("--json", stat.json, "Print the stats document as JSON and exit");
  stat_cmd->add_flag("--drops", stat.drops, "Show only the drop attribution tree");
  stat_cmd->add_flag("--list", stat.list, "List the running pipelines (pid, name, config) and exit");

  ExecOptions exec;
  CLI::App* exec_cmd = cli.add_subcommand(
      "exec", "Run a program with its UDP sockets on rawpipe (LD_PRELOAD of librawpipe-preload.so)");
  exec_cmd->add_option("-c,--config", exec.config, "Pipeline config (its ports and lcores)")->check(CLI::ExistingFile);
  exec_cmd->add_option("-i,--interface", exec.interface, "Interface to offload (pmd auto), without a config");
  exec_cmd->add_flag("--no-lcore", exec.no_lcore,
                     "With --interface: no lcore thread; the application's threads poll the port while they wait");
  exec_cmd->add_option("--offload", exec.offload, "Offload rules, e.g. \"use rawpipe udp *:7007\" (';' between rules)");
  exec_cmd->add_option("program", exec.argv, "The program and its arguments, after --")->required();

  std::string pcap_file;
  CLI::App* dissect_cmd = add_version(cli.add_subcommand("dissect", "Print every frame of a pcap file layer by layer"));
  dissect_cmd->add_option("file", pcap_file, "pcap or pcapng file")->required()->check(CLI::ExistingFile);

  CLI::App* version_cmd = cli.add_subcommand("version", "Print the version, commit, build type, drivers and libraries");
  std::string help_topic;
  CLI::App* help_cmd = cli.add_subcommand("help", "Print the help of rawpipe or of one subcommand");
  help_cmd->add_option("subcommand", help_topic, "the subcommand to explain");

  try {
    cli.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // CLI11 gives each kind of argument error its own status (105, 106, 109...); rawpipe promises 1.
    return cli.exit(e) == 0 ? 0 : 1;
  }

  if (const char* env = std::getenv("RAWPIPE_LOG_LEVEL"); env && *env && log_level.empty()) {
    if (auto level = parse_log_level(env))
      set_log_level(*level);
    else
      log_warn("RAWPIPE_LOG_LEVEL='{}' is not a log level (error, warn, info, debug); using info", env);
  }
  if (!log_level.empty()) set_log_level(*parse_log_level(log_level));

  if (*run_cmd) {
    if (*duration_opt) run.duration_s = duration;
    return run_command(run);
  }
  if (*gen_cmd) {
    if (*gen_cpu_opt) gen.cpu = gen_cpu;
    if (*gen_burst_opt) gen.burst = gen_burst;
    return gen_command(gen);
  }
  if (*check_cmd) return check_command(check);
  if (*config_ref_cmd) return config_ref_command(config_ref);
  if (*list_cmd) return list_pmds_command();
  if (*doctor_cmd) return doctor_command(doctor);
  if (*stat_cmd) return stat_command(stat);
  if (*exec_cmd) return exec_command(exec);
  if (*dissect_cmd) return rawpipe::run_dissect(pcap_file, std::cout);
  if (*version_cmd) {
    fmt::print("{}", version_text());
    return 0;
  }
  if (*help_cmd) {
    if (help_topic.empty()) {
      // cli.help() would describe the subcommand just parsed, `help` itself.
      fmt::print("{}", cli.get_formatter()->make_help(&cli, "rawpipe", CLI::AppFormatMode::Normal));
      return 0;
    }
    for (CLI::App* sub : cli.get_subcommands({}))
      if (sub->get_name() == help_topic) {
        fmt::print("{}", sub->help("rawpipe"));
        return 0;
      }
    std::string names;
    for (CLI::App* sub : cli.get_subcommands({})) {
      if (!names.empty()) names += ", ";
      names += sub->get_name();
    }
    fmt::print(stderr, "rawpipe help: no subcommand '{}'; the subcommands are {}\n", help_topic, names);
    return 1;
  }
  return 1;
}
