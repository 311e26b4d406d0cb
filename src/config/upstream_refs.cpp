#include "upstream_refs.h"

#include <algorithm>
#include <utility>

#include "values.h"

namespace floodgate::config::detail {
namespace {

bool defined(const UpstreamRefs& u, std::string_view name) {
  return std::find(u.names.begin(), u.names.end(), name) != u.names.end();
}

// The message for a name in `key` that no [[upstreams]] entry has.
std::string undefined_upstream(std::string_view key, std::string_view name, const UpstreamRefs& u) {
  std::string message = "upstream '" + std::string(name) + "' is not defined";
  if (const auto match = closest_match(name, u.names); !match.empty()) {
    message += " (did you mean '" + std::string(match) + "'?)";
  }
  return message + "; " + std::string(key) +
         " takes the names of [[upstreams]] entries: fix the name, or define [[upstreams]] " +
         "name = " + quoted(name);
}

// An unquoted key with dots (`api.v2 = 20`) is a chain of tables of one key each: the name it
// spells ("api.v2") and the value at its end; `name` and `value` themselves for any other entry.
struct Dotted {
  std::string name;
  const toml::node* value;
};
Dotted follow_dots(const std::string& name, const toml::node& value) {
  Dotted d{name, &value};
  while (const toml::table* t = d.value->as_table()) {
    if (t->size() != 1) {
      return {name, &value};
    }
    d.name.append(".").append(t->begin()->first.str());
    d.value = &t->begin()->second;
  }
  return d;
}

Parsed<std::string> parse_upstream_name(std::string_view text) {
  if (text.empty()) {
    return Parsed<std::string>::fail(
        "an upstream name cannot be empty; write the name of an [[upstreams]] entry, e.g. "
        "\"app\"");
  }
  return Parsed<std::string>::ok(std::string(text));
}

}  // namespace

std::string toml_key(std::string_view name) {
  const auto bare = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '-';
  };
  return !name.empty() && std::all_of(name.begin(), name.end(), bare) ? std::string(name)
                                                                      : quoted(name);
}

bool read_upstream_names(TableReader& r, std::string_view key, std::vector<std::string>& out,
                         const UpstreamRefs& u) {
  std::vector<std::string> names;
  if (!r.texts(key, "\"app\"", parse_upstream_name, names) || !r.peek(key)) {
    return !r.peek(key);  // false: the error is recorded; true: the key is absent
  }
  bool ok = true;
  for (size_t i = 0; i < names.size(); ++i) {  // parallel to the array: every element was valid
    if (!defined(u, names[i])) {
      r.out().error(position_of(r.element(key, i).source()), r.element_path(key, i),
                    undefined_upstream(key, names[i], u));
      ok = false;
    }
  }
  if (ok) {
    out = std::move(names);
  }
  return ok;
}

bool read_upstream_table(TableReader& r, const UpstreamTableKey& k, UpstreamTable& out,
                         const UpstreamRefs& u) {
  const toml::node* n = r.find(k.key);
  if (!n) {
    return true;
  }
  const std::string example = std::to_string(k.example);
  const toml::table* t = n->as_table();
  if (!t) {
    type_error(r.out(), r.position(k.key), r.path(k.key),
               "a table of upstream names and " + std::string(k.values), *n,
               std::string(k.key) + " = { app = " + example + " }");
    return false;
  }
  const std::string range =
      "an integer from " + std::to_string(k.lo) + " to " + std::to_string(k.hi);
  UpstreamTable entries;
  bool ok = true;
  for (auto&& [key, value] : *t) {
    const std::string name(key.str());
    const std::string path = r.path(k.key) + "." + toml_key(name);
    if (const Dotted d = follow_dots(name, value); d.name != name && defined(u, d.name)) {
      const auto* v = d.value->as_integer();
      r.out().error(position_of(key.source()), path,
                    "upstream names with a '.' must be quoted: unquoted, " + quoted(d.name) +
                        " is read as nested keys; write " + quoted(d.name) + " = " +
                        (v ? std::to_string(v->get()) : example));
      ok = false;
      continue;
    }
    if (!defined(u, name)) {
      r.out().error(position_of(key.source()), path, undefined_upstream(k.key, name, u));
      ok = false;
    }
    const auto* v = value.as_integer();
    if (!v) {
      type_error(r.out(), position_of(value.source()), path, range, value,
                 toml_key(name) + " = " + example);
      ok = false;
    } else if (v->get() < k.lo || v->get() > k.hi) {
      r.out().error(position_of(value.source()), path,
                    std::to_string(v->get()) + " is out of range; use " + range);
      ok = false;
    } else {
      entries.emplace(name, static_cast<uint32_t>(v->get()));
    }
  }
  if (ok) {
    out = std::move(entries);
  }
  return ok;
}

}  // namespace floodgate::config::detail
