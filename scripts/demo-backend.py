#!/usr/bin/env python3
"""A tiny demo backend for floodgate (python3 standard library only).

Serves plain HTTP/1.1 on every address given on the command line (default 127.0.0.1:9000 and
127.0.0.1:9001, the two servers of config/floodgate.toml) and answers every request with a
short text page naming the backend that answered, the method and the path, so you can watch
floodgate balance between them:

    scripts/demo-backend.py &                       # or: scripts/demo-backend.py 127.0.0.1:9100
    curl -i http://127.0.0.1:8080/hello

Stops on SIGINT or SIGTERM.
"""

import argparse
import http.server
import signal
import socketserver
import sys
import threading


class DemoHandler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, so floodgate can pool connections
    server_version = "floodgate-demo-backend"

    def _answer(self):
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        body = ("Hello from demo backend %s\nmethod: %s\npath: %s\n"
                % (self.server.name, self.command, self.path)).encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("X-Demo-Backend", self.server.name)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = do_HEAD = _answer

    def log_message(self, fmt, *args):
        sys.stderr.write("[%s] %s\n" % (self.server.name, fmt % args))


class DemoServer(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True


def parse_address(text):
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit():
        raise argparse.ArgumentTypeError("expected HOST:PORT, got %r" % text)
    return host.strip("[]") or "127.0.0.1", int(port)


def main():
    parser = argparse.ArgumentParser(description="floodgate demo backend")
    parser.add_argument("addresses", nargs="*", type=parse_address, metavar="HOST:PORT",
                        default=[("127.0.0.1", 9000), ("127.0.0.1", 9001)],
                        help="addresses to serve on (default: 127.0.0.1:9000 127.0.0.1:9001)")
    args = parser.parse_args()

    servers = []
    for host, port in args.addresses:
        try:
            server = DemoServer((host, port), DemoHandler)
        except OSError as e:
            sys.exit("demo-backend: cannot listen on %s:%d: %s" % (host, port, e.strerror))
        server.name = "%s:%d" % (host, port)
        servers.append(server)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        print("demo backend listening on http://%s/" % server.name, flush=True)

    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    stop.wait()
    for server in servers:
        server.shutdown()
        server.server_close()


if __name__ == "__main__":
    main()
