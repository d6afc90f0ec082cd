"""Open the Ray dashboard of a GKE cluster on http://127.0.0.1:<port>, without kubectl (`jobctl dashboard`).

A local reverse proxy forwards each request (websockets included) to the API server's service proxy
(`ray_address.dashboard_proxy_url`) with a fresh Google token (a tab outlives the ~1 h token), verifying TLS;
it needs only Application Default Credentials and works through the DNS endpoint. Upstream redirects are
moved to the local root. Only loopback listens, a foreign Host is refused (DNS rebinding would act with the
user's token), hop-by-hop headers (RFC 9110 7.6.1) are dropped and the token is never logged.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import ssl
import threading
from typing import Callable, Optional, Union
from urllib.parse import urlsplit, urlunsplit

import aiohttp
import certifi
from aiohttp import web
from yarl import URL

from workloads.job_errors import JobError
from workloads.ray_address import dashboard_proxy_url, is_loopback, needs_cluster_ca
from workloads.ray_connection import CONNECT_TIMEOUT, TokenProvider, connect, google_token_provider, tls_verify

DEFAULT_PORT = 8265  # the dashboard's own, so `http://127.0.0.1:8265` works as with a port-forward
LOCALHOST = "127.0.0.1"
SHUTDOWN_GRACE = 1.0
"""Seconds open requests (a log stream, a websocket) get to finish when the proxy stops."""

# RFC 9110 7.6.1 connection-specific fields, plus Proxy-Connection and Trailers seen in the wild.
HOP_BY_HOP = frozenset(
    "connection keep-alive proxy-connection proxy-authenticate proxy-authorization te trailer trailers "
    "transfer-encoding upgrade".split()
)
# Never sent upstream: Host/Authorization are replaced, `Expect: 100-continue` is answered locally.
_NOT_FORWARDED = HOP_BY_HOP | {"host", "authorization", "expect"}

Verify = Union[bool, str]
"""True: the public roots; a path: that PEM CA file; False: no verification (tests only)."""

log = logging.getLogger(__name__)


class ProxyError(JobError):
    """The local proxy could not start (the port is taken, no CA for an IP endpoint)."""


def ssl_context(verify: Verify) -> Union[ssl.SSLContext, bool]:
    """The client TLS setting for `verify`: a CA file, the public roots (certifi's, as `requests` uses in
    `workloads.ray_connection.connect`), or False."""
    if verify is False:
        return False
    return ssl.create_default_context(cafile=verify if isinstance(verify, str) else certifi.where())


def _connection_listed(headers) -> set[str]:
    """Header names a `Connection` header marks as hop-by-hop for this connection."""
    return {
        name.strip().lower() for value in headers.getall("Connection", ()) for name in value.split(",") if name.strip()
    }


def forwarded_request_headers(headers) -> dict[str, str]:
    """The client's end-to-end headers (no hop-by-hop, Host, Authorization or websocket handshake)."""
    drop = _NOT_FORWARDED | _connection_listed(headers)
    out: dict[str, str] = {}
    for name, value in headers.items():
        low = name.lower()
        if low in drop or low.startswith("sec-websocket-"):
            continue
        out[name] = f"{out[name]}, {value}" if name in out else value
    return out


def rewrite_location(location: str, upstream_base: str, local_base: str) -> str:
    """A redirect target under the upstream prefix moved to the local proxy (`https://<endpoint>/<prefix>/x?q`
    to `<local_base>/x?q`, `/<prefix>/x` to `/x`); relative targets and targets elsewhere stay."""
    up = urlsplit(upstream_base)
    prefix = up.path.rstrip("/")
    loc = urlsplit(location)
    absolute = bool(loc.scheme or loc.netloc)
    elsewhere = absolute and (loc.scheme.lower(), loc.netloc.lower()) != (up.scheme.lower(), up.netloc.lower())
    if elsewhere or not loc.path.startswith("/") or not _under(loc.path, prefix):
        return location
    rest = urlunsplit(("", "", loc.path[len(prefix) :] or "/", loc.query, loc.fragment))
    return local_base.rstrip("/") + rest if absolute else rest


def _under(path: str, prefix: str) -> bool:
    return not prefix or path == prefix or path.startswith(prefix + "/")


def _error(status: int, message: str) -> web.Response:
    return web.Response(status=status, text=f"nemo-rl-gke dashboard proxy: {message}\n")


class _Forwarder:
    """The request handler: one upstream session, a token per request."""

    def __init__(self, upstream_base: str, token_provider: TokenProvider, verify: Verify):
        self.base = upstream_base.rstrip("/")
        parts = urlsplit(self.base)
        self.origin = f"{parts.scheme}://{parts.netloc}"
        self.prefix = parts.path
        self.token_provider = token_provider
        self.verify = verify
        self.session: Optional[aiohttp.ClientSession] = None
        self.local_hosts: frozenset[str] = frozenset()  # the Host headers accepted, set once bound
        self._token_lock: Optional[asyncio.Lock] = None

    async def open(self) -> None:
        self._token_lock = asyncio.Lock()
        self.session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(ssl=ssl_context(self.verify)),
            timeout=aiohttp.ClientTimeout(total=None, connect=CONNECT_TIMEOUT),
            auto_decompress=False,  # bytes pass through as sent, Content-Encoding/Length stay right
            skip_auto_headers=("Accept-Encoding", "Content-Type"),  # only what the client sent
            cookie_jar=aiohttp.DummyCookieJar(),  # cookies belong to the browser, not to the proxy
        )

    async def close(self) -> None:
        if self.session is not None:
            await self.session.close()

    def target(self, raw_path: str) -> URL:
        """The upstream URL of a local path (with query), still percent-encoded as received."""
        if self.prefix and _under(raw_path.split("?", 1)[0], self.prefix):
            return URL(self.origin + raw_path, encoded=True)
        return URL(self.base + raw_path, encoded=True)

    async def token(self) -> str:
        # Providers may block (a Google refresh is an HTTP call): off the loop, one at a time.
        assert self._token_lock is not None
        async with self._token_lock:
            return await asyncio.get_running_loop().run_in_executor(None, self.token_provider)

    async def handle(self, request: web.Request) -> web.StreamResponse:
        if request.headers.get("Host", "").lower() not in self.local_hosts:
            # A web page can point its own host name at 127.0.0.1 (DNS rebinding) and would then
            # reach the cluster with the user's token; the browser still sends that page's Host.
            return _error(403, "the Host header must be the proxy's own address (127.0.0.1:<port> or localhost:<port>)")
        try:
            token = await self.token()
        except Exception as err:  # the provider's message (never the token) tells what to do
            log.warning("no token for the dashboard proxy: %s", err)
            detail = str(err).splitlines()[0] if isinstance(err, JobError) else type(err).__name__
            return _error(502, f"could not get a Google access token: {detail}")
        headers = forwarded_request_headers(request.headers)
        headers["Authorization"] = f"Bearer {token}"
        target = self.target(request.raw_path)
        try:
            if request.headers.get("Upgrade", "").lower() == "websocket":
                return await self._websocket(request, target, headers)
            return await self._http(request, target, headers)
        except aiohttp.ClientSSLError as err:
            log.warning("TLS to %s failed: %s", self.origin, err)
            return _error(502, f"TLS verification of {self.origin} failed; is the cluster CA right?")
        except (aiohttp.ClientConnectionError, asyncio.TimeoutError) as err:
            log.warning("%s %s: upstream %s unreachable: %r", request.method, request.path, self.origin, err)
            return _error(502, f"the GKE API server at {self.origin} is unreachable ({type(err).__name__})")

    async def _http(self, request: web.Request, target: URL, headers: dict[str, str]) -> web.StreamResponse:
        assert self.session is not None
        data = request.content if request.body_exists else None
        async with self.session.request(
            request.method, target, headers=headers, data=data, allow_redirects=False
        ) as up:
            drop = HOP_BY_HOP | _connection_listed(up.headers)
            response = web.StreamResponse(status=up.status, reason=up.reason)
            local_base = f"{request.scheme}://{request.host}"
            for name, value in up.headers.items():
                if name.lower() in drop:
                    continue
                if name.lower() == "location":
                    value = rewrite_location(value, self.base, local_base)
                response.headers.add(name, value)
            await response.prepare(request)
            try:
                async for chunk in up.content.iter_any():  # streamed as it arrives (log tails, SSE)
                    await response.write(chunk)
            except (aiohttp.ClientError, ConnectionError) as err:
                # One side broke off mid-body. Drop the local connection, so that the client sees a
                # truncated response rather than a clean end.
                log.info("%s %s: stream ended early: %s", request.method, request.path, type(err).__name__)
                if request.transport is not None:
                    request.transport.close()
                return response
            await response.write_eof()
            return response

    async def _websocket(self, request: web.Request, target: URL, headers: dict[str, str]) -> web.StreamResponse:
        assert self.session is not None
        protocols = [p.strip() for p in request.headers.get("Sec-WebSocket-Protocol", "").split(",") if p.strip()]
        url = target.with_scheme("wss" if target.scheme == "https" else "ws")
        try:
            up = await self.session.ws_connect(url, headers=headers, protocols=protocols, max_msg_size=0)
        except aiohttp.WSServerHandshakeError as err:  # e.g. the API server's 401/403: pass it on
            return web.Response(status=err.status, text=f"{err.message}\n")
        async with up:
            down = web.WebSocketResponse(protocols=(up.protocol,) if up.protocol else (), max_msg_size=0)
            await down.prepare(request)

            async def pump(src, dst) -> None:
                async for msg in src:
                    if msg.type == aiohttp.WSMsgType.TEXT:
                        await dst.send_str(msg.data)
                    elif msg.type == aiohttp.WSMsgType.BINARY:
                        await dst.send_bytes(msg.data)
                    else:
                        break
                await dst.close()

            tasks = [asyncio.ensure_future(pump(up, down)), asyncio.ensure_future(pump(down, up))]
            try:
                await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for task in tasks:
                    task.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)
            await down.close()
            return down


async def _serve(
    upstream_base: str,
    port: int,
    token_provider: TokenProvider,
    verify: Verify,
    on_ready: Optional[Callable[[str], None]],
    stop_event: Optional[threading.Event],
    host: str,
) -> None:
    forwarder = _Forwarder(upstream_base, token_provider, verify)
    await forwarder.open()
    runner = web.ServerRunner(web.Server(forwarder.handle), access_log=None, shutdown_timeout=SHUTDOWN_GRACE)
    try:
        await runner.setup()
        try:
            await web.TCPSite(runner, host, port).start()
        except OSError as err:
            taken = err.errno == errno.EADDRINUSE
            reason = "already in use (another proxy or a kubectl port-forward?)" if taken else err.strerror
            raise ProxyError(
                f"cannot listen on {host}:{port}: {reason}; pick another port (0 picks a free one)"
            ) from None
        bound = runner.addresses[0][1]
        forwarder.local_hosts = frozenset(f"{name}:{bound}" for name in (host, "localhost", LOCALHOST))
        log.info("dashboard proxy on http://%s:%d -> %s", host, bound, forwarder.base)
        if on_ready is not None:
            on_ready(f"http://{host}:{bound}")
        while stop_event is None or not stop_event.is_set():  # until Ctrl-C or the event
            await asyncio.sleep(0.1)
    finally:
        await runner.cleanup()
        await forwarder.close()


def serve(
    upstream_base: str,
    *,
    port: int = DEFAULT_PORT,
    token_provider: TokenProvider,
    verify: Verify = True,
    on_ready: Optional[Callable[[str], None]] = None,
    stop_event: Optional[threading.Event] = None,
    host: str = LOCALHOST,
) -> None:
    """Forward http://`host`:`port` (0: a free port) to the dashboard at `upstream_base`, with a
    `token_provider()` token on every request, until Ctrl-C or `stop_event`; `on_ready(local_url)` once it
    listens. Raises `ProxyError` when the port is taken or `host` is not loopback (the proxy acts with the
    user's Google identity: no other machine may reach it)."""
    if not is_loopback(host):
        raise ProxyError(f"the dashboard proxy listens on loopback only; {host!r} is not a loopback address")
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(_serve(upstream_base, port, token_provider, verify, on_ready, stop_event, host))


def serve_cluster(
    endpoint: str,
    namespace: str,
    service: str,
    *,
    ca_file: Optional[str] = None,
    ca_cert_b64: Optional[str] = None,
    port: int = DEFAULT_PORT,
    token_provider: Optional[TokenProvider] = None,
    on_ready: Optional[Callable[[str], None]] = None,
    stop_event: Optional[threading.Event] = None,
) -> None:
    """`serve` the dashboard of head service `service` in `namespace` behind GKE endpoint `endpoint` (an IP
    endpoint needs the cluster CA). Its version is fetched first (`connect`), so a wrong service, missing
    RBAC or bad credentials fail at once with a one-line `JobError` instead of in the browser."""
    if needs_cluster_ca(endpoint) and not (ca_file or ca_cert_b64):
        raise ProxyError(f"the IP endpoint {endpoint} needs the cluster CA (ca_file or ca_cert_b64)")
    verify: Verify = tls_verify(ca_file, ca_cert_b64)
    provider = token_provider or google_token_provider()
    connect(
        gke_endpoint=endpoint,
        namespace=namespace,
        service=service,
        ca_file=verify if isinstance(verify, str) else None,
        token_provider=provider,
    )
    serve(
        dashboard_proxy_url(endpoint, namespace, service),
        port=port,
        token_provider=provider,
        verify=verify,
        on_ready=on_ready,
        stop_event=stop_event,
    )
