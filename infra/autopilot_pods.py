"""Pod specs for a GKE Autopilot cluster: how GPU pods choose their nodes, and what Autopilot admits. Pure.

A pod selects its machine, capacity and zone by node labels (https://cloud.google.com/kubernetes-engine/docs/
how-to/autopilot-gpus); the zone because the RoCE VPC is pinned to one (https://cloud.google.com/vpc/docs/
rdma-network-profiles). Autopilot refuses privileged containers, host namespaces and writable host paths
(upstream container-engine-accelerators gpudirect-rdma/nccl-test-a4-autopilot.yaml @992db812 shows an admitted
RDMA pod), and evicts a container beyond 1 GiB of unrequested ephemeral storage, so the Ray pods request it.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Iterable, Mapping
from typing import Any, Optional

from infra.config import Provisioning
from infra.flavours import AutopilotPodLimits
from infra.machines import AUTOPILOT_GENERAL_PURPOSE_GIB_PER_CPU
from infra.naming import ACCELERATOR_LABEL
from infra.pod_facts import GPU_RESOURCE

ACCELERATOR_COUNT_LABEL = "cloud.google.com/gke-accelerator-count"
SPOT_LABEL = "cloud.google.com/gke-spot"
RESERVATION_NAME_LABEL = "cloud.google.com/reservation-name"
RESERVATION_AFFINITY_LABEL = "cloud.google.com/reservation-affinity"
ZONE_LABEL = "topology.kubernetes.io/zone"

# The host paths a GPU pod may mount, read-only (upstream nccl-test-a4-autopilot.yaml).
READ_ONLY_HOST_PATHS = ("/home/kubernetes/bin/nvidia", "/home/kubernetes/bin/gib")
HEAD_EPHEMERAL_STORAGE_GIB = 10  # logs and the working directory; checkpoints and the HF cache are on Lustre


def gpu_node_labels(
    *,
    zone: str,
    accelerator_type: str,
    gpus_per_node: int,
    provisioning: Provisioning,
    reservation_name: Optional[str] = None,
) -> tuple[tuple[str, str], ...]:
    labels = {ACCELERATOR_LABEL: accelerator_type, ACCELERATOR_COUNT_LABEL: str(gpus_per_node), ZONE_LABEL: zone}
    # The config refuses flexStart on Autopilot and a reservation without its name.
    if provisioning is Provisioning.SPOT:
        labels[SPOT_LABEL] = "true"
    elif provisioning is Provisioning.RESERVATION:
        labels.update({RESERVATION_NAME_LABEL: str(reservation_name), RESERVATION_AFFINITY_LABEL: "specific"})
    return tuple(sorted(labels.items()))


def gpu_pod_tolerations() -> list[dict[str, str]]:
    """Autopilot adds the first two itself; stating them keeps the pod schedulable either way."""
    return [
        {"key": GPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"},
        {"key": SPOT_LABEL, "operator": "Exists", "effect": "NoSchedule"},
        {"key": "cloud.google.com/impending-node-termination", "operator": "Exists"},
    ]


def admission_problems(pod_spec: Mapping[str, Any]) -> list[str]:
    """What Autopilot would refuse in a pod spec or a KubeRay group's values: one line per problem."""
    problems = []
    for key in ("hostNetwork", "hostPID", "hostIPC"):
        if pod_spec.get(key):
            problems.append(f"{key}: true")
    host_paths = {v["name"]: v["hostPath"].get("path", "") for v in pod_spec.get("volumes") or () if "hostPath" in v}
    for path in host_paths.values():
        if path not in READ_ONLY_HOST_PATHS:
            problems.append(f"hostPath {path}: only {', '.join(READ_ONLY_HOST_PATHS)} (read-only) are allowed")
    for where, container in _containers(pod_spec):
        security = container.get("securityContext") or {}
        if security.get("privileged"):
            problems.append(f"{where}: privileged")
        for mount in container.get("volumeMounts") or ():
            if mount.get("name") in host_paths and not mount.get("readOnly"):
                problems.append(f"{where}: host path {host_paths[mount['name']]} mounted writable")
    return problems


def _containers(pod_spec: Mapping[str, Any]) -> Iterable[tuple[str, Mapping[str, Any]]]:
    # A KubeRay group's own container is the group itself.
    for kind in ("initContainers", "containers", "sidecarContainers"):
        for c in pod_spec.get(kind) or ():
            yield f"{kind}/{c.get('name', '?')}", c
    if "containers" not in pod_spec:
        yield "ray container", pod_spec


def ray_values_for_autopilot(values: Mapping[str, Any], worker: AutopilotPodLimits) -> dict[str, Any]:
    """`infra.ray_cluster.ray_values` made admissible on Autopilot; raises ValueError offline for anything
    Autopilot would refuse at admission. The head stays on the default class (naming the "autopilot"
    ComputeClass needs GKE 1.34.1-gke.1829001)."""
    out = copy.deepcopy(dict(values))
    head, group = out["head"], out["worker"]

    group["securityContext"] = {}
    group["tolerations"] = gpu_pod_tolerations()
    writable = {v["name"] for v in group.get("volumes") or () if "hostPath" in v}
    for container in (group, *(group.get("initContainers") or ())):
        for mount in container.get("volumeMounts") or ():
            if mount.get("name") in writable:
                mount["readOnly"] = True
    requests = group["resources"]["requests"]
    cpu = min(int(requests["cpu"]), worker.cpu)
    memory = min(_gib(requests["memory"]), worker.memory_gib)
    amounts = {
        "cpu": str(cpu),
        "memory": f"{memory}Gi",
        "ephemeral-storage": f"{worker.ephemeral_storage_gib}Gi",
        GPU_RESOURCE: requests[GPU_RESOURCE],
    }
    group["resources"] = {"requests": dict(amounts), "limits": dict(amounts)}

    head["resources"] = general_purpose_resources(head["resources"]["requests"])

    problems = [
        f"Ray {name}: {p}" for name, spec in (("head", head), ("worker", group)) for p in admission_problems(spec)
    ]
    if problems:
        raise ValueError("Autopilot would refuse the Ray pods: " + "; ".join(problems))
    return out


def general_purpose_resources(requests: Mapping[str, str]) -> dict[str, Any]:
    """Requests = limits as Autopilot would set them (it raises the smaller of CPU and memory to the class's
    ratio), so the plan and its cost show what runs."""
    low, high = AUTOPILOT_GENERAL_PURPOSE_GIB_PER_CPU
    cpu, memory = int(requests["cpu"]), _gib(requests["memory"])
    cpu = max(cpu, math.ceil(memory / high))
    memory = max(memory, math.ceil(cpu * low))
    amounts = {"cpu": str(cpu), "memory": f"{memory}Gi", "ephemeral-storage": f"{HEAD_EPHEMERAL_STORAGE_GIB}Gi"}
    return {"requests": dict(amounts), "limits": dict(amounts)}


def _gib(quantity: str) -> int:
    if not quantity.endswith("Gi"):
        raise ValueError(f"expected a quantity in Gi, got {quantity!r}")
    return int(quantity[: -len("Gi")])
