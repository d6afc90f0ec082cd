"""A loopback HTTP server that accepts requests and never answers them (optionally except Ray's
version check), for the tests that every Ray Job API call gives up instead of hanging.

Only the network is fake: the code under test talks to it through its real HTTP clients.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

RAY_VERSION = "2.60.0"


class StalledServer:
    """`with StalledServer(answer_version=True) as url:` — a dashboard that answers `/api/version`
    (so a client can be created) and stalls on every other request; with False it stalls on all."""

    def __init__(self, *, answer_version: bool):
        self.answer_version = answer_version
        self._release = threading.Event()
        release, answer = self._release, answer_version

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 (http.server's naming)
                if answer and self.path.rstrip("/").endswith("/api/version"):
                    body = json.dumps({"version": "4", "ray_version": RAY_VERSION, "ray_commit": "test"}).encode()
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                    return
                release.wait(60)  # the stall: no status line, no headers, until the test ends

            do_POST = do_GET

            def log_message(self, *args):
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> str:
        self._thread.start()
        return self.url

    def __exit__(self, *exc) -> None:
        self._release.set()
        self._server.shutdown()
        self._server.server_close()
