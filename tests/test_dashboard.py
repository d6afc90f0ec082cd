"""The local dashboard proxy (`workloads.dashboard`), in front of an API-server-style proxy.

The chain under test is the one a user's browser goes through:

    client -> dashboard.serve (127.0.0.1:<free port>) -> AuthProxy (bearer token + PREFIX) -> local Ray head

plus a scripted upstream for what a Ray head cannot show (headers, redirects, streaming, TLS).
Only 127.0.0.1 is contacted.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import http.client
import ipaddress
import json
import logging
import queue
import shlex
import socket
import ssl
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid
from urllib.parse import urlsplit

import pytest
import ray
from aiohttp import web
from dashboard_proxy import AuthProxy

from workloads import dashboard
from workloads import submit as jobs
from workloads.job_spec import JobSpec

PREFIX = "/api/v1/namespaces/ns/services/head:dashboard/proxy"
TOKENS = ("tok-1", "tok-2")

# Ray's own log-tail call trips a deprecation in the installed aiohttp; not ours to fix.
pytestmark = pytest.mark.filterwarnings("ignore:ssl=None is deprecated:DeprecationWarning")


class CountingTokens:
    """A token provider that rotates between valid tokens, as refreshed Google tokens would."""

    def __init__(self, tokens=TOKENS):
        self.tokens = tokens
        self.calls = 0
        self._lock = threading.Lock()

    def __call__(self) -> str:
        with self._lock:
            self.calls += 1
            return self.tokens[self.calls % len(self.tokens)]


@contextlib.contextmanager
def serving(target=dashboard.serve, *args, **kwargs):
    """`target` (`dashboard.serve` or `serve_cluster`) in a thread, on a free port, until the block ends;
    yields its local URL, or raises what it raised before it listened."""
    started, stop = queue.Queue(), threading.Event()

    def run():
        try:
            target(*args, port=kwargs.pop("port", 0), on_ready=started.put, stop_event=stop, **kwargs)
        except BaseException as err:  # handed to the test
            started.put(err)

    thread = threading.Thread(target=run, name="dashboard-proxy", daemon=True)
    thread.start()
    url = started.get(timeout=60)  # serve_cluster first asks the Ray head for its version
    if isinstance(url, BaseException):
        raise url
    try:
        yield url
    finally:
        stop.set()
        thread.join(10)
        assert not thread.is_alive(), f"{target.__name__} did not return after the stop event"


def get(url: str, timeout: float = 30) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as err:
        return err.code, err.read()


@pytest.fixture
def api_server(head):
    proxy = AuthProxy(upstream=head.address, prefix=PREFIX, tokens=set(TOKENS)).start()
    yield proxy
    proxy.stop()


@pytest.fixture
def tokens():
    return CountingTokens()


@pytest.fixture
def local(api_server, tokens):
    with serving(upstream_base=api_server.base + PREFIX, token_provider=tokens) as url:
        yield url


# ------------------------------------------------------------------------------------ against Ray


def test_the_ray_version_is_served_at_the_local_root_with_a_fresh_token_per_request(local, api_server, tokens, caplog):
    caplog.set_level(logging.DEBUG)
    assert urlsplit(local).hostname == "127.0.0.1" and urlsplit(local).port not in (None, 0), local
    for _ in range(3):
        status, body = get(local + "/api/version")
        assert status == 200, f"GET /api/version through the local proxy: HTTP {status}: {body[:300]!r}"
        assert json.loads(body)["ray_version"] == ray.__version__, body
    assert tokens.calls == 3, f"the token provider was called {tokens.calls} times for 3 requests"
    assert [(s.method, s.path, s.authorized) for s in api_server.seen] == [("GET", PREFIX + "/api/version", True)] * 3
    assert not any(t in caplog.text for t in TOKENS), "a token was logged"


def test_a_link_that_already_carries_the_prefix_is_not_prefixed_twice(local, api_server):
    status, body = get(local + PREFIX + "/api/version")
    assert status == 200 and json.loads(body)["ray_version"] == ray.__version__, (status, body[:300])
    assert api_server.seen[-1].path == PREFIX + "/api/version"


def test_a_job_client_on_the_local_proxy_lists_submits_and_follows_jobs(local, api_server, tokens):
    client = jobs.connect(local)
    assert isinstance(client.list_jobs(), list)
    stack = f"t-dash-{uuid.uuid4().hex[:6]}"
    code = "print('through the local proxy')"
    spec = JobSpec.create(
        stack=stack,
        recipe="t",
        entrypoint=f"{shlex.quote(sys.executable)} -c {shlex.quote(code)}",
        runtime_env={"env_vars": {"RAY_OVERRIDE_JOB_RUNTIME_ENV": "1"}},
    )
    assert jobs.submit_attempt(client, spec, 1)[1]
    assert "through the local proxy" in "".join(jobs.logs(client, spec.submission_id, follow=True))
    assert [j.submission_id for j in jobs.list_jobs(client, stack)] == [spec.submission_id]
    assert any(
        s.websocket and s.path == f"{PREFIX}/api/jobs/{spec.submission_id}/logs/tail" for s in api_server.seen
    ), "the log follow did not go over a proxied websocket: " + repr(api_server.seen[-5:])
    assert all(s.authorized for s in api_server.seen), [s for s in api_server.seen if not s.authorized]
    assert tokens.calls == len(api_server.seen), f"{tokens.calls} tokens for {len(api_server.seen)} upstream requests"


def test_a_refused_token_gets_the_api_servers_401_passed_through(api_server):
    with serving(upstream_base=api_server.base + PREFIX, token_provider=lambda: "wrong") as local:
        status, body = get(local + "/api/version")
    assert status == 401, f"expected the upstream's 401, got HTTP {status}: {body[:300]!r}"
    assert json.loads(body)["reason"] == "Unauthorized"
    assert [s.authorized for s in api_server.seen] == [False]


def test_serve_cluster_checks_the_dashboard_first_then_serves_it(api_server, tokens):
    with pytest.raises(jobs.DashboardUnreachable, match="wrong service or namespace"):
        dashboard.serve_cluster(api_server.base, "ns", "other", port=0, token_provider=tokens)
    with serving(dashboard.serve_cluster, api_server.base, "ns", "head", token_provider=tokens) as local:
        status, body = get(local + "/api/version")
    assert status == 200 and json.loads(body)["ray_version"] == ray.__version__, (status, body[:300])


def test_a_taken_port_is_reported_in_one_line(api_server, tokens):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(dashboard.ProxyError, match=f"cannot listen on 127.0.0.1:{port}: already in use"):
            dashboard.serve(api_server.base + PREFIX, token_provider=tokens, port=port)


# ------------------------------------------------------------------------------------ scripted upstream


class Upstream:
    """A scripted upstream on 127.0.0.1 (https with `ssl_context`) that records what reaches it."""

    def __init__(self, ssl_context: ssl.SSLContext | None = None):
        self.ssl_context = ssl_context
        self.requests: list[dict] = []
        self.release = threading.Event()
        self.base = ""

    def start(self) -> "Upstream":
        ready = threading.Event()
        self._loop = asyncio.new_event_loop()

        async def listen() -> None:
            self._runner = web.ServerRunner(web.Server(self._handle), access_log=None, shutdown_timeout=0.5)
            await self._runner.setup()
            await web.TCPSite(self._runner, "127.0.0.1", 0, ssl_context=self.ssl_context).start()

        def run() -> None:
            asyncio.set_event_loop(self._loop)
            self._loop.run_until_complete(listen())
            scheme = "https" if self.ssl_context else "http"
            self.base = f"{scheme}://127.0.0.1:{self._runner.addresses[0][1]}"
            ready.set()
            self._loop.run_forever()

        self._thread = threading.Thread(target=run, daemon=True)
        self._thread.start()
        assert ready.wait(30), "the scripted upstream did not start"
        return self

    def stop(self) -> None:
        self.release.set()
        asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()

    async def _handle(self, request: web.BaseRequest) -> web.StreamResponse:
        self.requests.append(
            {
                "method": request.method,
                "path": request.raw_path,
                "headers": dict(request.headers),
                "body": await request.read(),
            }
        )
        tail = request.path[len(PREFIX) :]
        if tail == "/redirect-absolute":
            raise web.HTTPFound(f"{self.base}{PREFIX}/next?x=1")
        if tail == "/redirect-path":
            raise web.HTTPFound(f"{PREFIX}/next")
        if tail == "/redirect-away":
            raise web.HTTPFound("https://accounts.google.com/")
        if tail == "/stream":
            resp = web.StreamResponse(headers={"Content-Type": "text/plain"})
            await resp.prepare(request)
            await resp.write(b"first\n")
            # The second chunk waits until the client has the first (or the test ends): far longer than
            # the client's read timeout, so a proxy that buffers the response times the client out.
            deadline = time.monotonic() + 120
            while not self.release.is_set() and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            await resp.write(b"second\n")
            await resp.write_eof()
            return resp
        return web.json_response({"ok": True}, headers={"Keep-Alive": "timeout=5", "X-Upstream": "yes"})


@pytest.fixture
def upstream():
    up = Upstream().start()
    yield up
    up.stop()


@pytest.fixture
def scripted(upstream):
    with serving(upstream_base=upstream.base + PREFIX, token_provider=lambda: "tok-s") as url:
        yield url


def local_connection(url: str) -> http.client.HTTPConnection:
    return http.client.HTTPConnection("127.0.0.1", urlsplit(url).port, timeout=30)


def test_method_path_query_and_body_arrive_whole_with_the_bearer_token_and_no_hop_by_hop_headers(scripted, upstream):
    conn = local_connection(scripted)
    conn.request(
        "PUT",
        "/api/x%2Fy?a=1&b=%2F&a=2",
        body=b'{"k": "v"}',
        headers={
            "Content-Type": "application/json",
            "X-Custom": "kept",
            "Authorization": "Basic bG9jYWw6c2VjcmV0",
            "Connection": "keep-alive, X-Listed",
            "X-Listed": "dropped",
            "Keep-Alive": "timeout=5",
            "TE": "trailers",
            "Proxy-Authorization": "Basic eDp5",
        },
    )
    resp = conn.getresponse()
    body = resp.read()
    assert resp.status == 200 and json.loads(body) == {"ok": True}, (resp.status, body)
    assert resp.getheader("X-Upstream") == "yes" and resp.getheader("Keep-Alive") is None, resp.getheaders()
    seen = upstream.requests[-1]
    assert (seen["method"], seen["path"], seen["body"]) == ("PUT", PREFIX + "/api/x%2Fy?a=1&b=%2F&a=2", b'{"k": "v"}')
    headers = {k.lower(): v for k, v in seen["headers"].items()}
    assert headers["authorization"] == "Bearer tok-s", "the client's Authorization must be replaced by the token"
    assert headers["x-custom"] == "kept" and headers["content-type"] == "application/json"
    leaked = {"x-listed", "keep-alive", "te", "proxy-authorization"} & set(headers)
    assert not leaked, f"hop-by-hop headers were forwarded: {sorted(leaked)}"


def test_a_request_for_another_host_name_is_refused_so_a_rebound_web_page_cannot_use_the_token(scripted, upstream):
    conn = local_connection(scripted)
    conn.request("GET", "/api/version", headers={"Host": f"attacker.example:{urlsplit(scripted).port}"})
    resp = conn.getresponse()
    assert (resp.status, upstream.requests) == (403, []), resp.read()
    conn = http.client.HTTPConnection("localhost", urlsplit(scripted).port, timeout=10)
    conn.request("GET", "/api/version")
    assert conn.getresponse().status == 200, "localhost:<port> is the proxy's own address too"


@pytest.mark.parametrize(
    ("path", "location"),
    [
        ("/redirect-absolute", "{local}/next?x=1"),
        ("/redirect-path", "/next"),
        ("/redirect-away", "https://accounts.google.com/"),
    ],
)
def test_redirects_under_the_prefix_point_back_at_the_local_proxy(scripted, path, location):
    conn = local_connection(scripted)
    conn.request("GET", path)
    resp = conn.getresponse()
    resp.read()
    assert resp.status == 302
    assert resp.getheader("Location") == location.format(local=scripted)


@pytest.mark.parametrize(
    ("location", "rewritten"),
    [
        ("https://gke.example:443/p/x", "https://gke.example:443/p/x"),  # another origin (port spelled out)
        ("https://gke.example/p/x/y?q=1#f", "http://127.0.0.1:8265/x/y?q=1#f"),
        ("https://gke.example/p", "http://127.0.0.1:8265/"),
        ("/p/", "/"),
        ("/px", "/px"),  # shares the prefix's characters, not its path
        ("static/app.js", "static/app.js"),
    ],
)
def test_rewrite_location_moves_only_targets_under_the_prefix(location, rewritten):
    assert dashboard.rewrite_location(location, "https://gke.example/p", "http://127.0.0.1:8265") == rewritten


def test_a_streamed_response_arrives_chunk_by_chunk(scripted, upstream):
    conn = local_connection(scripted)
    conn.request("GET", "/stream")
    resp = conn.getresponse()
    assert resp.status == 200
    try:
        first = resp.readline()
    except TimeoutError:
        pytest.fail("the first chunk did not arrive before the upstream finished: the proxy buffers responses")
    assert first == b"first\n"
    upstream.release.set()
    assert resp.read() == b"second\n"


def test_an_unreachable_upstream_is_a_502_that_says_so(tokens):
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        base = f"http://127.0.0.1:{closed.getsockname()[1]}{PREFIX}"
        with serving(upstream_base=base, token_provider=tokens) as local:
            status, body = get(local + "/api/version")
    assert status == 502 and b"unreachable" in body, (status, body)


# ------------------------------------------------------------------------------------ TLS


def _certificates(tmp_path):
    """A CA and a certificate it signed for IP 127.0.0.1, as PEM files (ca, cert, key)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.timezone.utc)
    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "test cluster CA")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_cert_sign=True,
                crl_sign=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    paths = tmp_path / "ca.pem", tmp_path / "cert.pem", tmp_path / "key.pem"
    paths[0].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    paths[1].write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    paths[2].write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return tuple(str(p) for p in paths)


def test_tls_is_verified_with_the_cluster_ca_file_and_an_untrusted_certificate_is_a_502(tmp_path):
    ca, cert, key = _certificates(tmp_path)
    server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_ctx.load_cert_chain(cert, key)
    up = Upstream(server_ctx).start()
    try:
        with serving(upstream_base=up.base + PREFIX, token_provider=lambda: "tok-s", verify=ca) as local:
            status, body = get(local + "/api/version")
            assert status == 200 and json.loads(body) == {"ok": True}, (status, body)
        with serving(upstream_base=up.base + PREFIX, token_provider=lambda: "tok-s") as local:  # public roots
            status, body = get(local + "/api/version")
            assert status == 502 and b"TLS verification" in body and b"cluster CA" in body, (status, body)
    finally:
        up.stop()
    assert len(up.requests) == 1 and up.requests[0]["headers"]["Authorization"] == "Bearer tok-s"


@pytest.mark.parametrize("host", ["0.0.0.0", "192.0.2.10", "example.com"])
def test_the_proxy_refuses_to_listen_anywhere_but_loopback(host):
    with pytest.raises(dashboard.ProxyError, match=f"loopback only; {host!r} is not a loopback address"):
        dashboard.serve("http://127.0.0.1:9/", port=0, token_provider=lambda: "t", host=host)
