// Keeping control threads off the lcore CPUs.
//
// An lcore pinned to a CPU expects it to itself; rawpipe's own control threads (the stats
// publisher, the metrics server, the app's ring consumer unless it is pinned, the main loop)
// would otherwise be scheduled there too and preempt it. Call keep_control_threads_off_lcores
// on the control thread after Pipeline::start() (the lcore threads keep their own affinity) and
// before starting the others: threads inherit their creator's affinity.
#pragma once

#include <string>
#include <vector>

#include "rawpipe/api.h"
#include "rawpipe/plan.hh"
#include "rawpipe/status.hh"

namespace rawpipe {

struct ControlCpus {
  bool applied = false;         // the calling thread's affinity was narrowed
  std::vector<int> cpus;        // the CPUs control threads now use (when applied)
  std::vector<int> lcore_cpus;  // the CPUs of the plan's pinned lcores
  std::string note;             // one line for the user: what was done, or why nothing was
};

// Restricts the calling thread to the CPUs this process may use minus the pinned lcores' CPUs.
// Nothing changes when no lcore is pinned or the lcores take every allowed CPU (the note says
// so). An error only when the kernel refuses the new affinity.
RAWPIPE_API Result<ControlCpus> keep_control_threads_off_lcores(const Plan& plan);

}  // namespace rawpipe
