// The metrics endpoint's listening socket, opened one way for the server and for doctor's probe,
// so doctor's "the port is taken" is exactly what the server would meet.
#pragma once

#include "pipeline/config/metrics_section.hh"

namespace rawpipe::ops {

// A TCP socket bound to `where` and listening (backlog `backlog`), with SO_REUSEADDR so only a
// live listener conflicts (not a connection in TIME_WAIT from an earlier run). Returns the
// descriptor (close-on-exec), or -errno of the step that failed.
int open_listen_socket(const ListenAddress& where, int backlog) noexcept;

}  // namespace rawpipe::ops
