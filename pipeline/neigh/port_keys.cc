#include "pipeline/neigh/port_keys.hh"

#include <set>

#include "pipeline/config/hex.hh"
#include "pipeline/config/section.hh"
#include "pipeline/config/tables.hh"
#include "pipeline/neigh/neigh.hh"

namespace rawpipe {

namespace {
const KeyDoc kNeighPortDocs[] = {
    {"addresses", "string list", "IPv4/IPv6 addresses, at most 64", "[]",
     "addresses the pipeline answers ARP and neighbour solicitations for on this port"},
    {"mac", "string", "a unicast MAC address (with addresses only)", "the port's MAC",
     "MAC address the ARP/ND answers give"},
    {"next_hop_mac", "string", "a unicast MAC address", "resolved by ARP/ND",
     "destination MAC of every datagram the Extra API's sendto sends on this port"},
};
}  // namespace

const KeyTable kNeighPortKeys{"neighbour", "[[ports]]", "neighbour keys of every port", kNeighPortDocs};

Result<wire::MacAddr> parse_mac_address(std::string_view text) {
  wire::MacAddr mac{};
  if (text.size() != 17) return Status::errorf("\"{}\" is not a MAC address like \"02:00:00:00:00:01\"", text);
  for (std::size_t i = 0; i < 6; ++i) {
    int hi = hex_digit(text[i * 3]), lo = hex_digit(text[i * 3 + 1]);
    if (hi < 0 || lo < 0 || (i < 5 && text[i * 3 + 2] != ':'))
      return Status::errorf("\"{}\" is not a MAC address like \"02:00:00:00:00:01\"", text);
    mac[i] = static_cast<std::uint8_t>(hi << 4 | lo);
  }
  if (mac[0] & 1) return Status::errorf("\"{}\" is a multicast address; a port answers with a unicast MAC", text);
  return mac;
}

NeighPortKeys read_neigh_port_keys(ConfigSection& s) {
  NeighPortKeys k;
  k.addresses = s.string_list("addresses");
  std::set<std::string> seen;
  for (const std::string& a : k.addresses) {
    auto parsed = parse_neigh_address(a, wire::MacAddr{});
    if (!parsed) s.fail("addresses", parsed.message());
    else if (!seen.insert(a).second) s.fail("addresses", fmt::format("\"{}\" is listed twice", a));
  }
  if (k.addresses.size() > NeighTable::kMaxAddresses)
    s.fail("addresses", fmt::format("at most {} addresses per port", NeighTable::kMaxAddresses));
  if (s.has("mac")) {
    k.mac = s.string("mac");
    auto mac = parse_mac_address(k.mac);
    if (!mac) s.fail("mac", mac.message());
    if (k.addresses.empty()) s.fail("mac", "only used to answer ARP/ND for `addresses`, and this port lists none");
  }
  if (s.has("next_hop_mac")) {
    k.next_hop_mac = s.string("next_hop_mac");
    auto mac = parse_mac_address(k.next_hop_mac);
    if (!mac)
      s.fail("next_hop_mac", fmt::format("{}; it is the MAC address the Extra API's sendto sends every datagram to",
                                         mac.message()));
  }
  return k;
}

}  // namespace rawpipe
