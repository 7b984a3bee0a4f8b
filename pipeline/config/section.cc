#include "pipeline/config/section.hh"

#include <fmt/ranges.h>
#include <toml++/toml.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

namespace rawpipe {

struct ConfigErrors {
  std::string file;
  std::vector<std::string> messages;
};

namespace {

const toml::table& as_table(const void* p) { return *static_cast<const toml::table*>(p); }

std::string_view type_name(const toml::node& n) {
  switch (n.type()) {
    case toml::node_type::string: return "a string";
    case toml::node_type::integer: return "an integer";
    case toml::node_type::floating_point: return "a number";
    case toml::node_type::boolean: return "a boolean";
    case toml::node_type::table: return "a table";
    case toml::node_type::array: return "an array";
    case toml::node_type::date:
    case toml::node_type::time:
    case toml::node_type::date_time: return "a date/time";
    default: return "nothing";
  }
}

std::string_view line_text(std::string_view text, std::size_t line) {
  for (std::size_t n = 1; n < line && !text.empty(); ++n) {
    const std::size_t eol = text.find('\n');
    text = eol == std::string_view::npos ? std::string_view() : text.substr(eol + 1);
  }
  return text.substr(0, text.find('\n'));
}

// toml++ describes a syntax error as its parser sees it ("Error while parsing string: unescaped
// control characters ..."). The common mistakes get a sentence that says what to change; the
// rest keep the parser's words. The position stays the parser's.
std::string describe_toml_error(std::string_view text, const std::string& file, std::size_t line, std::size_t column,
                                std::string_view description) {
  const std::string_view src = line_text(text, line);
  auto contains = [&](std::string_view what) { return description.find(what) != std::string_view::npos; };
  std::string plain;
  if ((contains("parsing string") || contains("parsing literal string")) && contains("control character") &&
      column > src.size()) {
    // The string ran into the end of the line: its closing quote is missing.
    const char quote = contains("literal") ? '\'' : '"';
    const std::size_t open = src.find(quote);
    plain = fmt::format("missing closing quote: the string that starts at column {} runs to the end of the line; "
                        "end it with {}",
                        open == std::string_view::npos ? column : open + 1, quote);
  } else if (contains("parsing table header") && contains("expected ']'")) {
    const std::size_t open = src.find_first_not_of(" \t");
    const bool array = src.substr(open == std::string_view::npos ? 0 : open).starts_with("[[");
    std::string name(src.substr(open == std::string_view::npos ? 0 : open));
    while (!name.empty() && (name.back() == ' ' || name.back() == '\r' || name.back() == ']')) name.pop_back();
    plain = fmt::format("missing '{}' at the end of the table header {}: write {}{}", array ? "]]" : "]", name, name,
                        array ? "]]" : "]");
  } else if (contains("cannot redefine existing table")) {
    const std::size_t q = description.find('\'');
    const std::string_view name = q == std::string_view::npos ? std::string_view() : description.substr(q);
    plain = fmt::format("duplicate table {}: [{}] appears twice; merge the two into one (only [[arrays of tables]] "
                        "repeat)",
                        name, name.size() > 2 ? name.substr(1, name.size() - 2) : name);
  } else if (contains("cannot redefine existing")) {
    const std::size_t q = description.find('\'');
    plain = fmt::format("duplicate key {}: it is already set in this table; keep one of the two",
                        q == std::string_view::npos ? std::string_view("here") : description.substr(q));
  } else if (contains("parsing array") && contains("end-of-file")) {
    plain = "missing ']': an array is still open at the end of the file";
  } else if (contains("parsing key-value pair") && contains("expected '='")) {
    plain = "expected '=' after the key (key = value)";
  } else if (contains("parsing key-value pair") && contains("expected value")) {
    plain = "the key has no value after '='";
  }
  if (plain.empty()) return fmt::format("{}:{}:{}: not valid TOML: {}", file, line, column, description);
  return fmt::format("{}:{}:{}: {}", file, line, column, plain);
}

}  // namespace

ConfigSection::ConfigSection(std::shared_ptr<void> doc, const void* table, std::shared_ptr<ConfigErrors> errors,
                             std::string label)
    : doc_(std::move(doc)), table_(table), errors_(std::move(errors)), label_(std::move(label)) {}
ConfigSection::ConfigSection(ConfigSection&&) noexcept = default;
ConfigSection& ConfigSection::operator=(ConfigSection&&) noexcept = default;
ConfigSection::~ConfigSection() = default;

Result<ConfigSection> ConfigSection::parse_file(const std::string& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) return Status::errorf("{}: cannot open the config file: {}", file, std::strerror(errno));
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_string(ss.str(), file);
}

Result<ConfigSection> ConfigSection::parse_string(std::string_view text, const std::string& file) {
  std::shared_ptr<toml::table> doc;
#if TOML_EXCEPTIONS
  try {
    doc = std::make_shared<toml::table>(toml::parse(text, file));
  } catch (const toml::parse_error& err) {
    return Status::error(describe_toml_error(text, file, err.source().begin.line, err.source().begin.column,
                                             err.description()));
  }
#else
  toml::parse_result parsed = toml::parse(text, file);
  if (!parsed) {
    const auto& err = parsed.error();
    return Status::error(describe_toml_error(text, file, err.source().begin.line, err.source().begin.column,
                                             err.description()));
  }
  doc = std::make_shared<toml::table>(std::move(parsed).table());
#endif
  auto errors = std::make_shared<ConfigErrors>();
  errors->file = file;
  const void* root = doc.get();
  return ConfigSection(std::shared_ptr<void>(doc, doc.get()), root, std::move(errors), "top level");
}

const std::string& ConfigSection::file() const { return errors_->file; }

void ConfigSection::declare(const KeyTable& table) {
  declared_names_.push_back(table.name);
  for (const KeyTable* t = &table; t; t = t->also) declared_.push_back(t);
}

std::vector<std::string_view> ConfigSection::declared_names() const {
  std::vector<std::string_view> out;
  for (const KeyTable* t : declared_)
    for (const KeyDoc& k : t->keys) out.push_back(k.name);
  return out;
}

void ConfigSection::allow_undeclared() { enforce_ = false; }

void ConfigSection::mark(std::string_view key) {
  if (!used_.emplace(key).second || declared_.empty() || !enforce_) return;
  for (const KeyTable* t : declared_)
    for (const KeyDoc& k : t->keys)
      if (k.name == key) return;
  errors_->messages.push_back(fmt::format("{}: key '{}' is read but not declared in the config reference; add it to "
                                          "the key table of {} (a bug in rawpipe, please report it)",
                                          where(key), key, declared_.front()->title));
}

int ConfigSection::line() const {
  const auto& src = as_table(table_).source();
  return static_cast<int>(src.begin.line);
}

const void* ConfigSection::node(std::string_view key) const { return as_table(table_).get(key); }

bool ConfigSection::has(std::string_view key) const { return node(key) != nullptr; }

int ConfigSection::line_of(std::string_view key) const {
  if (auto* n = static_cast<const toml::node*>(node(key))) return static_cast<int>(n->source().begin.line);
  return line();
}

std::string ConfigSection::where(std::string_view key) const {
  if (key.empty()) return fmt::format("{}:{}: {}", file(), line(), label_);
  return fmt::format("{}:{}: {}: key '{}'", file(), line_of(key), label_, key);
}

void ConfigSection::fail(std::string_view key, std::string_view message) {
  errors_->messages.push_back(fmt::format("{}: {}", where(key), message));
}

void ConfigSection::type_error(std::string_view key, std::string_view expected) {
  auto* n = static_cast<const toml::node*>(node(key));
  fail(key, fmt::format("expected {}, got {}", expected, n ? type_name(*n) : "nothing (the key is required)"));
}

ConfigSection ConfigSection::child(const void* table, std::string label) const {
  return ConfigSection(doc_, table, errors_, std::move(label));
}

std::string ConfigSection::string(std::string_view key) {
  mark(key);
  auto* n = static_cast<const toml::node*>(node(key));
  if (n && n->is_string()) return std::string(n->as_string()->get());
  type_error(key, "a string");
  return {};
}

std::string ConfigSection::string(std::string_view key, std::string_view fallback) {
  if (!has(key)) {
    mark(key);
    return std::string(fallback);
  }
  return string(key);
}

std::int64_t ConfigSection::integer(std::string_view key, std::int64_t min, std::int64_t max) {
  mark(key);
  auto* n = static_cast<const toml::node*>(node(key));
  if (!n || !n->is_integer()) {
    type_error(key, fmt::format("an integer from {} to {}", min, max));
    return min;
  }
  std::int64_t v = n->as_integer()->get();
  if (v < min || v > max) {
    fail(key, fmt::format("expected an integer from {} to {}, got {}", min, max, v));
    return min;
  }
  return v;
}

std::int64_t ConfigSection::integer(std::string_view key, std::int64_t min, std::int64_t max, std::int64_t fallback) {
  if (!has(key)) {
    mark(key);
    return fallback;
  }
  return integer(key, min, max);
}

double ConfigSection::number(std::string_view key, double min, double max) {
  mark(key);
  auto* n = static_cast<const toml::node*>(node(key));
  if (!n || !(n->is_integer() || n->is_floating_point())) {
    type_error(key, fmt::format("a number from {} to {}", min, max));
    return min;
  }
  double v = n->value<double>().value_or(min);
  if (!(v >= min && v <= max)) {
    fail(key, fmt::format("expected a number from {} to {}, got {}", min, max, v));
    return min;
  }
  return v;
}

double ConfigSection::number(std::string_view key, double min, double max, double fallback) {
  if (!has(key)) {
    mark(key);
    return fallback;
  }
  return number(key, min, max);
}

bool ConfigSection::boolean(std::string_view key, bool fallback) {
  mark(key);
  auto* n = static_cast<const toml::node*>(node(key));
  if (!n) return fallback;
  if (!n->is_boolean()) {
    type_error(key, "true or false");
    return fallback;
  }
  return n->as_boolean()->get();
}

std::string ConfigSection::choice(std::string_view key, std::initializer_list<std::string_view> choices,
                                  std::string_view fallback) {
  std::string v = string(key, fallback);
  for (auto c : choices)
    if (c == v) return v;
  std::string list;
  for (auto c : choices) list += fmt::format("{}\"{}\"", list.empty() ? "" : ", ", c);
  const std::vector<std::string_view> names(choices);
  fail(key, fmt::format("expected one of {}, got \"{}\"{}", list, v, did_you_mean(v, names)));
  return std::string(fallback);
}

std::vector<std::string> ConfigSection::string_list(std::string_view key) {
  mark(key);
  std::vector<std::string> out;
  auto* n = static_cast<const toml::node*>(node(key));
  if (!n) return out;
  if (n->is_string()) {  // a single string is accepted where a list is expected
    out.emplace_back(n->as_string()->get());
    return out;
  }
  if (!n->is_array()) {
    type_error(key, "an array of strings");
    return out;
  }
  for (const auto& e : *n->as_array()) {
    if (!e.is_string()) {
      fail(key, fmt::format("expected an array of strings, found {} in it (line {})", type_name(e),
                            e.source().begin.line));
      return {};
    }
    out.emplace_back(e.as_string()->get());
  }
  return out;
}

std::vector<std::int64_t> ConfigSection::integer_list(std::string_view key, std::int64_t min, std::int64_t max) {
  mark(key);
  std::vector<std::int64_t> out;
  auto* n = static_cast<const toml::node*>(node(key));
  if (!n) return out;
  if (n->is_integer()) {
    std::int64_t v = n->as_integer()->get();
    if (v < min || v > max) fail(key, fmt::format("expected integers from {} to {}, got {}", min, max, v));
    else out.push_back(v);
    return out;
  }
  if (!n->is_array()) {
    type_error(key, fmt::format("an array of integers from {} to {}", min, max));
    return out;
  }
  for (const auto& e : *n->as_array()) {
    if (!e.is_integer() || e.as_integer()->get() < min || e.as_integer()->get() > max) {
      fail(key, fmt::format("expected an array of integers from {} to {}", min, max));
      return {};
    }
    out.push_back(e.as_integer()->get());
  }
  return out;
}

std::vector<std::vector<std::int64_t>> ConfigSection::integer_tuples(std::string_view key, std::size_t arity,
                                                                     std::int64_t min, std::int64_t max) {
  mark(key);
  std::vector<std::vector<std::int64_t>> out;
  auto* n = static_cast<const toml::node*>(node(key));
  if (!n) return out;
  auto bad = [&] {
    fail(key, fmt::format("expected an array of [{}] integer arrays with values from {} to {}",
                          arity == 2 ? "a, b" : fmt::format("{} values", arity), min, max));
    return std::vector<std::vector<std::int64_t>>{};
  };
  if (!n->is_array()) return bad();
  for (const auto& e : *n->as_array()) {
    if (!e.is_array() || e.as_array()->size() != arity) return bad();
    std::vector<std::int64_t> tuple;
    for (const auto& v : *e.as_array()) {
      if (!v.is_integer() || v.as_integer()->get() < min || v.as_integer()->get() > max) return bad();
      tuple.push_back(v.as_integer()->get());
    }
    out.push_back(std::move(tuple));
  }
  return out;
}

std::optional<ConfigSection> ConfigSection::table(std::string_view key) {
  mark(key);
  auto* n = static_cast<const toml::node*>(node(key));
  if (!n) return std::nullopt;
  if (!n->is_table()) {
    type_error(key, "a table");
    return std::nullopt;
  }
  std::string label = label_ == "top level" ? fmt::format("[{}]", key) : fmt::format("{}.{}", label_, key);
  return child(n->as_table(), std::move(label));
}

std::vector<ConfigSection> ConfigSection::table_array(std::string_view key) {
  mark(key);
  std::vector<ConfigSection> out;
  auto* n = static_cast<const toml::node*>(node(key));
  if (!n) return out;
  if (!n->is_array_of_tables()) {
    type_error(key, fmt::format("an array of tables ([[{}]])", key));
    return out;
  }
  std::size_t i = 0;
  for (const auto& e : *n->as_array()) {
    out.push_back(child(e.as_table(), fmt::format("{}[{}]", key, i)));
    ++i;
  }
  return out;
}

std::vector<std::pair<std::string, ConfigSection>> ConfigSection::named_tables() {
  std::vector<std::pair<std::string, ConfigSection>> out;
  for (const auto& [k, v] : as_table(table_)) {
    if (!v.is_table()) continue;
    used_.emplace(k.str());
    out.emplace_back(std::string(k.str()), child(v.as_table(), fmt::format("{}.{}", label_, k.str())));
  }
  return out;
}

std::vector<std::pair<std::string, std::string>> ConfigSection::scalars_as_text() {
  std::vector<std::pair<const toml::node*, std::string>> found;
  for (const auto& [k, v] : as_table(table_)) {
    used_.emplace(k.str());
    if (v.is_table() || v.is_array()) {
      type_error(k.str(), "a string, a number or a boolean");
      continue;
    }
    found.emplace_back(&v, std::string(k.str()));
  }
  // The table is ordered by key; the reader expects the order of the file.
  std::sort(found.begin(), found.end(), [](const auto& a, const auto& b) {
    const auto& x = a.first->source().begin;
    const auto& y = b.first->source().begin;
    return x.line != y.line ? x.line < y.line : x.column < y.column;
  });
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& [n, key] : found) {
    std::string text;
    if (n->is_string()) {
      text = std::string(n->as_string()->get());
    } else if (n->is_integer()) {
      text = std::to_string(n->as_integer()->get());
    } else if (n->is_floating_point()) {
      text = fmt::format("{}", n->as_floating_point()->get());
    } else if (n->is_boolean()) {
      text = n->as_boolean()->get() ? "true" : "false";
    } else {
      std::ostringstream os;
      n->visit([&os](const auto& v) { os << v; });  // dates and times in TOML spelling
      text = os.str();
    }
    out.emplace_back(key, std::move(text));
  }
  return out;
}

Status ConfigSection::finish() {
  std::vector<std::string_view> known = declared_names();
  if (known.empty())
    for (const auto& k : used_) known.push_back(k);
  for (const auto& [k, v] : as_table(table_)) {
    if (used_.count(k.str())) continue;
    // The key's own position: toml++ records where each key was written.
    const auto& at = k.source().begin.line ? k.source().begin : v.source().begin;
    std::string hint = did_you_mean(k.str(), known);
    if (hint.empty() && !declared_.empty())
      hint = fmt::format(" (`rawpipe config-ref {}` list{} the keys this table takes)",
                         fmt::join(declared_names_, "` and `rawpipe config-ref "), declared_names_.size() == 1 ? "s" : "");
    errors_->messages.push_back(
        fmt::format("{}:{}:{}: {}: unknown key '{}'{}", file(), at.line, at.column, label_, k.str(), hint));
  }
  return status();
}

Status ConfigSection::status() const {
  if (errors_->messages.empty()) return Status::ok();
  // All of them, one per line, in the order found (section by section, the first is the one the
  // others may follow from): a config with three typos is fixed in one edit, not three runs.
  std::string all;
  for (const auto& m : errors_->messages) all += fmt::format("{}{}", all.empty() ? "" : "\n", m);
  return Status::error(all);
}

}  // namespace rawpipe
