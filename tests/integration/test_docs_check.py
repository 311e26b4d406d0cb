"""scripts/check_docs.py finds each kind of disagreement between the code and docs/ (a scratch
tree with one of each), and passes on a tree where they agree."""

import os
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "..", "..", "scripts", "check_docs.py")

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


if __name__ == "__main__":
    unittest.main()
