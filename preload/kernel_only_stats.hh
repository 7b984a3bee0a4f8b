// A process where nothing is offloaded has no pipeline, and so no stats segment of its own. This
// gives it one, with the same "sockets" section a running pipeline carries (every UDP socket the
// kernel's, and why) and the reason nothing is offloaded, so that `rawpipe stat` shows a preloaded
// process whichever way its start went.
#pragma once

#include <string>

namespace rawpipe::preload {

// Control path, under the control lock, once the process is known to stay on the kernel: creates
// the segment and a thread that republishes it every second until exit. Later calls do nothing.
// When the segment cannot be made, one line on stderr says so and the process goes on without.
void publish_kernel_only(const std::string& why);

}  // namespace rawpipe::preload
