// to_json, and the one compiled copy of Boost.JSON for the whole binary: any other .cpp that
// uses Boost.JSON includes <boost/json.hpp> only and links floodgate_config.
#include <boost/json/src.hpp>

#include "floodgate/config/config.h"

namespace floodgate::config {
namespace {

// The length of the sequence a UTF-8 lead byte starts, or 0 for a continuation byte and for
// lead bytes that only start overlong forms (0xc0, 0xc1) or code points above U+10FFFF.
size_t utf8_length(unsigned char lead) {
  if (lead < 0x80) return 1;
  if (lead >= 0xc2 && lead <= 0xdf) return 2;
  if (lead >= 0xe0 && lead <= 0xef) return 3;
  if (lead >= 0xf0 && lead <= 0xf4) return 4;
  return 0;
}

// The length of the well-formed UTF-8 sequence at the start of `s`, or 0 (RFC 3629: no
// overlong forms, no surrogates, nothing above U+10FFFF).
size_t utf8_sequence(std::string_view s) {
  const auto byte = [&](size_t i) { return static_cast<unsigned char>(s[i]); };
  const unsigned char b0 = byte(0);
  const size_t n = utf8_length(b0);
  if (n <= 1 || s.size() < n) {
    return n == 1 ? 1 : 0;
  }
  for (size_t i = 1; i < n; ++i) {
    if ((byte(i) & 0xc0) != 0x80) {
      return 0;
    }
  }
  const unsigned char b1 = byte(1);
  if ((b0 == 0xe0 && b1 < 0xa0) || (b0 == 0xed && b1 > 0x9f) || (b0 == 0xf0 && b1 < 0x90) ||
      (b0 == 0xf4 && b1 > 0x8f)) {
    return 0;
  }
  return n;
}

// JSON strings are Unicode; a byte that is not part of valid UTF-8 becomes U+FFFD.
std::string valid_utf8(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  while (!s.empty()) {
    const size_t n = utf8_sequence(s);
    out.append(n > 0 ? s.substr(0, n) : std::string_view("\xef\xbf\xbd"));
    s.remove_prefix(n > 0 ? n : 1);
  }
  return out;
}

boost::json::object item(const Diagnostic& d) {
  return boost::json::object{{"line", d.line},
                             {"column", d.column},
                             {"path", valid_utf8(d.path)},
                             {"message", valid_utf8(d.message)}};
}

}  // namespace

std::string to_json(const LoadResult& result, bool notes) {
  boost::json::array errors;
  boost::json::array warnings;
  for (const Diagnostic& d : result.diagnostics) {
    (d.severity == Diagnostic::Severity::error ? errors : warnings).push_back(item(d));
  }
  boost::json::object doc{
      {"valid", result.ok()}, {"errors", std::move(errors)}, {"warnings", std::move(warnings)}};
  if (notes && !result.notes.empty()) {
    boost::json::array items;
    for (const Diagnostic& d : result.notes) items.push_back(item(d));
    doc["notes"] = std::move(items);
  }
  return boost::json::serialize(doc);
}

}  // namespace floodgate::config
