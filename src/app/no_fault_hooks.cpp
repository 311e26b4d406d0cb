// Process without the test-only fault hooks (fault_hooks.h): what floodgate, and so the Debian
// package, links. Its admin listener never routes /fault/... here (fault_hooks_built() is
// false, so such a path is a 404 like any unknown one); Process::fault exists only so that
// control_api.cpp links, and answers the same 404 should it ever be reached.
#include "fault_hooks.h"
#include "process.h"

namespace floodgate::app {

bool fault_hooks_built() {
  return false;
}

std::string_view fault_hooks_build_note() {
  return "";
}

void Process::fault(const AdminServer::Request& /*req*/, const Reply& done) {
  done(AdminServer::Response{404, "not found\n", "text/plain; charset=utf-8"});
}

}  // namespace floodgate::app
