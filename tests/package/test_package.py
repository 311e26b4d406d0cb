"""The Debian package as an installed system gets it (scripts/package.sh builds it; the test
command runs this over the result): unpacked into a scratch root with `dpkg -x`, it holds the
stripped binary in /usr/sbin, the configuration as a conffile, the unit, the sysusers.d snippet,
the logrotate file, both man pages (every key, links as text) and the documentation with the
machine-readable copyright file, with the debug symbols in the dbgsym package; and the
installed binary accepts the installed configuration.

    FLOODGATE_PACKAGES=build-package/packages python3 -m unittest -v tests/package/test_package.py
"""

import glob
import gzip
import os
import re
import shutil
import subprocess
import tempfile
import unittest

PACKAGES = os.environ.get("FLOODGATE_PACKAGES", "build-package/packages")
SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
DEP5 = "https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/"


def run(*args, **kw):
    return subprocess.run(list(args), capture_output=True, text=True, timeout=60, check=True, **kw)


def only(pattern):
    found = glob.glob(os.path.join(PACKAGES, pattern))
    if len(found) != 1:
        raise AssertionError("expected one %s in %s, found %s" % (pattern, PACKAGES, found))
    return found[0]


def sections(binary):
    """The ELF section names of `binary`."""
    out = run("readelf", "-S", "-W", binary).stdout
    return set(re.findall(r"\]\s+(\.\S+)", out))


def build_id(binary):
    m = re.search(r"Build ID: ([0-9a-f]+)", run("readelf", "-n", binary).stdout)
    if not m:
        raise AssertionError("%s has no build id" % binary)
    return m.group(1)


def deb822(text):
    """The paragraphs of a deb822 file (Debian's control-file syntax) as lists of (field, value)
    pairs; a value's continuation lines keep their text, a lone "." is an empty line."""
    paragraphs = []
    for block in re.split(r"\n\s*\n", text.strip("\n")):
        fields = []
        for line in block.split("\n"):
            if line.startswith((" ", "\t")):
                if not fields:
                    raise AssertionError("a continuation line opens a paragraph: %r" % line)
                more = line.strip()
                name, value = fields[-1]
                fields[-1] = (name, value + "\n" + ("" if more == "." else more))
            else:
                m = re.fullmatch(r"([A-Za-z][A-Za-z0-9-]*):\s*(.*)", line)
                if not m:
                    raise AssertionError("not a field: %r" % line)
                fields.append((m.group(1), m.group(2)))
        names = [n.lower() for n, _ in fields]
        if len(names) != len(set(names)):
            raise AssertionError("a field twice in one paragraph: %s" % names)
        paragraphs.append(fields)
    return paragraphs


def words(text):
    return " ".join(text.split())


def render(path):
    """A gzipped man page as `man` shows it: groff's text (no overstrike) and its warnings."""
    with gzip.open(path, "rt", encoding="utf-8") as f:
        source = f.read()
    p = subprocess.run(["groff", "-man", "-Tutf8", "-ww"], input=source, capture_output=True,
                       text=True, timeout=60)
    text = re.sub(".\b", "", p.stdout).replace("\u2010", "-")
    return source, re.sub(r"-\n\s+", "-", text), p


class TheDebianPackage(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.deb = only("floodgate_*.deb")
        cls.ddeb = only("floodgate-dbgsym_*.ddeb")
        cls.root = tempfile.mkdtemp(prefix="floodgate-package-root-")
        cls.debug_root = tempfile.mkdtemp(prefix="floodgate-package-dbgsym-")
        run("dpkg", "-x", cls.deb, cls.root)
        run("dpkg", "-x", cls.ddeb, cls.debug_root)
        cls.control = tempfile.mkdtemp(prefix="floodgate-package-control-")
        run("dpkg-deb", "-e", cls.deb, cls.control)

    @classmethod
    def tearDownClass(cls):
        for d in (cls.root, cls.debug_root, cls.control):
            shutil.rmtree(d, True)

    def path(self, p):
        return os.path.join(self.root, p.lstrip("/"))

    def test_installs_the_files_an_installed_system_needs(self):
        for p in ("/usr/sbin/floodgate", "/etc/floodgate/floodgate.toml",
                  "/usr/lib/systemd/system/floodgate.service",
                  "/usr/lib/sysusers.d/floodgate.conf", "/etc/logrotate.d/floodgate",
                  "/usr/share/man/man8/floodgate.8.gz", "/usr/share/man/man5/floodgate.toml.5.gz",
                  "/usr/share/doc/floodgate/README.md",
                  "/usr/share/doc/floodgate/configuration.md",
                  "/usr/share/doc/floodgate/operations.md", "/usr/share/doc/floodgate/metrics.md"):
            self.assertTrue(os.path.isfile(self.path(p)), p)
        self.assertTrue(os.access(self.path("/usr/sbin/floodgate"), os.X_OK))
        # Nothing of the build or the tests: no fault hooks, no headers, nothing under /usr/local.
        everything = run("dpkg-deb", "-c", self.deb).stdout
        self.assertNotIn("/usr/local", everything)
        self.assertNotIn("/include/", everything)

    def test_the_configuration_and_the_logrotate_file_are_conffiles(self):
        with open(os.path.join(self.control, "conffiles")) as f:
            conffiles = f.read().split()
        self.assertEqual(sorted(conffiles),
                         ["/etc/floodgate/floodgate.toml", "/etc/logrotate.d/floodgate"])

    def test_the_binary_is_stripped_and_its_symbols_are_in_the_dbgsym_package(self):
        binary = self.path("/usr/sbin/floodgate")
        self.assertNotIn(".debug_info", sections(binary))
        self.assertNotIn(".symtab", sections(binary))
        bid = build_id(binary)
        debug = os.path.join(self.debug_root, "usr/lib/debug/.build-id", bid[:2], bid[2:] + ".debug")
        self.assertTrue(os.path.isfile(debug), "no %s in the dbgsym package" % debug)
        self.assertIn(".debug_info", sections(debug))

    def test_the_installed_binary_accepts_the_installed_configuration(self):
        p = subprocess.run([self.path("/usr/sbin/floodgate"), "check", "-c",
                            self.path("/etc/floodgate/floodgate.toml")],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        version = run(self.path("/usr/sbin/floodgate"), "--version").stdout
        self.assertIn("floodgate", version)
        self.assertNotIn("fault hooks", version)

    def test_the_unit_runs_the_installed_binary_checks_first_and_names_the_man_page(self):
        with open(self.path("/usr/lib/systemd/system/floodgate.service")) as f:
            unit = f.read()
        self.assertIn("Environment=FLOODGATE_CONFIG=/etc/floodgate/floodgate.toml", unit)
        self.assertIn("ExecStart=/usr/sbin/floodgate -c ${FLOODGATE_CONFIG}", unit)
        self.assertIn("ExecStartPre=/usr/sbin/floodgate check -c ${FLOODGATE_CONFIG}", unit)
        self.assertIn("ExecReload=/usr/sbin/floodgate check -c ${FLOODGATE_CONFIG}", unit)
        self.assertIn("Documentation=man:floodgate(8) man:floodgate.toml(5)", unit)

    def test_the_logrotate_file_rotates_the_log_directory_and_signals_usr1(self):
        with open(self.path("/etc/logrotate.d/floodgate")) as f:
            text = f.read()
        self.assertIn("/var/log/floodgate/*.log", text)
        self.assertIn("--signal=USR1", text)
        if shutil.which("logrotate"):
            run("logrotate", "--debug", self.path("/etc/logrotate.d/floodgate"))

    def test_the_man_pages_render_without_warnings(self):
        for page, must in (("/usr/share/man/man8/floodgate.8.gz", "floodgate check"),
                           ("/usr/share/man/man5/floodgate.toml.5.gz", "max_active_requests")):
            source, text, p = render(self.path(page))
            self.assertNotIn("@", source.splitlines()[0])  # the version filled in
            self.assertRegex(source.splitlines()[0], r'"floodgate \d+\.\d+\.\d+"')
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertEqual(p.stderr, "", page)
            self.assertIn(must, text)

    def test_the_configuration_page_has_every_front_key_and_no_markdown_or_development_words(self):
        _, text, _ = render(self.path("/usr/share/man/man5/floodgate.toml.5.gz"))
        self.assertNotIn("](", text)  # a Markdown link shows as its text
        self.assertNotIn("``", text)
        for key in ("resilience.inflight.max_inflight", "resilience.inflight.exempt_path_suffixes",
                    "resilience.memory_guard.min_available", "resilience.protocol.allow_connect",
                    "resilience.protocol.denied_path_prefixes", "FLOODGATE_MAX_INFLIGHT"):
            self.assertIn(key, text)
        self.assertIsNone(re.search(r"\b(?:issues? \d+|seeds?|not built)\b", text, re.I))

    def test_the_copyright_file_is_in_debians_machine_readable_format(self):
        path = self.path("/usr/share/doc/floodgate/copyright")
        listing = run("dpkg-deb", "-c", self.deb).stdout
        self.assertIn("./usr/share/doc/floodgate/copyright\n", listing)
        self.assertEqual(os.stat(path).st_mode & 0o777, 0o644)
        # One license file, as lintian wants (extra-license-file): no LICENSE beside it.
        self.assertFalse(os.path.exists(self.path("/usr/share/doc/floodgate/LICENSE")))
        with open(path, encoding="utf-8") as f:
            header, *rest = deb822(f.read())
        fields = dict(header)
        self.assertEqual(fields.get("Format"), DEP5)
        self.assertEqual(fields.get("Upstream-Name"), "floodgate")
        files = [dict(p) for p in rest if "Files" in dict(p)]
        texts = {dict(p)["License"].split("\n", 1)[0]: dict(p)["License"]
                 for p in rest if "Files" not in dict(p)}
        # The most general paragraph first (the format's rule); each has Copyright and License,
        # and every license it names has its text, in the paragraph or in a License paragraph.
        self.assertEqual(files[0]["Files"], "*")
        self.assertIn("The floodgate authors", files[0]["Copyright"])
        for f in files:
            self.assertTrue(f.get("Copyright"), f)
            name, _, text = f["License"].partition("\n")
            self.assertTrue(text.strip() or texts.get(name, "").count("\n") > 2,
                            "no text for license %r" % name)
        # The package's license is the source tree's LICENSE: the MIT license (Expat).
        self.assertEqual(files[0]["License"], "Expat")
        with open(os.path.join(SOURCE, "LICENSE"), encoding="utf-8") as f:
            license_text = f.read()
        self.assertIn("Copyright (c) 2026 The floodgate authors", license_text)
        grant = license_text[license_text.index("Permission is hereby granted"):]
        self.assertEqual(words(texts["Expat"].split("\n", 1)[1]), words(grant))

    def test_the_maintainer_scripts_create_the_user_and_do_not_start_the_service(self):
        with open(os.path.join(self.control, "postinst")) as f:
            postinst = f.read()
        self.assertIn("systemd-sysusers floodgate.conf", postinst)
        self.assertNotIn("enable", re.sub(r"#.*", "", postinst))
        info = run("dpkg-deb", "-f", self.deb, "Package", "Depends", "Description").stdout
        self.assertIn("Package: floodgate", info)
        self.assertRegex(info, r"Depends: systemd, .*libssl3")
        # The summary once, then the extended description indented by one space.
        self.assertEqual(info.count("reverse proxy built for overload control"), 1, info)
        self.assertIn("\n floodgate forwards HTTP/1.1 requests", info)


if __name__ == "__main__":
    unittest.main()
