"""The command line end to end: --version and --help exit 0; a bad configuration or a failed
start exits 1 with a message naming the file, the key (or address) and the reason."""

import os
import shutil
import socket
import subprocess
import tempfile
import unittest

from harness import floodgate_bin, free_port

RUN_TIMEOUT = 30


class CommandLine(unittest.TestCase):
    def setUp(self):
        self.tmpdir = tempfile.mkdtemp(prefix="floodgate-cli-")
        self.addCleanup(shutil.rmtree, self.tmpdir, True)

    def run_floodgate(self, *args):
        try:
            return subprocess.run([floodgate_bin(), *args], stdin=subprocess.DEVNULL,
                                  capture_output=True, timeout=RUN_TIMEOUT)
        except subprocess.TimeoutExpired as e:
            self.fail("floodgate %s did not exit within %ds; stderr: %r"
                      % (" ".join(args), RUN_TIMEOUT, e.stderr))

    def write_config(self, text, name="floodgate.toml"):
        path = os.path.join(self.tmpdir, name)
        with open(path, "w") as f:
            f.write(text)
        return path

    def valid_config(self, balance="round_robin", listen=None):
        """A configuration whose line numbers the tests rely on (balance is on line 8)."""
        listen = listen or "127.0.0.1:%d" % free_port()
        return "\n".join([
            "[server]",                                              # 1
            'listen = ["%s"]' % listen,                              # 2
            "[admin]",                                               # 3
            'listen = "127.0.0.1:%d"' % free_port(),                 # 4
            "[[upstreams]]",                                         # 5
            'name = "app"',                                          # 6
            'servers = ["127.0.0.1:%d"]' % free_port(),              # 7
            'balance = "%s"' % balance,                              # 8
            "[[routes]]",                                            # 9
            'host = "*"',                                            # 10
            'path_prefix = "/"',                                     # 11
            'upstream = "app"',                                      # 12
            ""])

    def assertFailsNaming(self, config_text, *needles, name="floodgate.toml"):
        path = self.write_config(config_text, name)
        p = self.run_floodgate("-c", path)
        err = p.stderr.decode("utf-8", "replace")
        self.assertEqual(p.returncode, 1, "exit code %r, stderr:\n%s" % (p.returncode, err))
        for needle in (name,) + needles:
            self.assertIn(needle, err, "stderr does not name %r:\n%s" % (needle, err))
        return err

    def test_version_prints_the_version_and_exits_0(self):
        p = self.run_floodgate("--version")
        out = (p.stdout + p.stderr).decode()
        self.assertEqual(p.returncode, 0, out)
        self.assertRegex(out, r"^floodgate \d+\.\d+\.\d+ \(revision [0-9a-z-]+\)\n")
        # What `haproxy -vv` tells: the build, the event loops, the libraries.
        self.assertRegex(out, r"\nbuild: \w+")
        self.assertRegex(out, r"\nevent loops: io_uring \((usable here|not usable here: .+)\), "
                              r"epoll \(always\)\n")
        for library in ("Boost 1.", "llhttp 8.", "OpenSSL 3.", "liburing 2.", "spdlog 1.",
                        "toml++ 3."):
            self.assertIn("\n  " + library, out)

    def test_help_describes_the_config_option_and_exits_0(self):
        p = self.run_floodgate("--help")
        out = (p.stdout + p.stderr).decode()
        self.assertEqual(p.returncode, 0, out)
        self.assertIn("-c", out)

    def test_unknown_value_names_file_line_and_key(self):
        err = self.assertFailsNaming(self.valid_config(balance="rr"), "upstreams[0].balance", '"rr"')
        self.assertIn("floodgate.toml:8", err)

    def test_unknown_key_is_an_error_naming_the_key(self):
        text = self.valid_config().replace("[admin]", "bogus_key = 1\n[admin]")
        self.assertFailsNaming(text, "server.bogus_key")

    def test_bad_duration_names_the_key(self):
        text = self.valid_config().replace("[admin]", 'header_timeout = "10 parsecs"\n[admin]')
        self.assertFailsNaming(text, "server.header_timeout")

    def test_all_problems_are_reported_in_one_pass(self):
        text = self.valid_config(balance="rr").replace("[admin]", "bogus_key = 1\n[admin]")
        self.assertFailsNaming(text, "server.bogus_key", "upstreams[0].balance")

    def test_route_to_an_unknown_upstream_names_the_key(self):
        text = self.valid_config().replace('upstream = "app"', 'upstream = "nope"')
        self.assertFailsNaming(text, "routes[0].upstream", "nope")

    def test_toml_syntax_error_names_the_file(self):
        self.assertFailsNaming("[server\nlisten = [", name="broken.toml")

    def test_missing_config_file_exits_1_naming_it(self):
        path = os.path.join(self.tmpdir, "does-not-exist.toml")
        p = self.run_floodgate("-c", path)
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertIn("does-not-exist.toml", p.stderr.decode())

    def test_listen_address_in_use_is_a_failed_start_exiting_1(self):
        blocker = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            blocker.bind(("127.0.0.1", 0))
            blocker.listen(1)
            port = blocker.getsockname()[1]
            path = self.write_config(self.valid_config(listen="127.0.0.1:%d" % port))
            p = self.run_floodgate("-c", path)
        finally:
            blocker.close()
        err = p.stderr.decode("utf-8", "replace")
        self.assertEqual(p.returncode, 1, err)
        # The system's reason alone, as `ss` or nginx would say it: no library call or source
        # location.
        self.assertIn("server.listen: cannot listen on 127.0.0.1:%d: Address already in use\n"
                      % port, err)
        self.assertNotIn("[system:", err)
        self.assertNotIn(".hpp", err)

    def test_a_port_another_process_shares_with_so_reuseport_is_in_use_too(self):
        # floodgate's reactors bind with SO_REUSEPORT, which the kernel lets a second process
        # of the same user share: a second floodgate would take half the connections of the
        # first without a word. It is refused like any other address in use.
        blocker = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            blocker.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            blocker.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
            blocker.bind(("127.0.0.1", 0))
            blocker.listen(1)
            port = blocker.getsockname()[1]
            path = self.write_config(self.valid_config(listen="127.0.0.1:%d" % port))
            p = self.run_floodgate("-c", path)
        finally:
            blocker.close()
        err = p.stderr.decode("utf-8", "replace")
        self.assertEqual(p.returncode, 1, err)
        self.assertIn("server.listen: cannot listen on 127.0.0.1:%d: Address already in use\n"
                      % port, err)

    def test_admin_address_in_use_names_admin_listen_and_the_reason(self):
        blocker = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            blocker.bind(("127.0.0.1", 0))
            blocker.listen(1)
            port = blocker.getsockname()[1]
            text = self.valid_config().replace(
                'listen = "127.0.0.1:', 'listen = "127.0.0.1:%d" #' % port, 1)
            p = self.run_floodgate("-c", self.write_config(text))
        finally:
            blocker.close()
        err = p.stderr.decode("utf-8", "replace")
        self.assertEqual(p.returncode, 1, err)
        self.assertIn("admin.listen: cannot listen on 127.0.0.1:%d: Address already in use\n"
                      % port, err)
        self.assertNotIn("[system:", err)


if __name__ == "__main__":
    unittest.main()
