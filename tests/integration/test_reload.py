"""Configuration lifecycle end to end: SIGHUP reloads, generations, the control API, listener
changes, retirement and log reopening. A reload never drops a request; a bad file never takes
the service down."""

import hashlib
import http.client
import json
import os
import shutil
import signal
import socket
import tempfile
import threading
import unittest

from backend import Backend
from test_upgrade import UPGRADE_HEADERS
from harness import (DEFAULT_TIMEOUT, Conn, FloodgateTestCase, admin_get, build_request,
                     free_port, poll, render_toml, route, upstream)

TOKEN = "s3cret-token-for-tests-0123"


def admin_post(port, path, body=b"", token=TOKEN):
    """POST to the control API; with TOKEN by default (every class but NoToken configures it)."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=DEFAULT_TIMEOUT)
    headers = {"Content-Type": "application/toml"}
    if token is not None:
        headers["Authorization"] = "Bearer " + token
    c.request("POST", path, body=body, headers=headers)
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, json.loads(data) if data.strip() else None


class Reloads(FloodgateTestCase):
    """Each test starts from the class's base configuration (reapplied in setUp)."""

    @classmethod
    def setUpClass(cls):
        cls.a = Backend("a").start()
        cls.b = Backend("b").start()
        cls.backends = [cls.a, cls.b]
        cls.fg = cls.start_floodgate([upstream("a", [cls.a])], routes=[route("a")],
                                     server={"retirement_grace": "1s"}, workers=2,
                                     admin={"token": TOKEN})
        cls.base = cls.fg.config()

    def setUp(self):
        super().setUp()
        if self.fg.config() != self.base or self.generation()["sha256"] != self.sha(self.base):
            self.reload(self.base)

    # --- helpers ---------------------------------------------------------------------------
    def generation(self):
        status, _, body = admin_get(self.fg.admin_port, "/config")
        self.assertEqual(status, 200)
        return json.loads(body)

    @staticmethod
    def sha(cfg):
        return hashlib.sha256(render_toml(cfg).encode()).hexdigest()

    def write(self, cfg):
        self.fg.upstreams, self.fg.routes = cfg["upstreams"], cfg["routes"]
        with open(self.fg.config_path, "w") as f:
            f.write(render_toml(cfg))

    def reload(self, cfg):
        """Writes `cfg`, sends SIGHUP and waits until its generation is active."""
        before = self.generation()["generation"]
        self.write(cfg)
        self.fg.signal(signal.SIGHUP)
        poll(lambda: self.generation()["generation"] > before, what="a new generation")
        self.assertEqual(self.generation()["sha256"], self.sha(cfg))

    def metric(self, name, **labels):
        return self.fg.metrics().value(name, **labels)

    def with_pool_b(self):
        cfg = json.loads(json.dumps(self.base))
        cfg["upstreams"].append(upstream("b", [self.b]))
        cfg["routes"].append(route("b", host="b.test"))
        return cfg

    # --- SIGHUP ----------------------------------------------------------------------------
    def test_sighup_with_a_good_file_activates_a_new_generation(self):
        before = self.generation()
        ok_before = self.metric("floodgate_config_reloads_total", result="ok")
        cfg = self.with_pool_b()
        self.reload(cfg)
        after = self.generation()
        self.assertEqual(after["generation"], before["generation"] + 1)
        self.assertRegex(after["loaded_at"], r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
        self.assertEqual(self.metric("floodgate_config_generation"), after["generation"])
        self.assertEqual(self.metric("floodgate_config_reloads_total", result="ok"), ok_before + 1)
        self.assertEqual(self.fg.get("/x", host="b.test").status, 200)
        self.b.wait_for_target("/x")

    def test_sighup_with_a_bad_file_keeps_the_old_generation_serving(self):
        before = self.generation()
        errors = self.metric("floodgate_config_reloads_total", result="error")
        with open(self.fg.config_path, "w") as f:
            f.write(render_toml(self.base) + '\n[bogus]\nkey = 1\n')
        self.fg.signal(signal.SIGHUP)
        poll(lambda: self.metric("floodgate_config_reloads_total", result="error") == errors + 1,
             what="the failed reload counted")
        self.assertEqual(self.generation(), before)
        self.assertEqual(self.fg.get("/still").status, 200)
        self.assertIn(b"bogus", self.fg.stderr_bytes())  # every error is logged
        self.write(self.base)

    def test_removing_a_pool_and_its_route_takes_effect_and_adding_them_back_works(self):
        self.reload(self.with_pool_b())
        self.assertEqual(self.fg.get("/pool-1", host="b.test").status, 200)
        self.b.wait_for_target("/pool-1")
        self.reload(self.base)
        r = self.fg.get("/pool-2", host="b.test")  # now routed to pool a (host "*")
        self.assertEqual(r.status, 200)
        self.a.wait_for_target("/pool-2")
        self.reload(self.with_pool_b())
        self.assertEqual(self.fg.get("/pool-3", host="b.test").status, 200)
        self.b.wait_for_target("/pool-3")

    def test_a_route_to_nothing_after_reload_answers_no_route(self):
        cfg = json.loads(json.dumps(self.base))
        cfg["routes"] = [route("a", host="only.test")]
        self.reload(cfg)
        self.assertGenerated(self.fg.get("/x", host="other.test"), 404, "no_route")

    def test_keep_alive_connection_opened_before_reloads_carries_on_with_the_new_routes(self):
        with self.fg.conn() as c:
            self.assertEqual(c.request("GET", "/ka-before", host="b.test").status, 200)
            self.a.wait_for_target("/ka-before")
            self.reload(self.with_pool_b())
            self.assertEqual(c.request("GET", "/ka-after", host="b.test").status, 200)
            self.b.wait_for_target("/ka-after")

    def test_a_request_in_flight_during_a_reload_completes(self):
        key = "reload-in-flight"
        with self.fg.conn() as c:
            c.send(build_request("GET", "/hold?key=" + key))
            self.a.wait_for_target("/hold?key=" + key)
            self.reload(self.with_pool_b())
            self.a.release(key)
            self.assertEqual(c.read_response().status, 200)

    def test_a_tunnel_opened_before_reloads_still_echoes_after_them(self):
        with self.fg.conn() as c:
            c.send(build_request("GET", "/ws", headers=UPGRADE_HEADERS))
            self.assertEqual(c.read_response().status, 101)
            for i in range(3):
                self.reload(self.with_pool_b() if i % 2 == 0 else self.base)
                c.send(b"ping-%d" % i)
                self.assertEqual(c.read_exact(6), b"ping-%d" % i)

    def test_a_reload_does_not_change_a_running_tunnels_idle_timeout(self):
        # The tunnel runs on the generation its request was read on: idle_timeout 60 s. A
        # reload to 300 ms applies to requests read after it, not to this tunnel, even after
        # its traffic re-arms the timer.
        with self.fg.conn() as c:
            c.send(build_request("GET", "/ws", headers=UPGRADE_HEADERS))
            self.assertEqual(c.read_response().status, 101)
            cfg = json.loads(json.dumps(self.base))
            cfg["server"]["idle_timeout"] = "300ms"
            self.reload(cfg)
            c.send(b"ping-a")
            self.assertEqual(c.read_exact(6), b"ping-a")
            self.assertTrue(c.is_open_after(1.0), "the reload's idle_timeout closed the tunnel")
            c.send(b"ping-b")
            self.assertEqual(c.read_exact(6), b"ping-b")

    def test_a_request_on_a_removed_pool_ends_after_retirement_grace(self):
        self.reload(self.with_pool_b())
        key = "reload-removed-pool"
        with self.fg.conn() as c:
            c.send(build_request("GET", "/hold?key=" + key, host="b.test"))
            self.b.wait_for_target("/hold?key=" + key)
            self.reload(self.base)  # pool b is gone; retirement_grace is 1s
            # Cut: no response, the connection closes (wait_closed raises if it stays open).
            self.assertEqual(c.wait_closed(timeout=10), b"")
            self.b.release(key)

    def test_a_head_completed_after_its_generation_retired_is_routed_on_the_new_one(self):
        self.reload(self.with_pool_b())
        key = "reload-head-across-retirement"
        with self.fg.conn() as held, self.fg.conn() as slow:
            held.send(build_request("GET", "/hold?key=" + key, host="b.test"))
            self.b.wait_for_target("/hold?key=" + key)
            slow.send(b"GET /late-head HTTP/1.1\r\nHost: b.test\r\n")  # the head is not complete
            self.reload(self.base)  # pool b and its route are gone; retirement_grace is 1s
            # The held request on pool b is cut once the grace has passed: retirement was forced.
            self.assertEqual(held.wait_closed(timeout=10), b"")
            self.b.release(key)
            slow.send(b"\r\n")
            self.assertEqual(slow.read_response().status, 200)
        self.a.wait_for_target("/late-head")
        self.assertNotIn("/late-head", [r.target for r in list(self.b.requests)])

    def test_workers_cannot_change_on_reload(self):
        before = self.generation()
        cfg = json.loads(json.dumps(self.base))
        cfg["server"]["workers"] = 3
        status, body = admin_post(self.fg.admin_port, "/config/activate", render_toml(cfg).encode())
        self.assertEqual(status, 422)
        self.assertFalse(body["valid"])
        self.assertIn("server.workers", [e["path"] for e in body["errors"]])
        self.assertEqual(self.generation(), before)

    def test_event_loop_interface_cannot_change_on_reload(self):
        before = self.generation()
        cfg = json.loads(json.dumps(self.base))
        cfg["server"]["io"] = "io_uring" if cfg["server"].get("io") == "epoll" else "epoll"
        status, body = admin_post(self.fg.admin_port, "/config/activate", render_toml(cfg).encode())
        self.assertEqual(status, 422)
        self.assertFalse(body["valid"])
        self.assertIn("server.io", [e["path"] for e in body["errors"]])
        self.assertEqual(self.generation(), before)

    # --- listeners -------------------------------------------------------------------------
    def test_listener_added_and_removed_on_reload_without_dropping_connections(self):
        port = free_port()
        cfg = json.loads(json.dumps(self.base))
        cfg["server"]["listen"] = self.base["server"]["listen"] + ["127.0.0.1:%d" % port]
        self.reload(cfg)
        poll(lambda: self.accepts(port), what="the new listener")
        with Conn(port) as on_new, self.fg.conn() as on_old:
            self.assertEqual(on_new.request("GET", "/via-new").status, 200)
            self.assertEqual(on_old.request("GET", "/via-old").status, 200)
            self.reload(self.base)  # the new listener goes away again
            poll(lambda: not self.accepts(port), what="the removed listener closed")
            # Established connections on the removed listener carry on.
            self.assertEqual(on_new.request("GET", "/still-new").status, 200)
            self.assertEqual(on_old.request("GET", "/still-old").status, 200)

    def test_a_listener_that_cannot_be_bound_refuses_the_reload_without_using_a_number(self):
        blocker = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.addCleanup(blocker.close)
        blocker.bind(("127.0.0.1", 0))
        blocker.listen(1)
        port = blocker.getsockname()[1]
        before = self.generation()
        errors = self.metric("floodgate_config_reloads_total", result="error")
        cfg = json.loads(json.dumps(self.base))
        cfg["server"]["listen"] = self.base["server"]["listen"] + ["127.0.0.1:%d" % port]
        self.write(cfg)
        self.fg.signal(signal.SIGHUP)
        poll(lambda: self.metric("floodgate_config_reloads_total", result="error") == errors + 1,
             what="the refused reload counted")
        self.assertEqual(self.generation(), before)
        log = self.fg.stderr_bytes().decode("utf-8", "replace")
        self.assertIn("server.listen: cannot listen on 127.0.0.1:%d: Address already in use"
                      % port, log)
        self.assertNotIn("[system:", log)
        # The next good reload takes the number the refused one did not use.
        self.reload(self.with_pool_b())
        self.assertEqual(self.generation()["generation"], before["generation"] + 1)
        self.reload(self.base)

    @staticmethod
    def accepts(port):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return True
        except OSError:
            return False

    # --- control API -----------------------------------------------------------------------
    def test_get_config_reports_generation_hash_and_load_time(self):
        g = self.generation()
        self.assertEqual(set(g), {"generation", "sha256", "loaded_at"})
        self.assertEqual(g["sha256"], self.sha(self.base))

    def test_validate_reports_problems_and_changes_nothing(self):
        before = self.generation()
        bad = render_toml(self.base).replace('"round_robin"', '"rr"') + '\nbalance = "rr"\n'
        status, body = admin_post(self.fg.admin_port, "/config/validate", bad.encode())
        self.assertEqual(status, 200)
        self.assertFalse(body["valid"])
        self.assertTrue(body["errors"])
        self.assertEqual(set(body["errors"][0]), {"line", "column", "path", "message"})
        status, body = admin_post(self.fg.admin_port, "/config/validate",
                                  render_toml(self.with_pool_b()).encode())
        self.assertEqual((status, body["valid"]), (200, True))
        self.assertEqual(self.generation(), before)

    def test_preview_lists_what_would_change(self):
        status, body = admin_post(self.fg.admin_port, "/config/preview",
                                  render_toml(self.with_pool_b()).encode())
        self.assertEqual(status, 200, body)
        self.assertEqual(body["pools"]["added"], ["b"])
        self.assertEqual(body["routes"]["added"],
                         [{"host": "b.test", "path_prefix": "/", "upstream": "b",
                           "allow_h2c_upgrade": False}])
        self.assertEqual(body["pools"]["removed"], [])
        status, body = admin_post(self.fg.admin_port, "/config/preview", b"[server]\nworkers = x\n")
        self.assertEqual(status, 422)
        self.assertFalse(body["valid"])

    def test_resilience_changes_are_previewed_and_reloadable(self):
        text = render_toml(self.base) + ("\n[resilience.inflight]\nmax_inflight = 1000\n"
                                         "[resilience.protocol]\nmode = \"shadow\"\n")
        status, body = admin_post(self.fg.admin_port, "/config/preview", text.encode())
        self.assertEqual(status, 200, body)
        self.assertEqual(body["resilience"], {"changed": ["inflight", "protocol"]})
        status, body = admin_post(self.fg.admin_port, "/config/preview",
                                  render_toml(self.base).encode())
        self.assertEqual((status, body["resilience"]), (200, {"changed": []}))
        before = self.generation()["generation"]
        status, body = admin_post(self.fg.admin_port, "/config/activate", text.encode())
        self.assertEqual((status, body), (200, {"generation": before + 1}))
        self.assertEqual(self.fg.get("/").status, 200)

    def test_activate_with_a_body_and_rollback(self):
        before = self.generation()
        status, body = admin_post(self.fg.admin_port, "/config/activate",
                                  render_toml(self.with_pool_b()).encode())
        self.assertEqual(status, 200, body)
        self.assertEqual(body["generation"], before["generation"] + 1)
        self.assertEqual(self.fg.get("/api", host="b.test").status, 200)
        self.b.wait_for_target("/api")
        status, body = admin_post(self.fg.admin_port, "/config/rollback")
        self.assertEqual((status, body), (200, {"generation": before["generation"]}))
        self.assertEqual(self.generation()["sha256"], before["sha256"])
        self.assertEqual(self.fg.get("/rolled-back", host="b.test").status, 200)
        self.a.wait_for_target("/rolled-back")

    def test_activate_with_an_invalid_body_changes_nothing(self):
        before = self.generation()
        status, body = admin_post(self.fg.admin_port, "/config/activate", b"[[routes]]\nupstream = 1\n")
        self.assertEqual(status, 422)
        self.assertFalse(body["valid"])
        self.assertEqual(self.generation(), before)

    def test_activate_without_a_body_rereads_the_file(self):
        before = self.generation()
        self.write(self.with_pool_b())
        status, body = admin_post(self.fg.admin_port, "/config/activate")
        self.assertEqual(status, 200, body)
        # Numbers only grow (a rollback reactivates an older number; the next one is new).
        self.assertGreater(body["generation"], before["generation"])
        self.assertEqual(self.generation()["generation"], body["generation"])
        self.assertEqual(self.generation()["sha256"], self.sha(self.with_pool_b()))

    def test_reopen_logs_on_sigusr1(self):
        path = self.fg.access_log_path
        os.rename(path, path + ".1")
        self.fg.signal(signal.SIGUSR1)
        poll(lambda: os.path.exists(path), what="a new access log file")
        self.fg.get("/after-rotate", headers=[("X-Request-Id", "after-rotate-1")])
        def logged():
            with open(path, "rb") as f:
                return b"after-rotate-1" in f.read()
        poll(logged, what="the line in the new file")


class NoPreviousGeneration(FloodgateTestCase):
    @classmethod
    def setUpClass(cls):
        cls.a = Backend("a").start()
        cls.backends = [cls.a]
        cls.fg = cls.start_floodgate([upstream("a", [cls.a])], admin={"token": TOKEN})

    def test_rollback_without_a_previous_generation_is_a_conflict(self):
        status, body = admin_post(self.fg.admin_port, "/config/rollback")
        self.assertEqual(status, 409)
        self.assertIn("previous", body["error"])


class Token(FloodgateTestCase):
    @classmethod
    def setUpClass(cls):
        cls.a = Backend("a").start()
        cls.backends = [cls.a]
        cls.fg = cls.start_floodgate([upstream("a", [cls.a])], admin={"token": TOKEN})

    @classmethod
    def config_with_token(cls):
        return cls.fg.config()

    def test_posts_need_the_bearer_token_and_gets_stay_open(self):
        body = render_toml(self.config_with_token()).encode()
        for token in (None, "wrong-token-of-enough-length", TOKEN + "x"):
            status, answer = admin_post(self.fg.admin_port, "/config/validate", body, token)
            self.assertEqual(status, 401, token)
            self.assertIn("token", answer["error"])
        status, _ = admin_post(self.fg.admin_port, "/config/rollback", token=None)
        self.assertEqual(status, 401)
        status, answer = admin_post(self.fg.admin_port, "/config/validate", body, TOKEN)
        self.assertEqual((status, answer["valid"]), (200, True))
        status, _, _ = admin_get(self.fg.admin_port, "/config")
        self.assertEqual(status, 200)


class NoToken(FloodgateTestCase):
    """Without a token, the control API reads but never changes floodgate."""

    @classmethod
    def setUpClass(cls):
        cls.a = Backend("a").start()
        cls.backends = [cls.a]
        cls.fg = cls.start_floodgate([upstream("a", [cls.a])])

    def test_activate_and_rollback_are_forbidden_and_validate_and_preview_answer(self):
        body = render_toml(self.fg.config()).encode()
        _, _, before = admin_get(self.fg.admin_port, "/config")
        for path in ("/config/activate", "/config/rollback"):
            for with_body in (body, b""):
                status, answer = admin_post(self.fg.admin_port, path, with_body, token=None)
                self.assertEqual(status, 403, path)
                self.assertIn("no admin token is configured", answer["error"])
                self.assertIn("admin.token_file", answer["error"])
        # A token sent when none is configured changes nothing either.
        status, _ = admin_post(self.fg.admin_port, "/config/activate", body, TOKEN)
        self.assertEqual(status, 403)
        status, answer = admin_post(self.fg.admin_port, "/config/validate", body, token=None)
        self.assertEqual((status, answer["valid"]), (200, True))
        status, answer = admin_post(self.fg.admin_port, "/config/preview", body, token=None)
        self.assertEqual(status, 200, answer)
        _, _, after = admin_get(self.fg.admin_port, "/config")
        self.assertEqual(json.loads(after)["generation"], json.loads(before)["generation"])


class TokenFile(FloodgateTestCase):
    """admin.token_file: the token read from a file (systemd's LoadCredential=), re-read on
    every reload, so a new token is a new file and a SIGHUP."""

    @classmethod
    def setUpClass(cls):
        cls.a = Backend("a").start()
        cls.backends = [cls.a]
        cls.token_dir = tempfile.mkdtemp(prefix="floodgate-token-")
        cls.token_path = os.path.join(cls.token_dir, "admin-token")
        with open(cls.token_path, "w") as f:
            f.write(TOKEN + "\n")
        cls.fg = cls.start_floodgate([upstream("a", [cls.a])],
                                     admin={"token_file": cls.token_path})

    @classmethod
    def tearDownClass(cls):
        super().tearDownClass()
        shutil.rmtree(cls.token_dir, ignore_errors=True)

    def generation(self):
        _, _, body = admin_get(self.fg.admin_port, "/config")
        return json.loads(body)["generation"]

    def test_the_token_comes_from_the_file_and_a_reload_rereads_it(self):
        status, _ = admin_post(self.fg.admin_port, "/config/activate", token=None)
        self.assertEqual(status, 401)
        status, body = admin_post(self.fg.admin_port, "/config/activate", token=TOKEN)
        self.assertEqual(status, 200, body)
        rotated = "rotated-token-0123456789abcdef"
        with open(self.token_path, "w") as f:
            f.write(rotated + "\n")
        before = self.generation()
        self.fg.signal(signal.SIGHUP)
        poll(lambda: self.generation() > before, what="the reload that reads the new token")
        status, _ = admin_post(self.fg.admin_port, "/config/activate", token=TOKEN)
        self.assertEqual(status, 401)
        status, body = admin_post(self.fg.admin_port, "/config/activate", token=rotated)
        self.assertEqual(status, 200, body)


if __name__ == "__main__":
    unittest.main()
