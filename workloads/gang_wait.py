"""A bounded wait for the whole gang of GPU workers, and the release of partial nodes when it never comes.

GKE's autoscaler walks a capacity ladder's rungs but never gives up, so a partial gang would hold (and
bill) its nodes. The owner looks at the gang before each attempt (`look_at_gang`, one look per watcher
step, bounded by the ledger's `GangWait`); past `capacity.maxWaitMinutes` it says so in one line and,
with `onTimeout: releaseWorkers`, scales the Ray worker group to 0. docs/capacity.md.
"""

from __future__ import annotations

import json
import ssl
import urllib.request
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Optional, Protocol

NODE_POOL_LABEL = "cloud.google.com/gke-nodepool"
"""A copy of infra.naming.NODE_POOL_LABEL (tests/test_gang_wait.py checks them equal)."""


@dataclass(frozen=True)
class WorkerPod:
    name: str
    phase: str
    node: Optional[str]
    scheduled_at: Optional[float] = None
    """When the pod was bound to a node (its `PodScheduled` condition): the autoscaled node had joined, Ready."""
    started_at: Optional[float] = None
    """When its last container started running: the image was pulled."""


class GangView(Protocol):
    """What the wait reads and does; `KubeGangView` on a cluster, a fake in the tests."""

    def worker_pods(self) -> Sequence[WorkerPod]: ...

    def node_pool(self, node: str) -> Optional[str]: ...

    def node_created(self, node: str) -> Optional[float]: ...

    def release(self) -> str: ...

    def group(self) -> "WorkerGroup": ...

    def scale(
        self, replicas: int, claim_until: Optional[float] = None, asked_at: Optional[float] = None
    ) -> Optional[int]: ...


@dataclass(frozen=True)
class WorkerGroup:
    """The RayCluster's GPU worker group as its spec says (workloads/worker_group.py owns `replicas`)."""

    index: int
    replicas: int
    min_replicas: int
    max_replicas: Optional[int]
    claimed_until: Optional[float] = None
    """Until when a party that asked for the workers holds them against the owner's release (epoch seconds)."""
    asked_at: Optional[float] = None
    """When an ask last raised the group's replicas (epoch seconds): nodes registered after it are the asker's."""


CLAIM_ANNOTATION = "nemo-rl-gke/workers-claimed-until"
"""The RayCluster annotation of a claim (workloads/worker_group.py): epoch seconds, as text."""
ASKED_ANNOTATION = "nemo-rl-gke/workers-asked-at"
"""The RayCluster annotation of the last ask that raised the replicas: epoch seconds, as text."""


def _epoch(text: Any) -> Optional[float]:
    try:
        return float(text) if text else None
    except (TypeError, ValueError):  # a hand-written value: none
        return None


VIEW_ERRORS = (OSError, ValueError, LookupError, StopIteration)
"""What a failed look at the gang raises (urllib's errors are OSErrors)."""

KEEP_WHY = "gpuPool.capacity.onTimeout: keep"


@dataclass(frozen=True)
class GangResult:
    complete: bool
    ready: int
    want: int
    waited_s: float
    by_rung: dict[str, int] = field(default_factory=dict)
    """Running workers per rung."""
    released: Optional[str] = None
    line: str = ""
    timed_out: bool = False
    mix: str = ""
    """`by_rung` in ladder order ("spot 3, onDemand 5"; "none")."""


def _by_rung(
    view: GangView, pods: Sequence[WorkerPod], rungs: Mapping[str, str], default_rung: Optional[str]
) -> dict[str, int]:
    counts: Counter[str] = Counter()
    for pod in pods:
        if pod.node:
            pool = view.node_pool(pod.node) or "unknown pool"
            counts[rungs.get(pool, default_rung or pool)] += 1
    return dict(counts)


def _mix(by_rung: Mapping[str, int], order: Sequence[str]) -> str:
    keys = [r for r in order if r in by_rung] + sorted(k for k in by_rung if k not in order)
    return ", ".join(f"{k} {by_rung[k]}" for k in keys) or "none"


def mix_counts(mix: str) -> dict[str, int]:
    """ "spot 3, onDemand 5" -> {"spot": 3, "onDemand": 5}; a rung label may hold a space, never a comma."""
    counts: dict[str, int] = {}
    for part in mix.split(","):
        rung, _, count = part.strip().rpartition(" ")
        if rung and count.isdigit():
            counts[rung] = counts.get(rung, 0) + int(count)
    return counts


def look_at_gang(
    view: GangView,
    *,
    want: int,
    rungs: Mapping[str, str],
    waited_s: float,
    max_wait_s: float,
    release: bool = True,
    default_rung: Optional[str] = None,
    kept_why: str = KEEP_WHY,
) -> GangResult:
    """One look, `waited_s` into a wait of at most `max_wait_s`: complete, timed out (released with `release`,
    else kept), or neither. `default_rung`: the rung of a node whose pool `rungs` does not name. An API error
    before the bound is raised; past it the wait times out unseen."""
    if want < 1:
        raise ValueError("want must be at least 1")
    order = list(dict.fromkeys([*rungs.values(), *([default_rung] if default_rung else [])]))
    try:
        running = [p for p in view.worker_pods() if p.phase == "Running" and p.node]
        by_rung = _by_rung(view, running, rungs, default_rung)
    except VIEW_ERRORS as err:
        if waited_s < max_wait_s:
            raise  # the owner waits and looks again on its next step
        # Past the bound the wait ends unseen: a failing API must not hold partial nodes forever.
        done = view.release() if release else None
        then = f"released: {done}" if done else f"kept waiting ({kept_why})"
        line = f"gang unseen after {max_wait_s / 60:.0f} min (cannot look at the gang: {err}); {then}"
        return GangResult(False, 0, want, waited_s, {}, done, line, timed_out=True, mix="unseen")
    mix = _mix(by_rung, order)
    ready = len(running)
    if ready >= want:
        line = f"gang complete: {ready} of {want} GPU nodes after {waited_s / 60:.0f} min ({mix})"
        return GangResult(True, ready, want, waited_s, by_rung, None, line, mix=mix)
    if waited_s >= max_wait_s:
        done = view.release() if release else None
        then = f"released: {done}" if done else f"kept waiting ({kept_why})"
        line = (
            f"gang incomplete: {ready} of {want} GPU nodes after {max_wait_s / 60:.0f} min "
            f"({mix}; no rung gave the rest); {then}"
        )
        return GangResult(False, ready, want, waited_s, by_rung, done, line, timed_out=True, mix=mix)
    line = f"waiting for the gang: {ready} of {want} GPU nodes ({mix})"
    return GangResult(False, ready, want, waited_s, by_rung, None, line, mix=mix)


def kube_time(stamp: Optional[str]) -> Optional[float]:
    """A Kubernetes timestamp as epoch seconds: metav1.Time is written in UTC as RFC 3339 to the second
    (kubernetes/apimachinery pkg/apis/meta/v1/time.go, `MarshalJSON`)."""
    if not stamp:
        return None
    return datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc).timestamp()


def pod_marks(view: GangView, want: int) -> dict[str, float]:
    """The goodput boundaries the worker pods show once `want` of them run (the attempt's size; workloads/goodput.py):
    `paidFrom`, the first GPU node's registration (its VM was billed a little earlier: only a real cluster
    says how much; goodput pays from no earlier than the run's first submission or the last release, since a
    node may be older than the run); `nodesReady`, the last pod bound to a node; `podsRunning`, the last
    container started, its image pulled. Empty until `want` pods run with both times: the owner reads again at
    its next look (`Watcher._mark_pods`)."""
    pods = [p for p in view.worker_pods() if p.phase == "Running" and p.node and p.scheduled_at and p.started_at]
    if want < 1 or len(pods) < want:
        return {}
    marks = {
        "nodesReady": max(p.scheduled_at or 0.0 for p in pods),
        "podsRunning": max(p.started_at or 0.0 for p in pods),
    }
    try:
        created = [c for c in (view.node_created(p.node) for p in pods if p.node) if c is not None]
    except VIEW_ERRORS:  # a node not readable: the paid time starts where it would without the mark
        created = []
    if created:
        marks["paidFrom"] = min(created)
    return marks


def _scheduled_at(status: Mapping[str, Any]) -> Optional[float]:
    for condition in status.get("conditions") or []:
        if condition.get("type") == "PodScheduled" and condition.get("status") == "True":
            return kube_time(condition.get("lastTransitionTime"))
    return None


def _started_at(status: Mapping[str, Any]) -> Optional[float]:
    started = [
        kube_time(((c.get("state") or {}).get("running") or {}).get("startedAt"))
        for c in status.get("containerStatuses") or []
    ]
    if not started or None in started:  # a container still waiting (pulling its image) or ended
        return None
    return max(s for s in started if s is not None)


SA_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")


class KubeGangView:
    """The Kubernetes API as the pod's service account, standard library only (the image has no client)."""

    def __init__(
        self,
        base: str,
        token: "str | Path | Callable[[], str]",
        ca_file: Optional[str],
        namespace: str,
        ray_cluster: str,
        worker_group: str,
        timeout: float = 20.0,
    ):
        self.base, self.token, self.namespace = base.rstrip("/"), token, namespace
        self.ray_cluster, self.worker_group, self.timeout = ray_cluster, worker_group, timeout
        self.context = ssl.create_default_context(cafile=ca_file) if ca_file else None
        self._nodes: dict[str, tuple[Optional[str], Optional[float]]] = {}

    @classmethod
    def in_cluster(cls, namespace: str, ray_cluster: str, worker_group: str) -> "KubeGangView":
        import os

        host, port = os.environ["KUBERNETES_SERVICE_HOST"], os.environ.get("KUBERNETES_SERVICE_PORT", "443")
        return cls(
            f"https://{host}:{port}",
            SA_DIR / "token",
            str(SA_DIR / "ca.crt"),
            namespace,
            ray_cluster,
            worker_group,
        )

    @classmethod
    def on_gke(
        cls,
        endpoint: str,
        namespace: str,
        ray_cluster: str,
        worker_group: str,
        *,
        ca_file: Optional[str] = None,
        ca_b64: Optional[str] = None,
        token: Optional[Callable[[], str]] = None,
    ) -> "KubeGangView":
        """The view from a user's machine (the deploy hook, `jobctl`): the GKE API server at `endpoint` with the
        cluster CA where its IP endpoint needs one, and a Google token (Application Default Credentials by default)
        refreshed within its hour."""
        from workloads import ray_address, ray_connection

        verify = ray_connection.tls_verify(ca_file, ca_b64)
        return cls(
            ray_address.endpoint_url(endpoint),
            token or ray_connection.google_token_provider(),
            verify if isinstance(verify, str) else None,
            namespace,
            ray_cluster,
            worker_group,
        )

    def _token(self) -> str:
        """The token file is read for every request: the kubelet rotates it (the `serviceAccountToken` projection,
        https://kubernetes.io/docs/reference/kubernetes-api/config-and-storage-resources/volume/,
        https://kubernetes.io/docs/reference/access-authn-authz/service-accounts-admin/#bound-service-account-token-volume)."""
        if callable(self.token):  # a Google token provider on a user's machine: refreshed within its hour
            return self.token()
        return self.token.read_text().strip() if isinstance(self.token, Path) else self.token

    def _call(self, method: str, path: str, body: Any = None, content_type: str = "application/json") -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            self.base + path,
            data=data,
            method=method,
            headers={"Authorization": f"Bearer {self._token()}", "Content-Type": content_type},
        )
        from workloads.deadline import within

        def fetch() -> bytes:
            with urllib.request.urlopen(request, timeout=self.timeout, context=self.context) as response:
                return response.read()

        # `timeout` bounds each wait for a byte; a server trickling bytes is bounded by the deadline (an OSError).
        where = f"the Kubernetes API ({method} {path.partition('?')[0]})"
        body = within(3 * self.timeout, fetch, where)
        try:
            return json.loads(body or b"{}")
        except (ValueError, RecursionError):
            raise ValueError(f"{where} answered with something other than JSON") from None

    def worker_pods(self) -> list[WorkerPod]:
        # KubeRay's labels on every pod of a worker group.
        selector = f"ray.io/cluster={self.ray_cluster},ray.io/group={self.worker_group}"
        doc = self._call(
            "GET", f"/api/v1/namespaces/{self.namespace}/pods?labelSelector={urllib.request.quote(selector)}"
        )
        # A pod being deleted still reads Running until it is gone; it is no part of the gang.
        return [
            WorkerPod(
                p["metadata"]["name"],
                (p.get("status") or {}).get("phase", "Unknown"),
                (p.get("spec") or {}).get("nodeName"),
                _scheduled_at(p.get("status") or {}),
                _started_at(p.get("status") or {}),
            )
            for p in doc.get("items", [])
            if not p["metadata"].get("deletionTimestamp")
        ]

    def _node(self, node: str) -> tuple[Optional[str], Optional[float]]:
        """A node's pool and registration time, read once (neither changes while the node lives)."""
        if node not in self._nodes:
            meta = self._call("GET", f"/api/v1/nodes/{urllib.request.quote(node)}").get("metadata") or {}
            self._nodes[node] = (
                (meta.get("labels") or {}).get(NODE_POOL_LABEL),
                kube_time(meta.get("creationTimestamp")),
            )
        return self._nodes[node]

    def node_pool(self, node: str) -> Optional[str]:
        return self._node(node)[0]

    def node_created(self, node: str) -> Optional[float]:
        return self._node(node)[1]

    def release(self) -> str:
        """Scale the worker group to 0 (nothing brings it back but the owner's ask, workloads/worker_group.py)."""
        self.scale(0)
        return f"worker group {self.worker_group} of RayCluster {self.ray_cluster} scaled to 0"

    def _cluster_path(self) -> str:
        return f"/apis/ray.io/v1/namespaces/{self.namespace}/rayclusters/{self.ray_cluster}"

    def _read_group(self) -> tuple[dict[str, Any], WorkerGroup]:
        from workloads.cli_args import shown_line

        # Of a shape other than KubeRay's (a hand edit, another CRD version, a proxy's page): one line, a ValueError
        # or LookupError (`VIEW_ERRORS`), never a KeyError's bare key; what the server sent is shown sanitised.
        cluster = self._call("GET", self._cluster_path())
        what = f"RayCluster {self.ray_cluster} in namespace {self.namespace}"
        spec_of = cluster.get("spec") if isinstance(cluster, dict) else None
        groups = spec_of.get("workerGroupSpecs") if isinstance(spec_of, dict) else None
        if not isinstance(groups, list) or not all(isinstance(g, dict) for g in groups):
            raise ValueError(
                f"{what} has no list of worker groups (spec.workerGroupSpecs); allowed: a RayCluster of KubeRay's "
                "ray.io/v1 API"
            )
        index = next((i for i, g in enumerate(groups) if g.get("groupName") == self.worker_group), None)
        if index is None:
            names = shown_line(", ".join(repr(g.get("groupName")) for g in groups), 200)
            raise LookupError(f"{what} has no worker group {self.worker_group!r} (its groups: {names or 'none'})")
        spec = groups[index]

        def count(key: str) -> Optional[int]:
            value = spec.get(key)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
                shown = shown_line(repr(value), 60)
                raise ValueError(f"{what}: worker group {self.worker_group} has {key} {shown}; allowed: 0 or more")
            return value

        meta = cluster.get("metadata")
        annotations = meta.get("annotations") if isinstance(meta, dict) else None
        annotations = annotations if isinstance(annotations, dict) else {}
        group = WorkerGroup(
            index,
            count("replicas") or 0,
            count("minReplicas") or 0,
            count("maxReplicas"),
            _epoch(annotations.get(CLAIM_ANNOTATION)),
            _epoch(annotations.get(ASKED_ANNOTATION)),
        )
        return cluster, group

    def group(self) -> WorkerGroup:
        return self._read_group()[1]

    def scale(
        self, replicas: int, claim_until: Optional[float] = None, asked_at: Optional[float] = None
    ) -> Optional[int]:
        """Set the worker group's `replicas` (and lower a `minReplicas` above it: KubeRay clamps `replicas` into
        [min, max], ray-project/kuberay v1.7.0 ray-operator/controllers/ray/utils/util.go
        `GetWorkerGroupDesiredReplicas`); with `claim_until`, also write the claim annotation. One JSON patch whose
        first op tests the group's name, so a list reordered since the read is refused, not patched at the wrong
        index. With `asked_at`, a raise of the replicas also stamps when (`ASKED_ANNOTATION`). Returns the replicas it
        had, or None when they were `replicas` already."""
        cluster, group = self._read_group()
        spec = f"/spec/workerGroupSpecs/{group.index}"
        ops: list[dict[str, Any]] = []
        if group.replicas != replicas:
            ops.append({"op": "replace", "path": f"{spec}/replicas", "value": replicas})
        if group.min_replicas > replicas:
            ops.append({"op": "replace", "path": f"{spec}/minReplicas", "value": replicas})
        notes = {}
        if claim_until is not None:
            notes[CLAIM_ANNOTATION] = f"{claim_until:.0f}"
        if asked_at is not None and replicas > group.replicas:
            notes[ASKED_ANNOTATION] = f"{asked_at:.0f}"
        if notes and (cluster.get("metadata") or {}).get("annotations") is None:
            ops.append({"op": "add", "path": "/metadata/annotations", "value": notes})
        else:  # "add" on an object member replaces it (RFC 6902 4.1); "/" in a key is "~1" (RFC 6901)
            for name, stamp in notes.items():
                key = name.replace("~", "~0").replace("/", "~1")
                ops.append({"op": "add", "path": f"/metadata/annotations/{key}", "value": stamp})
        if not ops:
            return None
        test = {"op": "test", "path": f"{spec}/groupName", "value": self.worker_group}
        self._call("PATCH", self._cluster_path(), [test, *ops], content_type="application/json-patch+json")
        return group.replicas if group.replicas != replicas else None
