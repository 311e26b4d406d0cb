// Process: the control API of the admin listener (docs/operations.md; process.h).
#include "process.h"

#include <boost/json.hpp>

#include "config_diff.h"

namespace floodgate::app {

void Process::control(const AdminServer::Request& req, const Reply& done) {
  namespace json = boost::json;
  auto reply = [&done](int status, const json::value& v) {
    done(AdminServer::Response{status, json::serialize(v) + "\n"});
  };
  auto message = [&](int status, std::string text) {
    reply(status, json::object{{"error", std::move(text)}});
  };
  auto invalid = [&done](const config::LoadResult& r) {
    done(AdminServer::Response{422, config::to_json(r) + "\n"});
  };
  // Only floodgate-faults' admin server routes /fault/... here (AdminServer::Handlers).
  if (req.path.starts_with("/fault/")) return fault(req, done);
  if (req.path == "/status") {
    if (req.method != "GET") return message(405, "use GET /status");
    return reply(200, status_json(*serving_));
  }
  if (req.path == "/config") {
    if (req.method != "GET") return message(405, "use GET /config");
    const auto& snap = *serving_;  // what every reactor serves now
    return reply(200, json::object{{"generation", snap.generation},
                                   {"sha256", snap.sha256},
                                   {"loaded_at", rfc3339(snap.loaded_at)}});
  }
  const std::string_view action = std::string_view(req.path).substr(8);  // after "/config/"
  if (action != "validate" && action != "preview" && action != "activate" && action != "rollback") {
    return message(404, "unknown path; see docs/operations.md for the control API");
  }
  if (req.method != "POST") return message(405, "use POST " + req.path);
  // The token was checked when the head was complete (AdminServer::Handlers::authorized).
  if (draining_) return message(503, "floodgate is shutting down");
  if (action == "validate") {
    return done(AdminServer::Response{
        200, config::to_json(apply(req.body, "request body", false).validation) + "\n"});
  }
  if (action == "preview") {
    Outcome o = apply(req.body, "request body", false);
    if (!o.validation.ok()) return invalid(o.validation);
    json::object changes = config_diff(gens_.active().config, *o.validation.config);
    changes["generation"] = gens_.active().snapshot->generation;
    return reply(200, changes);
  }
  if (action == "activate") {
    const bool from_file = req.body.empty();
    std::string source = req.body;
    if (from_file && !read_config_file(source)) {
      ++reloads_failed_;
      return message(500, "cannot read " + path_ + ": " + source);
    }
    Outcome o =
        reload(source, from_file ? path_ : std::string("request body"), "control API",
               [done](uint64_t generation) {
                 done(AdminServer::Response{
                     200, json::serialize(json::object{{"generation", generation}}) + "\n"});
               });
    if (!o.validation.ok()) return invalid(o.validation);
    if (o.generation == 0) return message(500, o.error);
    return;  // answered once every reactor serves it
  }
  // rollback
  const Generations::Entry* previous = gens_.previous();
  if (previous == nullptr) return message(409, "there is no previous generation to go back to");
  notifier_.reloading();
  const std::shared_ptr<const proxy::Snapshot> old = gens_.active().snapshot;
  std::string error;
  if (!apply_listeners(previous->config, error)) {
    notifier_.reloaded(old->generation, false, error);
    return message(500, error);
  }
  gens_.rollback();
  ++rollbacks_;
  const auto snap = gens_.active().snapshot;
  track_retirement(old);
  spdlog::info("rollback: generation {} active again; generation {} retiring", snap->generation,
               old->generation);
  install_everywhere(snap, [this, snap, done] {
    notifier_.reloaded(snap->generation, true, "");
    done(AdminServer::Response{
        200, boost::json::serialize(boost::json::object{{"generation", snap->generation}}) + "\n"});
  });
}

}  // namespace floodgate::app
