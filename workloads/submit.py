"""Submit, watch and stop NeMo-RL jobs on the Ray dashboard's Job Submission API.

Everything goes through `ray.job_submission.JobSubmissionClient`. The dashboard is reached
either at an explicit address (a `kubectl port-forward`, or a test head) or through the GKE API
server's service proxy:

    https://<endpoint>/api/v1/namespaces/<ns>/services/<head-svc>:dashboard/proxy

with a Google OAuth bearer token (the same identity `kubectl` uses on GKE) and the cluster CA.
Nothing is exposed outside the cluster and no port-forward has to stay open.

Submission is idempotent: a `JobSpec` has a deterministic id, and `submit` finds the stack's
jobs by their metadata. The same spec already pending/running/succeeded is returned as is; after
a failure or a stop the same spec is submitted again as `<id>-r<N>` (Ray never reuses an id),
which resumes from the checkpoint dir; a job of the same stack with another spec that is still
running is stopped first, because a stack's GPU pool holds one training job.

Errors a user can act on are `JobError`s with a one-line message: `InvalidAddress`,
`DashboardUnreachable`, `DashboardAuthError`, `UnknownJob`, `WaitTimeout`, `DashboardError`.
"""

from __future__ import annotations

import asyncio
import atexit
import base64
import binascii
import contextlib
import ipaddress
import os
import re
import socket
import tempfile
import time
from dataclasses import dataclass
from typing import Any, AsyncIterator, Callable, Collection, Iterator, Optional
from urllib.parse import quote, urlsplit

import requests
from ray.job_submission import JobDetails, JobStatus, JobSubmissionClient

try:
    from ray.exceptions import AuthenticationError
except ImportError:  # added with token auth in Ray 2.52 (ray-project/ray#58737); the NeMo-RL v0.4.0
    # image the watcher pod runs on the b200 stack ships Ray 2.46

    class AuthenticationError(Exception):  # type: ignore[no-redef]
        """Never raised by an older Ray's client; keeps `_guard`'s except clause valid."""


from workloads.cli_args import RUN
from workloads.job_types import META_ATTEMPT, META_RECIPE, META_SPEC_HASH, META_STACK, JobSpec

CLOUD_PLATFORM_SCOPE = "https://www.googleapis.com/auth/cloud-platform"
DASHBOARD_PORT_NAME = "dashboard"
"""The name KubeRay gives the head service's dashboard port (8265)."""
TERMINAL = frozenset({JobStatus.STOPPED, JobStatus.SUCCEEDED, JobStatus.FAILED})
RETRYABLE = frozenset({JobStatus.STOPPED, JobStatus.FAILED})
"""A same-spec job that ended like this is submitted again (as a new attempt) by `submit`."""
CONNECT_TIMEOUT = 10.0
LOG_IDLE_TIMEOUT = 120.0
"""Seconds `logs --follow` waits on Ray's log websocket without a chunk before it switches to polling
the log over HTTP (which has `READ_TIMEOUT`, and notices a job that ended): a quiet job costs a switch,
a stalled websocket no longer hangs the CLI."""
READ_TIMEOUT = 60.0
"""Seconds a Job API request may wait for the next bytes of an answer. Ray's client sends every
request without a timeout (ray/dashboard/modules/dashboard_sdk.py `_do_request`), so one stalled
answer (a hung proxy, a head under memory pressure) would hang the CLI, the deploy or the watcher."""

TokenProvider = Callable[[], str]


class JobError(Exception):
    """A job operation failed for a reason the user can act on; `str()` is one line."""


class InvalidAddress(JobError):
    """A dashboard address or cluster endpoint that cannot be a URL to connect to; raised before any network use.
    `address` is the value as the user wrote it with any `user:password@` masked: show that, never the raw flag."""

    def __init__(self, address: str, reason: str):
        self.address, self.reason = redacted(address), reason
        super().__init__(f"{self.address}: {reason}")


class DashboardUnreachable(JobError):
    """No Ray dashboard answered at the address."""

    def __init__(self, address: str, detail: str = ""):
        self.address = address
        hint = (
            "check that the cluster is up and the Ray head pod is running "
            "(`kubectl -n <namespace> get pods -l ray.io/node-type=head`), "
            "and that the address/port (or port-forward) is right"
        )
        super().__init__(f"Ray dashboard unreachable at {address}{f' ({detail})' if detail else ''}: {hint}")


class DashboardAuthError(JobError):
    """The dashboard (or the API server in front of it) refused our credentials."""

    def __init__(self, address: str, detail: str = ""):
        self.address = address
        super().__init__(
            f"not authorized at {address}{f' ({detail})' if detail else ''}: run "
            "`gcloud auth application-default login` and make sure your identity may proxy to "
            "services in the namespace (RBAC services/proxy, e.g. roles/container.developer)"
        )


class UnknownJob(JobError):
    """No job with this id on the cluster."""

    def __init__(self, job_id: str, address: str = ""):
        self.job_id = job_id
        where = f" on {address}" if address else ""
        super().__init__(f"no job {job_id!r}{where}; `{RUN} jobctl list --stack <stack>` shows the stack's jobs")


class WaitTimeout(JobError):
    """`wait` gave up before the job reached the wanted status."""

    def __init__(self, job_id: str, last: JobStatus, timeout: float):
        self.job_id, self.last = job_id, last
        super().__init__(f"job {job_id} still {last} after {timeout:g}s")


class DashboardError(JobError):
    """Any other failed request to the Job API (HTTP error from the dashboard)."""


class DuplicateSubmission(DashboardError):
    """A submission whose id Ray already has: someone submitted this very job first."""

    def __init__(self, job_id: str, address: str):
        super().__init__(f"Ray job {job_id} already exists at {address}")
        self.job_id = job_id


@dataclass(frozen=True)
class SubmitResult:
    """What `submit` did."""

    submission_id: str
    status: JobStatus
    created: bool
    """False when the same spec was already on the cluster and nothing was submitted."""
    stopped: tuple[str, ...] = ()
    """Jobs of the same stack (other specs) stopped to make room."""


# ------------------------------------------------------------------------------------ connecting


def dashboard_proxy_url(endpoint: str, namespace: str, service: str) -> str:
    """The API server service-proxy URL of the head service's dashboard port.

    `endpoint` is the cluster endpoint (an IP or host, as GKE reports it); a value that already
    carries a scheme is used as is (tests put a plain-http proxy there).
    """
    base = _endpoint_url(endpoint)
    ns, svc = quote(namespace, safe=""), quote(service, safe="")
    return f"{base.rstrip('/')}/api/v1/namespaces/{ns}/services/{svc}:{DASHBOARD_PORT_NAME}/proxy"


def needs_cluster_ca(endpoint: str) -> bool:
    """Whether `endpoint`'s certificate is signed by the cluster's own CA.

    GKE's IP endpoint serves a certificate of the cluster CA (`masterAuth.clusterCaCertificate`);
    the DNS endpoint (`gke-<id>.<region>.gke.goog`) serves a publicly trusted one, which the system
    roots verify. `endpoint` is a host, `host:port`, `[v6]:port` or a URL; a plain-http URL (a local
    proxy, as in tests) needs none.
    """
    parts = urlsplit(_endpoint_url(endpoint))
    if parts.scheme != "https" or not parts.hostname:
        return False
    try:
        ipaddress.ip_address(parts.hostname)
    except ValueError:
        return False
    return True


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
    turns a stalled answer into `requests.exceptions.Timeout`, which `_guard` reports as
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
        _refuse_bare_scheme(address, "http, https")
        if "://" not in url:
            url = f"http://{url}"
        _host_port(url, address)
        _probe(url, timeout)
        return _guard(url, lambda: _TimeoutClient(url, request_timeout=(timeout, read_timeout)))
    if not service:
        raise ValueError("gke_endpoint needs the Ray head service name (service=...)")
    check_endpoint(gke_endpoint)
    url = dashboard_proxy_url(gke_endpoint, namespace, service)
    verify = tls_verify(ca_file, ca_cert_b64)
    _probe(url, timeout)
    provider = token_provider or google_token_provider()
    return _guard(
        url, lambda: _BearerClient(url, token_provider=provider, verify=verify, request_timeout=(timeout, read_timeout))
    )


def check_endpoint(endpoint: str) -> None:
    """Raise `InvalidAddress` unless the GKE endpoint (host, host:port, [v6]:port or URL) gives a usable URL.

    Every request to it carries the user's Google bearer token, so it is https only; plain http is
    allowed to a loopback host alone (a local proxy such as `kubectl proxy`, or a test's), where the
    token never leaves the machine."""
    _refuse_bare_scheme(endpoint, "https")
    url = _endpoint_url(endpoint)
    host, _ = _host_port(url, endpoint)
    if urlsplit(url).scheme != "https" and not is_loopback(host):
        raise InvalidAddress(
            endpoint,
            "scheme 'http' is not allowed: the requests carry your Google bearer token; allowed: https "
            "(http only to a loopback proxy such as 127.0.0.1)",
        )


def redacted(text: str) -> str:
    """`text` with the `user:password@` of a URL (or of a `host:port` without scheme) masked as `***@`."""
    return re.sub(r"^((?:[A-Za-z][A-Za-z0-9+.\-]*:)?//)?[^/?#@]*@", lambda m: (m.group(1) or "") + "***@", text)


def _refuse_bare_scheme(given: str, allowed: str) -> None:
    """`javascript:alert(1)`, `file:/etc/passwd`: a scheme without `//`, which prefixing `http://` would
    turn into a host and a "port" that is not a number. `host:8265` (digits after the colon) is a port."""
    if re.match(r"[^/?#]*@", given):  # `user:password@host`: the credentials check names that
        return
    m = re.match(r"([A-Za-z][A-Za-z0-9+.\-]*):(?!//)(?!\d)", given)
    if m:
        raise InvalidAddress(given, f"scheme {m.group(1).lower()!r} is not allowed; allowed: {allowed}")


def is_loopback(host: str) -> bool:
    """`localhost` or a loopback IP literal (the dashboard proxy's listen address, plain-http endpoints)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _endpoint_url(endpoint: str) -> str:
    if "://" in endpoint:
        return endpoint
    with contextlib.suppress(ValueError):
        if ipaddress.ip_address(endpoint).version == 6:
            return f"https://[{endpoint}]"  # a bare v6 address's colons would read as a port
    return f"https://{endpoint}"


def _host_port(url: str, given: Optional[str] = None) -> tuple[str, int]:
    """Host and port of an http(s) URL; `InvalidAddress` (naming `given`, the value as the user wrote
    it) where urllib would raise a bare ValueError later, or Ray would fail with a confusing one."""
    given = url if given is None else given
    try:
        parts = urlsplit(url)
    except ValueError as err:  # e.g. an unclosed "[" of an IPv6 literal
        raise InvalidAddress(given, f"not a valid URL ({err})") from None
    if parts.scheme not in ("http", "https"):
        raise InvalidAddress(given, f"scheme {parts.scheme!r} is not allowed; allowed: http, https")
    if "@" in parts.netloc:
        # A password on the command line lands in shell history, process lists and every message that
        # shows the address; the dashboard and the API server take none this way.
        raise InvalidAddress(
            given, "credentials in the URL (user:password@) are not allowed; allowed: http(s)://host:port"
        )
    if not parts.hostname:
        raise InvalidAddress(given, "no host name; expected e.g. http://127.0.0.1:8265")
    # Read the port text ourselves: `SplitResult.port` raises without saying what was wrong in a
    # form we could show, and accepts 0, which nothing can listen on.
    tail = parts.netloc.rpartition("@")[2].rpartition("]")[2]
    port_text = tail.partition(":")[2]
    if not port_text:
        return parts.hostname, 443 if parts.scheme == "https" else 80
    if not (port_text.isascii() and port_text.isdigit()):
        raise InvalidAddress(given, f"port {port_text!r} is not a number; allowed: 1-65535")
    port = int(port_text)
    if not 1 <= port <= 65535:
        raise InvalidAddress(given, f"port {port} is out of range; allowed: 1-65535")
    return parts.hostname, port


def _probe(url: str, timeout: float) -> None:
    """Fail fast on an address nothing listens on; requests would wait for the OS TCP timeout."""
    host, port = _host_port(url)
    try:
        with socket.create_connection((host, port), timeout=timeout):
            pass
    except OSError as err:
        raise DashboardUnreachable(url, err.strerror or str(err)) from None


def _guard(address: str, fn: Callable[[], Any], job_id: Optional[str] = None) -> Any:
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
        raise DashboardError(f"Ray Job API request to {address} failed: {text.splitlines()[0][:300]}") from None


# ------------------------------------------------------------------------------------ operations


def status(client: JobSubmissionClient, job_id: str) -> JobStatus:
    """The job's current status. Raises `UnknownJob`."""
    return info(client, job_id).status


def info(client: JobSubmissionClient, job_id: str) -> JobDetails:
    """The job's details (status, message, times, metadata). Raises `UnknownJob`."""
    return _guard(client.get_address(), lambda: client.get_job_info(job_id), job_id)


def stop(client: JobSubmissionClient, job_id: str) -> bool:
    """Ask the job to stop; True if it was still running. Raises `UnknownJob`."""
    return bool(_guard(client.get_address(), lambda: client.stop_job(job_id), job_id))


def list_jobs(
    client: JobSubmissionClient, stack: Optional[str] = None, recipe: Optional[str] = None
) -> list[JobDetails]:
    """Submitted jobs this program made, oldest first; filtered by stack and recipe when given."""
    jobs = _guard(client.get_address(), client.list_jobs)
    mine = [
        j
        for j in jobs
        if j.submission_id
        and META_STACK in (j.metadata or {})
        and (stack is None or j.metadata[META_STACK] == stack)
        and (recipe is None or j.metadata.get(META_RECIPE) == recipe)
    ]
    return sorted(mine, key=lambda j: (j.start_time or 0, j.submission_id))


def latest_job(client: JobSubmissionClient, stack: str, recipe: Optional[str] = None) -> Optional[JobDetails]:
    """The stack's most recently started job, or None."""
    jobs = list_jobs(client, stack, recipe)
    return jobs[-1] if jobs else None


def ray_nodes(client: JobSubmissionClient) -> list[dict[str, Any]]:
    """Ray's node table, dead nodes included (the dashboard's state API, `GET /api/v0/nodes`, served
    since Ray 2.0 by dashboard/modules/state/state_head.py): rows with `node_id`, `node_ip`, `state`
    (ALIVE/DEAD), `resources_total`, `end_time_ms` and `state_message` (why a node died). Sent through
    the client's own `_do_request`, so the proxy's bearer token and TLS settings apply as for the Job API."""
    address = client.get_address()

    response = _guard(
        address, lambda: client._do_request("GET", "/api/v0/nodes?limit=10000&detail=true", timeout=CONNECT_TIMEOUT * 3)
    )
    if response.status_code in (401, 403):
        raise DashboardAuthError(address, f"HTTP {response.status_code}")
    if response.status_code != 200:
        raise DashboardError(f"Ray state API at {address}/api/v0/nodes answered HTTP {response.status_code}")
    try:
        rows = response.json()["data"]["result"]["result"]
    except (KeyError, TypeError, ValueError):
        raise DashboardError(f"Ray state API at {address}/api/v0/nodes answered in an unknown shape") from None
    return [row for row in rows if isinstance(row, dict)]


def metadata_int(job: Any, key: str, default: int) -> int:
    """A number this program stored in a job's metadata (`META_ATTEMPT`, ...); `default` when absent or not a number."""
    try:
        return int((getattr(job, "metadata", None) or {}).get(key, default))
    except (TypeError, ValueError):
        return default


def attempt_of(job: Any) -> int:
    """The attempt number of a job of a spec (1: the first submission)."""
    return metadata_int(job, META_ATTEMPT, 1)


def attempt_id(submission_id: str, attempt: int) -> str:
    """The submission id of the N-th attempt of a spec (the first keeps the plain id)."""
    return submission_id if attempt <= 1 else f"{submission_id}-r{attempt}"


def submit_attempt(
    client: JobSubmissionClient, spec: JobSpec, attempt: int, metadata: Optional[dict[str, str]] = None
) -> tuple[str, bool]:
    """Submit attempt `attempt` of `spec` (its entrypoint and runtime env, id `attempt_id`), with `metadata`
    added to the spec's. Returns the job id and whether this call created the job: False when someone
    submitted this very attempt between the caller's listing and this submission (that is the job)."""
    job_id = attempt_id(spec.submission_id, attempt)
    try:
        _guard(
            client.get_address(),
            lambda: client.submit_job(
                entrypoint=spec.entrypoint,
                submission_id=job_id,
                runtime_env=spec.runtime_env,
                metadata={**spec.metadata, META_ATTEMPT: str(attempt), **(metadata or {})},
            ),
            job_id,
        )
    except DuplicateSubmission:
        return job_id, False
    return job_id, True


def stop_other_specs(client: JobSubmissionClient, spec: JobSpec, *, stop_timeout: float = 60.0) -> tuple[str, ...]:
    """Stop every unfinished job of `spec`'s stack that runs another spec (a stack's GPU pool holds one
    training job), giving each up to `stop_timeout` seconds to release its GPUs; returns their ids."""
    stale = [
        j
        for j in list_jobs(client, spec.stack)
        if j.metadata.get(META_SPEC_HASH) != spec.spec_hash and j.status not in TERMINAL
    ]
    stopped = []
    for job in stale:
        with contextlib.suppress(UnknownJob):
            stop(client, job.submission_id)
            stopped.append(job.submission_id)
    for job_id in stopped:
        with contextlib.suppress(WaitTimeout, UnknownJob):
            wait(client, job_id, timeout=stop_timeout, poll_interval=0.5)
    return tuple(stopped)


def submit(
    client: JobSubmissionClient,
    spec: JobSpec,
    *,
    stop_timeout: float = 60.0,
    before_submit: Optional[Callable[[], None]] = None,
) -> SubmitResult:
    """Make sure `spec` runs on the cluster, without duplicates.

    1. Any job of the same stack with another spec that has not ended is stopped, and given up
       to `stop_timeout` seconds to release its GPUs.
    2. If the newest attempt of this spec is pending, running or succeeded, it is returned.
    3. Otherwise (never submitted, or it failed / was stopped) `before_submit` is called (the
       acceptance gate: on free GPUs, and only when a job is really going to start; an exception
       from it stops the submission) and a new attempt is submitted.
    """
    stopped = stop_other_specs(client, spec, stop_timeout=stop_timeout)
    same = [j for j in list_jobs(client, spec.stack) if j.metadata.get(META_SPEC_HASH) == spec.spec_hash]
    attempt = 1
    if same:
        newest = max(same, key=attempt_of)
        if newest.status not in RETRYABLE:
            return SubmitResult(newest.submission_id, newest.status, created=False, stopped=stopped)
        attempt = attempt_of(newest) + 1
    if before_submit is not None:
        before_submit()
    job_id, created = submit_attempt(client, spec, attempt)
    return SubmitResult(job_id, status(client, job_id), created=created, stopped=stopped)


def wait(
    client: JobSubmissionClient,
    job_id: str,
    *,
    until: Collection[JobStatus] = TERMINAL,
    timeout: Optional[float] = None,
    on_status: Optional[Callable[[JobStatus, float], None]] = None,
    poll_interval: float = 1.0,
) -> JobStatus:
    """Poll until the job's status is in `until` (default: ended); returns that status.

    `on_status(status, elapsed_seconds)` is called after every poll (the CLI draws its live line
    with it). A job that ends in a status outside `until` ends the wait too (it cannot change
    any more). Raises `WaitTimeout` after `timeout` seconds, `UnknownJob`.
    """
    start = time.monotonic()
    while True:
        current = status(client, job_id)
        elapsed = time.monotonic() - start
        if on_status is not None:
            on_status(current, elapsed)
        if current in until or current in TERMINAL:
            return current
        if timeout is not None and elapsed >= timeout:
            raise WaitTimeout(job_id, current, timeout)
        time.sleep(poll_interval)


def logs(
    client: JobSubmissionClient,
    job_id: str,
    *,
    follow: bool = False,
    tail: Optional[int] = None,
    poll_interval: float = 1.0,
) -> Iterator[str]:
    """The job's log as text chunks.

    Without `follow` it yields the whole log once, or only its last `tail` lines. With `follow` it
    streams new output until the job ends, over Ray's log websocket (`tail_job_logs`), starting with
    the whole log or its last `tail` lines; if the websocket cannot be opened (a proxy that does not
    pass upgrades), it falls back to polling the full log.
    """
    if tail is not None and tail < 1:
        raise ValueError(f"tail must be a positive number of lines, got {tail}")
    address = client.get_address()
    status(client, job_id)  # UnknownJob before anything is yielded
    if not follow:
        text = _guard(address, lambda: client.get_job_logs(job_id), job_id)
        yield text if tail is None else last_lines(text, tail)
        return
    import aiohttp

    shown = 0  # characters from the start of the log already yielded or deliberately skipped
    if tail is not None:
        # Ray's websocket always replays the log from its first line; take the tail from a snapshot
        # and drop that much of the replay below.
        text = _guard(address, lambda: client.get_job_logs(job_id), job_id)
        yield last_lines(text, tail)
        shown = len(text)
    streamed = 0
    try:
        for chunk in _sync_iter(client.tail_job_logs(job_id), LOG_IDLE_TIMEOUT):
            new = chunk[max(shown - streamed, 0) :]
            streamed += len(chunk)
            shown = max(shown, streamed)
            if new:
                yield new
        return
    except (aiohttp.WSServerHandshakeError, aiohttp.ClientError, RuntimeError, asyncio.TimeoutError):
        # Streaming failed (or was never possible); continue from what was already shown.
        pass
    while True:
        done = status(client, job_id) in TERMINAL
        text = _guard(address, lambda: client.get_job_logs(job_id), job_id)
        if len(text) > shown:
            yield text[shown:]
            shown = len(text)
        if done:
            return
        time.sleep(poll_interval)


def last_lines(text: str, count: int) -> str:
    """The last `count` lines of `text` (all of it when it has fewer), split at "\n" only, as `tail -n`
    does: a progress bar redrawing itself with "\r" stays one line."""
    end = len(text) - 1 if text.endswith("\n") else len(text)
    for _ in range(count):
        end = text.rfind("\n", 0, end)
        if end < 0:
            return text
    return text[end + 1 :]


def _sync_iter(agen: AsyncIterator[str], idle_timeout: Optional[float] = None) -> Iterator[str]:
    """Drive an async iterator from synchronous code on a private event loop; `asyncio.TimeoutError`
    when no item arrives within `idle_timeout` seconds."""
    loop = asyncio.new_event_loop()
    try:
        while True:
            try:
                yield loop.run_until_complete(asyncio.wait_for(agen.__anext__(), idle_timeout))
            except StopAsyncIteration:
                return
    finally:
        with contextlib.suppress(Exception):
            loop.run_until_complete(agen.aclose())  # type: ignore[attr-defined]
        loop.close()
