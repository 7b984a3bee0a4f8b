// `rawpipe doctor`: whether this machine can run a config (or, without one, what it offers), as
// findings with a fix each: capabilities, memlock, hugepages, interfaces and their drivers, NUMA,
// bpffs, the XDP program, rdma-core and the devices, and which driver and mode each port will
// run in.
#pragma once

#include <string>

#include "rawpipe/api.h"

namespace rawpipe {

struct DoctorResult {
  bool can_run = false;   // no finding stops the config (or the machine) from running
  std::string text;       // the report for a terminal, one finding per line with its fix
  std::string json;       // the same as a JSON document
};

// Looks at this machine; `config` empty means no config (what the machine offers in general).
RAWPIPE_API DoctorResult run_doctor(const std::string& config);

}  // namespace rawpipe
