// Process: the test-only fault hooks of the admin listener (process.h, fault_hooks.h;
// docs/operations.md, "Fault hooks"). Linked only into floodgate-faults, the binary that
// builds configured with -DFLOODGATE_FAULT_HOOKS=ON (scripts/test.sh's) add beside floodgate;
// floodgate itself links no_fault_hooks.cpp, and its admin listener answers 404 under /fault/.
//
//   POST /fault/stall  {"reactor": 0, "ms": 1500}
//     Reactor 0 runs a task that sleeps 1500 ms: its loop does not turn meanwhile (no accept, no
//     read, no timer, no inbox), as a reactor wedged by a bug would. At most 60 s. Answers 200
//     {"reactor": 0, "ms": 1500} once the task is posted (it starts on the reactor's next turn).
#include "fault_hooks.h"
#include "process.h"

#include <boost/json.hpp>
#include <chrono>
#include <thread>

namespace floodgate::app {

namespace {
constexpr int64_t kMaxStallMs = 60'000;
}  // namespace

bool fault_hooks_built() {
  return true;
}

std::string_view fault_hooks_build_note() {
  return ", test fault hooks";
}

void Process::fault(const AdminServer::Request& req, const Reply& done) {
  namespace json = boost::json;
  auto message = [&done](int status, std::string text) {
    done(AdminServer::Response{status,
                               json::serialize(json::object{{"error", std::move(text)}}) + "\n"});
  };
  if (req.path != "/fault/stall") return message(404, "unknown fault hook; see docs/operations.md");
  if (req.method != "POST") return message(405, "use POST /fault/stall");
  boost::system::error_code ec;
  const json::value body = json::parse(req.body, ec);
  const json::object* o = ec ? nullptr : body.if_object();
  const json::value* reactor = o != nullptr ? o->if_contains("reactor") : nullptr;
  const json::value* ms = o != nullptr ? o->if_contains("ms") : nullptr;
  if (reactor == nullptr || ms == nullptr || !reactor->is_int64() || !ms->is_int64() ||
      reactor->as_int64() < 0 || static_cast<uint64_t>(reactor->as_int64()) >= reactors_.size() ||
      ms->as_int64() <= 0 || ms->as_int64() > kMaxStallMs) {
    return message(400, "send {\"reactor\": <0.." + std::to_string(reactors_.size() - 1) +
                            ">, \"ms\": <1.." + std::to_string(kMaxStallMs) + ">}");
  }
  const auto index = static_cast<std::size_t>(reactor->as_int64());
  const std::chrono::milliseconds stall(ms->as_int64());
  spdlog::warn("fault hook: reactor {} stalls for {} ms", index, stall.count());
  reactors_[index]->post([stall] { std::this_thread::sleep_for(stall); });
  done(AdminServer::Response{
      200, json::serialize(json::object{{"reactor", index}, {"ms", stall.count()}}) + "\n"});
}

}  // namespace floodgate::app
