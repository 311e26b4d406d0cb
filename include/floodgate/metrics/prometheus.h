// Prometheus text exposition format, version 0.0.4 (Content-Type
// "text/plain; version=0.0.4; charset=utf-8").
//
// Threads: called by the admin scrape on whatever thread serves /metrics; it only reads the
// shards (relaxed loads, see counter.h) and appends to a string the caller owns. Not on the
// request path; it may allocate.
//
// PrometheusWriter is the one place that knows the format: metric families are a header()
// followed by their samples; label values are escaped (backslash, double quote, newline), HELP
// text too (backslash, newline). Every family /metrics serves is written through it; nothing
// else formats the text.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "floodgate/metrics/histogram.h"
#include "floodgate/metrics/reactor_metrics.h"

namespace floodgate {

enum class MetricType { counter, gauge, histogram };

struct Label {
  std::string_view name;   // a valid label name; not escaped
  std::string_view value;  // any bytes; escaped on output
};

class PrometheusWriter {
 public:
  explicit PrometheusWriter(std::string& out) noexcept : out_(out) {}

  // "# HELP name help" and "# TYPE name type". Call once per metric family, before its samples.
  void header(std::string_view name, std::string_view help, MetricType type);

  // One sample line: name{labels} value. `labels` may be empty (no braces are written then).
  void sample(std::string_view name, std::span<const Label> labels, uint64_t value);
  void sample(std::string_view name, std::span<const Label> labels, int64_t value);
  void sample(std::string_view name, std::span<const Label> labels, double value);

  // The samples of one histogram series: name_bucket{labels,le="..."} (cumulative), name_sum in
  // seconds, name_count.
  void histogram(std::string_view name, std::span<const Label> labels,
                 const HistogramTotals& totals);

 private:
  void begin_sample(std::string_view name, std::string_view suffix, std::span<const Label> labels,
                    const Label* extra);
  void end_sample(std::string_view value);

  std::string& out_;
};

// Appends every metric of ReactorMetrics, summed over `shards`, to `out`. upstream_names[i] is
// the name of upstream id i; a shard built for fewer upstreams contributes zeros for the rest.
void render_prometheus(std::span<const ReactorMetrics* const> shards,
                       std::span<const std::string> upstream_names, std::string& out);

// Appends floodgate_accept_errors_total{reason}, summed over `shards`, every reason listed.
void render_accept_errors(std::span<const ReactorMetrics* const> shards, std::string& out);
// The TLS listeners' handshakes: by result and version, their duration, resumptions.
void render_tls(std::span<const ReactorMetrics* const> shards, std::string& out);
// HTTP/2 from clients: connections, streams, refused streams, glitches, GOAWAYs.
void render_http2(std::span<const ReactorMetrics* const> shards, std::string& out);

}  // namespace floodgate
