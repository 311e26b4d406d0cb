// The front of the stage chain (docs/resilience.md): the process-wide in-flight cap, the host
// memory guard and the protocol policy, in that order, before routing. Built with each
// generation from its [resilience] parameters; the cap's counter and the memory sample are
// process-wide and outlive generations (FrontState), so a reload changes a limit, never the
// count of requests already in flight.
#pragma once

#include <cstdint>
#include <memory>

#include "floodgate/proxy/stage.h"
#include "floodgate/resilience/inflight.h"
#include "floodgate/resilience/memory_guard.h"
#include "floodgate/resilience/params.h"
#include "floodgate/resilience/protocol.h"

namespace floodgate::proxy {

// What the front stages share across generations and reactors.
struct FrontState {
  resilience::InflightCap inflight;
  resilience::MemoryGuard memory;
};

// Builds the front chain of a generation: only the stages its parameters switch on (the cap
// when `max_inflight` resolved to a non-zero value, the memory guard unless its floor is 0;
// the protocol policy always, since CONNECT is always its decision). Building sets no limit:
// the generation's max_inflight becomes the cap's limit when the generation is activated
// (app::Generations), so building a preview changes nothing live.
Chain build_front_chain(const resilience::Params& params, uint32_t max_inflight,
                        const std::shared_ptr<FrontState>& state);

}  // namespace floodgate::proxy
