// The key tables of the sections pipeline/ reads, each defined beside the code that reads it.
// `rawpipe config-ref` prints them, with every built-in driver's table (PmdDriver::keys).
#pragma once

#include "pipeline/config/keys.hh"

namespace rawpipe {

extern const KeyTable kTopLevelKeys;   // loader.cc
extern const KeyTable kRunKeys;        // loader.cc, with kPrivilegeKeys
extern const KeyTable kPrivilegeKeys;  // pipeline/privilege/settings.cc
extern const KeyTable kPoolKeys;       // loader.cc
extern const KeyTable kPortKeys;       // loader.cc, with kNeighPortKeys
extern const KeyTable kNeighPortKeys;  // pipeline/neigh/port_keys.cc
extern const KeyTable kEndpointKeys;   // loader.cc
extern const KeyTable kLcoreKeys;      // loader.cc
extern const KeyTable kMetricsKeys;    // metrics_section.cc
extern const KeyTable kTapKeys;        // pipeline/capture/tap.cc
extern const KeyTable kFilterKeys;     // filters_section.cc

}  // namespace rawpipe
