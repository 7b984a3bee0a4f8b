// Typed, position-aware access to one table of a TOML config.
//
// Each subsystem (a pool, a port and its driver, an endpoint, an lcore) reads its own keys through
// a ConfigSection. Reads record which keys were used; finish() then rejects every key nobody read,
// so a typo is an error rather than a silently ignored setting. Every error names the file, the
// line, the key and what was expected, e.g.
//   configs/synth.toml:14: ports[0] 'synth0': key 'rate_pps': expected a number >= 0, got a string
// Errors accumulate; status() and finish() report all of them, one per line, in the order found.
//
// A section is told which keys it owns (declare(), with the tables of pipeline/config/keys.hh): it
// then refuses to read an undeclared key (a programming error reported like a config error, so the
// reference cannot miss a key), and finish() offers the closest declared key for an unknown one.
//
// The TOML library stays behind this interface (pipeline/config/section.cc is the only
// translation unit besides the loader that includes it).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "pipeline/config/keys.hh"
#include "rawpipe/status.hh"

namespace rawpipe {

struct ConfigErrors;

class ConfigSection {
 public:
  // Parses a whole TOML document; the root table is the returned section. `file` is used in
  // messages only.
  static Result<ConfigSection> parse_file(const std::string& file);
  static Result<ConfigSection> parse_string(std::string_view text, const std::string& file = "<string>");

  ConfigSection(ConfigSection&&) noexcept;
  ConfigSection& operator=(ConfigSection&&) noexcept;
  ~ConfigSection();

  const std::string& file() const;
  // Human name of this table in messages, e.g. "ports[0] 'synth0'".
  const std::string& label() const { return label_; }
  void set_label(std::string label) { label_ = std::move(label); }
  int line() const;  // line of this table's first key or header; 0 if unknown

  // The keys this table may hold (with the table's `also` chain). Several tables may be declared:
  // a port holds the generic port keys, the neighbour keys and its driver's keys.
  void declare(const KeyTable& table);
  // For tables whose reader declares nothing (a driver without a key table, as tests register):
  // undeclared reads are allowed; unknown keys are still rejected.
  void allow_undeclared();

  bool has(std::string_view key) const;
  // Line where `key` is defined (or of the table when absent).
  int line_of(std::string_view key) const;

  // Each getter marks the key as used. A missing optional key yields the default; a missing
  // required key (no default given) records an error and yields an empty/zero value.
  std::string string(std::string_view key);
  std::string string(std::string_view key, std::string_view fallback);
  std::int64_t integer(std::string_view key, std::int64_t min, std::int64_t max);
  std::int64_t integer(std::string_view key, std::int64_t min, std::int64_t max, std::int64_t fallback);
  double number(std::string_view key, double min, double max);
  double number(std::string_view key, double min, double max, double fallback);
  bool boolean(std::string_view key, bool fallback);
  // One of `choices`; the error lists them.
  std::string choice(std::string_view key, std::initializer_list<std::string_view> choices,
                     std::string_view fallback);
  std::vector<std::string> string_list(std::string_view key);  // absent -> empty
  std::vector<std::int64_t> integer_list(std::string_view key, std::int64_t min, std::int64_t max);
  // Weighted entries like [[64, 7], [576, 4], [1500, 1]]: arrays of exactly `arity` integers.
  std::vector<std::vector<std::int64_t>> integer_tuples(std::string_view key, std::size_t arity,
                                                        std::int64_t min, std::int64_t max);

  std::optional<ConfigSection> table(std::string_view key);           // [key]; absent -> nullopt
  std::vector<ConfigSection> table_array(std::string_view key);       // [[key]]; absent -> empty
  // Every key of this table whose value is a table, with its name ([endpoints.name] style).
  std::vector<std::pair<std::string, ConfigSection>> named_tables();
  // Every key of this table with its value as text (strings as they are, numbers and booleans
  // in TOML spelling), in file order; arrays and tables are recorded as errors. For free-form
  // tables handed to someone else to interpret (a filter plugin's `config`).
  std::vector<std::pair<std::string, std::string>> scalars_as_text();

  // Records an error at `key` (or at the table when key is empty) with `expected` as the reason.
  void fail(std::string_view key, std::string_view message);

  // Rejects unread keys, then returns every error recorded anywhere in this document.
  Status finish();
  Status status() const;

 private:
  ConfigSection(std::shared_ptr<void> doc, const void* table, std::shared_ptr<ConfigErrors> errors,
                std::string label);
  const void* node(std::string_view key) const;
  ConfigSection child(const void* table, std::string label) const;
  std::string where(std::string_view key) const;
  void type_error(std::string_view key, std::string_view expected);
  // Marks `key` read; reading a key no declared table names is recorded as an error.
  void mark(std::string_view key);
  std::vector<std::string_view> declared_names() const;

  std::shared_ptr<void> doc_;           // keeps the parsed document alive
  const void* table_ = nullptr;         // toml::table inside doc_
  std::shared_ptr<ConfigErrors> errors_;
  std::string label_;
  std::set<std::string, std::less<>> used_;
  std::vector<const KeyTable*> declared_;
  std::vector<std::string_view> declared_names_;  // the tables declare() was given, for the hint
  bool enforce_ = true;
};

}  // namespace rawpipe
