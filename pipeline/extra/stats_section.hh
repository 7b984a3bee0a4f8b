// The C API's stats_section: an application's callback turned into a section of the stats
// document (see rawpipe_api_t::stats_section for the contract).
#pragma once

#include <cstddef>
#include <string_view>

#include "rawpipe/stats_publisher.hh"

namespace rawpipe {

using CStatsSectionFn = long (*)(void* ctx, char* buf, std::size_t cap);

// 1 to 63 of [A-Za-z0-9_-]: the name is a JSON key and a word in `rawpipe stat`'s view.
bool stats_section_name_ok(std::string_view name);

// Calls fn into a buffer that grows once to the size fn asks for (at most
// RAWPIPE_STATS_SECTION_MAX); a negative return, or a second one beyond the buffer, leaves the
// section out of that publish.
ops::SectionFn c_stats_section(CStatsSectionFn fn, void* ctx);

}  // namespace rawpipe
