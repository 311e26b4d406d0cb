#include "floodgate/metrics/reactor_metrics.h"

namespace floodgate {

// std::vector(n) value-initialises n elements in place, which is all the non-movable counters
// allow; the vectors are never resized afterwards.
ReactorMetrics::ReactorMetrics(std::size_t upstreams)
    : slots_(upstreams + 1), upstreams_(upstreams) {}

}  // namespace floodgate
