// The [[filters]] config tables: filter plugins (include/rawpipe/filter_plugin.h) that the engine
// loads when it builds the pipeline and attaches to an endpoint or to one rx queue.
//
//   [[filters]]
//   path = "rawpipe_seq_gap"   # a plugin name (searched, pipeline/filter/plugin.hh) or a path with '/'
//   endpoint = "md"            # attach to this endpoint ...
//   queue = "synth0:0"         # ... or to this rx queue ("port:queue"); exactly one of the two
//   [filters.config]           # optional; every key is handed to the plugin's create() as text
//   offset = 0
//
// Checked here, before anything runs: the plugin resolves to a file, opens, and has this rawpipe's
// filter ABI (a mismatch names both versions); the endpoint or queue exists; no two entries attach
// to the same endpoint or queue (each takes one filter). The plugin's own config errors come from
// its create(), when the engine loads it, and are reported at the `config` key.
#pragma once

#include "rawpipe/plan.hh"

namespace rawpipe {

class ConfigSection;

// Reads every [[filters]] table of `root` into plan.filters (after ports and endpoints are loaded)
// and finishes those tables (unknown keys are errors). Errors are recorded in the document.
void load_filters(ConfigSection& root, Plan& plan);

}  // namespace rawpipe
