#include "table_reader.h"

#include <algorithm>
#include <limits>

namespace floodgate::config::detail {
namespace {

using Millis = std::chrono::milliseconds;

// "a, b or c"
std::string one_of(std::span<const std::string_view> names) {
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) {
    if (i > 0) {
      out += i + 1 == names.size() ? " or " : ", ";
    }
    out += names[i];
  }
  return out;
}

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& item : items) {
    out += (out.empty() ? "" : ", ") + item;
  }
  return out;
}

// The type of `n` without its value ("an integer").
std::string describe_type(const toml::node& n) {
  switch (n.type()) {
    case toml::node_type::string:
      return "a string";
    case toml::node_type::integer:
      return "an integer";
    case toml::node_type::floating_point:
      return "a floating-point number";
    case toml::node_type::boolean:
      return "a boolean";
    case toml::node_type::array:
      return "an array";
    case toml::node_type::table:
      return "a table";
    default:
      return "a date or time";
  }
}

// The type of `n` and, for scalars that are short to quote, its value ("an integer (4)").
std::string describe(const toml::node& n) {
  switch (n.type()) {
    case toml::node_type::string:
      return "a string (" + quoted(n.as_string()->get()) + ")";
    case toml::node_type::integer:
      return "an integer (" + std::to_string(n.as_integer()->get()) + ")";
    case toml::node_type::boolean:
      return n.as_boolean()->get() ? "a boolean (true)" : "a boolean (false)";
    default:
      return describe_type(n);
  }
}

// True for a table written as a [header] or an array of [[headers]]: its key sits inside the
// brackets, so the header itself (column 1) is the better position to report.
bool is_section(const toml::node& n) {
  if (const toml::table* t = n.as_table()) {
    return !t->is_inline();
  }
  const toml::array* items = n.as_array();
  return items && !items->empty() && items->front().is_table() &&
         !items->front().as_table()->is_inline();
}

std::string range_text(int64_t lo, int64_t hi) {
  if (hi == std::numeric_limits<int64_t>::max()) {
    return "an integer of at least " + std::to_string(lo);
  }
  return "an integer from " + std::to_string(lo) + " to " + std::to_string(hi);
}

}  // namespace

Position position_of(const toml::source_region& region) {
  return Position{static_cast<int>(region.begin.line), static_cast<int>(region.begin.column)};
}

void type_error(Collector& out, Position at, std::string path, std::string_view expected,
                const toml::node& got, std::string_view example) {
  std::string message = "expected " + std::string(expected) + ", got " + describe(got);
  if (!example.empty()) {
    message += "; e.g. " + std::string(example);
  }
  out.error(at, std::move(path), std::move(message));
}

TableReader::TableReader(Collector& out, const toml::table& table, std::string path,
                         std::string title, ScopeHint hint)
    : out_(&out),
      table_(&table),
      path_(std::move(path)),
      title_(std::move(title)),
      hint_(std::move(hint)) {}

std::optional<int64_t> TableReader::checked_integer(std::string_view key, const toml::node& n,
                                                    int64_t lo, int64_t hi, int64_t current) {
  const auto* v = n.as_integer();
  if (!v) {
    type_error(*out_, position(key), path(key), "an integer", n,
               std::string(key) + " = " + std::to_string(current));
    return std::nullopt;
  }
  if (v->get() < lo || v->get() > hi) {
    error(key, std::to_string(v->get()) + " is out of range; use " + range_text(lo, hi));
    return std::nullopt;
  }
  return v->get();
}

std::optional<size_t> TableReader::checked_choice(std::string_view key, const toml::node& n,
                                                  std::span<const std::string_view> names,
                                                  size_t current) {
  const auto* s = n.as_string();
  if (!s) {
    type_error(*out_, position(key), path(key), "a string", n,
               std::string(key) + " = " + quoted(names[current]));
    return std::nullopt;
  }
  const auto it = std::find(names.begin(), names.end(), s->get());
  if (it != names.end()) {
    return static_cast<size_t>(it - names.begin());
  }
  error(key, "unknown value " + quoted(s->get()) + "; expected " + one_of(names));
  return std::nullopt;
}

bool TableReader::duration(std::string_view key, Zero zero, Millis& out) {
  const toml::node* n = find(key);
  if (!n) {
    return true;
  }
  const std::string example =
      std::string(key) + " = " + quoted(format_duration(out.count() > 0 ? out : Millis{10'000}));
  if (const auto* i = n->as_integer(); i && i->get() > 0) {
    const std::string count = std::to_string(i->get());
    error(key, "expected a duration string with a unit, got an integer (" + count + "); write " +
                   std::string(key) + " = \"" + count + "s\" or \"" + count + "ms\"");
    return false;
  }
  const auto* s = n->as_string();
  if (!s) {
    type_error(*out_, position(key), path(key), "a duration string such as \"10s\"", *n, example);
    return false;
  }
  const auto parsed = parse_duration(s->get());
  if (!parsed.value) {
    error(key, parsed.error);
  } else if (zero == Zero::rejected && parsed.value->count() == 0) {
    error(key, "must be greater than 0; e.g. " + example);
  } else {
    out = *parsed.value;
    return true;
  }
  return false;
}

bool TableReader::endpoint(std::string_view key, PortRule rule, Endpoint& out, bool names) {
  const toml::node* n = find(key);
  if (!n) {
    return true;
  }
  const auto* s = n->as_string();
  if (!s) {
    const std::string example = out.text.empty() ? "127.0.0.1:9000" : out.text;
    type_error(*out_, position(key), path(key), "a \"host:port\" string", *n,
               std::string(key) + " = " + quoted(example));
    return false;
  }
  auto parsed = parse_endpoint(s->get(), rule, names);
  if (!parsed.value) {
    error(key, std::move(parsed.error));
    return false;
  }
  out = std::move(*parsed.value);
  return true;
}

bool TableReader::endpoints(std::string_view key, PortRule rule, std::vector<Endpoint>& out) {
  const toml::node* n = find(key);
  if (!n) {
    return true;
  }
  const auto* items = n->as_array();
  if (!items) {
    const std::string text = n->is_string() ? n->as_string()->get() : "127.0.0.1:8080";
    type_error(*out_, position(key), path(key), "an array of \"host:port\" strings", *n,
               std::string(key) + " = [" + quoted(text) + "]");
    return false;
  }
  if (items->empty()) {
    error(key,
          "at least one address is required; e.g. " + std::string(key) + " = [\"127.0.0.1:8080\"]");
    return false;
  }
  std::vector<Endpoint> result;
  std::vector<std::string> paths;
  bool ok = true;
  for (size_t i = 0; i < items->size(); ++i) {
    const std::string item_path = path(key) + "[" + std::to_string(i) + "]";
    ok = add_endpoint((*items)[i], item_path, rule, result, paths) && ok;
  }
  if (ok) {
    out = std::move(result);
  }
  return ok;
}

bool TableReader::add_endpoint(const toml::node& item, std::string path, PortRule rule,
                               std::vector<Endpoint>& into, std::vector<std::string>& paths) {
  const Position at = position_of(item.source());
  const auto* s = item.as_string();
  if (!s) {
    type_error(*out_, at, std::move(path), "a \"host:port\" string", item, "\"127.0.0.1:8080\"");
    return false;
  }
  auto parsed = parse_endpoint(s->get(), rule);
  if (!parsed.value) {
    out_->error(at, std::move(path), std::move(parsed.error));
    return false;
  }
  for (size_t j = 0; j < into.size(); ++j) {
    if (into[j].host == parsed.value->host && into[j].port == parsed.value->port) {
      out_->error(at, std::move(path),
                  "duplicate address " + quoted(s->get()) + " (same as " + paths[j] +
                      "); remove one of them");
      return false;
    }
  }
  into.push_back(std::move(*parsed.value));
  paths.push_back(std::move(path));
  return true;
}

bool TableReader::boolean(std::string_view key, std::string_view example, bool& out) {
  const toml::node* n = find(key);
  if (n == nullptr) {
    return true;
  }
  if (const auto* b = n->as_boolean()) {
    out = b->get();
    return true;
  }
  type_error(*out_, position(key), path(key), "a boolean", *n, example);
  return false;
}

bool TableReader::texts(std::string_view key, std::string_view example, TextParser parse,
                        std::vector<std::string>& out) {
  const toml::node* n = find(key);
  if (!n) {
    return true;
  }
  const auto* items = n->as_array();
  if (!items) {
    const std::string element =
        n->is_string() ? quoted(n->as_string()->get()) : std::string(example);
    type_error(*out_, position(key), path(key), "an array of strings", *n,
               std::string(key) + " = [" + element + "]");
    return false;
  }
  std::vector<std::string> result;
  std::vector<std::string> paths;
  bool ok = true;
  for (size_t i = 0; i < items->size(); ++i) {
    const std::string item_path = path(key) + "[" + std::to_string(i) + "]";
    ok = add_text((*items)[i], item_path, example, parse, result, paths) && ok;
  }
  if (ok) {
    out = std::move(result);
  }
  return ok;
}

bool TableReader::add_text(const toml::node& item, std::string path, std::string_view example,
                           TextParser parse, std::vector<std::string>& into,
                           std::vector<std::string>& paths) {
  const Position at = position_of(item.source());
  const auto* s = item.as_string();
  if (!s) {
    type_error(*out_, at, std::move(path), "a string", item, example);
    return false;
  }
  auto parsed = parse(s->get());
  if (!parsed.value) {
    out_->error(at, std::move(path), std::move(parsed.error));
    return false;
  }
  for (size_t j = 0; j < into.size(); ++j) {
    if (into[j] == *parsed.value) {
      out_->error(
          at, std::move(path),
          "duplicate " + quoted(s->get()) + " (same as " + paths[j] + "); remove one of them");
      return false;
    }
  }
  into.push_back(std::move(*parsed.value));
  paths.push_back(std::move(path));
  return true;
}

std::optional<std::string> TableReader::string(std::string_view key, std::string_view example) {
  const toml::node* n = find(key);
  if (!n) {
    return std::nullopt;
  }
  if (const auto* s = n->as_string()) {
    return s->get();
  }
  type_error(*out_, position(key), path(key), "a string", *n, example);
  return std::nullopt;
}

bool TableReader::text(std::string_view key, std::string_view example, TextParser parse,
                       std::string& out) {
  if (!find(key)) {
    return true;
  }
  const auto raw = string(key, example);
  if (!raw) {
    return false;
  }
  auto parsed = parse(*raw);
  if (!parsed.value) {
    error(key, std::move(parsed.error));
    return false;
  }
  out = std::move(*parsed.value);
  return true;
}

bool TableReader::secret(std::string_view key, std::string_view example, TextParser check,
                         std::string& out) {
  const toml::node* n = find(key);
  if (!n) {
    return true;
  }
  const auto* s = n->as_string();
  if (!s) {
    error(key, "expected a string, got " + describe_type(*n) + "; e.g. " + std::string(example));
    return false;
  }
  auto checked = check(s->get());
  if (!checked.value) {
    error(key, std::move(checked.error));
    return false;
  }
  out = std::move(*checked.value);
  return true;
}

const toml::table* TableReader::typed_table(std::string_view key, std::string_view title) {
  const toml::node* n = find(key);
  if (!n) {
    return nullptr;
  }
  if (const toml::table* t = n->as_table()) {
    return t;
  }
  type_error(*out_, position(key), path(key), "a table", *n, title);
  return nullptr;
}

const toml::array* TableReader::tables_array(std::string_view key, std::string_view if_missing) {
  const toml::node* n = find(key);
  if (!n) {
    if (!if_missing.empty()) {
      out_->error(position(), path(key), std::string(if_missing));
    }
    return nullptr;
  }
  const toml::array* items = n->as_array();
  if (!items) {
    type_error(*out_, position(key), path(key), "an array of tables", *n,
               "[[" + path(key) + "]] (double brackets) for each entry");
    return nullptr;
  }
  if (items->empty() && !if_missing.empty()) {
    error(key, std::string(if_missing));
  }
  return items;
}

const toml::table* TableReader::element_table(const toml::array& items, std::string_view key,
                                              size_t i) {
  if (const toml::table* t = items[i].as_table()) {
    return t;
  }
  type_error(*out_, position_of(items[i].source()), path(key) + "[" + std::to_string(i) + "]",
             "a table", items[i], "[[" + path(key) + "]]");
  return nullptr;
}

const toml::node* TableReader::find(std::string_view key) {
  if (std::find(known_.begin(), known_.end(), key) == known_.end()) {
    known_.emplace_back(key);
  }
  return table_->get(key);
}

const toml::node* TableReader::claim(std::string_view key) {
  if (std::find(claimed_.begin(), claimed_.end(), key) == claimed_.end()) {
    claimed_.emplace_back(key);
  }
  return table_->get(key);
}

bool TableReader::require(std::string_view key, std::string_view example) {
  if (find(key)) {
    return true;
  }
  out_->error(position(), path(key),
              "missing required key '" + std::string(key) + "'; add " + std::string(example) +
                  " to this " + title_);
  return false;
}

void TableReader::error(std::string_view key, std::string message) {
  out_->error(position(key), path(key), std::move(message));
}

void TableReader::warning(std::string_view key, std::string message) {
  out_->warning(position(key), path(key), std::move(message));
}

void TableReader::note(std::string_view key, std::string message) {
  out_->note(position(key), path(key), std::move(message));
}

void TableReader::finish() {
  for (auto&& [key, node] : *table_) {
    // Captured by name, not as a structured binding: clang 14 (the fuzzing build) cannot.
    const auto is_key = [name = key.str()](const std::string& k) { return k == name; };
    if (std::ranges::any_of(known_, is_key) || std::ranges::any_of(claimed_, is_key)) {
      continue;
    }
    out_->error(position(key.str()), path(key.str()), unknown_key_message(std::string(key.str())));
  }
}

std::string TableReader::unknown_key_message(const std::string& key) const {
  const std::string message = "unknown key '" + key + "' in " + title_;
  if (const std::string home = hint_ ? hint_(key) : ""; !home.empty()) {
    return message + "; " + home;
  }
  if (known_.empty()) {
    return message + ", which accepts no keys in this version of floodgate";
  }
  if (const auto match = closest_match(key, known_); !match.empty()) {
    return message + " (did you mean '" + std::string(match) +
           "'?); expected one of: " + join(known_);
  }
  return message + "; expected one of: " + join(known_);
}

TableReader TableReader::child(const toml::table& table, std::string path,
                               std::string title) const {
  return TableReader(*out_, table, std::move(path), std::move(title), hint_);
}

Position TableReader::position() const {
  const Position at = position_of(table_->source());
  return at.line > 0 ? at : Position{1, 1};
}

Position TableReader::position(std::string_view key) const {
  const auto it = table_->find(key);
  if (it == table_->end()) {
    return position();
  }
  Position at = position_of(it->first.source());
  if (at.line == 0 || is_section(it->second)) {
    at = position_of(it->second.source());
  }
  return at.line > 0 ? at : position();
}

std::string TableReader::path(std::string_view key) const {
  return path_.empty() ? std::string(key) : path_ + "." + std::string(key);
}

}  // namespace floodgate::config::detail
