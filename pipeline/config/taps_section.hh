// The [[taps]] config tables: capture taps written to pcap/pcapng files (pipeline/capture/tap.hh
// describes the stages, rotation and the writer thread).
//
//   [[taps]]
//   name = "rx-all"            # optional; default "taps[N]"
//   stage = "rx"               # "rx" | "filtered" | "drops"
//   path = "/tmp/rx.pcap"      # created with mode 0600
//   format = "auto"            # "auto" (by extension) | "pcap" | "pcapng"
//   snaplen = 65535
//   rotate_bytes = 0           # 0 or >= 4096
//   rotate_seconds = 0
//   max_files = 0
//   lane_bytes = 4194304       # per lcore, a power of two
//   drop_reasons = ["no_match"]# stage "drops" only
//   port = "veth0"             # only packets received on this port
//   endpoint = "video"         # stage "filtered"/"drops" only: packets classified to it
//
// Checked across tables: names unique, no two taps write the same path, `port` names a port.
#pragma once

#include "rawpipe/plan.hh"

namespace rawpipe {

class ConfigSection;

// Reads every [[taps]] table of `root` into plan.taps (after the ports are loaded) and finishes
// those tables (unknown keys are errors). Errors are recorded in the document, as every section's.
void load_taps(ConfigSection& root, Plan& plan);

}  // namespace rawpipe
