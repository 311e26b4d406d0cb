"""Backends by name: a server written as a host name is resolved when the file is loaded, every
address becoming a backend; `resolve_interval` re-resolves it in the background and applies a
changed answer as a new generation (backends added and removed, the unchanged one kept with its
state); a failed re-resolution keeps the previous addresses; a name that does not resolve at
start is an error naming the server.

The names are real getaddrinfo() lookups: floodgate runs in a mount namespace of its own
(unshare) where /etc/hosts is a file this test writes and /etc/nsswitch.conf says
`hosts: files`, so no DNS server is ever asked and the system's files are untouched."""

import json
import os
import re
import shutil
import subprocess
import tempfile
import unittest

from backend import Backend
from harness import (FloodgateTestCase, admin_get, floodgate_bin, poll, render_toml, route,
                     upstream)

NAME = "app.floodgate.test"


def namespaces_work():
    """True when this user can make a mount namespace and bind-mount a file (root in CI)."""
    if shutil.which("unshare") is None:
        return False
    p = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c",
                        "mount --bind /etc/hostname /etc/hostname"], capture_output=True,
                       timeout=30)
    return p.returncode == 0


class Hosts:
    """An /etc/hosts and an nsswitch.conf for floodgate's own mount namespace."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="floodgate-hosts-")
        self.hosts = os.path.join(self.dir, "hosts")
        self.nsswitch = os.path.join(self.dir, "nsswitch.conf")
        with open(self.nsswitch, "w") as f:
            f.write("hosts: files\n")
        self.write({})

    def write(self, names):
        """names: {name: [ip, ...]}. Written in place: the bind mount follows the inode."""
        with open(self.hosts, "w") as f:
            f.write("127.0.0.1 localhost\n")
            for name, ips in names.items():
                for ip in ips:
                    f.write("%s %s\n" % (ip, name))

    def wrap(self):
        script = ('mount --bind "$1" /etc/hosts && mount --bind "$2" /etc/nsswitch.conf && '
                  'shift 2 && exec "$@"')
        return ["unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh",
                self.hosts, self.nsswitch]

    def cleanup(self):
        shutil.rmtree(self.dir, True)


@unittest.skipUnless(namespaces_work(), "needs a mount namespace (run as root, as CI does)")
class ReResolution(FloodgateTestCase):
    @classmethod
    def setUpClass(cls):
        cls.a = Backend("a").start()
        cls.b = Backend("b", port=cls.a.port, host="127.0.0.2").start()
        cls.backends = [cls.a, cls.b]
        cls.names = Hosts()
        cls.names.write({NAME: ["127.0.0.1"]})
        try:
            cls.fg = cls.start_floodgate(
                [upstream("app", ["%s:%d" % (NAME, cls.a.port)], resolve_interval="1s")],
                routes=[route("app")], workers=2, wrap=cls.names.wrap())
        except BaseException:
            cls.names.cleanup()
            raise

    @classmethod
    def tearDownClass(cls):
        try:
            super().tearDownClass()
        finally:
            cls.names.cleanup()

    def backend_set(self):
        _, _, body = admin_get(self.fg.admin_port, "/status")
        pool = [p for p in json.loads(body)["pools"] if p["name"] == "app"][0]
        for b in pool["backends"]:
            self.assertEqual(b["server"], "%s:%d" % (NAME, self.a.port))
        return sorted(b["address"] for b in pool["backends"])

    def served_by(self, n=8):
        names = set()
        for _ in range(n):
            r = self.fg.get("/name")
            self.assertEqual(r.status, 200, r)
            names.add(r.body.decode())
        return names

    def resolutions(self, result):
        return self.fg.metrics().value(
            "floodgate_upstream_resolutions_total", upstream="app", result=result)

    def test_1_every_address_of_the_name_is_a_backend_labelled_by_its_address(self):
        self.assertEqual(self.backend_set(), ["127.0.0.1:%d" % self.a.port])
        self.assertEqual(self.served_by(), {"a"})
        poll(lambda: self.resolutions("unchanged") >= 1, timeout=10,
             what="a re-resolution that finds the same address")

    def test_2_a_changed_answer_adds_and_removes_backends_as_a_reload_would(self):
        before = self.resolutions("changed")
        self.names.write({NAME: ["127.0.0.1", "127.0.0.2"]})
        both = sorted(["127.0.0.1:%d" % self.a.port, "127.0.0.2:%d" % self.a.port])
        poll(lambda: self.backend_set() == both, timeout=10, what="both addresses as backends")
        poll(lambda: self.served_by() == {"a", "b"}, timeout=10, what="requests reaching b too")
        self.assertEqual(self.resolutions("changed"), before + 1)
        self.names.write({NAME: ["127.0.0.2"]})
        poll(lambda: self.backend_set() == ["127.0.0.2:%d" % self.a.port], timeout=10,
             what="the removed address gone")
        self.assertEqual(self.served_by(), {"b"})
        log = self.fg.stderr_bytes().decode("utf-8", "replace")
        self.assertIn('upstream "app": %s:%d now resolves to 127.0.0.2:%d (was' %
                      (NAME, self.a.port, self.a.port), log)
        # Not a reload: the reload counter stays where start-up left it.
        self.assertEqual(self.fg.metrics().value(
            "floodgate_config_reloads_total", result="ok"), 0)

    def test_3_a_failed_re_resolution_keeps_the_previous_addresses_and_says_why(self):
        kept = self.backend_set()
        before = self.resolutions("failed")
        self.names.write({})
        poll(lambda: self.resolutions("failed") > before, timeout=10, what="a failed resolution")
        self.assertEqual(self.backend_set(), kept)
        self.assertEqual(len(self.served_by()), 1)
        log = self.fg.stderr_bytes().decode("utf-8", "replace")
        self.assertIn('upstream "app": cannot resolve %s:%d again (' % (NAME, self.a.port), log)
        self.assertIn("keeping " + kept[0], log)


@unittest.skipUnless(namespaces_work(), "needs a mount namespace (run as root, as CI does)")
class AtLoad(unittest.TestCase):
    def setUp(self):
        self.names = Hosts()
        self.addCleanup(self.names.cleanup)
        self.dir = tempfile.mkdtemp(prefix="floodgate-names-")
        self.addCleanup(shutil.rmtree, self.dir, True)

    def check(self, servers, **options):
        cfg = {"upstreams": [upstream("app", servers, **options)], "routes": [route("app")]}
        path = os.path.join(self.dir, "floodgate.toml")
        with open(path, "w") as f:
            f.write(render_toml(cfg))
        p = subprocess.run(self.names.wrap() + [floodgate_bin(), "check", "-c", path],
                           capture_output=True, text=True, timeout=30)
        return p.returncode, p.stdout + p.stderr, path

    def test_a_name_that_does_not_resolve_is_an_error_naming_the_server(self):
        rc, out, path = self.check(["127.0.0.1:9000", "nowhere.floodgate.test:9000"])
        self.assertEqual(rc, 1, out)
        # At the server's own position, by its key path.
        self.assertRegex(out, r"%s:3:\d+: error: upstreams\[0\]\.servers\[1\]: cannot resolve "
                         r"'nowhere\.floodgate\.test' \(" % re.escape(path))
        self.assertIn("write the server's IP address", out)

    def test_start_refuses_it_too(self):
        _, _, path = self.check(["nowhere.floodgate.test:9000"])
        p = subprocess.run(self.names.wrap() + [floodgate_bin(), "-c", path],
                           capture_output=True, text=True, timeout=30)
        self.assertEqual(p.returncode, 1)
        self.assertIn("cannot resolve 'nowhere.floodgate.test'", p.stderr + p.stdout)

    def test_a_name_with_several_addresses_passes_and_resolve_interval_alone_warns(self):
        self.names.write({NAME: ["127.0.0.1", "127.0.0.2"]})
        rc, out, _ = self.check(["%s:9000" % NAME], resolve_interval="30s")
        self.assertEqual(rc, 0, out)
        self.assertIn("valid (0 errors, 0 warnings)", out)
        rc, out, _ = self.check(["127.0.0.1:9000"], resolve_interval="30s")
        self.assertEqual(rc, 0, out)
        self.assertIn("upstreams[0].resolve_interval: has no effect", out)


if __name__ == "__main__":
    unittest.main()
