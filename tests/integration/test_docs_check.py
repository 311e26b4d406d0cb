"""scripts/check_docs.py finds each kind of disagreement between the code and docs/ (a scratch
tree with one of each), and passes on a tree where they agree. And the man page
floodgate.toml(5) that scripts/gen_manpage.py makes of docs/configuration.md: links as their
text, every key, nothing of floodgate's development."""

import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
TREE = os.path.join(HERE, "..", "..")
SCRIPT = os.path.join(TREE, "scripts", "check_docs.py")
GEN_MANPAGE = os.path.join(TREE, "scripts", "gen_manpage.py")

AGREEING = {
    "include/floodgate/core/reason.h": '    {"no_route", 404, "Not Found", "no route"},\n',
    "docs/http.md": "| Status | Reason |\n|---|---|\n| 404 | `no_route` | no route |\n",
    "src/app/metrics.cpp": 'w.header("floodgate_requests_total", "help", counter);\n',
    "src/proxy/access_log.cpp": ('void format_json(LineBuffer& out) {\n'
                                 '  json_field(out, "client", r.client);\n}\n'
                                 '// A combined-format field\n'),
    "docs/metrics.md": ("| Metric |\n|---|\n| `floodgate_requests_total` | counter |\n\n"
                        "## The access log\n\n| Key | Meaning |\n|---|---|\n"
                        "| `client` | the client |\n\n## Adding a metric\n"),
    "src/config/schema.cpp": 'r.text("listen", "example", parse, p.listen);  // see docs/http.md\n',
    "docs/configuration.md": "| Key | Type |\n|---|---|\n| `listen` | address |\n",
    "docs/resilience.md": "Nothing here.\n",
}


class DocsCheck(unittest.TestCase):
    def setUp(self):
        self.root = tempfile.mkdtemp(prefix="floodgate-docs-check-")
        self.addCleanup(shutil.rmtree, self.root, True)
        for rel, text in AGREEING.items():
            self.write(rel, text)

    def write(self, rel, text):
        path = os.path.join(self.root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(text)

    def append(self, rel, text):
        with open(os.path.join(self.root, rel), "a") as f:
            f.write(text)

    def check(self):
        p = subprocess.run([sys.executable, SCRIPT, self.root], capture_output=True, timeout=60)
        return p.returncode, p.stdout.decode()

    def test_a_tree_where_code_and_docs_agree_passes(self):
        self.assertEqual(self.check(), (0, "docs check: configuration keys, metrics, reasons, "
                                           "access-log fields and cited files agree with the "
                                           "code\n"))

    def assertFinds(self, *needles):
        code, out = self.check()
        self.assertEqual(code, 1, out)
        for needle in needles:
            self.assertIn(needle, out)

    def test_an_undocumented_reason_and_a_documented_one_that_does_not_exist(self):
        self.append("include/floodgate/core/reason.h", '    {"new_reason", 503, "x", "y"},\n')
        self.append("docs/http.md", "| 429 | `gone_reason` | gone |\n")
        self.assertFinds("reason 'new_reason' is in the code but not in docs/http.md",
                         "reason 'gone_reason' is in docs/http.md but not in the code")

    def test_an_undocumented_metric_and_a_documented_one_nobody_exports(self):
        self.append("src/app/metrics.cpp", 'w.header("floodgate_new_total", "h", counter);\n')
        self.write("docs/metrics.md", AGREEING["docs/metrics.md"].replace(
            "| counter |\n", "| counter |\n| `floodgate_gone_total` | gauge |\n"))
        self.assertFinds("metric 'floodgate_new_total' is in the code but not in docs/metrics.md",
                         "metric 'floodgate_gone_total' is in docs/metrics.md but not in the code")

    def test_an_undocumented_access_log_field_and_a_documented_one_never_written(self):
        self.write("src/proxy/access_log.cpp", AGREEING["src/proxy/access_log.cpp"].replace(
            "r.client);\n", 'r.client);\n  json_ms(out, "new_ms", r.t);\n'))
        self.write("docs/metrics.md", AGREEING["docs/metrics.md"].replace(
            "| the client |\n", "| the client |\n| `gone_field` | no more |\n"))
        self.assertFinds("access-log field 'new_ms' is in the code but not in docs/metrics.md",
                         "access-log field 'gone_field' is in docs/metrics.md")

    def test_an_undocumented_key_and_a_documented_key_nobody_reads(self):
        self.append("src/config/schema.cpp", 'r.duration("new_timeout", "x", p.t);\n')
        self.append("docs/configuration.md", "| `gone_key` | string |\n")
        self.assertFinds("configuration key 'new_timeout' is read by src/config but not in",
                         "configuration key 'gone_key' is in a table of docs/configuration.md")

    def test_a_cited_file_that_does_not_exist(self):
        self.append("docs/resilience.md", "See src/proxy/missing_stage.cpp for the details.\n")
        self.assertFinds("docs/resilience.md:2 cites src/proxy/missing_stage.cpp, which does "
                         "not exist")

    def test_a_key_documented_only_in_resilience_md_is_missing_from_the_reference(self):
        # floodgate.toml(5) is made of configuration.md alone: a key resilience.md lists but
        # configuration.md does not would be missing from the man page.
        self.append("src/config/schema.cpp", 'r.boolean("exempt_upgrades", "x", p.e);\n')
        self.write("docs/resilience.md", "| Key | Type |\n|---|---|\n| `exempt_upgrades` | b |\n")
        self.assertFinds("configuration key 'exempt_upgrades' is read by src/config but not in "
                         "docs/configuration.md")

    def test_development_wording_in_an_installed_document(self):
        self.write("cmake/package.cmake",
                   "install(FILES README.md CHANGELOG.md DESTINATION doc)\n"
                   "install(FILES docs/resilience.md DESTINATION doc)\n")
        self.append("docs/resilience.md", "Built in issue 13, as the seed says (not built yet).\n")
        self.write("CHANGELOG.md", "- issue 13: failure handling\n")  # history: allowed
        self.write("docs/STATUS.md", "issue 13 is done; TODO: more\n")  # not installed
        code, out = self.check()
        self.assertEqual(code, 1, out)
        for word in ("issue 13", "seed", "not built"):
            self.assertIn("docs/resilience.md:2 says '%s', which belongs to floodgate's "
                          "development" % word, out)
        self.assertNotIn("CHANGELOG", out)
        self.assertNotIn("STATUS", out)


def gen_manpage():
    spec = importlib.util.spec_from_file_location("gen_manpage", GEN_MANPAGE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class ManPage(unittest.TestCase):
    """floodgate.toml(5), as `man floodgate.toml` shows it after the package installs it."""

    def convert(self, markdown):
        return gen_manpage().convert(markdown, "1.2.3", "2026-01-01")

    def test_a_link_is_its_text_and_a_web_address_is_written_out(self):
        page = self.convert("# Title\n\nSee \"Routing\" in [http.md](http.md#routing), the "
                            "[`[resilience]` keys](resilience.md#keys) and "
                            "[RFC 9110](https://www.rfc-editor.org/rfc/rfc9110).\n")
        self.assertNotIn("](", page)
        self.assertIn('See "Routing" in http.md, the \\fB[resilience]\\fR keys and RFC 9110 '
                      "<https://www.rfc\\-editor.org/rfc/rfc9110>.", page)

    def test_a_link_it_cannot_read_is_an_error(self):
        with self.assertRaisesRegex(ValueError, "a link the man page cannot show"):
            self.convert("# Title\n\nSee [the part](two words.md).\n")

    def test_a_code_span_with_a_backtick_and_characters_beyond_ascii(self):
        page = self.convert("# Title\n\nTokens: ``a`b``, 4 × 2.\n")
        self.assertIn("Tokens: \\fBa`b\\fR, 4 \\[u00D7] 2.", page)

    def test_the_page_of_the_reference_names_every_front_key_and_no_raw_link(self):
        tmp = tempfile.mkdtemp(prefix="floodgate-manpage-")
        self.addCleanup(shutil.rmtree, tmp, True)
        out = os.path.join(tmp, "floodgate.toml.5")
        subprocess.run([sys.executable, "-B", GEN_MANPAGE,
                        os.path.join(TREE, "docs", "configuration.md"), out, "--version", "1.2.3"],
                       check=True, timeout=60)
        with open(out, encoding="utf-8") as f:
            source = f.read()
        if shutil.which("groff"):  # what man shows: the text, its warnings on stderr
            p = subprocess.run(["groff", "-man", "-Tutf8", "-ww"], input=source,
                               capture_output=True, text=True, timeout=60)
            self.assertEqual(p.stderr, "")
            text = re.sub(".\b", "", p.stdout).replace("\u2010", "-")
            text = re.sub(r"-\n\s+", "-", text)  # a key hyphenated at a line's end
        else:
            text = re.sub(r"\\f[BIR]|\\&", "", source).replace("\\-", "-")
        self.assertNotIn("](", text)
        for key in ("resilience.inflight.max_inflight", "resilience.inflight.exempt_upgrades",
                    "resilience.memory_guard.min_available", "resilience.memory_guard.meminfo",
                    "resilience.protocol.allowed_methods", "resilience.protocol.allow_connect",
                    "resilience.protocol.connect_allowed_authorities",
                    "resilience.protocol.early_data_safe_methods", "FLOODGATE_MAX_INFLIGHT",
                    "FLOODGATE_MEMORY_GUARD_MIN_MB"):
            self.assertIn(key, text)
        self.assertIsNone(re.search(r"\b(?:issues? \d+|seeds?|not built)\b", text, re.I))


if __name__ == "__main__":
    unittest.main()
