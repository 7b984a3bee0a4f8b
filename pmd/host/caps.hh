// Linux capabilities of this process, read with capget(2) (no libcap dependency), and the text
// form of /proc/<pid>/status for tests and for looking at another process.
#pragma once

#include <cstdint>
#include <string_view>

#include "rawpipe/status.hh"

namespace rawpipe::host {

struct CapSet {
  std::uint64_t effective = 0;
  std::uint64_t permitted = 0;
  std::uint64_t bounding = 0;
  bool has(int cap) const noexcept { return cap >= 0 && cap < 64 && ((effective >> cap) & 1) != 0; }
};

// The calling thread's sets (capget with pid 0). Bounding stays 0: capget does not report it.
Result<CapSet> read_caps();
// Parses the CapEff/CapPrm/CapBnd lines of /proc/<pid>/status text.
Result<CapSet> parse_proc_status_caps(std::string_view status_text);
// True when the calling thread's effective set holds `cap` (CAP_NET_RAW, ...).
bool has_capability(int cap);
// "CAP_NET_RAW" for 13 and so on, for the capabilities rawpipe cares about; "CAP_<n>" otherwise.
std::string_view capability_name(int cap);

}  // namespace rawpipe::host
