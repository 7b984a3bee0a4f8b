// A capture tap's settings, as the [[taps]] config tables give them (pipeline/capture/tap.hh
// has the taps themselves). Kept apart so the Plan can hold them without the writer's machinery.
#pragma once

#include <cstdint>
#include <string>

#include "rawpipe/drop_reason.hh"

namespace rawpipe {

enum class CaptureFormat : std::uint8_t { kPcap, kPcapng };

enum class TapStage : std::uint8_t { kRx, kFiltered, kDrops };

struct TapConfig {
  std::string name;
  TapStage stage = TapStage::kRx;
  std::string path;
  CaptureFormat format = CaptureFormat::kPcap;
  std::uint32_t snaplen = 65535;
  std::uint64_t rotate_bytes = 0;        // 0: no size rotation
  double rotate_seconds = 0;             // 0: no time rotation
  std::uint32_t max_files = 0;           // 0: keep every file
  std::uint32_t lane_bytes = 4u << 20;   // per producer; a power of two
  std::uint64_t drop_reason_mask = ~0ull;// kDrops only: bit r set = capture drops of reason r
  std::string port;                      // only packets received on this port ("" = all)
  std::int32_t port_id = -1;             // `port` resolved by whoever builds the writer; -1 = all
  std::string endpoint;                  // filtered/drops only: packets classified to it ("" = all)
  std::int32_t endpoint_id = -1;         // `endpoint` resolved like port_id
};
static_assert(kDropReasonCount <= 64, "drop_reason_mask holds one bit per reason");

}  // namespace rawpipe
