"""server.io: the reactors' event loop runs on io_uring or epoll, says which at start, and
serves the same way on both (the whole suite also runs once more on epoll: the
integration.epoll.* tests)."""

import json
import unittest

from backend import Backend
from harness import Floodgate, FloodgateTestCase, build_request, poll, upstream


class EventLoop(FloodgateTestCase):
    @classmethod
    def setUpClass(cls):
        cls.backend = Backend("app-0").start()
        cls.backends = [cls.backend]

    def start(self, io):
        fg = Floodgate([upstream("app", [self.backend])], server={"io": io})
        self.addCleanup(fg.cleanup)
        return fg

    def assertServes(self, fg):
        with fg.conn() as c:
            # Pipelined requests, one with a body, on one keep-alive connection.
            c.send(build_request("GET", "/echo?a") + build_request("POST", "/echo?b",
                                                                    body=b"y" * 100000))
            first, second = c.read_response(), c.read_response()
        self.assertEqual(first.status, 200, first)
        self.assertEqual(second.status, 200, second)
        echoed = json.loads(second.body)
        self.assertEqual((echoed["target"], echoed["body"]), ("/echo?b", "y" * 100000))

    def assertLogs(self, fg, *texts):
        poll(lambda: any(t in fg.stderr_bytes() for t in texts),
             what="the event loop line in the log: %r" % (texts,))

    def test_epoll_is_used_when_asked_for(self):
        fg = self.start("epoll").start()
        self.assertServes(fg)
        self.assertLogs(fg, b"event loop: epoll\n")

    def test_auto_takes_io_uring_or_says_why_it_fell_back(self):
        fg = self.start("auto").start()
        self.assertServes(fg)
        self.assertLogs(fg, b"event loop: io_uring\n", b"event loop: epoll, because")

    def test_io_uring_runs_or_fails_to_start_naming_the_key(self):
        fg = self.start("io_uring")
        try:
            fg.start()
        except AssertionError as e:  # the kernel has no usable io_uring: a clear failed start
            self.assertIn("server.io", str(e))
            return
        self.assertServes(fg)
        self.assertLogs(fg, b"event loop: io_uring\n")


if __name__ == "__main__":
    unittest.main()
