"""A bounded wait for the whole gang of GPU workers, and the release of partial nodes when it never comes.

With a capacity ladder (`gpuPool.capacity`, infra/compute_class.py) GKE's autoscaler walks the rungs by
itself; what it does not do is give up. A gang of `nodeCount` workers of which only some find nodes would
hold those nodes (and bill them) while the job waits for the rest. The owner of the run looks at the
gang before it submits: it polls the Ray worker pods until every one is Running on a node, for at most
`capacity.maxWaitMinutes`; when the time is up it says so in ONE line and, with `onTimeout:
releaseWorkers`, scales the Ray worker group to 0 replicas, so KubeRay deletes the worker pods (bound and
pending) and the cluster autoscaler removes the now-empty nodes after its scale-down delay. Releasing by
the workers, not by the pools' autoscaling limits, leaves the node pools exactly as `pulumi up` made them.

A gang may come from several rungs (3 spot + 5 on-demand nodes: same zone, machine and RDMA networks);
the result says how many nodes each rung gave (`GangResult.by_rung`), for the owner's status and ledger (which
prices each rung's nodes at its own price: `mix_counts`).

How it plugs in: the preemption watcher (`workloads/recovery/owner_loop.py` `Watcher`, the run's owner in the
cluster) looks once per step, before it submits an attempt (the first, and each after a preemption), with
`look_at_gang`: its loop must not block, so the wait is the watcher's own steps, bounded by the time it
recorded in the run ledger when the wait began (`workloads/ledger.py` `GangWait`, on Lustre: a restarted
watcher goes on with the same deadline). The plan-time values come in the watcher's `RunPlan` (run.json,
`infra.run_plan.run_plan_for_stack`): `node_count` (want), `gang_rungs` (node pool -> rung, ladder order,
from infra.placement `gpu_pool_facts(...).rung_pools`), `gang_max_wait_minutes`, `gang_on_timeout`, and the
RayCluster, worker group and namespace of `KubeGangView`; this module imports nothing from infra.
`wait_for_gang` is the same look in a blocking loop, for a caller that may wait.

Only on a real cluster: the API calls of `KubeGangView` (the pods' and nodes' fields read, the RayCluster
patch) with the RBAC infra/watcher_deployment.py grants the watcher (list pods in the namespace, get
nodes, get/patch its RayCluster).
"""

from __future__ import annotations

import json
import ssl
import time
import urllib.request
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, Protocol

NODE_POOL_LABEL = "cloud.google.com/gke-nodepool"
"""The node label GKE sets to the node pool's name (workloads import nothing from infra: a copy of
infra.naming.NODE_POOL_LABEL, checked equal by tests/test_gang_wait.py)."""
DEFAULT_POLL_S = 30.0


@dataclass(frozen=True)
class WorkerPod:
    name: str
    phase: str
    """The pod's `status.phase` (Pending, Running, ...)."""
    node: Optional[str]
    """`spec.nodeName`: the node it is bound to, or None while unscheduled."""


class GangView(Protocol):
    """What the wait reads and does; `KubeGangView` on a cluster, a fake in the tests."""

    def worker_pods(self) -> Sequence[WorkerPod]: ...

    def node_pool(self, node: str) -> Optional[str]: ...

    def release(self) -> str:
        """Give the partial nodes back; returns what was done, in words."""
        ...


VIEW_ERRORS = (OSError, ValueError, LookupError, StopIteration)
"""What a look at the gang raises when the API fails: urllib's errors are OSErrors, a malformed answer a
ValueError (JSON) or LookupError (a missing field)."""

KEEP_WHY = "gpuPool.capacity.onTimeout: keep"
"""Why the workers are kept after a timeout, by default (the plan may give another reason: `look_at_gang`)."""


@dataclass(frozen=True)
class GangResult:
    complete: bool
    ready: int
    want: int
    waited_s: float
    by_rung: dict[str, int] = field(default_factory=dict)
    """Running workers per rung (node pool -> rung); a node of an unknown pool counts under `default_rung`,
    or its pool name when there is none."""
    released: Optional[str] = None
    """What `release` did, when the gang did not complete and releasing was asked for."""
    line: str = ""
    """The one line the owner says and records (complete or timed out); while waiting, how far the gang is."""
    timed_out: bool = False
    """Incomplete after `max_wait_s`: the wait is over (released or kept, `released` says which)."""
    mix: str = ""
    """`by_rung` in ladder order, as the line and the ledger show it ("spot 3, onDemand 5"; "none")."""


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
    """The nodes per rung of a mix as `GangResult.mix` writes it ("spot 3, onDemand 5" -> {"spot": 3,
    "onDemand": 5}; "none" or "" -> {}): the ledger keeps the mix as that one line and prices by its counts. A
    rung label may hold a space ("reservation r1 2"), never a comma (labels and GKE pool names cannot)."""
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
    """One look at the gang, `waited_s` into a wait of at most `max_wait_s`: complete (`want` worker pods
    Running on nodes), timed out (then released with `release`, else kept: `kept_why` says why), or neither.

    `rungs` maps node pool names to rung labels in ladder order (spot, flexStart, ...); `default_rung` is
    the rung of a node whose pool `rungs` does not name (a one-rung stack: every GPU node is of its rung,
    and Autopilot names its pools itself). Releases at most once per call, and only on the timeout.
    An API error (`VIEW_ERRORS`) before the bound is raised; at or past it the wait times out unseen.
    """
    if want < 1:
        raise ValueError("want must be at least 1")
    order = list(dict.fromkeys([*rungs.values(), *([default_rung] if default_rung else [])]))
    try:
        pods = list(view.worker_pods())
        running = [p for p in pods if p.phase == "Running" and p.node]
        by_rung = _by_rung(view, running, rungs, default_rung)
    except VIEW_ERRORS as err:
        if waited_s < max_wait_s:
            raise  # the owner waits and looks again on its next step
        # Past the bound the wait ends whether or not the API answers the look: an API that keeps failing
        # (an expired token, RBAC gone) must not hold partial nodes forever. `release` may fail too; then
        # it raises and the owner tries again next step, still past the bound.
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


def wait_for_gang(
    view: GangView,
    *,
    want: int,
    rungs: Mapping[str, str],
    max_wait_s: float,
    release: bool = True,
    say: Callable[[str], None] = print,
    poll_s: float = DEFAULT_POLL_S,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    default_rung: Optional[str] = None,
) -> GangResult:
    """Wait until `want` worker pods are Running on nodes, for at most `max_wait_s` (`look_at_gang` in a loop).

    On success the line names the mix of rungs; on timeout it says how many nodes came from which rungs,
    that the gang is incomplete, and whether the workers were released (`release`) or kept. Says that one
    line, and nothing while it waits.
    """
    start = clock()
    while True:
        result = look_at_gang(
            view,
            want=want,
            rungs=rungs,
            waited_s=clock() - start,
            max_wait_s=max_wait_s,
            release=release,
            default_rung=default_rung,
        )
        if result.complete or result.timed_out:
            say(result.line)
            return result
        sleep(min(poll_s, max(0.0, max_wait_s - result.waited_s)))


# ----------------------------------------------------------------------------- on a cluster

SA_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")


class KubeGangView:
    """The Kubernetes API from inside the cluster (the pod's service account), with the standard library
    only: the workload image carries no Kubernetes client. Only on a real cluster: these calls."""

    def __init__(
        self,
        base: str,
        token: "str | Path",
        ca_file: Optional[str],
        namespace: str,
        ray_cluster: str,
        worker_group: str,
        timeout: float = 20.0,
    ):
        self.base, self.token, self.namespace = base.rstrip("/"), token, namespace
        self.ray_cluster, self.worker_group, self.timeout = ray_cluster, worker_group, timeout
        self.context = ssl.create_default_context(cafile=ca_file) if ca_file else None
        self._pools: dict[str, Optional[str]] = {}
        """Node -> pool, read once per node: a node never changes pools (a new node has a new name)."""

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

    def _token(self) -> str:
        """The bearer token, a token file read again for every request: the kubelet rotates the projected
        service-account token (from 80% of its TTL, at most 24 h: the `serviceAccountToken` projection,
        https://kubernetes.io/docs/reference/kubernetes-api/config-and-storage-resources/volume/ and
        https://kubernetes.io/docs/reference/access-authn-authz/service-accounts-admin/#bound-service-account-token-volume),
        so a token read once at start is refused after about an hour."""
        return self.token.read_text().strip() if isinstance(self.token, Path) else self.token

    def _call(self, method: str, path: str, body: Any = None, content_type: str = "application/json") -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            self.base + path,
            data=data,
            method=method,
            headers={"Authorization": f"Bearer {self._token()}", "Content-Type": content_type},
        )
        with urllib.request.urlopen(request, timeout=self.timeout, context=self.context) as response:
            return json.loads(response.read() or b"{}")

    def worker_pods(self) -> list[WorkerPod]:
        # KubeRay's labels on every pod of a worker group.
        selector = f"ray.io/cluster={self.ray_cluster},ray.io/group={self.worker_group}"
        doc = self._call(
            "GET", f"/api/v1/namespaces/{self.namespace}/pods?labelSelector={urllib.request.quote(selector)}"
        )
        # A pod being deleted (the group released, its node drained) still reads Running until it is
        # gone; it is no part of the gang.
        return [
            WorkerPod(
                p["metadata"]["name"],
                (p.get("status") or {}).get("phase", "Unknown"),
                (p.get("spec") or {}).get("nodeName"),
            )
            for p in doc.get("items", [])
            if not p["metadata"].get("deletionTimestamp")
        ]

    def node_pool(self, node: str) -> Optional[str]:
        if node not in self._pools:
            doc = self._call("GET", f"/api/v1/nodes/{urllib.request.quote(node)}")
            self._pools[node] = ((doc.get("metadata") or {}).get("labels") or {}).get(NODE_POOL_LABEL)
        return self._pools[node]

    def release(self) -> str:
        """Scale the worker group to 0 (KubeRay deletes its pods; the autoscaler then removes the empty nodes).
        The Helm release's values still say `replicas: nodeCount`, but the release's own record does not
        change, so a later `pulumi up` does not restore the group: the run's owner and `python -m jobctl
        submit` (`scale`) own the worker count (docs/day-2.md)."""
        self.scale(0)
        return f"worker group {self.worker_group} of RayCluster {self.ray_cluster} scaled to 0"

    def scale(self, replicas: int) -> Optional[int]:
        """Set the worker group's `replicas` and `minReplicas` to `replicas` (the Helm values have min = replicas
        = max = nodeCount: infra/ray_cluster.py); returns the replicas it had, or None when it had `replicas`
        already (then nothing is patched). A JSON patch by index, the group found by its name."""
        path = f"/apis/ray.io/v1/namespaces/{self.namespace}/rayclusters/{self.ray_cluster}"
        cluster = self._call("GET", path)
        groups = cluster["spec"]["workerGroupSpecs"]
        index = next(i for i, g in enumerate(groups) if g.get("groupName") == self.worker_group)
        had = groups[index].get("replicas")
        if had == replicas and groups[index].get("minReplicas") == replicas:
            return None
        patch = [
            {"op": "replace", "path": f"/spec/workerGroupSpecs/{index}/replicas", "value": replicas},
            {"op": "replace", "path": f"/spec/workerGroupSpecs/{index}/minReplicas", "value": replicas},
        ]
        self._call("PATCH", path, patch, content_type="application/json-patch+json")
        return int(had or 0)
