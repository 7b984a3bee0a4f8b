// The preload library's part of the stats segment that `rawpipe stat` reads: one row per UDP
// socket the library watches, offloaded (its endpoint, what it received and sent, what it lost)
// or the kernel's (why, and the kernel's own drop count for it).
#pragma once

#include <cstdint>
#include <string>

#include "preload/fd_table.hh"
#include "preload/runtime.hh"

namespace rawpipe::preload {

struct EndpointFigures {
  bool known = false;       // get_stats answered (it fails once destroy has begun)
  bool offloaded = true;    // set_endpoint_offload's state
  std::uint64_t ring_full = 0;
  std::uint64_t queued = 0;
};
EndpointFigures endpoint_figures(const Runtime& rt, std::uint16_t endpoint);

// Datagrams an offloaded socket lost because its application did not read fast enough.
std::uint64_t ring_full_since_bind(const Slot& s, const EndpointFigures& f);

const char* kernel_why_text(KernelWhy why);

// The "sockets" section's rows as JSON: every UDP socket, offloaded or why not. rt null: the
// process has no runtime (nothing is offloaded). Never waits for the control lock; must not be
// called with it held.
const std::string& sockets_now(const Runtime* rt);

// Adds the "sockets" section to the pipeline's stats segment; a line on stderr when it cannot.
void publish_sockets(Runtime& rt);

}  // namespace rawpipe::preload
