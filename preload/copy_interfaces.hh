// Which of a config's ports give the pipeline copies of the kernel's traffic, so that the copy
// filter on offloaded sockets' kernel sides covers their interfaces (preload/kernel_side.hh).
#pragma once

#include <string>

#include "preload/kernel_side.hh"

namespace rawpipe::preload {

// From a config's [[ports]]: af_packet and auto ports (auto may pick af_packet) give copies, on
// their `interface`; af_xdp ports give none. False when a port's driver is one this cannot vouch
// for (pcap, dpdk, socket, the device drivers), when an interface does not exist, when there
// are more than CopyInterfaces::kMax, or when the text is not TOML: then the kernel sides are
// not read, rather than risk reading every datagram twice.
bool copy_interfaces(const std::string& config_text, CopyInterfaces* out);

}  // namespace rawpipe::preload
