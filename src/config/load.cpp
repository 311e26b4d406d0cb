#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include <toml++/toml.h>

#include "collector.h"
#include "floodgate/config/config.h"
#include "schema.h"
#include "table_reader.h"

namespace floodgate::config {
namespace {

// A configuration is a few KiB; the cap stops a mistaken path (a log, /dev/zero) early.
constexpr size_t kMaxFileBytes = size_t{16} << 20;

std::string lower_first(std::string_view s) {
  std::string out(s);
  if (!out.empty() && out[0] >= 'A' && out[0] <= 'Z') {
    out[0] = static_cast<char>(out[0] - 'A' + 'a');
  }
  return out;
}

}  // namespace

std::optional<std::string> process_environment(std::string_view name) {
  // Main thread only (as every load), and floodgate never calls setenv: getenv cannot race.
  if (const char* value = std::getenv(std::string(name).c_str())) {
    return std::string(value);
  }
  return std::nullopt;
}

LoadResult load_string(std::string_view toml_text, std::string_view source_name,
                       const Environment& env) {
  detail::Collector out{std::string(source_name)};
  LoadResult result;
  try {
    const toml::table root = toml::parse(toml_text, source_name);
    Config config = detail::map_document(root, env, out);
    if (!out.has_errors()) {
      result.config = std::move(config);
    }
  } catch (const toml::parse_error& e) {
    out.error(detail::position_of(e.source()), "", "invalid TOML: " + lower_first(e.description()));
  }
  result.diagnostics = out.take();
  result.notes = out.take_notes();
  return result;
}

bool read_file(const std::string& path, std::string& text, std::string& why) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    why = std::strerror(errno);
    return false;
  }
  char buf[64 * 1024];
  ssize_t n = 0;
  while (text.size() <= kMaxFileBytes && (n = ::read(fd, buf, sizeof buf)) != 0) {
    if (n > 0) {
      text.append(buf, static_cast<size_t>(n));
    }
    if (n < 0 && errno != EINTR) {
      break;
    }
  }
  const int err = errno;
  ::close(fd);
  if (n < 0) {
    why = std::strerror(err);
  }
  if (text.size() > kMaxFileBytes) {
    why = "file is larger than 16 MiB; is this a configuration?";
  }
  return why.empty();
}

LoadResult load_file(const std::string& path, const Environment& env) {
  std::string text;
  std::string why;
  if (!read_file(path, text, why)) {
    detail::Collector out{path};
    out.error({}, "", "cannot read configuration file \"" + path + "\": " + why);
    return LoadResult{std::nullopt, out.take(), {}};
  }
  return load_string(text, path, env);
}

}  // namespace floodgate::config
