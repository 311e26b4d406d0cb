"""The processes floodgate's benchmarks run: one loopback nginx backend and the proxies in
front of it (floodgate, HAProxy, nginx), with comparable configurations.

Used by compare.py, attack.py and profile.sh (through the `config` command below). Everything
lives in one temporary directory (configs, pid files, logs); ports are unused ports in
20000-32767, below the kernel's ephemeral range so that client source ports never collide with
them.

Fairness rules shared by every proxy: one worker/thread, no access log, keep-alive on both
sides with up to KEEPALIVE idle backend connections, no limit on requests per connection,
idle timeouts long enough for the idle-connection test. With forward_headers=True, HAProxy and
nginx also add the headers floodgate always adds (X-Forwarded-For/-Proto/-Host, Via,
X-Request-Id), so the per-request header work is the same on every proxy.

With tls=True (compare.py --tls) every proxy's client side speaks TLS on its port instead: one
ECDSA P-256 certificate made for the run (make_certificate), TLS 1.2 and 1.3 with each
proxy's default ciphers and session tickets, ALPN http/1.1; the backend stays plain HTTP, so
"direct" has no TLS variant. floodgate also keeps a plain listener on another port; with
plain_listener=True (attack.py) HAProxy and nginx get one too, and Target.plain_port names it.

Contract: a Stack owns every process it starts; Stack.stop() (also run by `with`) stops them
all, first with SIGTERM, then SIGKILL to the process group it created. Not thread-safe.
"""

import os
import random
import shlex
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field

BODY = "hello, world\n"          # the backend's fixed response body
KEEPALIVE = 64                   # idle backend connections per proxy
IDLE_TIMEOUT_S = 300             # client keep-alive timeout on every proxy
PROXIES = ("floodgate", "haproxy", "nginx")
# "floodgate-prev": a second floodgate binary (compare.py --floodgate-prev), measured in the
# same interleaved rounds, so a change is judged against the binary before it.
TARGETS = PROXIES + ("direct", "floodgate-prev")
FLOODGATES = ("floodgate", "floodgate-prev")
CLK_TCK = os.sysconf("SC_CLK_TCK")


def nofile_hard():
    import resource
    return resource.getrlimit(resource.RLIMIT_NOFILE)[1]


def unused_port(taken=()):
    """A port in 20000-32767 that nothing listens on now (checked by binding it)."""
    for _ in range(200):
        port = random.randint(20000, 32767)
        if port in taken:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
                return port
            except OSError:
                continue
    raise RuntimeError("no unused port found in 20000-32767")


def make_certificate(d):
    """A self-signed ECDSA P-256 certificate for "bench" in D: (cert, key, combined) paths;
    HAProxy wants the certificate and key in one file."""
    cert, key, both = f"{d}/bench.crt", f"{d}/bench.key", f"{d}/bench.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:P-256", "-nodes", "-keyout", key, "-out", cert,
                    "-days", "2", "-subj", "/CN=bench", "-addext", "subjectAltName=DNS:bench"],
                   check=True, capture_output=True)
    with open(both, "w") as out:
        for path in (cert, key):
            with open(path) as f:
                out.write(f.read())
    return cert, key, both


# --- configurations ------------------------------------------------------------------------
# Every proxy configuration takes `backend_port` as one port or a list of ports (a pool of
# several backends, e.g. bench/retry_storm/).

def _ports(backend_port):
    return list(backend_port) if isinstance(backend_port, (list, tuple)) else [backend_port]


def _nginx_common(d, name, nofile, error_level="warn"):
    temp = "\n".join(f"    {k}_temp_path {d}/{name}-temp/{k};"
                     for k in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
    return f"""daemon off;
master_process on;
worker_processes 1;
pid {d}/{name}.pid;
error_log {d}/{name}-error.log {error_level};
worker_rlimit_nofile {nofile};
events {{ worker_connections {nofile - 100}; }}
http {{
    access_log off;
    keepalive_requests 1000000;
    keepalive_timeout {IDLE_TIMEOUT_S}s;
{temp}
"""


def backend_config(d, port, nofile, locations=""):
    """`locations`: more nginx location blocks for the backend's server (attack.py's large
    file)."""
    return _nginx_common(d, "backend", nofile) + f"""    server {{
        listen 127.0.0.1:{port} backlog=4096;
{locations}        location / {{
            default_type text/plain;
            return 200 "{BODY.encode('unicode_escape').decode()}";
        }}
    }}
}}
"""


def nginx_proxy_config(d, port, backend_port, nofile, forward_headers, server_params="",
                       location_extra="", error_level="warn", tls=None, plain_port=0):
    """`server_params` follow each `server` of the upstream (e.g. "max_fails=3"); the lines of
    `location_extra` go at the end of the location; `tls`: (cert, key, combined) paths, and
    with it `plain_port`, when not 0, a second listener without TLS."""
    params = f" {server_params}" if server_params else ""
    servers = "".join(f"        server 127.0.0.1:{p}{params};\n" for p in _ports(backend_port))
    extra = ""
    if forward_headers:
        extra = """            proxy_set_header Host $http_host;
            proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
            proxy_set_header X-Forwarded-Proto $scheme;
            proxy_set_header X-Forwarded-Host $host;
            proxy_set_header Via "1.1 nginx";
            proxy_set_header X-Request-Id $request_id;
"""
    extra += location_extra
    tls_lines = ""
    if tls:
        tls_lines = (f"        ssl_certificate {tls[0]};\n        ssl_certificate_key {tls[1]};\n"
                     "        ssl_protocols TLSv1.2 TLSv1.3;\n")
        if plain_port:
            tls_lines += f"        listen 127.0.0.1:{plain_port} backlog=4096;\n"
    return _nginx_common(d, "nginx", nofile, error_level) + f"""    upstream backend {{
{servers}        keepalive {KEEPALIVE};
        keepalive_requests 1000000;
        keepalive_timeout {IDLE_TIMEOUT_S}s;
    }}
    server {{
        listen 127.0.0.1:{port} backlog=4096{" ssl" if tls else ""};
{tls_lines}        location / {{
            proxy_pass http://backend;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
{extra}        }}
    }}
}}
"""


def haproxy_config(port, backend_port, nofile, forward_headers, backend_extra="", tls=None,
                   plain_port=0):
    # `backend_extra`: lines for the backend section, before its servers; `tls`: (cert, key,
    # combined) paths, and with it `plain_port`, when not 0, a second bind without TLS.
    # maxconn must admit the idle-connection test; HAProxy reserves 2 fds per connection, so
    # with a low hard fd limit it would refuse to start: "no strict-limits" makes that a warning.
    maxconn = max(1000, nofile - 500)
    proto = "https" if tls else "http"
    binds = f"    bind 127.0.0.1:{port}{f' ssl crt {tls[2]} alpn http/1.1' if tls else ''}\n"
    if tls and plain_port:
        proto = "%[ssl_fc,iif(https,http)]"
        binds += f"    bind 127.0.0.1:{plain_port}\n"
    extra = ""
    if forward_headers:
        extra = f"""    option forwardfor
    http-request set-header X-Forwarded-Proto {proto}
    http-request set-header X-Forwarded-Host %[req.hdr(host)]
    http-request add-header Via "1.1 haproxy"
    unique-id-format %{{+X}}o\\ %ci:%cp_%fi:%fp_%Ts_%rt:%pid
    unique-id-header X-Request-Id
"""
    return f"""global
    nbthread 1
    maxconn {maxconn}
    no strict-limits

defaults
    mode http
    maxconn {maxconn}
    timeout connect 5s
    timeout client {IDLE_TIMEOUT_S}s
    timeout server 30s
    timeout http-request 10s
    timeout http-keep-alive {IDLE_TIMEOUT_S}s
    option http-keep-alive
    http-reuse always

frontend fe
{binds}{extra}    default_backend be

backend be
{backend_extra}""" + "".join(f"    server s{i} 127.0.0.1:{p} pool-max-conn {KEEPALIVE}\n"
                               for i, p in enumerate(_ports(backend_port), 1))


def floodgate_config(port, admin_port, backend_port, pool_tables="", tls=None, plain_port=0):
    """floodgate's configuration; `pool_tables` (TOML, e.g. an [upstreams.resilience] table)
    goes right after the pool's keys. FLOODGATE_IO in the environment sets server.io (auto,
    io_uring or epoll; default: floodgate's own default, auto). With `tls` ((cert, key,
    combined) paths) `port` speaks TLS and the plain listener is `plain_port`."""
    io = os.environ.get("FLOODGATE_IO", "")
    io_line = f'io = "{io}"\n' if io else ""
    tls_table = ""
    if tls:
        tls_table = (f'\n[[server.tls]]\nlisten = ["127.0.0.1:{port}"]\n'
                     f'certificate = "{tls[0]}"\nprivate_key = "{tls[1]}"\n')
    return f"""[server]
listen = ["127.0.0.1:{plain_port if tls else port}"]
workers = 1
{io_line}idle_timeout = "{IDLE_TIMEOUT_S}s"
{tls_table}
[admin]
listen = "127.0.0.1:{admin_port}"

[log]
level = "warn"
access_log = "off"

[[upstreams]]
name = "backend"
servers = [{", ".join(f'"127.0.0.1:{p}"' for p in _ports(backend_port))}]
keepalive = {KEEPALIVE}
keepalive_timeout = "{IDLE_TIMEOUT_S}s"
{pool_tables}
[[routes]]
host = "*"
path_prefix = "/"
upstream = "backend"
"""


def write_config(kind, d, port, backend_port, floodgate_bin="", forward_headers=False,
                 taken=(), extra_toml="", tls=None, plain_port=0, backend_locations=""):
    """Writes KIND's configuration into directory D; returns the argv that runs it in the
    foreground. KIND is "backend" or one of PROXIES. EXTRA_TOML (floodgate only) is appended to
    its configuration: more tables, such as [[resilience.scoped_rate_limits]]. TLS: (cert, key,
    combined) paths when the proxies' client side speaks TLS; PLAIN_PORT, when not 0, is then a
    second listener without TLS (floodgate always has one: a port of its own if 0).
    BACKEND_LOCATIONS: more nginx location blocks for the backend."""
    nofile = nofile_hard()
    if kind in ("backend", "nginx"):
        text = (backend_config(d, port, nofile, backend_locations) if kind == "backend"
                else nginx_proxy_config(d, port, backend_port, nofile, forward_headers,
                                        tls=tls, plain_port=plain_port))
        os.makedirs(f"{d}/{kind}-temp", exist_ok=True)
        path = f"{d}/{kind}.conf"
        argv = ["nginx", "-p", f"{d}/", "-e", f"{d}/{kind}-error.log", "-c", path]
    elif kind == "haproxy":
        text = haproxy_config(port, backend_port, nofile, forward_headers, tls=tls,
                              plain_port=plain_port)
        path = f"{d}/haproxy.cfg"
        argv = ["haproxy", "-db", "-f", path]
    elif kind in FLOODGATES:
        admin = unused_port(taken=set(taken) | {port, backend_port, plain_port})
        plain = plain_port
        if tls and not plain:
            plain = unused_port(taken=set(taken) | {port, backend_port, admin})
        text = floodgate_config(port, admin, backend_port, tls=tls, plain_port=plain) + extra_toml
        path = f"{d}/{kind}.toml"
        argv = [floodgate_bin, "-c", path]
    else:
        raise ValueError(f"unknown target {kind!r}")
    with open(path, "w") as f:
        f.write(text)
    return argv


# --- /proc ----------------------------------------------------------------------------------

def process_tree(pid):
    """PID and all its descendants (nginx master + worker, valgrind children...)."""
    children = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    tree, todo = [], [pid]
    while todo:
        p = todo.pop()
        tree.append(p)
        todo.extend(children.get(p, []))
    return tree


def cpu_split(pids):
    """(utime, stime) of PIDS (all threads of each), in seconds; vanished pids count 0."""
    user = system = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            user += int(fields[11])     # field 14 of stat(5)
            system += int(fields[12])   # field 15
        except (OSError, IndexError, ValueError):
            pass
    return user / CLK_TCK, system / CLK_TCK


def cpu_seconds(pids):
    """utime+stime of PIDS (all threads of each), in seconds; vanished pids count 0."""
    return sum(cpu_split(pids))


def rss_kib(pids):
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1])
        except OSError:
            pass
    return total


# --- processes ------------------------------------------------------------------------------

def http_get_ok(port, timeout=1.0, headers=(), tls=False):
    """True when GET / answers 200; `headers` are extra "Name: value" lines (the load's own);
    `tls`: over TLS, the certificate not checked."""
    extra = "".join(f"{h}\r\n" for h in headers).encode()
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as raw:
            s = raw
            if tls:
                ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
                ctx.check_hostname = False
                ctx.verify_mode = ssl.CERT_NONE
                s = ctx.wrap_socket(raw, server_hostname="bench")
            s.sendall(b"GET / HTTP/1.1\r\nHost: bench\r\nConnection: close\r\n" + extra
                      + b"\r\n")
            data = b""
            while len(data) < 12:
                chunk = s.recv(4096)
                if not chunk:
                    break
                data += chunk
            return data.startswith(b"HTTP/1.1 200")
    except OSError:
        return False


@dataclass
class Target:
    name: str
    port: int
    proc: subprocess.Popen = None      # None for "direct"
    log: str = ""
    pids: list = field(default_factory=list)
    plain_port: int = 0                # the listener without TLS beside a TLS one (or 0)

    def refresh_pids(self):
        if self.proc is not None:
            self.pids = process_tree(self.proc.pid)
        return self.pids


class Stack:
    def __init__(self, floodgate_bin="", forward_headers=False, taskset=None, keep_dir=False,
                 floodgate_prev_bin="", extra_toml=None, headers=(), tls=False,
                 plain_listener=False, backend_locations=""):
        self.dir = tempfile.mkdtemp(prefix="floodgate-bench-")
        os.chmod(self.dir, 0o755)      # nginx workers run as nobody when started by root
        self.tls = make_certificate(self.dir) if tls else None
        self.floodgate_bin = floodgate_bin
        self.floodgate_prev_bin = floodgate_prev_bin
        self.extra_toml = extra_toml or {}  # "floodgate" / "floodgate-prev" -> TOML appended
        self.forward_headers = forward_headers
        self.headers = tuple(headers)  # header lines the load sends, so readiness sends them too
        self.taskset = taskset or {}   # target name or "backend" -> CPU list for taskset -c
        self.keep_dir = keep_dir
        # With tls: every proxy also listens without TLS on Target.plain_port (and is checked
        # there too when it starts).
        self.plain_listener = plain_listener and tls
        # nginx location blocks added to the backend's server, set before start("backend").
        self.backend_locations = backend_locations
        self.targets = {}
        self._ports = set()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()

    def _port(self):
        port = unused_port(self._ports)
        self._ports.add(port)
        return port

    def start(self, kind, wrapper=(), ready_timeout=15.0):
        """Starts KIND ("backend", "direct" or a proxy) and waits until it answers 200."""
        if kind == "direct":
            self.targets[kind] = Target(kind, self.targets["backend"].port)
            return self.targets[kind]
        port = self._port()
        backend_port = self.targets["backend"].port if kind != "backend" else 0
        binary = self.floodgate_prev_bin if kind == "floodgate-prev" else self.floodgate_bin
        tls = self.tls if kind != "backend" else None
        plain = self._port() if self.plain_listener and kind != "backend" else 0
        argv = write_config(kind, self.dir, port, backend_port, binary,
                            self.forward_headers, self._ports, self.extra_toml.get(kind, ""),
                            tls=tls, plain_port=plain,
                            backend_locations=self.backend_locations)
        cpus = self.taskset.get(kind)
        argv = (["taskset", "-c", cpus] if cpus else []) + list(wrapper) + argv
        log = f"{self.dir}/{kind}.out"
        with open(log, "w") as out:
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=out,
                                    start_new_session=True)
        target = Target(kind, port, proc, log, plain_port=plain)
        self.targets[kind] = target
        deadline = time.monotonic() + ready_timeout
        while not (http_get_ok(port, headers=self.headers, tls=tls is not None)
                   and (not plain or http_get_ok(plain, headers=self.headers))):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{kind} did not start ({shlex.join(argv)}):\n"
                                   + tail(log))
            time.sleep(0.05)
        time.sleep(0.2)                 # let nginx workers finish starting
        target.refresh_pids()
        return target

    def stop(self):
        for target in reversed(list(self.targets.values())):
            if target.proc is not None and target.proc.poll() is None:
                target.proc.send_signal(signal.SIGTERM)
        for target in reversed(list(self.targets.values())):
            if target.proc is None:
                continue
            try:
                target.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
            try:                        # leftovers of the group this Stack created
                os.killpg(target.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            try:
                target.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
        self.targets.clear()
        if not self.keep_dir:
            shutil.rmtree(self.dir, ignore_errors=True)


def tail(path, lines=20):
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-lines:])
    except OSError:
        return ""


def exit_on_signals():
    """Turns SIGTERM/SIGHUP into SystemExit so `with Stack()` cleans up (SIGINT already is)."""
    def handler(signum, _frame):
        raise SystemExit(128 + signum)
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, handler)


def main(argv):
    """`targets.py config KIND DIR PORT BACKEND_PORT [FLOODGATE_BIN]`: writes KIND's config
    into DIR and prints the shell-quoted command that runs it (used by profile.sh). A TOML file
    named by FLOODGATE_EXTRA is appended to floodgate's configuration."""
    if len(argv) < 5 or argv[0] != "config":
        sys.exit(main.__doc__)
    kind, d, port, backend_port = argv[1], argv[2], int(argv[3]), int(argv[4])
    floodgate_bin = argv[5] if len(argv) > 5 else ""
    os.makedirs(d, exist_ok=True)
    extra = os.environ.get("FLOODGATE_EXTRA", "")
    extra_toml = open(extra).read() if extra else ""
    print(shlex.join(write_config(kind, d, port, backend_port, floodgate_bin,
                                  extra_toml=extra_toml)))


if __name__ == "__main__":
    main(sys.argv[1:])
