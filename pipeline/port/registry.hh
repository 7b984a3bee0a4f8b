// The drivers built into the library. The core declares the lookup; the driver set linked with it
// defines it (pmd/registry.cc, an explicit list: no constructor self-registration, so a static
// link cannot silently lose a driver). The config loader and the Extra API's create() use it when
// their caller names no other lookup.
#pragma once

#include <span>
#include <string_view>

#include "pipeline/port/driver.hh"
#include "rawpipe/config.hh"

namespace rawpipe {

std::span<const PmdDriver* const> all_pmds();

}  // namespace rawpipe
