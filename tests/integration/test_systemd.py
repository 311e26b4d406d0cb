"""floodgate under systemd, end to end: the sd_notify protocol over a test NOTIFY_SOCKET
(READY=1 with the generation once every listener is up, STOPPING=1 when SIGTERM starts the
drain, sent by floodgate's own pid), a normal start without NOTIFY_SOCKET or with one nobody
listens on, and `cmake --install` into a temporary prefix."""

import os
import shutil
import signal
import socket
import struct
import subprocess
import tempfile
import time
import unittest
from unittest import mock

from harness import (DEFAULT_TIMEOUT, START_TIMEOUT, Floodgate, OwnFloodgateTestCase,
                     _ExitedEarly, build_request, floodgate_bin, upstream)

CREDENTIALS = struct.Struct("3i")  # struct ucred: pid, uid, gid


class NotifySocket:
    """A datagram socket standing in for systemd's notification socket. It asks the kernel for
    each sender's credentials, as systemd does to tell the main process's messages apart."""

    def __init__(self):
        self.tmpdir = tempfile.mkdtemp(prefix="floodgate-notify-")
        self.path = os.path.join(self.tmpdir, "notify.sock")
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
        self.sock.bind(self.path)
        self.messages = []  # (sender pid, {VAR: value}) in arrival order

    def close(self):
        self.sock.close()
        shutil.rmtree(self.tmpdir, ignore_errors=True)

    def receive(self, timeout=DEFAULT_TIMEOUT):
        """The next message as (sender pid, {VAR: value}); AssertionError at the deadline."""
        self.sock.settimeout(timeout)
        try:
            data, ancdata, _, _ = self.sock.recvmsg(4096, socket.CMSG_SPACE(CREDENTIALS.size))
        except socket.timeout:
            raise AssertionError("no sd_notify message within %.1fs (so far: %r)"
                                 % (timeout, self.messages))
        pid = None
        for level, kind, payload in ancdata:
            if level == socket.SOL_SOCKET and kind == socket.SCM_CREDENTIALS:
                pid = CREDENTIALS.unpack(payload[:CREDENTIALS.size])[0]
        fields = dict(line.split("=", 1) for line in data.decode().split("\n") if line)
        self.messages.append((pid, fields))
        return pid, fields

    def pending(self):
        """True if a message is waiting now."""
        self.sock.setblocking(False)
        try:
            self.sock.recv(4096, socket.MSG_PEEK)
            return True
        except BlockingIOError:
            return False
        finally:
            self.sock.setblocking(True)


class NotifiedFloodgate(Floodgate):
    """A Floodgate started with NOTIFY_SOCKET whose start-up waits for READY=1 instead of
    polling: once READY=1 arrives, the admin listener and the proxy port must answer at the
    first attempt, because READY=1 promises that everything is listening."""

    def __init__(self, notify, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.notify = notify
        self.ready = None  # (pid, fields) of the READY=1 message

    def start(self):
        with mock.patch.dict(os.environ, {"NOTIFY_SOCKET": self.notify.path}):
            return super().start()

    def _wait_ready(self):
        deadline = time.monotonic() + START_TIMEOUT
        while self.ready is None:
            if self.proc.poll() is not None:
                raise _ExitedEarly()
            if time.monotonic() >= deadline:
                self.kill()
                raise AssertionError("no READY=1 within %.0fs; stderr:\n%s"
                                     % (START_TIMEOUT, self.stderr_tail()))
            try:
                pid, fields = self.notify.receive(timeout=0.2)
            except AssertionError:
                continue  # nothing yet: check that floodgate still runs, then wait again
            if fields.get("READY") == "1":
                self.ready = (pid, fields)
        if not (self._healthy() and self._accepts()):
            raise AssertionError("READY=1 sent before every listener answered")


class Notify(OwnFloodgateTestCase):
    """Each test runs its own floodgate (self.fg), since most end it."""

    def setUp(self):
        super().setUp()
        self.notify = NotifySocket()
        self.addCleanup(self.notify.close)

    def start(self, fg):
        return self.launch(fg)

    def start_notified(self):
        return self.start(NotifiedFloodgate(self.notify, [upstream("app", [self.backend])]))

    def start_plain(self):
        return self.start(Floodgate([upstream("app", [self.backend])]))

    def assertServes(self):
        self.assertEqual(self.fg.get("/echo").status, 200)

    def assertStopsWithExit0(self):
        self.fg.signal(signal.SIGTERM)
        rc = self.fg.wait_exit()
        self.assertEqual(rc, 0, "exit code %r; stderr:\n%s" % (rc, self.fg.stderr_tail()))

    # --- with NOTIFY_SOCKET -----------------------------------------------------------------
    def test_ready_names_generation_1_once_every_listener_is_up(self):
        fg = self.start_notified()
        _, fields = fg.ready
        self.assertEqual(fields.get("STATUS"), "serving generation 1", fields)
        self.assertServes()
        self.assertStopsWithExit0()

    def test_ready_is_the_first_message_and_comes_from_floodgates_own_pid(self):
        fg = self.start_notified()
        self.assertEqual(self.notify.messages, [fg.ready])
        self.assertEqual(fg.ready[0], fg.proc.pid)
        self.assertStopsWithExit0()

    def test_sigterm_sends_stopping_then_exits_0(self):
        fg = self.start_notified()
        self.assertServes()
        fg.signal(signal.SIGTERM)
        pid, fields = self.notify.receive()
        self.assertEqual(fields.get("STOPPING"), "1", fields)
        self.assertEqual(fields.get("STATUS"), "draining", fields)
        self.assertEqual(pid, fg.proc.pid)
        rc = fg.wait_exit()
        self.assertEqual(rc, 0, "exit code %r; stderr:\n%s" % (rc, fg.stderr_tail()))
        self.assertFalse(self.notify.pending(), "messages after STOPPING=1")

    def test_a_second_signal_sends_no_second_stopping(self):
        fg = self.start_notified()
        with fg.conn() as c:  # a request held at the backend keeps the drain going
            c.send(build_request("GET", "/hold?key=second-signal"))
            self.backend.wait_for_target("/hold?key=second-signal")
            fg.signal(signal.SIGTERM)
            self.assertEqual(self.notify.receive()[1].get("STOPPING"), "1")
            fg.signal(signal.SIGTERM)  # cuts the held request
            rc = fg.wait_exit()
        self.backend.release("second-signal")
        self.assertEqual(rc, 0, "exit code %r; stderr:\n%s" % (rc, fg.stderr_tail()))
        self.assertFalse(self.notify.pending(), "messages after STOPPING=1")

    def test_a_reload_is_framed_by_reloading_and_ready_with_the_new_generation(self):
        fg = self.start_notified()
        before = time.clock_gettime(time.CLOCK_MONOTONIC)
        fg.signal(signal.SIGHUP)  # the same file: a valid reload to generation 2
        pid, fields = self.notify.receive()
        self.assertEqual((pid, fields.get("RELOADING")), (fg.proc.pid, "1"), fields)
        usec = int(fields["MONOTONIC_USEC"])
        self.assertGreaterEqual(usec, int(before * 1e6))
        self.assertLessEqual(usec, int(time.clock_gettime(time.CLOCK_MONOTONIC) * 1e6))
        _, fields = self.notify.receive()
        self.assertEqual(fields.get("READY"), "1", fields)
        self.assertIn("serving generation 2", fields.get("STATUS", ""))
        self.assertServes()
        self.assertStopsWithExit0()

    def test_a_refused_reload_says_which_generation_keeps_serving(self):
        fg = self.start_notified()
        with open(fg.config_path, "a") as f:
            f.write("\n[nonsense]\n")
        fg.signal(signal.SIGHUP)
        self.assertEqual(self.notify.receive()[1].get("RELOADING"), "1")
        _, fields = self.notify.receive()
        self.assertEqual(fields.get("READY"), "1", fields)
        self.assertIn("refused", fields.get("STATUS", ""))
        self.assertIn("generation 1 keeps serving", fields.get("STATUS", ""))
        self.assertServes()
        self.assertStopsWithExit0()

    # --- without a service manager ----------------------------------------------------------
    def test_starts_normally_without_notify_socket(self):
        with mock.patch.dict(os.environ):
            os.environ.pop("NOTIFY_SOCKET", None)
            self.start_plain()
        self.assertServes()
        self.assertStopsWithExit0()
        self.assertFalse(self.notify.pending())

    def test_starts_normally_when_nothing_listens_on_notify_socket(self):
        missing = os.path.join(self.notify.tmpdir, "nobody.sock")
        with mock.patch.dict(os.environ, {"NOTIFY_SOCKET": missing}):
            self.start_plain()
        self.assertServes()
        self.assertStopsWithExit0()


def cmake_cache(build_dir):
    """The entries of build_dir/CMakeCache.txt as {NAME: value}, or None without one."""
    try:
        with open(os.path.join(build_dir, "CMakeCache.txt")) as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    entries = {}
    for line in lines:
        if line and not line.startswith(("#", "//")) and ":" in line and "=" in line:
            key, value = line.split("=", 1)
            entries[key.split(":", 1)[0]] = value
    return entries


class Install(unittest.TestCase):
    """`cmake --install` of the build that made $FLOODGATE_BIN, into a temporary prefix."""

    @classmethod
    def setUpClass(cls):
        cls.build_dir = os.path.dirname(os.path.abspath(floodgate_bin()))
        cls.cache = cmake_cache(cls.build_dir)
        if cls.cache is None or "CMAKE_COMMAND" not in cls.cache:
            raise unittest.SkipTest("%s is not a CMake build directory" % cls.build_dir)
        cls.prefix = tempfile.mkdtemp(prefix="floodgate-install-")
        p = subprocess.run([cls.cache["CMAKE_COMMAND"], "--install", cls.build_dir,
                            "--prefix", cls.prefix], capture_output=True, timeout=120)
        if p.returncode != 0:
            shutil.rmtree(cls.prefix, ignore_errors=True)
            raise AssertionError("cmake --install failed:\n%s%s"
                                 % (p.stdout.decode(), p.stderr.decode()))

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.prefix, ignore_errors=True)

    def installed(self, *parts):
        path = os.path.join(self.prefix, *parts)
        self.assertTrue(os.path.isfile(path), "%s not installed; prefix holds %r"
                        % (path, sorted(os.path.relpath(os.path.join(d, f), self.prefix)
                                        for d, _, fs in os.walk(self.prefix) for f in fs)))
        return path

    def unit_text(self):
        unit_dir = self.cache.get("FLOODGATE_SYSTEMD_UNIT_DIR", "lib/systemd/system")
        if os.path.isabs(unit_dir):
            self.skipTest("FLOODGATE_SYSTEMD_UNIT_DIR is absolute: %s" % unit_dir)
        with open(self.installed(unit_dir, "floodgate.service")) as f:
            return f.read()

    def test_installs_the_binary(self):
        binary = self.installed(self.cache.get("CMAKE_INSTALL_BINDIR", "bin"), "floodgate")
        self.assertTrue(os.access(binary, os.X_OK))
        p = subprocess.run([binary, "--version"], capture_output=True, timeout=30)
        self.assertEqual(p.returncode, 0, p)

    def test_installs_a_notify_unit_naming_the_configured_binary(self):
        text = self.unit_text()
        bindir = self.cache.get("CMAKE_INSTALL_BINDIR", "bin")
        if not os.path.isabs(bindir):
            bindir = os.path.join(self.cache["CMAKE_INSTALL_PREFIX"], bindir)
        self.assertIn("\nType=notify\n", text)
        binary = os.path.join(bindir, "floodgate")
        # One variable names the file for the check, the start and the reload, so a drop-in
        # that points floodgate at another file checks that file too.
        self.assertIn("\nEnvironment=FLOODGATE_CONFIG=/etc/floodgate/floodgate.toml\n", text)
        self.assertIn("\nExecStart=%s -c ${FLOODGATE_CONFIG}\n" % binary, text)
        # The file is checked before a start and before a reload's SIGHUP (HAProxy's habit).
        self.assertIn("\nExecStartPre=%s check -c ${FLOODGATE_CONFIG}\n" % binary, text)
        self.assertIn("\nExecReload=%s check -c ${FLOODGATE_CONFIG}\n"
                      "ExecReload=/bin/kill -HUP $MAINPID\n" % binary, text)
        settings = [line for line in text.splitlines() if not line.startswith("#")]
        self.assertEqual(sum("/etc/floodgate/floodgate.toml" in line for line in settings), 1,
                         text)

    def test_installed_unit_passes_systemd_analyze_verify(self):
        analyze = shutil.which("systemd-analyze")
        if analyze is None:
            self.skipTest("no systemd-analyze")
        # verify checks that ExecStart exists: point it at the binary just installed.
        text = self.unit_text()
        staged = os.path.join(self.prefix, self.cache.get("CMAKE_INSTALL_BINDIR", "bin"),
                              "floodgate")
        bindir = self.cache.get("CMAKE_INSTALL_BINDIR", "bin")
        if not os.path.isabs(bindir):
            bindir = os.path.join(self.cache["CMAKE_INSTALL_PREFIX"], bindir)
        lines = [line.replace(os.path.join(bindir, "floodgate"), staged)
                 for line in text.splitlines()]
        with tempfile.TemporaryDirectory(prefix="floodgate-verify-") as d:
            path = os.path.join(d, "floodgate.service")
            with open(path, "w") as f:
                f.write("\n".join(lines) + "\n")
            p = subprocess.run([analyze, "verify", "--man=no", path], capture_output=True,
                               timeout=60)
        self.assertEqual(p.returncode, 0, (p.stdout + p.stderr).decode())
        self.assertEqual(p.stderr.decode().strip(), "")

    def test_installs_the_sysusers_snippet_for_the_service_user(self):
        sysusers_dir = self.cache.get("FLOODGATE_SYSUSERS_DIR", "lib/sysusers.d")
        if os.path.isabs(sysusers_dir):
            self.skipTest("FLOODGATE_SYSUSERS_DIR is absolute: %s" % sysusers_dir)
        with open(self.installed(sysusers_dir, "floodgate.conf")) as f:
            self.assertRegex(f.read(), r"(?m)^u floodgate ")

    def test_installs_the_example_configuration_as_documentation(self):
        docdir = self.cache.get("CMAKE_INSTALL_DOCDIR") or "share/doc/floodgate"
        self.installed(docdir, "examples", "floodgate.toml")
        self.assertFalse(os.path.exists(os.path.join(self.prefix, "etc")),
                         "nothing may be installed under etc/: it would overwrite edited files")


if __name__ == "__main__":
    unittest.main()
