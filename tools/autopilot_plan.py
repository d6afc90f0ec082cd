"""What an Autopilot plan will run, read from the plan itself: it has no node pools, so its capacity is the Ray
release's GPU worker pods (each on a whole GPU node GKE creates for it: the accelerator and Spot selectors and
every GPU of the machine, infra/autopilot_pods.py) and its general-purpose pods. Read by the cost estimate, the
deploy time and the plan summary.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from infra.autopilot_pods import RESERVATION_NAME_LABEL, SPOT_LABEL
from infra.config import Provisioning
from infra.flavours import FLAVOURS
from infra.naming import ACCELERATOR_LABEL
from infra.pod_facts import GPU_RESOURCE

CLUSTER = "gcp:container/cluster:Cluster"
RELEASE = "kubernetes:helm.sh/v3:Release"


@dataclass(frozen=True)
class GpuPods:
    """One group of whole-node GPU pods of an Autopilot plan."""

    release: str  # the Helm release (plan resource name) the pods come from
    pods: int
    machine_type: str
    accelerator_type: str
    gpus_per_pod: int
    capacity: Provisioning  # from the pods' node selector: spot, a reservation, else on-demand


@dataclass(frozen=True)
class GeneralPurposePod:
    """A CPU pod on Autopilot's general-purpose class, billed per requested vCPU and GiB."""

    name: str
    cpu: float
    memory_gib: float


def is_autopilot(plan: Any) -> bool:
    return any(bool(c.inputs.get("enableAutopilot")) for c in plan.by_type(CLUSTER))


def gpu_pods(plan: Any) -> list[GpuPods]:
    """The GPU worker groups of every Ray release of an Autopilot plan (empty for a Standard plan)."""
    if not is_autopilot(plan):
        return []
    machines = {f.accelerator_type: f.machine_type for f in FLAVOURS.values()}
    found = []
    for release in plan.by_type(RELEASE):
        values = release.inputs.get("values") or {}
        for group in _worker_groups(values):
            selector = group.get("nodeSelector") or {}
            accelerator = selector.get(ACCELERATOR_LABEL)
            if not accelerator:
                continue
            gpus = int(((group.get("resources") or {}).get("limits") or {}).get(GPU_RESOURCE, 0))
            capacity = (
                Provisioning.SPOT
                if selector.get(SPOT_LABEL) == "true"
                else Provisioning.RESERVATION
                if selector.get(RESERVATION_NAME_LABEL)
                else Provisioning.ON_DEMAND
            )
            machine = machines.get(accelerator, f"<{accelerator}>")
            # `maxReplicas`: installed at 0, asked up to it for each attempt (workloads/worker_group.py).
            count = int(group.get("maxReplicas") or group.get("replicas") or 0)
            found.append(GpuPods(release.name, count, machine, accelerator, gpus, capacity))
    return found


def general_purpose_pods(plan: Any) -> list[GeneralPurposePod]:
    """The Ray heads of an Autopilot plan (the other small pods, the preemption watcher and the NCCL
    installer's pause container, are left out: a fraction of a CPU together)."""
    if not is_autopilot(plan):
        return []
    pods = []
    for release in plan.by_type(RELEASE):
        head = (release.inputs.get("values") or {}).get("head") or {}
        requests = (head.get("resources") or {}).get("requests") or {}
        if requests:
            pods.append(
                # As infra/autopilot_pods.py writes them: whole CPUs and GiB.
                GeneralPurposePod(
                    f"Ray head ({release.name})", float(requests["cpu"]), float(requests["memory"].removesuffix("Gi"))
                )
            )
    return pods


def _worker_groups(values: dict[str, Any]) -> list[dict[str, Any]]:
    groups = [
        g
        for g in (values.get("additionalWorkerGroups") or {}).values()
        if isinstance(g, dict) and not g.get("disabled")
    ]
    worker = values.get("worker") or {}
    if worker and not worker.get("disabled"):
        groups.append(worker)
    return groups


def summary_counts(plan: Any) -> Optional[tuple[int, int]]:
    """(GPU nodes, GPUs) of an Autopilot plan's GPU pods; None for a Standard plan."""
    if not is_autopilot(plan):
        return None
    groups = gpu_pods(plan)
    return sum(g.pods for g in groups), sum(g.pods * g.gpus_per_pod for g in groups)
