#include "stop_signals.hh"

#include <cstddef>

namespace rawpipe::app {

void take_down_stop_handlers(std::span<const int> signals, std::span<const struct sigaction> old, bool stop_signalled) {
  struct sigaction ignore {};
  ignore.sa_handler = SIG_IGN;
  for (std::size_t i = 0; i < signals.size() && i < old.size(); ++i)
    sigaction(signals[i], stop_signalled ? &ignore : &old[i], nullptr);
}

}  // namespace rawpipe::app
