// `rawpipe stat [PID|NAME]`: reads the stats segment of a running pipeline (pipeline/ops).
#pragma once

#include <string>

namespace rawpipe::app {

struct StatOptions {
  std::string target;  // pid or pipeline name; empty: the only segment in /dev/shm
  bool once = false;
  bool json = false;
  bool drops = false;
  bool list = false;  // list the live pipelines and exit
};

int stat_command(const StatOptions& options);

}  // namespace rawpipe::app
