#include "pipeline/config/section.hh"

#include <toml++/toml.h>

#include <algorithm>
#include <cerrno>
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
    return Status::errorf("{}:{}:{}: not valid TOML: {}", file, err.source().begin.line, err.source().begin.column,
                          err.description());
  }
#else
  toml::parse_result parsed = toml::parse(text, file);
  if (!parsed) {
    const auto& err = parsed.error();
    return Status::errorf("{}:{}:{}: not valid TOML: {}", file, err.source().begin.line, err.source().begin.column,
                          err.description());
  }
  doc = std::make_shared<toml::table>(std::move(parsed).table());
#endif
  auto errors = std::make_shared<ConfigErrors>();
  errors->file = file;
  const void* root = doc.get();
  return ConfigSection(std::shared_ptr<void>(doc, doc.get()), root, std::move(errors), "top level");
}

const std::string& ConfigSection::file() const { return errors_->file; }

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
  used_.emplace(key);
  auto* n = static_cast<const toml::node*>(node(key));
  if (n && n->is_string()) return std::string(n->as_string()->get());
  type_error(key, "a string");
  return {};
}

std::string ConfigSection::string(std::string_view key, std::string_view fallback) {
  if (!has(key)) {
    used_.emplace(key);
    return std::string(fallback);
  }
  return string(key);
}

std::int64_t ConfigSection::integer(std::string_view key, std::int64_t min, std::int64_t max) {
  used_.emplace(key);
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
    used_.emplace(key);
    return fallback;
  }
  return integer(key, min, max);
}

double ConfigSection::number(std::string_view key, double min, double max) {
  used_.emplace(key);
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
    used_.emplace(key);
    return fallback;
  }
  return number(key, min, max);
}

bool ConfigSection::boolean(std::string_view key, bool fallback) {
  used_.emplace(key);
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
  fail(key, fmt::format("expected one of {}, got \"{}\"", list, v));
  return std::string(fallback);
}

std::vector<std::string> ConfigSection::string_list(std::string_view key) {
  used_.emplace(key);
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
  used_.emplace(key);
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
  used_.emplace(key);
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
  used_.emplace(key);
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
  used_.emplace(key);
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
  for (const auto& [k, v] : as_table(table_)) {
    if (used_.count(k.str())) continue;
    errors_->messages.push_back(fmt::format("{}:{}: {}: unknown key '{}'", file(), v.source().begin.line, label_,
                                            k.str()));
  }
  return status();
}

Status ConfigSection::status() const {
  if (errors_->messages.empty()) return Status::ok();
  std::string all = errors_->messages.front();
  if (errors_->messages.size() > 1)
    all += fmt::format(" (and {} more error{})", errors_->messages.size() - 1,
                       errors_->messages.size() == 2 ? "" : "s");
  return Status::error(all);
}

}  // namespace rawpipe
