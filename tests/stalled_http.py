"""A loopback HTTP server that accepts requests and never answers them (optionally except Ray's
version check), or answers one byte at a time (`trickle`), for the tests that every Ray Job API call gives
up instead of hanging; and `AnsweringServer`, a server that is not Ray (Jupyter, a web page).

Only the network is fake: the code under test talks to it through its real HTTP clients.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Optional

RAY_VERSION = "2.60.0"


class _LoopbackServer:
    """A threaded HTTP server on 127.0.0.1 with `handler`, started by `with` (which gives its URL), stopped at exit."""

    def __init__(self, handler: type[BaseHTTPRequestHandler]):
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._server.daemon_threads = True
        # Polled every 50 ms, not 0.5 s: `shutdown` waits for the next poll.
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> str:
        self._thread.start()
        return self.url

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()


class StalledServer(_LoopbackServer):
    """`with StalledServer(answer_version=True) as url:` — a dashboard that answers `/api/version`
    (so a client can be created) and stalls on every other request; with False it stalls on all. With
    `trickle` (seconds) it answers those requests instead, one byte every `trickle` seconds, `trickle_bytes` in
    all: each read gets a byte long before any read timeout, so only an overall deadline ends the request."""

    def __init__(self, *, answer_version: bool, trickle: Optional[float] = None, trickle_bytes: int = 40):
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
                if trickle is not None:
                    reply = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n[]"
                    for byte in reply.ljust(trickle_bytes, b" ")[:trickle_bytes]:
                        if release.is_set():
                            return
                        self.wfile.write(bytes([byte]))
                        self.wfile.flush()
                        time.sleep(trickle)
                    return
                release.wait(60)  # the stall: no status line, no headers, until the test ends

            do_POST = do_GET

            def log_message(self, *args):
                pass

        super().__init__(Handler)

    def __exit__(self, *exc) -> None:
        self._release.set()  # the stalled handlers return before the server stops
        super().__exit__(*exc)


class AnsweringServer(_LoopbackServer):
    """`with AnsweringServer({"/api/version": (200, "application/json", b"{}")}) as url:` answers each path (any
    method; a path not listed: `default`) with its status, content type and body."""

    def __init__(self, routes: dict[str, tuple[int, str, bytes]], default: Optional[tuple[int, str, bytes]] = None):
        fallback = default or (404, "text/plain", b"not found")

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 (http.server's naming)
                status, content_type, body = routes.get(self.path.split("?")[0].rstrip("/"), fallback)
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_POST = do_GET

            def log_message(self, *args):
                pass

        super().__init__(Handler)
