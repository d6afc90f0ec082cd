"""Connecting to the Ray dashboard's Job Submission API: the clients, their credentials and timeouts.

At an explicit address, or through the GKE API server's service proxy
(`https://<endpoint>/api/v1/namespaces/<ns>/services/<head-svc>:dashboard/proxy`) with a Google bearer
token and the cluster CA. `guard` turns every Job API failure into a one-line `workloads.job_errors`.
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
"""Ray's client sends every request without a timeout (ray/dashboard/modules/dashboard_sdk.py `_do_request`)."""

TokenProvider = Callable[[], str]


def google_token_provider(scopes: Collection[str] = (CLOUD_PLATFORM_SCOPE,)) -> TokenProvider:
    """Application Default Credentials as a callable returning an access token, refreshed when expired."""
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


def tls_verify(ca_file: Optional[str] = None, ca_cert_b64: Optional[str] = None) -> bool | str:
    """`verify` for requests/aiohttp: the CA file, GKE's base64 CA written to one (removed at exit), or True."""
    if ca_file or not ca_cert_b64:
        return ca_file or True
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


def _remove_quietly(path: str) -> None:
    with contextlib.suppress(OSError):
        os.remove(path)


class _Client(JobSubmissionClient):
    """A JobSubmissionClient with a timeout on every REST call (`_do_request` passes it to `requests.request`)
    and, with `token_provider`, a fresh bearer token on each (its websocket sends the same headers). Taken as
    `*args, **kwargs`: the older Ray of the NeMo-RL images (2.46, 2.49) works the same."""

    def __init__(
        self,
        address: str,
        *,
        request_timeout: float | tuple[float, float],
        token_provider: Optional[TokenProvider] = None,
        **kwargs: Any,
    ):
        self._request_timeout, self._token_provider = request_timeout, token_provider
        if token_provider is not None:
            kwargs["headers"] = {"Authorization": f"Bearer {token_provider()}"}
        super().__init__(address, **kwargs)

    def _do_request(self, *args: Any, **kwargs: Any) -> requests.Response:
        kwargs.setdefault("timeout", self._request_timeout)
        if self._token_provider is not None:
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
    """A connected `JobSubmissionClient`: at `address`, or through `gke_endpoint`'s service proxy to `service`
    with a Google bearer token (an IP endpoint also needs the cluster CA). Every request gives up after
    `timeout` s to connect and `read_timeout` s without an answer. Raises `InvalidAddress`,
    `DashboardUnreachable`, `DashboardAuthError`."""
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
        return guard(url, lambda: _Client(url, request_timeout=(timeout, read_timeout)))
    if not service:
        raise ValueError("gke_endpoint needs the Ray head service name (service=...)")
    check_endpoint(gke_endpoint)
    url = dashboard_proxy_url(gke_endpoint, namespace, service)
    verify = tls_verify(ca_file, ca_cert_b64)
    _probe(url, timeout)
    provider = token_provider or google_token_provider()
    return guard(
        url, lambda: _Client(url, token_provider=provider, verify=verify, request_timeout=(timeout, read_timeout))
    )


def _probe(url: str, timeout: float) -> None:
    """Fail fast on an address nothing listens on."""
    host, port = host_port(url)
    try:
        with socket.create_connection((host, port), timeout=timeout):
            pass
    except OSError as err:
        raise DashboardUnreachable(url, err.strerror or str(err)) from None


def guard(address: str, fn: Callable[[], Any], job_id: Optional[str] = None) -> Any:
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
            # JobManager.submit_job's "Job with submission_id ... already exists" comes as an HTTP 500 whose
            # body is the whole traceback: the words are on its last line (ray 2.46 ... 2.54).
            raise DuplicateSubmission(job_id, address) from None
        if "Version check returned 404" in text:
            raise DashboardUnreachable(address, "no Ray dashboard at this path (wrong service or namespace?)") from None
        detail = without_credentials(text.splitlines()[0][:300])
        raise DashboardError(f"Ray Job API request to {redacted(address)} failed: {detail}") from None
