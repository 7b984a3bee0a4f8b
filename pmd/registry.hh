// The explicit list of drivers built into this binary (no constructor self-registration, so a
// static link cannot silently lose one).
#pragma once

#include <span>
#include <string_view>

#include "pmd/port.hh"

namespace rawpipe {

std::span<const PmdDriver* const> all_pmds();
const PmdDriver* find_pmd(std::string_view name);

}  // namespace rawpipe
