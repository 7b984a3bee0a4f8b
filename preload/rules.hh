// Which UDP sockets to offload, in the grammar of libvma.conf / VMA's add_conf_rule:
//
//   use <target> <protocol> <address>:<ports>
//   target   = rawpipe | vma (offload) | os (leave to the kernel)
//   protocol = udp | udp_r (a receiving socket: its bind address or a joined group)
//   address  = * | IPV4[/LEN] | [IPV6][/LEN]
//   ports    = * | PORT | FIRST-LAST
//
// e.g. "use rawpipe udp *:7007", "use os udp 239.1.1.0/24:*", "use rawpipe udp [ff02::1]:*".
// Rules come from RAWPIPE_OFFLOAD (';' or newlines between rules) and the file named by
// RAWPIPE_OFFLOAD_FILE ('#' starts a comment). The first rule that matches decides, as in
// libvma.conf. No rules at all: every UDP socket bound to an address of the offloaded
// interface (or the wildcard, or a multicast group) is offloaded. Rules given and none matches:
// the kernel's.
#pragma once

#include <netinet/in.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace rawpipe::preload {

struct OffloadRule {
  bool offload = true;
  std::uint8_t family = 0;  // 0: any address; 4 or 6
  std::uint8_t prefix = 0;
  std::uint8_t addr[16] = {};
  std::uint16_t port_first = 0;
  std::uint16_t port_last = 65535;
  std::string text;  // as written, for messages
};

// Parses one rule; on error returns false and sets *error to what is wrong and what was expected.
bool parse_offload_rule(std::string_view line, OffloadRule* out, std::string* error);

// Parses a list (';' or '\n' separated, '#' comments); the first error stops it.
bool parse_offload_rules(std::string_view text, std::vector<OffloadRule>* out, std::string* error);

enum class Decision { kOffload, kKernel, kNoRule };
// addr: 4 or 16 bytes in network order (family 4 or 6); port in host order.
Decision decide(const std::vector<OffloadRule>& rules, int family, const std::uint8_t* addr, std::uint16_t port,
                const OffloadRule** matched);

}  // namespace rawpipe::preload
