"""Certificates for the TLS tests, made with the openssl command line into a temporary
directory: a test CA (ECDSA P-256) and leaf certificates it signs, ECDSA P-256 or RSA-2048,
with the names given as subjectAltName DNS entries (the first also as the CN)."""

import os
import shutil
import subprocess
import tempfile


def _openssl(*args, cwd):
    p = subprocess.run(["openssl", *args], cwd=cwd, capture_output=True, timeout=60)
    if p.returncode != 0:
        raise AssertionError("openssl %s failed: %s" % (" ".join(args), p.stderr.decode()))


class TestCA:
    """A CA in its own directory; leaf() writes a certificate and key signed by it."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="floodgate-tls-")
        self.cert = os.path.join(self.dir, "ca.pem")
        self.key = os.path.join(self.dir, "ca.key")
        self._serial = 1
        _openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
                 "-nodes", "-keyout", self.key, "-out", self.cert, "-days", "30",
                 "-subj", "/CN=floodgate test CA", cwd=self.dir)

    def leaf(self, stem, names, kind="ec", days=30, not_after=None):
        """Writes stem.pem (leaf then nothing else: the CA is the trust anchor) and stem.key;
        returns (cert_path, key_path). kind: "ec" (P-256) or "rsa" (2048 bits). not_after: a
        date as openssl wants it (YYYYMMDDHHMMSSZ) for a certificate already expired."""
        cert = os.path.join(self.dir, stem + ".pem")
        key = os.path.join(self.dir, stem + ".key")
        csr = os.path.join(self.dir, stem + ".csr")
        ext = os.path.join(self.dir, stem + ".ext")
        if kind == "rsa":
            keyopts = ["-newkey", "rsa:2048"]
        else:
            keyopts = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256"]
        _openssl("req", "-new", *keyopts, "-nodes", "-keyout", key, "-out", csr,
                 "-subj", "/CN=%s" % names[0], cwd=self.dir)
        with open(ext, "w") as f:
            f.write("subjectAltName = %s\n" % ", ".join("DNS:%s" % n for n in names))
            f.write("basicConstraints = CA:FALSE\n")
            f.write("keyUsage = digitalSignature, keyEncipherment\n")
            f.write("extendedKeyUsage = serverAuth, clientAuth\n")
        self._serial += 1
        if not_after is None:
            _openssl("x509", "-req", "-in", csr, "-CA", self.cert, "-CAkey", self.key,
                     "-set_serial", str(self._serial), "-days", str(days), "-extfile", ext,
                     "-out", cert, cwd=self.dir)
        else:  # openssl ca can set both dates; x509 -req cannot make one in the past
            _openssl("ca", "-batch", "-config", self._ca_config(), "-in", csr, "-out", cert,
                     "-startdate", "20200101000000Z", "-enddate", not_after, "-extfile", ext,
                     "-notext", cwd=self.dir)
        return cert, key

    def _ca_config(self):
        db = os.path.join(self.dir, "ca-db")
        os.makedirs(db, exist_ok=True)
        open(os.path.join(db, "index.txt"), "a").close()
        with open(os.path.join(db, "serial"), "w") as f:
            f.write("%04X\n" % (1000 + self._serial))
        path = os.path.join(self.dir, "ca.cnf")
        with open(path, "w") as f:
            f.write("[ca]\ndefault_ca = test\n[test]\n"
                    "dir = %s\ndatabase = $dir/index.txt\nserial = $dir/serial\n"
                    "new_certs_dir = $dir\ncertificate = %s\nprivate_key = %s\n"
                    "default_md = sha256\npolicy = any\nunique_subject = no\n"
                    "[any]\ncommonName = supplied\n" % (db, self.cert, self.key))
        return path

    def cleanup(self):
        shutil.rmtree(self.dir, ignore_errors=True)
