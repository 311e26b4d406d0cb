#!/usr/bin/env python3
"""Keeps docs/ and the code telling the same story (issue 17). Fails, listing every mismatch, when

- a configuration key the code reads is not in docs/configuration.md (the reference that
  floodgate.toml(5) is made from, so the man page names every key), or a key a table of it or
  of docs/resilience.md lists is read nowhere;
- a metric family the code exports is not in docs/metrics.md, or one listed there is exported
  nowhere;
- an X-Floodgate-Reason the code sends is not in docs/http.md's table of reasons, or the reverse;
- an access-log field the code writes is not in docs/metrics.md's table of fields, or the reverse;
- a file the code or the docs cite (src/..., docs/..., tests/..., ...) does not exist;
- a document the package installs (cmake/package.cmake) speaks of floodgate's development
  rather than to its users: an issue number, the seeds (the reference documents), "not built",
  a TODO.

Run from anywhere: python3 scripts/check_docs.py [TREE]. The test command runs it (ctest's
docs.check)."""

import os
import re
import sys

# The tree to check: this checkout, or the one given as the first argument (its test checks a
# scratch tree with known mistakes: tests/integration/test_docs_check.py).
ROOT = (os.path.abspath(sys.argv[1]) if len(sys.argv) > 1
        else os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def read(rel):
    with open(os.path.join(ROOT, rel), encoding="utf-8") as f:
        return f.read()


def files(*dirs, exts=(".cpp", ".h")):
    for d in dirs:
        for base, _, names in os.walk(os.path.join(ROOT, d)):
            for n in sorted(names):
                if n.endswith(exts):
                    yield os.path.relpath(os.path.join(base, n), ROOT)


def code_text(*dirs):
    return {path: read(path) for path in files(*dirs)}


def table_first_cells(text):
    """The backticked names in the first cell of every markdown table row."""
    names = set()
    for line in text.splitlines():
        if not line.startswith("| `"):
            continue
        cell = line.split("|")[1]
        names.update(re.findall(r"`([^`]+)`", cell))
    return names


problems = []


def compare(what, in_code, in_docs, doc):
    for name in sorted(in_code - in_docs):
        problems.append("%s %r is in the code but not in %s" % (what, name, doc))
    for name in sorted(in_docs - in_code):
        problems.append("%s %r is in %s but not in the code" % (what, name, doc))


# --- reasons -------------------------------------------------------------------------------
reason_h = read("include/floodgate/core/reason.h")
code_reasons = set(re.findall(r'^\s*\{"([a-z_0-9]+)", \d{3},', reason_h, re.M))
http = read("docs/http.md")
doc_reasons = set(re.findall(r"^\| [\d /]+ \| `([a-z_0-9]+)` \|", http, re.M))
compare("reason", code_reasons, doc_reasons, "docs/http.md")

# --- metrics -------------------------------------------------------------------------------
src = code_text("src", "include")
code_metrics = set()
for text in src.values():
    code_metrics.update(re.findall(r'"((?:floodgate|process)_[a-z0-9_]+)"', text))
metrics_md = read("docs/metrics.md")
doc_metrics = {n for n in table_first_cells(metrics_md)
               if re.fullmatch(r"(floodgate|process)_[a-z0-9_]+", n)}
compare("metric", code_metrics, doc_metrics, "docs/metrics.md")

# --- access-log fields -------------------------------------------------------------------------
access = read("src/proxy/access_log.cpp")
json_part = access[access.index("void format_json"):access.index("// A combined-format field")]
code_fields = set(re.findall(r'json_(?:field|ms)\(out, "([a-z_]+)"', json_part))
code_fields.update(re.findall(r'\\"([a-z_]+)\\":', json_part))
log_section = metrics_md[metrics_md.index("## The access log"):]
log_section = log_section[:log_section.index("\n## ", 4)]
doc_fields = {n for n in table_first_cells(log_section) if re.fullmatch(r"[a-z_]+", n)}
compare("access-log field", code_fields, doc_fields, "docs/metrics.md (The access log)")

# --- configuration keys ----------------------------------------------------------------------
config_src = code_text("src/config")
code_keys = set()  # the keys the readers are asked for
literals = set()   # every identifier-like string literal of src/config (helpers take keys too)
for text in config_src.values():
    code_keys.update(re.findall(
        r'\b[a-z]\w*\.(?:text|choice|endpoint|secret|find|peek|require|string|duration|integer|'
        r'boolean|number|table|array|size|position|[a-z_]+)\("([a-z_0-9]+)"', text))
    literals.update(re.findall(r'"([a-z_0-9]+)"', text))
# docs/configuration.md names every key (floodgate.toml(5) is made from it); docs/resilience.md
# has the longer tables of the [resilience] sub-tables, whose keys must be read too.
reference = read("docs/configuration.md")
configuration = reference + "\n" + read("docs/resilience.md")
doc_words = set()
for line in reference.splitlines():  # per line: a ``literal with a backtick`` stays put
    for span in re.findall(r"`([^`]+)`", line.replace("``", "`")):
        doc_words.update(re.findall(r"[a-z_0-9]+", span))
doc_keys = set()  # the first column of the tables whose header is "| Key ..."
in_key_table = False
for line in configuration.splitlines():
    if line.startswith("| Key"):
        in_key_table = True
    elif not line.startswith("|"):
        in_key_table = False
    elif in_key_table and line.startswith("| `"):
        for part in re.findall(r"`([^`]+)`", line.split("|")[1]):
            if re.fullmatch(r"[a-z_0-9.]+", part):
                doc_keys.add(part.split(".")[-1])
for key in sorted(code_keys - doc_words):
    problems.append("configuration key %r is read by src/config but not in docs/configuration.md "
                    "(nor, so, in floodgate.toml(5))" % key)
for key in sorted(doc_keys - literals):
    problems.append("configuration key %r is in a table of docs/configuration.md or "
                    "docs/resilience.md but read nowhere in src/config" % key)

# --- cited files ---------------------------------------------------------------------------
CITED = re.compile(r"(?<![\w/.-])((?:src|include|tests|bench|scripts|config|docs|cmake|\.ci)/"
                   r"[A-Za-z0-9_./-]*[A-Za-z0-9_])(?![\w\\])")
sources = list(files("src", "include", "tests", "bench", "scripts", "config", "cmake",
                     exts=(".cpp", ".h", ".py", ".sh", ".cmake", ".txt", ".toml", ".service")))
sources += list(files("docs", exts=(".md",)))
sources += [f for f in ("README.md", "CHANGELOG.md") if os.path.exists(os.path.join(ROOT, f))]
for rel in sources:
    if rel in ("CHANGELOG.md", "tests/integration/test_docs_check.py"):
        continue  # history may name what no longer exists; the check's own test makes up paths
    for n, line in enumerate(read(rel).splitlines(), 1):
        for cited in CITED.findall(line):
            path = cited.rstrip(".")
            # Generated (bench/results/ is written by the benchmarks), or a pattern: NAME,
            # *_test.cpp, {h,cpp}, <file>.
            if path.startswith("bench/results") or re.search(r"/[A-Z]+(/|$)", path):
                continue
            if re.search(r"[*{<]", line[line.index(cited):line.index(cited) + len(cited) + 2]):
                continue
            if not os.path.exists(os.path.join(ROOT, path)):
                problems.append("%s:%d cites %s, which does not exist" % (rel, n, path))

# --- the installed documents' wording ----------------------------------------------------------
# What the package puts under /usr/share/doc/floodgate/ is read by operators, who have no use
# for the project's issue numbers, its reference documents or its to-do list. CHANGELOG.md is
# history, and may cite issues.
DEVELOPMENT_WORDS = re.compile(r"\b(?:issues? \d+|seeds?|not built|TODO|FIXME)\b", re.I)
package_cmake = os.path.join(ROOT, "cmake", "package.cmake")
installed = []
if os.path.exists(package_cmake):
    installed = sorted(set(re.findall(r"(?<![\w/])(README\.md|docs/[A-Za-z0-9_-]+\.md)\b",
                                      read("cmake/package.cmake"))))
for rel in installed:
    if not os.path.exists(os.path.join(ROOT, rel)):
        continue  # a missing installed file is the build's error, and a cited one is above
    for n, line in enumerate(read(rel).splitlines(), 1):
        for m in DEVELOPMENT_WORDS.finditer(line):
            problems.append("%s:%d says %r, which belongs to floodgate's development, not to the "
                            "users the file is installed for" % (rel, n, m.group(0)))

if problems:
    print("docs check: %d problem(s)" % len(problems))
    for p in problems:
        print("  " + p)
    sys.exit(1)
print("docs check: configuration keys, metrics, reasons, access-log fields and cited files "
      "agree with the code")
