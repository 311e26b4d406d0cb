// What activating one configuration would change against another: POST /config/preview
// answers with it, and a reload logs its summary.
//
// A pure function of the two configurations. Every comparison is a defaulted operator== of a
// Params struct (or of a copy with the fields reported on their own set equal), so a field
// added to any of them later is compared without anyone remembering to: a change can be
// reported coarsely (its table or pool), never missed.
#pragma once

#include <boost/json/object.hpp>
#include <string>

#include "floodgate/config/config.h"

namespace floodgate::app {

// {"pools": {added, removed, changed}, "servers": {added, removed, changed},
//  "routes": {added, removed, changed}, "policies": {changed}, "resilience": {changed},
//  "tables": {changed}}: names, or for servers and routes small objects. "policies" lists the
// pools whose keys other than name and servers differ; "resilience" the [resilience]
// sub-tables that differ; "tables" the other top-level tables (server, admin, log).
boost::json::object config_diff(const config::Config& active, const config::Config& next);

// A one-line summary for the process log ("2 pools changed, 1 route added"; "nothing
// changed" when the configurations are equal).
std::string summarize(const boost::json::object& diff);

}  // namespace floodgate::app
