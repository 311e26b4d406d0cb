// server.trusted_proxies (rate_limit_schema.h): the peers whose X-Forwarded-For a client_ip key
// source believes. Trusting too much lets any client choose the address it is counted by, so
// a range that trusts every peer, and one written with bits past its prefix (which IpRange
// clears: not the range it looks like), are worth a warning.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "rate_limit_schema.h"
#include "values.h"

namespace floodgate::config::detail {
namespace {

constexpr std::string_view kKey = "trusted_proxies";

// Whether `address` (the part before any '/') is written as IPv4, as IpRange::parse decides.
bool written_v4(std::string_view address) {
  return address.find(':') == std::string_view::npos;
}

// `r` as text, in the family it was written in: "10.0.0.0/8", "2001:db8::/32".
std::string range_text(const IpRange& r, bool v4) {
  char buf[INET6_ADDRSTRLEN] = {};
  if (v4) {
    inet_ntop(AF_INET, r.base.bytes.data() + 12, buf, sizeof buf);
    return std::string(buf) + "/" + std::to_string(r.prefix - 96);
  }
  inet_ntop(AF_INET6, r.base.bytes.data(), buf, sizeof buf);
  return std::string(buf) + "/" + std::to_string(r.prefix);
}

// Why `text` is not an address or a range (IpRange::parse refused it).
std::string bad_range(std::string_view text) {
  const std::string_view address = text.substr(0, text.find('/'));
  if (IpAddress::parse(address)) {
    return quoted(text) + ": the prefix length after '/' must be a number from 0 to " +
           (written_v4(address) ? "32 for an IPv4 address, e.g. \"10.0.0.0/8\""
                                : "128 for an IPv6 address, e.g. \"2001:db8::/32\"");
  }
  const auto letter = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); };
  if (is_hostname(address) && std::any_of(address.begin(), address.end(), letter)) {
    return quoted(text) +
           " is a host name; trusted_proxies takes IP addresses and CIDR ranges only (floodgate "
           "never resolves names): write the proxy's address, e.g. \"10.0.0.7\", or its "
           "network, e.g. \"10.0.0.0/8\"";
  }
  return quoted(text) +
         " is not an IP address or CIDR range; write an IPv4 or IPv6 address without brackets "
         "or port (\"10.0.0.7\", \"::1\"), or a range (\"10.0.0.0/8\", \"2001:db8::/32\")";
}

// A valid entry that trusts every peer, or that is not the range it looks like.
void warn_loose(Collector& out, Position at, const std::string& path, std::string_view text,
                const IpRange& range) {
  const std::string_view address = text.substr(0, text.find('/'));
  const auto lowest = IpAddress::parse("0.0.0.0");
  const auto highest = IpAddress::parse("255.255.255.255");
  if (range.contains(*lowest) && range.contains(*highest)) {
    out.warning(at, path,
                quoted(text) + " trusts every " + (range.prefix == 0 ? "peer" : "IPv4 peer") +
                    ", so any client can choose the address a client_ip key counts it by, with "
                    "an X-Forwarded-For of its own; list only the addresses of the proxies in "
                    "front of floodgate");
  } else if (IpAddress::parse(address) != range.base) {
    const std::string meant = quoted(range_text(range, written_v4(address)));
    out.warning(at, path,
                quoted(text) + " has bits set past its prefix, so it is the range " + meant +
                    "; write " + meant + ", or " + quoted(address) + " for that one address");
  }
}

// One element; nullopt when it has an error (recorded).
std::optional<IpRange> read_proxy(TableReader& r, const toml::node& item, const std::string& path) {
  const Position at = position_of(item.source());
  const auto* s = item.as_string();
  if (!s) {
    type_error(r.out(), at, path, "a string (an IP address or CIDR range)", item, "\"10.0.0.0/8\"");
    return std::nullopt;
  }
  const auto range = IpRange::parse(s->get());
  if (!range) {
    r.out().error(at, path, bad_range(s->get()));
    return std::nullopt;
  }
  warn_loose(r.out(), at, path, s->get(), *range);
  return range;
}

}  // namespace

bool read_trusted_proxies(TableReader& r, std::vector<IpRange>& out) {
  const toml::node* n = r.find(kKey);
  if (!n) {
    return true;
  }
  const toml::array* items = n->as_array();
  if (!items) {
    const std::string element = n->is_string() ? quoted(n->as_string()->get()) : "\"10.0.0.0/8\"";
    type_error(r.out(), r.position(kKey), r.path(kKey), "an array of IP addresses and CIDR ranges",
               *n, std::string(kKey) + " = [" + element + "]");
    return false;
  }
  std::vector<IpRange> ranges;
  std::vector<std::string> paths;
  bool ok = true;
  for (size_t i = 0; i < items->size(); ++i) {
    const toml::node& item = (*items)[i];
    std::string path = r.element_path(kKey, i);
    const auto range = read_proxy(r, item, path);
    const auto first = range ? std::find(ranges.begin(), ranges.end(), *range) : ranges.end();
    if (!range) {
      ok = false;
    } else if (first != ranges.end()) {
      r.out().error(position_of(item.source()), path,
                    "duplicate " + quoted(item.as_string()->get()) + " (same as " +
                        paths[static_cast<size_t>(first - ranges.begin())] +
                        "); remove one of them");
      ok = false;
    } else {
      ranges.push_back(*range);
      paths.push_back(std::move(path));
    }
  }
  if (ok) {
    out = std::move(ranges);
  }
  return ok;
}

}  // namespace floodgate::config::detail
