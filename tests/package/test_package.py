"""The Debian package as an installed system gets it (scripts/package.sh builds it; the test
command runs this over the result): unpacked into a scratch root with `dpkg -x`, it holds the
stripped binary in /usr/sbin, the configuration as a conffile, the unit, the sysusers.d snippet,
the logrotate file, both man pages and the documentation, with the debug symbols in the dbgsym
package; and the installed binary accepts the installed configuration.

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
            with gzip.open(self.path(page), "rt", encoding="utf-8") as f:
                source = f.read()
            self.assertNotIn("@", source.splitlines()[0])  # the version filled in
            self.assertRegex(source.splitlines()[0], r'"floodgate \d+\.\d+\.\d+"')
            p = subprocess.run(["groff", "-man", "-Tutf8", "-ww"], input=source,
                               capture_output=True, text=True, timeout=60)
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertEqual(p.stderr, "", page)
            self.assertIn(must, re.sub(".\b", "", p.stdout).replace("\u2010", "-"))

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
