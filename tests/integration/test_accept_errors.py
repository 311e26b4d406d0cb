"""Out of file descriptors: accept() failing is counted (floodgate_accept_errors_total), logged
at most once a second, never spun on, and the listener recovers by itself once descriptors are
free again (docs/metrics.md)."""

import math
import os
import re
import resource
import time
import unittest

from backend import Backend
from harness import Conn, FloodgateTestCase, poll, upstream

# UndefinedBehaviorSanitizer proves a virtual call's (or a member access's) vtable readable by
# writing it into a pipe: with no descriptor left that fails, and it reports the call as an
# "invalid vptr" whose memory "cannot be printed", or (clang's runtime, when the object was proved readable before and only
# its vtable's type information is not) printed with the vptr marked. In the sanitized lane
# this test lets floodgate go on after such a report (the build makes only the vptr check
# recoverable) and then accepts that report and no other. The same calls run in every other
# test with descriptors to spare, where a real vptr error stops floodgate at once.
FD_EXHAUSTION_REPORT = re.compile(
    rb"runtime error: [a-z ]+ address 0x[0-9a-f]+ which does not point to an object of "
    rb"type '[^']+'\n0x[0-9a-f]+: note: object has invalid vptr\n"
    rb"(<memory cannot be printed>\n|(?: [0-9a-f ]+\n) +\^~+\n +invalid vptr\n)")

SPARE_FDS = 6  # descriptors floodgate may still open once its limit is lowered
CLIENTS = SPARE_FDS + 10  # enough that some must wait in the backlog for a descriptor


def open_fds(pid):
    return len(os.listdir("/proc/%d/fd" % pid))


class AcceptErrors(FloodgateTestCase):
    @classmethod
    def setUpClass(cls):
        cls.a = Backend("a").start()
        cls.backends = [cls.a]
        env = {}
        if os.environ.get("FLOODGATE_SANITIZED"):
            env["UBSAN_OPTIONS"] = os.environ.get("UBSAN_OPTIONS", "") + ":halt_on_error=0"
        cls.fg = cls.start_floodgate([upstream("a", [cls.a])], workers=1, env=env)

    def setUp(self):
        super().setUp()
        self.pid = self.fg.proc.pid
        self.limits = resource.prlimit(self.pid, resource.RLIMIT_NOFILE)

    def tearDown(self):
        resource.prlimit(self.pid, resource.RLIMIT_NOFILE, self.limits)  # a clean shutdown

    def test_running_out_of_descriptors_is_counted_logged_and_recovered_from(self):
        # Every client connection floodgate accepts costs it one descriptor (no request is sent,
        # so no backend connection is opened): after SPARE_FDS of them accept() fails EMFILE.
        soft = open_fds(self.pid) + SPARE_FDS
        resource.prlimit(self.pid, resource.RLIMIT_NOFILE, (soft, self.limits[1]))
        started = time.monotonic()
        clients = [Conn(self.fg.port) for _ in range(CLIENTS)]
        try:
            poll(lambda: b"emfile" in self.fg.stderr_bytes().lower(), what="the emfile log line")
        finally:
            for c in clients:
                c.close()
        # Descriptors free again: the listener drains its backlog and serves as before.
        r = poll(lambda: self.fg.get("/"), what="a request once descriptors are free")
        self.assertEqual(r.status, 200, r)
        m = poll(lambda: self.fg.metrics(), what="/metrics once descriptors are free")
        self.assertGreaterEqual(m.value("floodgate_accept_errors_total", reason="emfile"), 1)
        self.assertEqual(m.value("floodgate_accept_errors_total", reason="other"), 0)
        elapsed = time.monotonic() - started
        lines = [l for l in self.fg.stderr_bytes().lower().splitlines() if b"emfile" in l]
        self.assertLessEqual(len(lines), math.ceil(elapsed) + 1)  # one a second at most
        rest = FD_EXHAUSTION_REPORT.sub(b"", self.fg.stderr_bytes())
        self.assertNotIn(b"runtime error", rest)  # any other sanitizer report fails the test


if __name__ == "__main__":
    unittest.main()
