// Whether the metrics server could listen where the config says, tried the same way (a TCP socket
// with SO_REUSEADDR, bind, listen, then closed), and when the address is taken, which process holds
// it: the LISTEN socket's inode from /proc/net/tcp{,6}, then the /proc/PID/fd link that names it.
#pragma once

#include <string>

#include "services/doctor/facts.hh"

namespace rawpipe::doctor {

ListenFacts probe_listen(const std::string& listen, const std::string& proc_root = "/proc");

// "pid 123 (cmdline)" for each process holding a socket with that inode, "" when none is visible.
std::string socket_holders(std::uint64_t inode, const std::string& proc_root = "/proc");

}  // namespace rawpipe::doctor
