#include "floodgate/metrics/prometheus.h"

#include <charconv>
#include <cmath>
#include <cstddef>
#include <system_error>

namespace floodgate {
namespace {

// Escapes per the text format: `\` and newline always, `"` only inside label values.
void append_escaped(std::string& out, std::string_view text, bool quote) {
  for (const char c : text) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '"' && quote) {
      out += "\\\"";
    } else {
      out += c;
    }
  }
}

std::string_view type_name(MetricType type) {
  switch (type) {
    case MetricType::counter:
      return "counter";
    case MetricType::gauge:
      return "gauge";
    case MetricType::histogram:
      return "histogram";
  }
  return "untyped";
}

template <class T>
std::string_view format(std::array<char, 32>& buffer, T value) {
  const auto result = std::to_chars(buffer.data(), buffer.data() + buffer.size(), value);
  return {buffer.data(), static_cast<std::size_t>(result.ptr - buffer.data())};
}

}  // namespace

void PrometheusWriter::header(std::string_view name, std::string_view help, MetricType type) {
  out_ += "# HELP ";
  out_ += name;
  out_ += ' ';
  append_escaped(out_, help, false);
  out_ += "\n# TYPE ";
  out_ += name;
  out_ += ' ';
  out_ += type_name(type);
  out_ += '\n';
}

void PrometheusWriter::sample(std::string_view name, std::span<const Label> labels,
                              uint64_t value) {
  std::array<char, 32> buffer;
  begin_sample(name, {}, labels, nullptr);
  end_sample(format(buffer, value));
}

void PrometheusWriter::sample(std::string_view name, std::span<const Label> labels, int64_t value) {
  std::array<char, 32> buffer;
  begin_sample(name, {}, labels, nullptr);
  end_sample(format(buffer, value));
}

void PrometheusWriter::sample(std::string_view name, std::span<const Label> labels, double value) {
  std::array<char, 32> buffer;
  begin_sample(name, {}, labels, nullptr);
  if (std::isnan(value)) {
    end_sample("NaN");
  } else if (std::isinf(value)) {
    end_sample(value > 0 ? "+Inf" : "-Inf");
  } else {
    end_sample(format(buffer, value));  // shortest round-trip form
  }
}

void PrometheusWriter::histogram(std::string_view name, std::span<const Label> labels,
                                 const HistogramTotals& totals) {
  std::array<char, 32> buffer;
  uint64_t cumulative = 0;
  for (std::size_t i = 0; i < totals.buckets.size(); ++i) {
    cumulative += totals.buckets[i];
    const Label le{"le", kDurationBucketLabels[i]};
    begin_sample(name, "_bucket", labels, &le);
    end_sample(format(buffer, cumulative));
  }
  begin_sample(name, "_sum", labels, nullptr);
  end_sample(format(buffer, static_cast<double>(totals.sum_ns) / 1e9));
  begin_sample(name, "_count", labels, nullptr);
  end_sample(format(buffer, cumulative));
}

void PrometheusWriter::begin_sample(std::string_view name, std::string_view suffix,
                                    std::span<const Label> labels, const Label* extra) {
  out_ += name;
  out_ += suffix;
  if (labels.empty() && extra == nullptr) {
    return;
  }
  char separator = '{';
  const auto append_label = [&](const Label& label) {
    out_ += separator;
    out_ += label.name;
    out_ += "=\"";
    append_escaped(out_, label.value, true);
    out_ += '"';
    separator = ',';
  };
  for (const Label& label : labels) {
    append_label(label);
  }
  if (extra != nullptr) {
    append_label(*extra);
  }
  out_ += '}';
}

void PrometheusWriter::end_sample(std::string_view value) {
  out_ += ' ';
  out_ += value;
  out_ += '\n';
}

}  // namespace floodgate
