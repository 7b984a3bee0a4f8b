// The declared keys of one config table: the single source of the config reference.
//
// Each section and each driver declares its keys next to the code that reads them. The table is
// handed to the ConfigSection before reading (ConfigSection::declare), and the section refuses to
// read a key that no declared table names, so a key cannot be parsed without appearing in
// `rawpipe config-ref` and docs/config.md. The same tables give unknown keys their "did you mean".
#pragma once

#include <span>
#include <string_view>

namespace rawpipe {

struct KeyDoc {
  std::string_view name;
  std::string_view type;      // "integer", "number", "string", "boolean", "string list", ...
  std::string_view range;     // allowed values or range; empty when any value of the type goes
  std::string_view fallback;  // default; "required" when the key must be given
  std::string_view meaning;   // one line
};

struct KeyTable {
  std::string_view name;     // what `rawpipe config-ref NAME` takes: "pools", "synth", ...
  std::string_view title;    // how it is written in a config: "[[pools]]", "[[ports]] pmd = \"synth\""
  std::string_view summary;  // one line
  std::span<const KeyDoc> keys;
  const KeyTable* also = nullptr;  // keys shared with other tables (mlx5 and mlx5-model), read as well
};

// Levenshtein distance, for "did you mean".
std::size_t edit_distance(std::string_view a, std::string_view b);
// The candidate closest to `word` when it is close enough to be a likely typo, else empty.
std::string_view closest_name(std::string_view word, std::span<const std::string_view> candidates);
// " (did you mean \"X\"?)" or "".
std::string did_you_mean(std::string_view word, std::span<const std::string_view> candidates);

}  // namespace rawpipe
