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
import functools
import json
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


from workloads import google_credentials
from workloads.cli_args import shown_line
from workloads.deadline import DeadlinePassed, within
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
REQUEST_DEADLINE = 2 * READ_TIMEOUT
"""The most one Job API request may take in all: `READ_TIMEOUT` bounds each wait for a byte, so a server that
trickles a byte every few seconds would hold a request (and the CLI) without end. A whole log comes well within it."""
TOKEN_TIMEOUT = 30.0
"""A token request's bound (google-auth's own is 120 s, google/auth/transport/requests.py `_DEFAULT_TIMEOUT`)."""

TokenProvider = Callable[[], str]


def google_token_provider(scopes: Collection[str] = (CLOUD_PLATFORM_SCOPE,)) -> TokenProvider:
    """Application Default Credentials as a callable returning an access token, refreshed when expired. The ADC
    file is checked first (`google_credentials`: a directory or a FIFO as the key or an external account's source
    is one line, not a traceback or a wait); every google-auth failure, at load (an external account fetches its
    token there already) or at refresh, is a `DashboardAuthError` of one line that repeats no credential."""
    import google.auth
    import google.auth.exceptions
    import google.auth.transport.requests

    where = "the GKE API server"
    # A dead credential_source.url, an unreadable source file; google-auth raises them unwrapped.
    failures = (google.auth.exceptions.GoogleAuthError, OSError, ValueError)
    try:
        google_credentials.check_credentials_file(os.environ)
        credentials, _ = google.auth.default(scopes=list(scopes))
    except google_credentials.BadCredentialsFile as err:
        raise DashboardAuthError(where, f"no usable Google credentials: {err}") from None
    except failures as err:
        raise DashboardAuthError(where, f"no Google credentials: {google_credentials.message(err)}") from None

    def token() -> str:
        if not credentials.valid:
            try:
                credentials.refresh(functools.partial(google.auth.transport.requests.Request(), timeout=TOKEN_TIMEOUT))
            except failures as err:
                raise DashboardAuthError(where, f"token refresh failed: {google_credentials.message(err)}") from None
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
        request = super()._do_request
        # Read whole within the deadline (`.content`), so no caller reads the rest of a trickle after it.
        return within(REQUEST_DEADLINE, lambda: _read_whole(request(*args, **kwargs)), "the request")


def _read_whole(response: requests.Response) -> requests.Response:
    response.content  # noqa: B018 (reads and keeps the body)
    return response


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
    except DeadlinePassed as err:  # a trickle: bytes keep coming, too slowly to end
        raise DashboardUnreachable(address, str(err)) from None
    except (requests.exceptions.ConnectionError, requests.exceptions.Timeout, ConnectionError) as err:
        raise DashboardUnreachable(address, type(err).__name__) from None
    except AuthenticationError:
        raise DashboardAuthError(address, "HTTP 401/403") from None
    except requests.exceptions.HTTPError as err:
        code = err.response.status_code if err.response is not None else 0
        if code in (401, 403):
            raise DashboardAuthError(address, f"HTTP {code}") from None
        raise DashboardUnreachable(address, f"HTTP {code} from the version check") from None
    except NOT_RAY as err:  # Ray's client read an answer of another shape: Jupyter's /api/version, a web page
        raise DashboardUnreachable(address, f"not a Ray dashboard: {_shape_error(err)}") from None
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
        detail = shown_line(text.strip().splitlines()[0] if text.strip() else type(err).__name__, 300)
        raise DashboardError(f"Ray Job API request to {redacted(address)} failed: {detail}") from None


def _not_ray_errors() -> tuple[type[BaseException], ...]:
    """What Ray's client raises reading an answer that is not a Ray dashboard's: JSON that is not there (a web
    page), a key that is not (`r.json()["ray_version"]`), a list where an object is (`JobDetails(**...)`), a model
    its fields do not fit (pydantic's ValidationError, a ValueError) (ray-project/ray
    python/ray/dashboard/modules/dashboard_sdk.py `_check_connection_and_version`,
    python/ray/dashboard/modules/job/sdk.py `list_jobs`, `get_job_info`, Ray 2.60.0)."""
    errors: list[type[BaseException]] = [json.JSONDecodeError, KeyError, TypeError, AttributeError]
    with contextlib.suppress(ImportError):
        from pydantic import ValidationError

        errors.append(ValidationError)
    return tuple(errors)


NOT_RAY = _not_ray_errors()


def _shape_error(err: BaseException) -> str:
    if isinstance(err, json.JSONDecodeError):
        return "it answered with something other than JSON (a web page?)"
    if isinstance(err, KeyError):
        return f"its answer lacks {shown_line(repr(err.args[0]) if err.args else 'a field', 80)}"
    return "its answer is not of the shape a Ray dashboard sends"
