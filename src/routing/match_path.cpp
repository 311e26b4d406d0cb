#include "floodgate/routing/match_path.h"

#include <cstddef>

namespace floodgate {
namespace {

int hex_value(char c) noexcept {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

bool unreserved(unsigned char c) noexcept {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '.' || c == '_' || c == '~';
}

// Whether `path` needs rewriting: a percent-encoding, an empty segment or a segment starting
// with '.' (a dot segment, or a name like ".well-known" that costs the slow path only).
bool already_normal(std::string_view path) noexcept {
  for (std::size_t i = 0; i < path.size(); ++i) {
    if (path[i] == '%') return false;
    if (path[i] == '/' && i + 1 < path.size() && (path[i + 1] == '/' || path[i + 1] == '.')) {
      return false;
    }
  }
  return true;
}

// 1 for a segment that decodes to ".", 2 for "..", 0 for any other.
int dots(std::string_view segment) noexcept {
  int n = 0;
  for (std::size_t i = 0; i < segment.size() && n <= 2; ++n) {
    if (segment[i] == '.') {
      i += 1;
    } else if (segment.substr(i, 3) == "%2e" || segment.substr(i, 3) == "%2E") {
      i += 3;
    } else {
      return 0;
    }
  }
  return n <= 2 ? n : 0;
}

// The normalised path as a sequence of "/segment" pieces, of which the buffer keeps the first
// bytes. `deep_` counts the kept segments' successors whose '/' fell beyond the buffer, so that
// removing the last segment knows whether it is in the buffer (find its '/') or not (nothing
// kept changes).
class Output {
 public:
  Output(char* buf, std::size_t cap) : buf_(buf), cap_(cap) {}

  void open_segment() noexcept {
    if (len_ < cap_) {
      buf_[len_++] = '/';
    } else {
      ++deep_;
    }
    ++segments_;
  }
  void put(char c) noexcept {
    if (len_ < cap_) buf_[len_++] = c;
  }
  // Removes the last segment; false when there is none (the path climbs above the root).
  bool pop() noexcept {
    if (segments_ == 0) return false;
    --segments_;
    if (deep_ > 0) {
      --deep_;
      return true;
    }
    while (buf_[--len_] != '/') {
    }
    return true;
  }
  std::string_view view() const noexcept { return {buf_, len_}; }

 private:
  char* buf_;
  std::size_t cap_;
  std::size_t len_ = 0;
  std::size_t deep_ = 0;
  std::size_t segments_ = 0;
};

// Appends a segment that is not a dot segment, decoding unreserved characters.
bool put_segment(std::string_view segment, Output& out) noexcept {
  static constexpr char kHex[] = "0123456789ABCDEF";
  out.open_segment();
  for (std::size_t i = 0; i < segment.size(); ++i) {
    if (segment[i] != '%') {
      out.put(segment[i]);
      continue;
    }
    const int hi = i + 2 < segment.size() ? hex_value(segment[i + 1]) : -1;
    const int lo = hi >= 0 ? hex_value(segment[i + 2]) : -1;
    if (lo < 0) return false;
    const auto c = static_cast<unsigned char>(hi * 16 + lo);
    if (unreserved(c)) {
      out.put(static_cast<char>(c));
    } else {
      out.put('%');
      out.put(kHex[hi]);
      out.put(kHex[lo]);
    }
    i += 2;
  }
  return true;
}

}  // namespace

PathVerdict MatchPath::assign(std::string_view target) noexcept {
  const std::string_view path = target.substr(0, target.find('?'));
  view_ = {};
  if (path.empty() || path.front() != '/') return PathVerdict::malformed;
  if (already_normal(path)) {
    view_ = path;
    return PathVerdict::ok;
  }
  Output out(buf_.data(), buf_.size());
  bool trailing_slash = false;  // the last segment was empty or a dot segment
  for (std::size_t begin = 1;;) {
    std::size_t end = path.find('/', begin);
    if (end == std::string_view::npos) end = path.size();
    const std::string_view segment = path.substr(begin, end - begin);
    const int d = segment.empty() ? 1 : dots(segment);
    if (d == 2 && !out.pop()) return PathVerdict::above_root;
    if (d == 0 && !put_segment(segment, out)) return PathVerdict::malformed;
    trailing_slash = d != 0;
    if (end == path.size()) break;
    begin = end + 1;
  }
  if (trailing_slash) out.put('/');
  view_ = out.view();
  return PathVerdict::ok;
}

}  // namespace floodgate
