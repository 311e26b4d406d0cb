// Whether this binary has the test-only fault hooks (docs/operations.md, "Fault hooks"): a
// link-time choice, not a compile-time one, so that the test suite's binary and the packaged one
// share every object but one. `floodgate` links no_fault_hooks.cpp; `floodgate-faults` (built
// only with -DFLOODGATE_FAULT_HOOKS=ON, for tests/integration/test_watchdog.py) links
// fault_hooks.cpp, which defines Process::fault. The packaged binary has no hook code at all.
#pragma once

#include <string_view>

namespace floodgate::app {

// True in floodgate-faults: the admin listener routes POST /fault/... to Process::fault.
bool fault_hooks_built();

// What `floodgate --version` adds to its build line: ", test fault hooks" or nothing.
std::string_view fault_hooks_build_note();

}  // namespace floodgate::app
