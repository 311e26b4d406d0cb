"""`floodgate check`: validates a file with the daemon's own loader, prints every error and
warning to stdout (one `FILE:LINE:COLUMN: error|warning: KEY.PATH: message` line each, or one
JSON object with --format json) and exits 0 (valid, warnings allowed) or 1 (errors); notes (what
a rate limit counts a request without its key as) are `note:` lines among them, and a "notes"
array in JSON, printed by check only. Also: the daemon refuses to start with an admin listener
off loopback and no admin.token."""

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import unittest

from harness import Floodgate, admin_get, floodgate_bin, free_port, poll, upstream

RUN_TIMEOUT = 30
LINE = re.compile(r"^(?P<file>[^:]+):(?P<line>\d+):(?P<column>\d+): (?P<severity>error|warning): "
                  r"(?P<path>[^ :]+): (?P<message>.+)$")

VALID = """\
[server]
listen = ["127.0.0.1:{port}"]
[admin]
listen = "127.0.0.1:{admin_port}"
[[upstreams]]
name = "app"
servers = ["127.0.0.1:9000"]
[[routes]]
upstream = "app"
"""

# Valid, but with two things an operator probably did not mean.
WARNINGS_ONLY = """\
[[upstreams]]
name = "app"
balance = "least_active"
servers = [{ address = "127.0.0.1:9000", weight = 5 }]
[[routes]]
upstream = "app"
[[routes]]
upstream = "app"
"""

# One error of each kind a file can have, and one warning; line numbers are pinned below.
ERRORS = """\
[server]
workers = "4"
header_timeout = "10"
[admin]
listen = "0.0.0.0:9901"
[log]
levle = "debug"
[[upstreams]]
name = "app"
balance = "p2c"
servers = ["127.0.0.1:9000", { address = "127.0.0.1:9001", weight = 2 }]
[[upstreams]]
name = "app"
servers = ["backend local:9002"]
[[routes]]
upstream = "api"
max_active_requests = 100
[[routes]]
path_prefix = "/app"
upstream = "app"
[routes.resilience]
pending_timeout = "1s"
"""

ERROR_LINES = [
    "2:1: error: server.workers: expected an integer, got a string (\"4\"); e.g. workers = 0",
    "3:1: error: server.header_timeout: \"10\" is not a valid duration: the unit is missing; "
    "add ms, s, m or h, e.g. \"10s\"",
    "5:1: error: admin.listen: \"0.0.0.0:9901\" is not a loopback address and admin.token is "
    "not set, so anyone who can reach it could change the configuration; set admin.token or "
    "admin.token_file (at least 16 characters, e.g. the output of \"openssl rand -hex 32\"), or "
    "listen on 127.0.0.1",
    "7:1: error: log.levle: unknown key 'levle' in [log] (did you mean 'level'?); expected one "
    "of: level, access_log, access_log_format, shed_summary_interval",
    "13:1: error: upstreams[1].name: duplicate upstream name 'app' (first defined at line 9); "
    "give each [[upstreams]] its own name",
    "14:12: error: upstreams[1].servers[0]: \"backend local:9002\" is not a valid address: "
    "'backend local' is neither an IP address nor a host name (dot-separated labels of letters, "
    "digits, '-' and '_', each at most 63 characters)",
    "16:1: error: routes[0].upstream: route names upstream 'api', which is not defined; define "
    "[[upstreams]] name = \"api\" or fix the name",
    "17:1: error: routes[0].max_active_requests: max_active_requests is pool-scoped: set it "
    "under [upstreams.resilience] of the upstream the route uses",
    "22:1: error: routes[1].resilience.pending_timeout: pending_timeout is pool-scoped: set it "
    "under [upstreams.resilience] of upstream 'app'",
]


class Check(unittest.TestCase):
    def setUp(self):
        self.tmpdir = tempfile.mkdtemp(prefix="floodgate-check-")
        self.addCleanup(shutil.rmtree, self.tmpdir, True)

    def write(self, text, name="floodgate.toml"):
        path = os.path.join(self.tmpdir, name)
        with open(path, "w") as f:
            f.write(text)
        return path

    def valid(self):
        port, admin_port = free_port(), free_port()
        while admin_port == port:  # two picks can return the same free port
            admin_port = free_port()
        return VALID.format(port=port, admin_port=admin_port)

    def run_floodgate(self, *args, env=None):
        """env: variables to set on top of this process's environment."""
        environment = dict(os.environ, **(env or {}))
        try:
            p = subprocess.run([floodgate_bin(), *args], stdin=subprocess.DEVNULL,
                               capture_output=True, timeout=RUN_TIMEOUT, env=environment)
        except subprocess.TimeoutExpired as e:
            self.fail("floodgate %s did not exit within %ds; stderr: %r"
                      % (" ".join(args), RUN_TIMEOUT, e.stderr))
        return p.returncode, p.stdout.decode("utf-8"), p.stderr.decode("utf-8", "replace")

    def check(self, path, *extra, env=None):
        return self.run_floodgate("check", "-c", path, *extra, env=env)

    def check_json(self, path):
        code, out, err = self.check(path, "--format", "json")
        self.assertEqual(out.count("\n"), 1, "expected one line of JSON, got:\n" + out)
        return code, json.loads(out), err

    def assertShape(self, doc):
        self.assertEqual(list(doc), ["valid", "errors", "warnings"])
        self.assertIsInstance(doc["valid"], bool)
        for item in doc["errors"] + doc["warnings"]:
            self.assertEqual(list(item), ["line", "column", "path", "message"])
            self.assertIsInstance(item["line"], int)
            self.assertIsInstance(item["column"], int)
            self.assertIsInstance(item["path"], str)
            self.assertIsInstance(item["message"], str)

    # --- text ------------------------------------------------------------------------------

    def test_valid_file_prints_nothing_on_stdout_and_exits_0(self):
        code, out, err = self.check(self.write(self.valid()))
        self.assertEqual((code, out), (0, ""), err)
        self.assertIn("valid (0 errors, 0 warnings)", err)

    def test_warnings_alone_are_printed_and_exit_0(self):
        path = self.write(WARNINGS_ONLY)
        code, out, err = self.check(path)
        self.assertEqual(code, 0, out + err)
        self.assertEqual(out.splitlines(), [
            path + ":4:42: warning: upstreams[0].servers[0].weight: weight 5 is ignored by "
            "balance = \"least_active\"; only round_robin uses weights: set balance = "
            "\"round_robin\" or remove the weight",
            path + ":7:1: warning: routes[1]: this route never matches: routes[0] (line 5) has "
            "the same host \"*\" and path_prefix \"/\" and takes all its requests; remove one of "
            "them or change its host or path_prefix",
        ])

    def test_errors_are_all_printed_in_file_order_and_exit_1(self):
        path = self.write(ERRORS)
        code, out, err = self.check(path)
        self.assertEqual(code, 1, out + err)
        lines = out.splitlines()
        errors = [l for l in lines if ": error: " in l]
        self.assertEqual(errors, [path + ":" + e for e in ERROR_LINES])
        self.assertEqual(len(lines), len(ERROR_LINES) + 1, out)  # and the weight warning
        self.assertIn(path + ":11:60: warning: upstreams[0].servers[1].weight: weight 2 is "
                      "ignored by balance = \"p2c\"", out)
        for line in lines:
            self.assertRegex(line, LINE)
        self.assertIn("invalid (9 errors, 1 warning)", err)

    def test_every_spelling_of_the_config_option_gives_the_same_output(self):
        path = self.write(ERRORS)
        expected = self.check(path)
        self.assertEqual(self.run_floodgate("check", "--config", path), expected)
        self.assertEqual(self.run_floodgate("check", "--config=" + path), expected)
        self.assertEqual(self.run_floodgate("check", "-c", path, "--format", "text"), expected)
        self.assertEqual(self.run_floodgate("check", "--format=text", "-c", path), expected)

    def test_unreadable_file_is_an_error_naming_it(self):
        path = os.path.join(self.tmpdir, "missing.toml")
        code, out, _ = self.check(path)
        self.assertEqual(code, 1)
        self.assertEqual(out, path + ": error: cannot read configuration file \"" + path +
                         "\": No such file or directory\n")

    def test_an_access_log_in_a_missing_directory_is_an_error_and_nothing_is_created(self):
        missing = os.path.join(self.tmpdir, "no-such-dir")
        text = self.valid() + '\n[log]\naccess_log = "%s/access.log"\n' % missing
        line = text.count("\n", 0, text.index("access_log = ")) + 1
        path = self.write(text)
        code, out, err = self.check(path)
        self.assertEqual(code, 1, out + err)
        self.assertIn('%s:%d:1: error: log.access_log: the directory "%s" does not exist; '
                      "create it first" % (path, line, missing), out)
        # The daemon refuses it the same way, and neither creates the directory.
        code, _, err = self.run_floodgate("-c", path)
        self.assertEqual(code, 1, err)
        self.assertIn("log.access_log: the directory", err)
        self.assertFalse(os.path.exists(missing))

    def test_the_readmes_minimal_configuration_is_valid_without_a_warning(self):
        with open(os.path.join(os.path.dirname(__file__), "..", "..", "README.md")) as f:
            readme = f.read()
        block = readme.split("```toml\n", 1)[1].split("```", 1)[0]
        code, out, err = self.check(self.write(block))
        self.assertEqual((code, out), (0, ""), err)
        self.assertIn("valid (0 errors, 0 warnings)", err)

    def test_bind_test_reports_an_address_in_use_at_its_line(self):
        blocker = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.addCleanup(blocker.close)
        blocker.bind(("127.0.0.1", 0))
        blocker.listen(1)
        port = blocker.getsockname()[1]
        text = self.valid().replace('listen = ["127.0.0.1:', 'listen = ["127.0.0.1:%d", "127.0.0.1:' % port, 1)
        path = self.write(text)
        self.assertEqual(self.check(path)[0], 0)  # without --bind-test nothing is bound
        code, out, err = self.check(path, "--bind-test")
        self.assertEqual(code, 1, out + err)
        self.assertEqual(out.splitlines(), [
            '%s:2:11: error: server.listen[0]: cannot listen on 127.0.0.1:%d: Address already in '
            "use (floodgate check --bind-test, as uid %d)" % (path, port, os.geteuid())])
        code, out, err = self.check(path, "--bind-test", "--format", "json")
        self.assertEqual(code, 1, err)
        doc = json.loads(out)
        self.assertEqual([(e["line"], e["path"]) for e in doc["errors"]], [(2, "server.listen[0]")])

    def test_bind_test_shares_the_proxy_ports_with_a_running_floodgate_but_not_its_admin(self):
        # Whether a second floodgate could start now: the proxy listeners are SO_REUSEPORT (as
        # for a restart that overlaps), the admin listener is one process's.
        fg = Floodgate([upstream("app", ["127.0.0.1:%d" % free_port()])])
        fg.start()
        self.addCleanup(fg.cleanup)
        code, out, err = self.check(fg.config_path, "--bind-test")
        self.assertEqual(code, 1, err)
        self.assertEqual(len(out.splitlines()), 1, out)
        self.assertIn(": error: admin.listen: cannot listen on 127.0.0.1:%d: Address already in "
                      "use" % fg.admin_port, out)

    def test_the_example_configuration_is_valid_without_a_warning(self):
        path = os.path.join(os.path.dirname(__file__), "..", "..", "config", "floodgate.toml")
        code, out, err = self.check(path)
        self.assertEqual((code, out), (0, ""), err)
        self.assertIn("valid (0 errors, 0 warnings)", err)

    def test_check_binds_nothing(self):
        blocker = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.addCleanup(blocker.close)
        blocker.bind(("127.0.0.1", 0))
        blocker.listen(1)
        text = self.valid().replace('listen = ["127.0.0.1:',
                                    'listen = ["127.0.0.1:%d", "127.0.0.1:'
                                    % blocker.getsockname()[1])
        code, out, err = self.check(self.write(text))
        self.assertEqual((code, out), (0, ""), err)

    def tenant_rule(self):
        """A valid file with one tenant rate limit, its key on the returned line."""
        text = self.valid() + ('\n[[resilience.scoped_rate_limits]]\nname = "t"\n'
                               'scope = "tenant"\nkey = "header:x-tenant-id"\n'
                               'requests_per_sec = 1\nburst = 1\n')
        return text, text.count("\n", 0, text.index('key = "header')) + 1

    def test_a_note_says_what_a_request_without_the_key_is_counted_as_and_is_no_warning(self):
        text, line = self.tenant_rule()
        path = self.write(text)
        code, out, err = self.check(path)
        self.assertEqual(code, 0, out + err)
        self.assertEqual(out.splitlines(), [
            '%s:%d:1: note: resilience.scoped_rate_limits[0].missing_key: a request without key '
            '= "header:x-tenant-id" is counted by its client\'s address (as client_ip gives it, '
            'server.trusted_proxies honoured), one bucket per client (missing_key = "peer", the '
            'default)' % (path, line)])
        self.assertIn("valid (0 errors, 0 warnings)", err)
        code, doc, err = self.check_json(path)
        self.assertEqual(list(doc), ["valid", "errors", "warnings", "notes"])
        self.assertEqual([(n["line"], n["path"]) for n in doc["notes"]],
                         [(line, "resilience.scoped_rate_limits[0].missing_key")])

    # --- json ------------------------------------------------------------------------------

    def test_json_for_a_valid_file(self):
        code, doc, err = self.check_json(self.write(self.valid()))
        self.assertEqual(code, 0, err)
        self.assertEqual(doc, {"valid": True, "errors": [], "warnings": []})
        self.assertShape(doc)

    def test_json_with_warnings_only_is_valid(self):
        code, doc, err = self.check_json(self.write(WARNINGS_ONLY))
        self.assertEqual(code, 0, err)
        self.assertShape(doc)
        self.assertTrue(doc["valid"])
        self.assertEqual(doc["errors"], [])
        self.assertEqual([(w["line"], w["column"], w["path"]) for w in doc["warnings"]],
                         [(4, 42, "upstreams[0].servers[0].weight"), (7, 1, "routes[1]")])

    def test_json_carries_every_error_with_its_position_path_and_message(self):
        path = self.write(ERRORS)
        code, doc, err = self.check_json(path)
        self.assertEqual(code, 1, err)
        self.assertShape(doc)
        self.assertFalse(doc["valid"])
        expected = [LINE.match(path + ":" + e) for e in ERROR_LINES]
        self.assertEqual(doc["errors"], [{"line": int(m["line"]), "column": int(m["column"]),
                                          "path": m["path"], "message": m["message"]}
                                         for m in expected])
        self.assertEqual(len(doc["warnings"]), 1)
        self.assertEqual(doc["warnings"][0]["path"], "upstreams[0].servers[1].weight")

    def test_json_for_an_unreadable_file_has_no_position(self):
        code, doc, _ = self.check_json(os.path.join(self.tmpdir, "missing.toml"))
        self.assertEqual(code, 1)
        self.assertShape(doc)
        self.assertEqual([(e["line"], e["column"], e["path"]) for e in doc["errors"]],
                         [(0, 0, "")])

    def test_json_escapes_what_the_file_quotes(self):
        path = self.write(self.valid() + 'host = "a\\"b\\\\c\\u0001"\n')
        code, doc, err = self.check_json(path)
        self.assertEqual(code, 1, err)
        self.assertEqual(doc["errors"][0]["path"], "routes[0].host")
        self.assertIn('"a"b\\c\x01" is not a valid host', doc["errors"][0]["message"])

    # --- usage -----------------------------------------------------------------------------

    def test_unknown_format_is_a_usage_error_naming_the_accepted_ones(self):
        code, out, err = self.check(self.write(self.valid()), "--format", "yaml")
        self.assertEqual((code, out), (1, ""))
        self.assertIn("unknown --format 'yaml'; expected text or json", err)

    def test_check_without_a_file_is_a_usage_error(self):
        code, out, err = self.run_floodgate("check")
        self.assertEqual((code, out), (1, ""))
        self.assertIn("no configuration file given", err)

    def test_help_describes_check_and_its_formats(self):
        code, out, _ = self.run_floodgate("--help")
        self.assertEqual(code, 0)
        self.assertIn("floodgate check -c FILE [--format text|json]", out)

    # --- the daemon ------------------------------------------------------------------------

    def test_daemon_refuses_a_non_loopback_admin_listener_without_a_token(self):
        text = self.valid().replace('[admin]\nlisten = "127.0.0.1:', '[admin]\nlisten = "0.0.0.0:')
        code, out, err = self.run_floodgate("-c", self.write(text))
        self.assertEqual(code, 1, err)
        self.assertRegex(err, r"floodgate\.toml:4:1: error: admin\.listen: \"0\.0\.0\.0:\d+\" is "
                              r"not a loopback address and admin\.token is not set")
        self.assertIn("set admin.token", err)

    def test_daemon_reports_exactly_what_check_reports(self):
        path = self.write(ERRORS)
        _, check_out, _ = self.check(path)
        code, _, err = self.run_floodgate("-c", path)
        self.assertEqual(code, 1)
        for line in check_out.splitlines():
            self.assertIn(line + "\n", err)

    # --- environment overrides ([resilience]) ----------------------------------------------

    def test_check_refuses_a_bad_in_flight_cap_in_the_environment(self):
        path = self.write(self.valid())
        code, out, err = self.check(path, env={"FLOODGATE_MAX_INFLIGHT": "lots"})
        self.assertEqual(code, 1, err)
        self.assertEqual(out, path + ": error: resilience.inflight.max_inflight: the environment "
                         "variable FLOODGATE_MAX_INFLIGHT is \"lots\", which is not an in-flight "
                         "cap; set it to \"auto\" or an integer from 0 (no cap) to 2147483646, or "
                         "unset it to use max_inflight\n")

    def test_check_warns_when_the_environment_overrides_the_file(self):
        path = self.write(self.valid() + "[resilience.inflight]\nmax_inflight = 100\n")
        code, out, err = self.check(path, env={"FLOODGATE_MAX_INFLIGHT": "auto"})
        self.assertEqual(code, 0, out + err)
        self.assertIn(path + ":11:1: warning: resilience.inflight.max_inflight: max_inflight = "
                      "100 is overridden by the environment variable FLOODGATE_MAX_INFLIGHT = "
                      "\"auto\"", out)

    def test_daemon_refuses_to_start_with_a_bad_memory_floor_in_the_environment(self):
        path = self.write(self.valid())
        code, out, err = self.run_floodgate("-c", path,
                                            env={"FLOODGATE_MEMORY_GUARD_MIN_MB": "1.5"})
        self.assertEqual(code, 1, err)
        self.assertIn(path + ": error: resilience.memory_guard.min_available: the environment "
                      "variable FLOODGATE_MEMORY_GUARD_MIN_MB is \"1.5\", which is not a memory "
                      "floor", err)
        self.assertIn("nothing was started", err)


# Two reactors and a pool capped at one request (issue 35's race): "auto" makes the front cap
# max(32, 4 x (2 + 1)) = 32, below adaptive admission's default min_limit of 64. The file writes
# nothing of [resilience].
SMALL_POOL = """\
[server]
workers = 2
[[upstreams]]
name = "app"
servers = ["127.0.0.1:9000"]
[upstreams.resilience]
max_active_requests = 1
[[routes]]
upstream = "app"
"""


class DefaultsWarnNothing(unittest.TestCase):
    """A warning points at something the operator wrote: values the file does not set are
    never warned about, at `check`, at start or at a reload. Before, the file above got a
    warning about the default min_limit (with no position: nothing in the file to point at)
    at every check, start and reload, and the log added one about the ceiling at each start
    and reload and one about the host's swap at each start. `nginx -t` on a file that sets
    nothing questionable prints only that the syntax is ok and the test successful."""

    def test_check_says_nothing_of_defaults(self):
        tmpdir = tempfile.mkdtemp(prefix="floodgate-check-")
        self.addCleanup(shutil.rmtree, tmpdir, True)
        path = os.path.join(tmpdir, "floodgate.toml")
        with open(path, "w") as f:
            f.write(SMALL_POOL)
        p = subprocess.run([floodgate_bin(), "check", "-c", path], stdin=subprocess.DEVNULL,
                           capture_output=True, text=True, timeout=RUN_TIMEOUT)
        self.assertEqual((p.returncode, p.stdout), (0, ""), p.stderr)
        self.assertIn("valid (0 errors, 0 warnings)", p.stderr)

    def test_start_and_reload_log_no_warning(self):
        fg = Floodgate([upstream("app", ["127.0.0.1:%d" % free_port()],
                                 resilience={"max_active_requests": 1})], workers=2)
        fg.start()
        self.addCleanup(fg.cleanup)

        fg.signal(signal.SIGHUP)
        # The reload's own lines (and its diagnostics) are written before generation 1 retires.
        poll(lambda: b"generation 1 retired" in fg.stderr_bytes(), what="the reload done")
        self.assertEqual(json.loads(admin_get(fg.admin_port, "/config")[2])["generation"], 2)
        log = fg.stderr_bytes().decode("utf-8", "replace")
        self.assertIn("adaptive ceiling: 32 to 32 requests", log)  # said, as a note
        self.assertEqual([line for line in log.splitlines() if "warning" in line], [], log)


if __name__ == "__main__":
    unittest.main()
