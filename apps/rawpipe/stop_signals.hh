// The end of a command's stop-signal handling (rawpipe run, rawpipe gen).
#pragma once

#include <signal.h>

#include <span>

namespace rawpipe::app {

// Takes down a command's stop handlers: signals[i] gets old[i] back. After a stop signal they stay
// ignored instead: the run ends with this process, and a repeat of the signal that arrives from
// here on (a second Ctrl-C, a service manager's second SIGTERM) must not turn the orderly exit,
// summary and JSON written, into a death by signal.
void take_down_stop_handlers(std::span<const int> signals, std::span<const struct sigaction> old, bool stop_signalled);

}  // namespace rawpipe::app
