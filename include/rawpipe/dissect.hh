// `rawpipe dissect FILE.pcap`: one tab-separated line per frame, as the parse stage sees it.
// Columns are documented in docs/dissect.md.
#pragma once

#include "rawpipe/api.h"

#include <ostream>
#include <string>

namespace rawpipe {

// Prints a header line, then one line per frame of `pcap_file` (pcap or pcapng, Ethernet) to
// `out`. Problems with the file go to std::cerr. Returns 0 when the whole file was read, 1 when it
// could not be opened or is not Ethernet, 2 when it ended in the middle of a record (the frames
// before the cut are printed).
RAWPIPE_API int run_dissect(const std::string& pcap_file, std::ostream& out);

}  // namespace rawpipe
