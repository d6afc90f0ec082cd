"""Wait until a KubeRay RayCluster's head is ready; Helm's wait cannot.

Ready: `status.conditions` has `HeadPodReady` "True" (ray-project/kuberay v1.7.0
ray-operator/apis/ray/v1/raycluster_types.go); the deprecated `status.state` only when an older operator
reports no conditions. Not `RayClusterProvisioned`: it never returns to false once true (the same file), so after
the owner released the workers it would still say "provisioned"; the workers are counted in Ray by the step that
asks for them (workloads/worker_group.py). 404, transport errors and 5xx keep waiting; 401/403 and TLS failures
end it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Optional, Union
from urllib.parse import quote

import requests

REQUIRED_CONDITIONS = ("HeadPodReady",)
DEFAULT_TIMEOUT_S = 3600.0
"""Spot GPU capacity, node-pool scale-up and the first pull of a NeMo-RL image (tens of GB) can take long."""
DEFAULT_POLL_S = 10.0
REQUEST_TIMEOUT_S = 30.0

Headers = Union[Mapping[str, str], Callable[[], Mapping[str, str]]]
"""Static headers, or a callable returning fresh ones on every poll (a bearer token lasts about an hour)."""


class RayClusterNotReady(Exception):
    """The RayCluster's head was not ready within the timeout; `str()` is one line."""

    def __init__(self, namespace: str, name: str, timeout_s: float, last: Optional["RayClusterProgress"]):
        self.namespace, self.name, self.timeout_s, self.last = namespace, name, timeout_s, last
        seen = last.describe() if last is not None else "no answer from the API server"
        super().__init__(
            f"RayCluster {namespace}/{name}: head not ready after {timeout_s:g}s; last seen: {seen}. "
            f"Check `kubectl -n {namespace} describe raycluster {name}` and "
            f"`kubectl -n {namespace} get pods -l ray.io/cluster={name}` (spot GPU capacity, image pulls)"
        )


class RayClusterAuthError(Exception):
    """The API server refused our credentials (or TLS to it failed)."""

    def __init__(self, url: str, detail: str):
        self.url = url
        super().__init__(
            f"cannot read the RayCluster at {url} ({detail}): run `gcloud auth application-default login` "
            "and make sure your identity may get rayclusters.ray.io in the namespace (e.g. roles/container.developer)"
        )


@dataclass(frozen=True)
class RayClusterProgress:
    """One poll's view of the RayCluster."""

    found: bool
    elapsed_s: float
    conditions: tuple[dict[str, Any], ...] = ()
    ready_workers: Optional[int] = None
    desired_workers: Optional[int] = None
    state: Optional[str] = None
    """Deprecated `status.state`; informative only (or the readiness signal without any conditions)."""
    error: Optional[str] = None
    """A transient failure of this poll (transport error, HTTP 5xx), when there was one."""
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def ready(self) -> bool:
        if self.conditions:
            true = {c.get("type") for c in self.conditions if c.get("status") == "True"}
            return true.issuperset(REQUIRED_CONDITIONS)
        # An operator older than KubeRay's status conditions (no `conditions` at all): fall back to
        # the deprecated state, and still require every worker replica.
        return (
            self.found
            and self.state == "ready"
            and self.desired_workers is not None
            and (self.ready_workers or 0) >= self.desired_workers
        )

    def describe(self) -> str:
        """One line: workers ready, then each condition's status and reason."""
        if self.error is not None:
            return f"request failed ({self.error})"
        if not self.found:
            return "RayCluster not found (not created yet)"
        ready, desired = ("?" if n is None else n for n in (self.ready_workers, self.desired_workers))
        parts = [f"workers {ready}/{desired} ready"]
        for cond in self.conditions:
            text = f"{cond.get('type')}={cond.get('status')}"
            detail = cond.get("reason") or ""
            if cond.get("message"):
                detail = f"{detail}: {cond['message']}" if detail else str(cond["message"])
            parts.append(f"{text} ({detail[:200]})" if detail else text)
        if not self.conditions:
            parts.append(f"no conditions, state={self.state or '?'}")
        return "; ".join(parts)


def raycluster_url(api_base_url: str, namespace: str, name: str) -> str:
    base = api_base_url if "://" in api_base_url else f"https://{api_base_url}"
    return (
        f"{base.rstrip('/')}/apis/ray.io/v1/namespaces/{quote(namespace, safe='')}/rayclusters/{quote(name, safe='')}"
    )


def progress_of(obj: Mapping[str, Any], elapsed_s: float) -> RayClusterProgress:
    status = obj.get("status") or {}

    def as_int(key: str) -> Optional[int]:
        value = status.get(key)
        return int(value) if isinstance(value, (int, float)) else None

    return RayClusterProgress(
        found=True,
        elapsed_s=elapsed_s,
        conditions=tuple(c for c in status.get("conditions") or () if isinstance(c, dict)),
        ready_workers=as_int("readyWorkerReplicas"),
        desired_workers=as_int("desiredWorkerReplicas"),
        state=status.get("state"),
        raw=dict(obj),
    )


def wait_for_raycluster(
    api_base_url: str,
    namespace: str,
    name: str,
    *,
    headers: Optional[Headers] = None,
    verify: Union[bool, str] = True,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    poll_s: float = DEFAULT_POLL_S,
    on_status: Optional[Callable[[RayClusterProgress], None]] = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> dict[str, Any]:
    """Poll the RayCluster until its head is ready; returns it. `on_status(progress)` follows every poll.

    Raises `RayClusterNotReady` after `timeout_s`, `RayClusterAuthError` at once on HTTP 401/403 or bad TLS.
    """
    url = raycluster_url(api_base_url, namespace, name)
    start = clock()
    last: Optional[RayClusterProgress] = None
    with requests.Session() as http:
        while True:
            elapsed = clock() - start
            current = {"Accept": "application/json", **(headers() if callable(headers) else (headers or {}))}
            try:
                resp = http.get(url, headers=current, verify=verify, timeout=REQUEST_TIMEOUT_S)
            except requests.exceptions.SSLError:  # before ConnectionError: it is a subclass of it
                raise RayClusterAuthError(url, "TLS verification failed; is the cluster CA right?") from None
            except requests.exceptions.RequestException as err:
                progress = RayClusterProgress(last.found if last else False, elapsed, error=type(err).__name__)
            else:
                if resp.status_code in (401, 403):
                    raise RayClusterAuthError(url, f"HTTP {resp.status_code}")
                progress = _progress_of_response(resp, elapsed)
            # Keep the last real view of the cluster for the timeout message when a poll only failed.
            if progress.error is None or last is None or last.error is not None:
                last = progress
            if on_status is not None:
                on_status(progress)
            if progress.ready:
                return progress.raw
            if clock() - start + poll_s > timeout_s:
                raise RayClusterNotReady(namespace, name, timeout_s, last)
            sleep(poll_s)


def _progress_of_response(resp: requests.Response, elapsed: float) -> RayClusterProgress:
    if resp.status_code == 404:
        return RayClusterProgress(found=False, elapsed_s=elapsed)
    if not resp.ok:
        return RayClusterProgress(found=False, elapsed_s=elapsed, error=f"HTTP {resp.status_code}")
    try:
        return progress_of(resp.json(), elapsed)
    except ValueError:
        return RayClusterProgress(found=False, elapsed_s=elapsed, error="response is not JSON")


def wait_for_raycluster_on_gke(
    gke_endpoint: str,
    namespace: str,
    name: str,
    *,
    ca_cert_b64: Optional[str] = None,
    ca_file: Optional[str] = None,
    token_provider: Optional[Callable[[], str]] = None,
    **kwargs: Any,
) -> dict[str, Any]:
    """`wait_for_raycluster` against a GKE API server, authenticated as `workloads.ray_connection.connect` is (a
    Google token refreshed on every poll, the cluster CA for an IP endpoint); an endpoint with a scheme is used
    as is (tests use a plain-http fake)."""
    from workloads import ray_connection

    verify = ray_connection.tls_verify(ca_file, ca_cert_b64)
    provider = token_provider or ray_connection.google_token_provider()
    return wait_for_raycluster(
        gke_endpoint,
        namespace,
        name,
        headers=lambda: {"Authorization": f"Bearer {provider()}"},
        verify=verify,
        **kwargs,
    )
