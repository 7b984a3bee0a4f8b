// `rawpipe doctor [CONFIG] [--json]`: checks that this machine can run the config (or, without
// one, what it offers in general) and prints each problem with its fix. Exit code 0 only when the
// config can run.
#include <fmt/core.h>

#include "commands.hh"
#include "rawpipe/doctor.hh"

namespace rawpipe::app {

int doctor_command(const DoctorOptions& options) {
  const DoctorResult r = run_doctor(options.config);
  fmt::print("{}", options.json ? r.json + "\n" : r.text);
  return r.can_run ? 0 : 1;
}

}  // namespace rawpipe::app
