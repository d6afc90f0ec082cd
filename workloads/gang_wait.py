"""A bounded wait for the whole gang of GPU workers, and the release of partial nodes when it never comes.

With a capacity ladder (`gpuPool.capacity`, infra/compute_class.py) GKE's autoscaler walks the rungs by
itself; what it does not do is give up. A gang of `nodeCount` workers of which only some find nodes would
hold those nodes (and bill them) while the job waits for the rest. The owner of the run calls
`wait_for_gang` before it submits: it polls the Ray worker pods until every one is Running on a node, for
at most `capacity.maxWaitMinutes`; when the time is up it says so in ONE line and, with `onTimeout:
releaseWorkers`, scales the Ray worker group to 0 replicas, so KubeRay deletes the worker pods (bound and
pending) and the cluster autoscaler removes the now-empty nodes after its scale-down delay. Releasing by
the workers, not by the pools' autoscaling limits, leaves the node pools exactly as `pulumi up` made them.

A gang may come from several rungs (3 spot + 5 on-demand nodes: same zone, machine and RDMA networks);
the result says how many nodes each rung gave (`GangResult.by_rung`), for the owner's status and ledger.

How it plugs in (the owner of the run is being written in workloads/, issue 23): before a submission,
    result = wait_for_gang(KubeGangView.in_cluster(namespace, ray_cluster, worker_group),
                           want=nodeCount, rungs=<pool name -> rung>, max_wait_s=60 * maxWaitMinutes,
                           release=onTimeout == "releaseWorkers", say=log)
    if not result.complete: do not submit; record result.line in the ledger.
The pool -> rung map is plan-time data (infra.placement `gpu_pool_facts(...).rung_pools`), handed over in the
owner's spec like the other pool facts; this module imports nothing from infra.

Only on a real cluster: the API calls of `KubeGangView` (the pods' and nodes' fields read, the RayCluster
patch) and the RBAC they need (get/list pods in the namespace, get nodes, patch rayclusters.ray.io).
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


@dataclass(frozen=True)
class GangResult:
    complete: bool
    ready: int
    want: int
    waited_s: float
    by_rung: dict[str, int] = field(default_factory=dict)
    """Running workers per rung (node pool -> rung); a node of an unknown pool counts under its pool name."""
    released: Optional[str] = None
    """What `release` did, when the gang did not complete and releasing was asked for."""
    line: str = ""
    """The one line the owner says and records."""


def _by_rung(view: GangView, pods: Sequence[WorkerPod], rungs: Mapping[str, str]) -> dict[str, int]:
    counts: Counter[str] = Counter()
    for pod in pods:
        if pod.node:
            pool = view.node_pool(pod.node) or "unknown pool"
            counts[rungs.get(pool, pool)] += 1
    return dict(counts)


def _mix(by_rung: Mapping[str, int], order: Sequence[str]) -> str:
    keys = [r for r in order if r in by_rung] + sorted(k for k in by_rung if k not in order)
    return ", ".join(f"{k} {by_rung[k]}" for k in keys) or "none"


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
) -> GangResult:
    """Wait until `want` worker pods are Running on nodes, for at most `max_wait_s`.

    `rungs` maps node pool names to rung labels in ladder order (spot, flexStart, ...). On success the
    line names the mix of rungs; on timeout it says how many nodes came from which rungs, that the gang
    is incomplete, and whether the workers were released (`release`) or kept.
    """
    if want < 1:
        raise ValueError("want must be at least 1")
    start = clock()
    order = list(dict.fromkeys(rungs.values()))
    while True:
        pods = list(view.worker_pods())
        running = [p for p in pods if p.phase == "Running" and p.node]
        waited = clock() - start
        if len(running) >= want:
            by_rung = _by_rung(view, running, rungs)
            line = (
                f"gang complete: {len(running)} of {want} GPU nodes after {waited / 60:.0f} min "
                f"({_mix(by_rung, order)})"
            )
            say(line)
            return GangResult(True, len(running), want, waited, by_rung, None, line)
        if waited >= max_wait_s:
            by_rung = _by_rung(view, running, rungs)
            done = view.release() if release else None
            then = f"released: {done}" if done else "kept waiting (gpuPool.capacity.onTimeout: keep)"
            line = (
                f"gang incomplete: {len(running)} of {want} GPU nodes after {max_wait_s / 60:.0f} min "
                f"({_mix(by_rung, order)}; no rung gave the rest); {then}"
            )
            say(line)
            return GangResult(False, len(running), want, waited, by_rung, done, line)
        sleep(min(poll_s, max(0.0, max_wait_s - waited)))


# ----------------------------------------------------------------------------- on a cluster

SA_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")


class KubeGangView:
    """The Kubernetes API from inside the cluster (the pod's service account), with the standard library
    only: the workload image carries no Kubernetes client. Only on a real cluster: these calls."""

    def __init__(
        self,
        base: str,
        token: str,
        ca_file: Optional[str],
        namespace: str,
        ray_cluster: str,
        worker_group: str,
        timeout: float = 20.0,
    ):
        self.base, self.token, self.namespace = base.rstrip("/"), token, namespace
        self.ray_cluster, self.worker_group, self.timeout = ray_cluster, worker_group, timeout
        self.context = ssl.create_default_context(cafile=ca_file) if ca_file else None

    @classmethod
    def in_cluster(cls, namespace: str, ray_cluster: str, worker_group: str) -> "KubeGangView":
        import os

        host, port = os.environ["KUBERNETES_SERVICE_HOST"], os.environ.get("KUBERNETES_SERVICE_PORT", "443")
        return cls(
            f"https://{host}:{port}",
            (SA_DIR / "token").read_text().strip(),
            str(SA_DIR / "ca.crt"),
            namespace,
            ray_cluster,
            worker_group,
        )

    def _call(self, method: str, path: str, body: Any = None, content_type: str = "application/json") -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            self.base + path,
            data=data,
            method=method,
            headers={"Authorization": f"Bearer {self.token}", "Content-Type": content_type},
        )
        with urllib.request.urlopen(request, timeout=self.timeout, context=self.context) as response:
            return json.loads(response.read() or b"{}")

    def worker_pods(self) -> list[WorkerPod]:
        # KubeRay's labels on every pod of a worker group.
        selector = f"ray.io/cluster={self.ray_cluster},ray.io/group={self.worker_group}"
        doc = self._call(
            "GET", f"/api/v1/namespaces/{self.namespace}/pods?labelSelector={urllib.request.quote(selector)}"
        )
        return [
            WorkerPod(
                p["metadata"]["name"],
                (p.get("status") or {}).get("phase", "Unknown"),
                (p.get("spec") or {}).get("nodeName"),
            )
            for p in doc.get("items", [])
        ]

    def node_pool(self, node: str) -> Optional[str]:
        doc = self._call("GET", f"/api/v1/nodes/{node}")
        return ((doc.get("metadata") or {}).get("labels") or {}).get(NODE_POOL_LABEL)

    def release(self) -> str:
        """Scale the worker group to 0 (KubeRay deletes its pods; the autoscaler then removes the empty nodes).
        The Helm release still says `replicas: nodeCount`: the next `pulumi up` puts it back."""
        path = f"/apis/ray.io/v1/namespaces/{self.namespace}/rayclusters/{self.ray_cluster}"
        cluster = self._call("GET", path)
        groups = cluster["spec"]["workerGroupSpecs"]
        index = next(i for i, g in enumerate(groups) if g.get("groupName") == self.worker_group)
        patch = [
            {"op": "replace", "path": f"/spec/workerGroupSpecs/{index}/replicas", "value": 0},
            {"op": "replace", "path": f"/spec/workerGroupSpecs/{index}/minReplicas", "value": 0},
        ]
        self._call("PATCH", path, patch, content_type="application/json-patch+json")
        return f"worker group {self.worker_group} of RayCluster {self.ray_cluster} scaled to 0"
