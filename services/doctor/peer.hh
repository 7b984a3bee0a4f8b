// The transmitting side of a port's interface (a veth's peer, lo itself) and its tx checksum
// offload, read into NetdevFacts (peer.cc says how it finds a peer in another namespace).
#pragma once

#include <string>

#include "services/doctor/facts.hh"

namespace rawpipe::doctor {

// Fills f.peer_*; `run_netns` is the name of the namespace doctor runs in ("" when unnamed), for
// the fix command of a peer that shares it.
void read_peer_offload(NetdevFacts& f, const std::string& run_netns);

// The name under /run/netns of this process's network namespace, "" when it has none.
std::string current_netns_name();

}  // namespace rawpipe::doctor
