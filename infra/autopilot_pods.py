"""Pod specs for a GKE Autopilot cluster (`cluster.mode: autopilot`): how GPU pods choose their nodes,
and what Autopilot admits. Pure builders and checks: no Outputs, no resources.

Autopilot has no node pools. A pod states what it needs and GKE makes a node for it:
- GPU machine: node selector `cloud.google.com/gke-accelerator` (+ `cloud.google.com/gke-accelerator-count`)
  and the `nvidia.com/gpu` limit; A4 / A3 Ultra pods take all 8 GPUs of the node (GKE "Deploy GPU
  workloads in Autopilot", https://cloud.google.com/kubernetes-engine/docs/how-to/autopilot-gpus);
- capacity: `cloud.google.com/gke-spot: "true"` (Spot Pods), or a specific reservation
  (`cloud.google.com/reservation-name` + `cloud.google.com/reservation-affinity: "specific"`), or
  nothing for on-demand;
- zone: `topology.kubernetes.io/zone`. The cluster is regional, but the RDMA NICs can only attach to
  subnets of the RoCE VPC, which is pinned to one zone
  (https://cloud.google.com/vpc/docs/rdma-network-profiles), and Lustre is in that
  zone too: a GPU node elsewhere would have no RDMA network to join.

What Autopilot refuses (GKE "Autopilot security constraints"; upstream container-engine-accelerators
gpudirect-rdma/nccl-test-a4-autopilot.yaml @992db812 shows the admitted shape of an RDMA pod):
privileged containers, host namespaces, and host paths other than read-only ones. GPUDirect RDMA still
works without `privileged`: GKE hands the RDMA devices to the pod's first (non-init) container. The GPU
library and gIB plugin directories the NCCL installer fills are mounted read-only, as upstream does.

Autopilot gives a container that requests no ephemeral storage 1 GiB and evicts it beyond that (GKE
"Resource requests in Autopilot", default requests), so the Ray pods request it explicitly.
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

READ_ONLY_HOST_PATHS = ("/home/kubernetes/bin/nvidia", "/home/kubernetes/bin/gib")
"""The host paths a GPU pod may mount, read-only: the driver libraries and the gIB plugin the NCCL
installer copied there (upstream nccl-test-a4-autopilot.yaml)."""

HEAD_EPHEMERAL_STORAGE_GIB = 10
"""The Ray head's logs and the job's working directory; checkpoints and the HF cache are on Lustre."""


def gpu_node_labels(
    *,
    zone: str,
    accelerator_type: str,
    gpus_per_node: int,
    provisioning: Provisioning,
    reservation_name: Optional[str] = None,
) -> tuple[tuple[str, str], ...]:
    """The node selector of a whole-node GPU pod on Autopilot, as sorted (label, value) pairs."""
    labels = {
        ACCELERATOR_LABEL: accelerator_type,
        ACCELERATOR_COUNT_LABEL: str(gpus_per_node),
        ZONE_LABEL: zone,
    }
    if provisioning is Provisioning.SPOT:
        labels[SPOT_LABEL] = "true"
    elif provisioning is Provisioning.RESERVATION:
        if not reservation_name:
            raise ValueError("a reservation-backed Autopilot GPU pod needs the reservation's name")
        labels[RESERVATION_NAME_LABEL] = reservation_name
        labels[RESERVATION_AFFINITY_LABEL] = "specific"
    elif provisioning is not Provisioning.ON_DEMAND:
        # Config validation refuses the others (flexStart) for Autopilot before this is reached.
        raise ValueError(f"provisioning {provisioning.value!r} has no Autopilot node selector here")
    return tuple(sorted(labels.items()))


def gpu_pod_tolerations() -> list[dict[str, str]]:
    """Whatever value GKE gives the GPU and Spot taints of the nodes it makes (Autopilot adds these
    tolerations to GPU and Spot Pods itself; stating them keeps the pod schedulable either way), and the
    taint of a Spot node about to be reclaimed (as on Standard, infra/ray_cluster.py)."""
    return [
        {"key": GPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"},
        {"key": SPOT_LABEL, "operator": "Exists", "effect": "NoSchedule"},
        {"key": "cloud.google.com/impending-node-termination", "operator": "Exists"},
    ]


# ---------------------------------------------------------------- admission


def admission_problems(pod_spec: Mapping[str, Any]) -> list[str]:
    """What Autopilot would refuse in a pod spec (or a KubeRay group's values, which use the same keys
    for containers' `securityContext`, `volumes` and `volumeMounts`): one line per problem."""
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
    """Every container of a pod spec; a KubeRay group's own container is the group itself."""
    for kind in ("initContainers", "containers", "sidecarContainers"):
        for c in pod_spec.get(kind) or ():
            yield f"{kind}/{c.get('name', '?')}", c
    if "containers" not in pod_spec:
        yield "ray container", pod_spec


# ---------------------------------------------------------------- the Ray cluster's values


def ray_values_for_autopilot(values: Mapping[str, Any], worker: AutopilotPodLimits) -> dict[str, Any]:
    """The `ray-cluster` chart values of `infra.ray_cluster.ray_values`, made admissible on Autopilot.

    - workers: not privileged; tolerating GKE's GPU and Spot taints; the host GPU library and gIB
      directories mounted read-only; requests =
      limits of CPU and memory no larger than the flavour's Autopilot pod size (and never more than the
      Standard sizing found room for), with ephemeral storage; the node selector already comes from the
      pool facts (`gpu_node_labels`);
    - head: on Autopilot's default general-purpose compute class (`infra.ray_cluster.ray_values` gives
      it no node selector without a system pool; naming the "autopilot" ComputeClass explicitly needs
      GKE 1.34.1-gke.1829001, leaving it out works on every version), with the requests Autopilot
      would bill (`general_purpose_resources`).

    Raises ValueError when something Autopilot refuses is left (a privileged or host-namespace setting a
    later change adds), so such a plan fails offline instead of at admission.
    """
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
    """Requests = limits of a pod on the general-purpose class, as Autopilot would set them: the CPU
    raised to the class's GiB-per-CPU ratio when the memory asks for more (Autopilot raises the smaller
    request rather than refuse; stating it shows the plan and its cost what runs), and ephemeral storage."""
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
