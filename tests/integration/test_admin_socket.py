"""The admin listener on a UNIX socket (admin.listen = "unix:/path", HAProxy's stats socket): the
control API and metrics answer over it, the socket file gets admin.socket_mode, file permissions
decide who may change the configuration (no token needed), a stale socket left by a crash is
replaced, a socket another process serves is not, and the file goes when floodgate exits (unless
it is no longer floodgate's)."""

import os
import shutil
import signal
import socket
import stat
import subprocess
import tempfile
import unittest

from harness import floodgate_bin, free_port, poll, render_toml, route, upstream

TIMEOUT = 10


def unix_request(path, method, target, body=b""):
    """One request on a new connection to the UNIX socket `path`; (status, body)."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(TIMEOUT)
    try:
        s.connect(path)
        head = "%s %s HTTP/1.1\r\nHost: admin\r\nContent-Length: %d\r\nConnection: close\r\n\r\n" % (
            method, target, len(body))
        s.sendall(head.encode() + body)
        data = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    finally:
        s.close()
    head, _, rest = data.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), rest


class AdminOnAUnixSocket(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="floodgate-admin-sock-")
        self.addCleanup(shutil.rmtree, self.dir, True)
        self.sock = os.path.join(self.dir, "admin.sock")
        self.config_path = os.path.join(self.dir, "floodgate.toml")
        self.cfg = {
            "server": {"listen": ["127.0.0.1:%d" % free_port()], "workers": 1},
            "admin": {"listen": "unix:" + self.sock, "socket_mode": "0600"},
            "log": {"access_log": "off"},
            "upstreams": [upstream("app", ["127.0.0.1:%d" % free_port()])],
            "routes": [route("app")],
        }
        self.proc = None

    def start(self):
        with open(self.config_path, "w") as f:
            f.write(render_toml(self.cfg))
        self.err = open(os.path.join(self.dir, "stderr.log"), "wb")
        self.addCleanup(self.err.close)
        self.proc = subprocess.Popen([floodgate_bin(), "-c", self.config_path],
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=self.err)
        self.addCleanup(self.stop)

        def ready():
            if self.proc.poll() is not None:
                self.fail("floodgate exited: %s" % self.stderr())
            try:
                return unix_request(self.sock, "GET", "/healthz")[0] == 200
            except OSError:
                return False
        poll(ready, timeout=TIMEOUT, what="the admin socket answering")

    def stop(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(timeout=30)

    def stderr(self):
        with open(os.path.join(self.dir, "stderr.log"), "rb") as f:
            return f.read().decode("utf-8", "replace")

    def test_metrics_and_the_control_api_answer_on_the_socket_with_its_mode(self):
        self.start()
        self.assertEqual(stat.S_IMODE(os.stat(self.sock).st_mode), 0o600)
        status, body = unix_request(self.sock, "GET", "/metrics")
        self.assertEqual(status, 200)
        self.assertIn(b"floodgate_build_info{", body)
        # No token: the socket's mode decides who may change floodgate, so a rollback is
        # considered (409: nothing to roll back to), not refused with 403.
        status, body = unix_request(self.sock, "POST", "/config/rollback")
        self.assertEqual(status, 409, body)
        with open(self.config_path, "rb") as f:
            status, body = unix_request(self.sock, "POST", "/config/activate", f.read())
        self.assertEqual(status, 200, body)

    def test_a_stale_socket_is_replaced_and_the_file_goes_at_exit(self):
        stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        stale.bind(self.sock)
        stale.close()  # left behind, as by a floodgate that was killed
        self.start()
        self.stop()
        self.assertEqual(self.proc.returncode, 0, self.stderr())
        self.assertFalse(os.path.exists(self.sock))

    def test_a_second_floodgate_on_a_served_socket_fails_and_the_first_keeps_it(self):
        self.start()
        second = dict(self.cfg, server={"listen": ["127.0.0.1:%d" % free_port()], "workers": 1})
        second_path = os.path.join(self.dir, "second.toml")
        with open(second_path, "w") as f:
            f.write(render_toml(second))
        p = subprocess.run([floodgate_bin(), "-c", second_path], stdin=subprocess.DEVNULL,
                           capture_output=True, timeout=30)
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertIn(b"another floodgate (or another program) is listening on unix:" +
                      self.sock.encode() + b"; stop it or choose another admin.listen", p.stderr)
        self.assertEqual(unix_request(self.sock, "GET", "/healthz")[0], 200)
        self.stop()
        self.assertEqual(self.proc.returncode, 0, self.stderr())
        self.assertFalse(os.path.exists(self.sock))

    def test_a_socket_that_replaced_floodgates_is_not_removed_at_exit(self):
        self.start()
        os.unlink(self.sock)
        other = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.addCleanup(other.close)
        other.bind(self.sock)
        other.listen()
        self.stop()
        self.assertEqual(self.proc.returncode, 0, self.stderr())
        self.assertTrue(stat.S_ISSOCK(os.lstat(self.sock).st_mode))
        probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.addCleanup(probe.close)
        probe.settimeout(TIMEOUT)
        probe.connect(self.sock)  # still the other program's, listening

    def test_a_file_that_is_not_a_socket_is_not_removed_and_start_fails(self):
        with open(self.sock, "w") as f:
            f.write("not a socket\n")
        with open(self.config_path, "w") as f:
            f.write(render_toml(self.cfg))
        p = subprocess.run([floodgate_bin(), "-c", self.config_path], stdin=subprocess.DEVNULL,
                           capture_output=True, timeout=30)
        self.assertEqual(p.returncode, 1)
        self.assertIn(b"admin.listen: cannot listen on unix:" + self.sock.encode(), p.stderr)
        self.assertTrue(os.path.isfile(self.sock))


if __name__ == "__main__":
    unittest.main()
