// `rawpipe version` and `--version` on every subcommand: what this binary is and what it runs on.
#pragma once

#include <string>

namespace rawpipe::app {

// Several lines: version and commit, build type, built drivers, and for DPDK, libxdp and
// rdma-core the version found at build time and the one this process loads.
std::string version_text();

}  // namespace rawpipe::app
