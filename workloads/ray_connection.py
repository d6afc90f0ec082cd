"""Connecting to the Ray dashboard's Job Submission API: the clients, their credentials and timeouts.

Everything goes through `ray.job_submission.JobSubmissionClient`, at an explicit address or through
the GKE API server's service proxy

    https://<endpoint>/api/v1/namespaces/<ns>/services/<head-svc>:dashboard/proxy

with a Google OAuth bearer token (the same identity `kubectl` uses on GKE) and the cluster CA.
Nothing is exposed outside the cluster and no port-forward has to stay open. `guard` turns the
transport and HTTP failures of every Job API call into the one-line `workloads.job_errors`.
"""

from __future__ import annotations

import atexit
import base64
import binascii
import contextlib
import os
import socket
import tempfile
from typing import Any, Callable, Collection, Optional

import requests
from ray.job_submission import JobSubmissionClient

try:
    from ray.exceptions import AuthenticationError
except ImportError:  # added with token auth in Ray 2.52 (ray-project/ray#58737); the NeMo-RL v0.4.0
    # image the watcher pod runs on the b200 stack ships Ray 2.46

    class AuthenticationError(Exception):  # type: ignore[no-redef]
        """Never raised by an older Ray's client; keeps `guard`'s except clause valid."""


from workloads.cli_args import without_credentials
from workloads.job_errors import (
    DashboardAuthError,
    DashboardError,
    DashboardUnreachable,
    DuplicateSubmission,
    JobError,
    UnknownJob,
    redacted,
)
from workloads.ray_address import check_endpoint, dashboard_proxy_url, host_port, refuse_bare_scheme

CLOUD_PLATFORM_SCOPE = "https://www.googleapis.com/auth/cloud-platform"
CONNECT_TIMEOUT = 10.0
READ_TIMEOUT = 60.0
"""Seconds a Job API request may wait for the next bytes of an answer. Ray's client sends every
request without a timeout (ray/dashboard/modules/dashboard_sdk.py `_do_request`), so one stalled
answer (a hung proxy, a head under memory pressure) would hang the CLI, the deploy or the watcher."""

TokenProvider = Callable[[], str]


def google_token_provider(scopes: Collection[str] = (CLOUD_PLATFORM_SCOPE,)) -> TokenProvider:
    """Application Default Credentials as a callable returning a valid access token.

    The credentials are loaded once and refreshed only when expired (tokens last about an hour;
    a long `wait` or `logs --follow` outlives one).
    """
    import google.auth
    import google.auth.exceptions
    import google.auth.transport.requests

    try:
        credentials, _ = google.auth.default(scopes=list(scopes))
    except google.auth.exceptions.DefaultCredentialsError as err:
        raise DashboardAuthError("the GKE API server", f"no Google credentials: {str(err).splitlines()[0]}") from None

    def token() -> str:
        if not credentials.valid:
            try:
                credentials.refresh(google.auth.transport.requests.Request())
            except google.auth.exceptions.GoogleAuthError as err:
                raise DashboardAuthError("the GKE API server", f"token refresh failed: {err}") from None
        return credentials.token

    return token


def write_ca_file(ca_cert_b64: str) -> str:
    """Write GKE's base64 `clusterCaCertificate` as a PEM file for `verify`; removed at exit."""
    try:
        pem = base64.b64decode(ca_cert_b64, validate=True)
    except (binascii.Error, ValueError):
        raise JobError(
            "the cluster CA certificate is not valid base64 (expected GKE's masterAuth.clusterCaCertificate)"
        ) from None
    fd, path = tempfile.mkstemp(prefix="nemo-rl-gke-ca-", suffix=".pem")
    with os.fdopen(fd, "wb") as fh:
        fh.write(pem)
    atexit.register(_remove_quietly, path)
    return path


def tls_verify(ca_file: Optional[str] = None, ca_cert_b64: Optional[str] = None) -> bool | str:
    """`verify` for requests/aiohttp: the CA file, GKE's base64 CA written to one, or True (system roots)."""
    if ca_file:
        return ca_file
    return write_ca_file(ca_cert_b64) if ca_cert_b64 else True


def _remove_quietly(path: str) -> None:
    with contextlib.suppress(OSError):
        os.remove(path)


class _TimeoutClient(JobSubmissionClient):
    """A JobSubmissionClient whose every REST call has a timeout.

    Ray's client sends every REST call (the version check in its constructor included) through
    `_do_request`, which passes extra keyword arguments on to `requests.request`; a `timeout` there
    turns a stalled answer into `requests.exceptions.Timeout`, which `guard` reports as
    `DashboardUnreachable`. The signature is taken as `*args, **kwargs` so the older Ray of the
    NeMo-RL images the watcher runs in (2.46, 2.49) works the same.
    """

    def __init__(self, address: str, *, request_timeout: float | tuple[float, float], **kwargs: Any):
        self._request_timeout = request_timeout
        super().__init__(address, **kwargs)

    def _do_request(self, *args: Any, **kwargs: Any) -> requests.Response:
        kwargs.setdefault("timeout", self._request_timeout)
        return super()._do_request(*args, **kwargs)


class _BearerClient(_TimeoutClient):
    """A JobSubmissionClient that puts a fresh bearer token on every request.

    Ray's client keeps its headers in `_headers` and sends every REST call through `_do_request`
    (and the log websocket with the same headers); refreshing there keeps long waits working
    after the first token expires.
    """

    def __init__(
        self,
        address: str,
        *,
        token_provider: TokenProvider,
        verify: bool | str = True,
        request_timeout: float | tuple[float, float],
    ):
        self._token_provider = token_provider
        super().__init__(
            address,
            request_timeout=request_timeout,
            headers={"Authorization": f"Bearer {token_provider()}"},
            verify=verify,
        )

    def _do_request(self, *args: Any, **kwargs: Any) -> requests.Response:
        self._headers["Authorization"] = f"Bearer {self._token_provider()}"
        return super()._do_request(*args, **kwargs)


def connect(
    address: Optional[str] = None,
    *,
    gke_endpoint: Optional[str] = None,
    ca_cert_b64: Optional[str] = None,
    ca_file: Optional[str] = None,
    namespace: str = "nemo-rl",
    service: Optional[str] = None,
    token_provider: Optional[TokenProvider] = None,
    timeout: float = CONNECT_TIMEOUT,
    read_timeout: Optional[float] = None,
) -> JobSubmissionClient:
    """A connected `JobSubmissionClient` (it checks the dashboard's version on creation).

    Either `address` (e.g. ``http://127.0.0.1:8265``), or `gke_endpoint` + `service` to go through
    the API server's service proxy with a Google bearer token (`token_provider`, default Application
    Default Credentials). An IP endpoint also needs the cluster CA (`ca_cert_b64` or `ca_file`); the
    DNS endpoint's certificate is verified with the system roots (`needs_cluster_ca`).
    Every request of the returned client gives up after `timeout` seconds to connect and `read_timeout`
    (default `READ_TIMEOUT`) seconds without an answer (`DashboardUnreachable`): nothing waits forever on a stalled
    dashboard.

    Raises:
        InvalidAddress: the address or endpoint is not a usable http(s) URL (bad port, no host, ...).
        DashboardUnreachable: nothing answers, or the proxy has no such service.
        DashboardAuthError: the credentials were refused.
    """
    if (address is None) == (gke_endpoint is None):
        raise ValueError("pass exactly one of address or gke_endpoint")
    read_timeout = READ_TIMEOUT if read_timeout is None else read_timeout
    if address is not None:
        url = address.rstrip("/")
        refuse_bare_scheme(address, "http, https")
        if "://" not in url:
            url = f"http://{url}"
        host_port(url, address)
        _probe(url, timeout)
        return guard(url, lambda: _TimeoutClient(url, request_timeout=(timeout, read_timeout)))
    if not service:
        raise ValueError("gke_endpoint needs the Ray head service name (service=...)")
    check_endpoint(gke_endpoint)
    url = dashboard_proxy_url(gke_endpoint, namespace, service)
    verify = tls_verify(ca_file, ca_cert_b64)
    _probe(url, timeout)
    provider = token_provider or google_token_provider()
    return guard(
        url, lambda: _BearerClient(url, token_provider=provider, verify=verify, request_timeout=(timeout, read_timeout))
    )


def _probe(url: str, timeout: float) -> None:
    """Fail fast on an address nothing listens on; requests would wait for the OS TCP timeout."""
    host, port = host_port(url)
    try:
        with socket.create_connection((host, port), timeout=timeout):
            pass
    except OSError as err:
        raise DashboardUnreachable(url, err.strerror or str(err)) from None


def guard(address: str, fn: Callable[[], Any], job_id: Optional[str] = None) -> Any:
    """Run one Job API call, turning transport and HTTP failures into `JobError`s."""
    try:
        return fn()
    except requests.exceptions.SSLError:  # before ConnectionError: it is a subclass of it
        raise DashboardUnreachable(address, "TLS verification failed; is the cluster CA right?") from None
    except requests.exceptions.ReadTimeout:
        raise DashboardUnreachable(address, "ReadTimeout: the request got no answer in time") from None
    except (requests.exceptions.ConnectionError, requests.exceptions.Timeout, ConnectionError) as err:
        raise DashboardUnreachable(address, type(err).__name__) from None
    except AuthenticationError:
        raise DashboardAuthError(address, "HTTP 401/403") from None
    except requests.exceptions.HTTPError as err:
        code = err.response.status_code if err.response is not None else 0
        if code in (401, 403):
            raise DashboardAuthError(address, f"HTTP {code}") from None
        raise DashboardUnreachable(address, f"HTTP {code} from the version check") from None
    except RuntimeError as err:
        text = str(err)
        if job_id is not None and "404" in text and "does not exist" in text:
            raise UnknownJob(job_id, address) from None
        if job_id is not None and "already exists" in text:
            # Ray refuses a duplicate submission id (JobManager.submit_job: "Job with submission_id ...
            # already exists"), but the dashboard returns it as an HTTP 500 whose body is the whole
            # traceback: the words are on its last line, not its first (ray 2.46 ... 2.54).
            raise DuplicateSubmission(job_id, address) from None
        if "Version check returned 404" in text:
            raise DashboardUnreachable(address, "no Ray dashboard at this path (wrong service or namespace?)") from None
        detail = without_credentials(text.splitlines()[0][:300])
        raise DashboardError(f"Ray Job API request to {redacted(address)} failed: {detail}") from None
