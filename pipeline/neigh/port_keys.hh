// The generic port keys that name the pipeline's own addresses on a port, for the ARP/ND
// responder (neigh.hh):
//   addresses = ["10.0.0.2", "fd00::2"]   IPv4/IPv6 addresses the pipeline answers ARP and
//                                         neighbour solicitations for on this port
//   mac = "02:00:00:00:00:02"             the hardware address to answer with; default: the
//                                         port's own (Port::link().mac)
//   next_hop_mac = "02:00:00:00:00:09"    where the Extra API's sendto sends every datagram (a
//                                         gateway, or a peer nobody resolves) instead of
//                                         resolving its destination through ARP/ND
// Read by the config loader before the driver's keys; validated here so a typo names its line.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "rawpipe/status.hh"
#include "pipeline/wire/wire.hh"
#include "rawpipe/plan.hh"

namespace rawpipe {

class ConfigSection;

NeighPortKeys read_neigh_port_keys(ConfigSection& section);

// "02:00:00:00:00:02" -> bytes; an error names what is wrong.
Result<wire::MacAddr> parse_mac_address(std::string_view text);

}  // namespace rawpipe
