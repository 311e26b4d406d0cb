#include "key_source.h"

#include <algorithm>
#include <array>
#include <optional>
#include <string>
#include <vector>

#include "resilience_values.h"

namespace floodgate::config::detail {
namespace {

using resilience::KeySource;
using Kind = KeySource::Kind;
using Result = Parsed<KeySource>;

struct BareForm {
  std::string_view text;
  Kind kind;
};
constexpr std::array<BareForm, 8> kBareForms{{
    {"path", Kind::path},
    {"authority", Kind::authority},
    {"method", Kind::method},
    {"cid", Kind::cid},
    {"sticky-cid", Kind::cid},  // the seed's other spelling of the connection id
    {"peer_ip", Kind::peer_ip},
    {"client_ip", Kind::client_ip},
    {"bearer_token", Kind::bearer_token},
}};

// A form with a name after the colon. `forbidden`: characters that a name as the request
// carries it can never hold (besides spaces and control characters), so that such a source
// could never match anything.
struct NamedForm {
  std::string_view prefix;
  Kind kind;
  std::string_view what;
  std::string_view example;
  std::string_view forbidden;
};
constexpr std::array<NamedForm, 3> kNamedForms{{
    {"header", Kind::header, "header", "\"header:x-tenant-id\"", ""},
    {"cookie", Kind::cookie, "cookie", "\"cookie:session\"", ";,="},
    {"query", Kind::query, "query parameter", "\"query:api_key\"", "&=#"},
}};

char to_lower(char c) {
  return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
}

std::string lower(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(), to_lower);
  return out;
}

bool is_space_or_control(char c) {
  return static_cast<unsigned char>(c) <= 0x20 || c == 0x7f;
}

// `name` after "<prefix>:" in `text`.
Result named(const NamedForm& f, std::string_view text, std::string_view name) {
  if (name.empty()) {
    return Result::fail(quoted(text) + " names no " + std::string(f.what) + "; write its name " +
                        "after the colon, e.g. " + std::string(f.example));
  }
  if (f.kind == Kind::header && !is_token(name)) {
    return Result::fail(quoted(text) + ": " + quoted(name) +
                        " is not a header name, which is a token of letters, digits and "
                        "!#$%&'*+-.^_`|~ (RFC 9110 section 5.6.2); e.g. " +
                        std::string(f.example));
  }
  const auto bad = [&f](char c) {
    return is_space_or_control(c) || f.forbidden.find(c) != std::string_view::npos;
  };
  if (std::any_of(name.begin(), name.end(), bad)) {
    std::string chars;
    for (const char c : f.forbidden) chars += std::string("'") + c + "', ";
    return Result::fail(quoted(text) + ": a " + std::string(f.what) + " name cannot hold " + chars +
                        "a space or a control character, so this one would never " +
                        "match; e.g. " + std::string(f.example));
  }
  KeySource k{.kind = f.kind, .name = std::string(name)};
  if (f.kind == Kind::header) k.name = lower(name);  // field names are case-insensitive
  return Result::ok(std::move(k));
}

// The result of parsing `text` as the form it spells; nullopt when it spells none.
std::optional<Result> parse_form(std::string_view text) {
  for (const BareForm& f : kBareForms) {
    if (text == f.text) return Result::ok(KeySource{.kind = f.kind});
  }
  for (const NamedForm& f : kNamedForms) {
    if (text == f.prefix) {
      return Result::fail(quoted(text) + " needs a name: write \"" + std::string(f.prefix) +
                          ":<name>\", e.g. " + std::string(f.example));
    }
    if (text.size() > f.prefix.size() && text.starts_with(f.prefix) &&
        text[f.prefix.size()] == ':') {
      return named(f, text, text.substr(f.prefix.size() + 1));
    }
  }
  return std::nullopt;
}

// A valid source that `text` was probably meant to be ("" when none is close): its lower-case
// form, or a near miss of a form's name.
std::string suggestion(std::string_view text) {
  if (std::string l = lower(text); l != text) {
    if (const auto r = parse_form(l); r && r->value) return l;
  }
  std::vector<std::string> names;
  const size_t colon = text.find(':');
  if (colon == std::string_view::npos) {
    for (const BareForm& f : kBareForms) names.emplace_back(f.text);
    return std::string(closest_match(text, names));
  }
  for (const NamedForm& f : kNamedForms) names.emplace_back(f.prefix);
  const std::string_view prefix = closest_match(text.substr(0, colon), names);
  return prefix.empty() ? std::string() : std::string(prefix) + std::string(text.substr(colon));
}

}  // namespace

std::string key_source_text(const KeySource& k) {
  for (const NamedForm& f : kNamedForms) {
    if (f.kind == k.kind) return std::string(f.prefix) + ":" + k.name;
  }
  for (const BareForm& f : kBareForms) {
    if (f.kind == k.kind) return std::string(f.text);  // cid before sticky-cid
  }
  return "none";  // Kind::none: no source, which no rule with a key has
}

Parsed<KeySource> parse_key_source(std::string_view text) {
  if (auto r = parse_form(text)) return std::move(*r);
  std::string message = quoted(text) + " is not a request-key source";
  if (const std::string s = suggestion(text); !s.empty()) {
    message += " (did you mean '" + s + "'?)";
  }
  return Result::fail(message + "; write one of " + std::string(kKeySourceForms));
}

}  // namespace floodgate::config::detail
