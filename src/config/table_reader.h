// TableReader maps one TOML table onto a Params struct and records every problem it finds in a
// Collector, so the loader reads like a schema: one call per key, each naming its range.
//
// Each read names a key the table may hold, so the reader learns the table's keys as it goes;
// finish() then reports every other key in the table as unknown, listing the known ones. A
// destination is assigned only when its value is valid: otherwise it keeps its default and the
// read returns false. Absent keys are not errors unless require() or a minimum says so.
//
// Errors about a key's value point at the key (the start of `key = value`); errors about an
// array element point at the element; a missing key points at its table. Main thread only.
#pragma once

#include <toml++/toml.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "collector.h"
#include "values.h"

namespace floodgate::config::detail {

Position position_of(const toml::source_region& region);

// Records "expected EXPECTED, got a string ("4"); e.g. EXAMPLE" for a node of the wrong type.
void type_error(Collector& out, Position at, std::string path, std::string_view expected,
                const toml::node& got, std::string_view example);

// A named value of an enumeration, for choice().
template <class E>
struct Choice {
  std::string_view name;
  E value;
};

enum class Zero { allowed, rejected };

class TableReader {
 public:
  // Given an unknown key, says where it belongs ("'keepalive' belongs in an [[upstreams]]
  // entry"), or returns "" to fall back to "did you mean" and the list of known keys.
  using ScopeHint = std::function<std::string(std::string_view key)>;

  // `path` is the table's key path ("" for the root, "server", "upstreams[0]"); `title` names
  // it in messages ("[server]", "[[upstreams]]", "the root table").
  TableReader(Collector& out, const toml::table& table, std::string path, std::string title,
              ScopeHint hint = {});

  // Each read below returns false when it recorded an error, true when the key is absent or
  // its value is valid (and assigned).

  // An integer in [lo, hi].
  template <class T>
  bool integer(std::string_view key, int64_t lo, int64_t hi, T& out) {
    const toml::node* n = find(key);
    if (!n) {
      return true;
    }
    const auto v = checked_integer(key, *n, lo, hi, static_cast<int64_t>(out));
    if (v) {
      out = static_cast<T>(*v);
    }
    return v.has_value();
  }
  bool duration(std::string_view key, Zero zero, std::chrono::milliseconds& out);
  // `names`: a host name is accepted too (a backend's address; parse_endpoint).
  bool endpoint(std::string_view key, PortRule rule, Endpoint& out, bool names = false);
  // A non-empty array of distinct endpoints.
  bool endpoints(std::string_view key, PortRule rule, std::vector<Endpoint>& out);
  // One of `choices`, by name.
  template <class E, size_t N>
  bool choice(std::string_view key, const std::array<Choice<E>, N>& choices, E& out) {
    const toml::node* n = find(key);
    if (!n) {
      return true;
    }
    std::vector<std::string_view> names;
    size_t current = 0;
    for (size_t i = 0; i < choices.size(); ++i) {
      names.push_back(choices[i].name);
      if (choices[i].value == out) {
        current = i;
      }
    }
    const auto picked = checked_choice(key, *n, names, current);
    if (picked) {
      out = choices[*picked].value;
    }
    return picked.has_value();
  }
  // true or false; `example` completes the message of a type error.
  bool boolean(std::string_view key, std::string_view example, bool& out);
  // A string checked (and possibly normalised) by `parse`, whose message is recorded on failure.
  using TextParser = Parsed<std::string> (*)(std::string_view);
  bool text(std::string_view key, std::string_view example, TextParser parse, std::string& out);
  // An array (possibly empty) of distinct strings, each checked by `parse`; a duplicate is an
  // error, as for endpoints(). `example` is one element ("\"GET\""). Assigned only when every
  // element is valid.
  bool texts(std::string_view key, std::string_view example, TextParser parse,
             std::vector<std::string>& out);
  // A string of any content; nullopt when absent or not a string (the latter is recorded).
  std::optional<std::string> string(std::string_view key, std::string_view example);
  // Like text(), for a secret (admin.token): no message, not even a type error, quotes the
  // value, so that a diagnostic can be pasted into a ticket or a log. `check` must not quote it
  // either.
  bool secret(std::string_view key, std::string_view example, TextParser check, std::string& out);

  // Calls read(TableReader&) for the sub-table `key` when present; then finishes it. `title`
  // is its header ("[upstreams.resilience]"), the example of a type error.
  template <class F>
  void table(std::string_view key, std::string title, F&& read) {
    if (const toml::table* t = typed_table(key, title)) {
      TableReader sub = child(*t, path(key), std::move(title));
      read(sub);
      sub.finish();
    }
  }
  // Calls read(TableReader&, index) for each table of the array of tables `key`. When the
  // array is absent or empty and `if_missing` is not empty, records it as an error.
  template <class F>
  void tables(std::string_view key, const std::string& title, std::string_view if_missing,
              F&& read) {
    const toml::array* items = tables_array(key, if_missing);
    for (size_t i = 0; items && i < items->size(); ++i) {
      if (const toml::table* t = element_table(*items, key, i)) {
        TableReader sub = child(*t, path(key) + "[" + std::to_string(i) + "]", title);
        read(sub, i);
        sub.finish();
      }
    }
  }

  // Marks `key` as known and returns its node, or nullptr when absent.
  const toml::node* find(std::string_view key);
  // Returns the node of `key` (nullptr when absent) and takes it out of finish()'s unknown-key
  // report without listing it among the table's keys: for a key the caller reports itself,
  // such as one that belongs to another scope.
  const toml::node* claim(std::string_view key);
  // The node of `key` or nullptr, leaving the key to finish() unless it is read or claimed.
  const toml::node* peek(std::string_view key) const { return table_->get(key); }
  // The element `i` of the array `key` (the caller knows it is there) and its key path
  // ("resilience.hedging.safe_methods[2]").
  const toml::node& element(std::string_view key, size_t i) const {
    return (*peek(key)->as_array())[i];
  }
  std::string element_path(std::string_view key, size_t i) const {
    return path(key) + "[" + std::to_string(i) + "]";
  }
  // Records a missing-key error at the table's position when `key` is absent.
  bool require(std::string_view key, std::string_view example);
  // Records an error (or a warning) about the value of `key`.
  void error(std::string_view key, std::string message);
  void warning(std::string_view key, std::string message);
  // Records a note (Collector::note) at `key`, or at the table when `key` is absent.
  void note(std::string_view key, std::string message);
  // Reports the keys of the table that no read asked for.
  void finish();

  // The table being read, for the rare check that looks at all its keys at once.
  const toml::table& node() const { return *table_; }

  TableReader child(const toml::table& table, std::string path, std::string title) const;
  Position position() const;                      // of the table
  Position position(std::string_view key) const;  // of `key`, or of the table when absent
  std::string path(std::string_view key) const;
  Collector& out() const { return *out_; }

 private:
  std::optional<int64_t> checked_integer(std::string_view key, const toml::node& n, int64_t lo,
                                         int64_t hi, int64_t current);
  std::optional<size_t> checked_choice(std::string_view key, const toml::node& n,
                                       std::span<const std::string_view> names, size_t current);
  std::string unknown_key_message(const std::string& key) const;
  const toml::table* typed_table(std::string_view key, std::string_view title);
  const toml::array* tables_array(std::string_view key, std::string_view if_missing);
  const toml::table* element_table(const toml::array& items, std::string_view key, size_t i);
  bool add_endpoint(const toml::node& item, std::string path, PortRule rule,
                    std::vector<Endpoint>& into, std::vector<std::string>& paths);
  bool add_text(const toml::node& item, std::string path, std::string_view example,
                TextParser parse, std::vector<std::string>& into, std::vector<std::string>& paths);

  Collector* out_;
  const toml::table* table_;
  std::string path_;
  std::string title_;
  ScopeHint hint_;
  std::vector<std::string> known_;    // in the order the reads asked, for "expected one of"
  std::vector<std::string> claimed_;  // reported by the caller; neither unknown nor listed
};

}  // namespace floodgate::config::detail
