"""Node sizes: what GKE leaves for pods on a machine (GKE "Plan GKE node sizes": tiered memory and CPU
reservations plus a 100 MiB eviction threshold), and the shape of the CPU machine types."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Optional

_GKE_MEMORY_TIERS = ((4, 0.25), (4, 0.20), (8, 0.10), (112, 0.06), (math.inf, 0.02))  # (GiB in tier, share)
_GKE_CPU_TIERS = ((1, 0.06), (1, 0.01), (2, 0.005), (math.inf, 0.0025))  # (cores in tier, share)
GKE_EVICTION_GIB = 100 / 1024
KERNEL_MEMORY_FRACTION = 0.02  # kept by the guest kernel before the kubelet sees it (an estimate)
# Left on a CPU system node for kube-dns, konnectivity, the CSI DaemonSets, the preemption watcher, ...
SYSTEM_POOL_OVERHEAD_CPU = 1.0
SYSTEM_POOL_OVERHEAD_MEMORY_GIB = 2.0
# GiB per vCPU of the families whose ratios are uniform (Compute Engine machine families guide); others: None.
_GIB_PER_VCPU = {
    "n1": {"standard": 3.75, "highmem": 6.5, "highcpu": 0.9},
    "n2": {"standard": 4.0, "highmem": 8.0, "highcpu": 1.0},
    "n2d": {"standard": 4.0, "highmem": 8.0, "highcpu": 1.0},
    "e2": {"standard": 4.0, "highmem": 8.0, "highcpu": 1.0},
}
_PREDEFINED = re.compile(r"^(?P<family>[a-z0-9]+)-(?P<kind>standard|highmem|highcpu)-(?P<vcpus>\d+)$")


def _tiered(amount: float, tiers: Sequence[tuple[float, float]]) -> float:
    reserved, left = 0.0, amount
    for size, share in tiers:
        step = min(left, size)
        reserved += step * share
        left -= step
        if left <= 0:
            break
    return reserved


def gke_reserved_cpu(vcpus: float) -> float:
    return _tiered(vcpus, _GKE_CPU_TIERS)


def gke_reserved_memory_gib(memory_gib: float) -> float:
    if memory_gib < 1:
        return 255 / 1024
    return _tiered(memory_gib, _GKE_MEMORY_TIERS)


# The system pool types the program can price (data/prices.yaml has N2 rates only), (vCPUs, GiB), from
# https://cloud.google.com/compute/docs/general-purpose-machines#n2_machine_types (n2-highmem-128 has 864).
SYSTEM_POOL_MACHINES: dict[str, tuple[int, float]] = {
    **{f"n2-standard-{n}": (n, 4.0 * n) for n in (2, 4, 8, 16, 32, 48, 64, 80, 96, 128)},
    **{f"n2-highmem-{n}": (n, 8.0 * n) for n in (2, 4, 8, 16, 32, 48, 64, 80, 96)},
    "n2-highmem-128": (128, 864.0),
    **{f"n2-highcpu-{n}": (n, 1.0 * n) for n in (2, 4, 8, 16, 32, 48, 64, 80, 96)},
}


def machine_series(machine_type: str) -> str:
    return machine_type.split("-", 1)[0]


def is_gpu_machine_type(machine_type: str) -> bool:
    """Accelerator-optimized (A2..A4X, G2, G4): GPUs a CPU pool would pay for and never use."""
    return bool(re.match(r"[ag]\d+[a-z]*-", machine_type))


def machine_shape(machine_type: str) -> Optional[tuple[int, float]]:
    if machine_type in SYSTEM_POOL_MACHINES:
        return SYSTEM_POOL_MACHINES[machine_type]
    m = _PREDEFINED.match(machine_type)
    if not m or m["family"] not in _GIB_PER_VCPU:
        return None
    vcpus = int(m["vcpus"])
    return vcpus, vcpus * _GIB_PER_VCPU[m["family"]][m["kind"]]


def system_node_room(machine_type: str) -> Optional[tuple[float, float]]:
    shape = machine_shape(machine_type)
    if shape is None:
        return None
    vcpus, memory_gib = shape
    cpu = vcpus - gke_reserved_cpu(vcpus) - SYSTEM_POOL_OVERHEAD_CPU
    capacity = memory_gib * (1 - KERNEL_MEMORY_FRACTION)
    memory = capacity - gke_reserved_memory_gib(memory_gib) - GKE_EVICTION_GIB - SYSTEM_POOL_OVERHEAD_MEMORY_GIB
    return cpu, memory


# Autopilot's general-purpose class (Ray head, watcher): the most one pod may request and the GiB per vCPU
# it must ask for (GKE "Resource requests in Autopilot"; recalled, not read back).
AUTOPILOT_GENERAL_PURPOSE_MAX_CPU = 30
AUTOPILOT_GENERAL_PURPOSE_MAX_MEMORY_GIB = 110
AUTOPILOT_GENERAL_PURPOSE_GIB_PER_CPU = (1.0, 6.5)


# Left on a GPU node for its DaemonSets (anetd, device plugin, CSI nodes, the NCCL installer, ...); GKE does
# not publish their sum.
GPU_NODE_DAEMONSET_CPU = 2.0
GPU_NODE_DAEMONSET_MEMORY_GIB = 16.0


@dataclass(frozen=True)
class NodeFit:
    machine_type: str
    cpu: int
    memory_gib: int
    shm_gib: int
    allocatable_cpu: float
    allocatable_memory_gib: float

    @property
    def headroom_cpu(self) -> float:
        return self.allocatable_cpu - self.cpu

    @property
    def headroom_memory_gib(self) -> float:
        return self.allocatable_memory_gib - self.memory_gib

    def to_json(self) -> dict[str, Any]:
        return {
            "machineType": self.machine_type,
            "cpu": self.cpu,
            "memoryGib": self.memory_gib,
            "shmGib": self.shm_gib,
            "allocatableCpu": round(self.allocatable_cpu, 2),
            "allocatableMemoryGib": round(self.allocatable_memory_gib, 1),
            "headroomCpu": round(self.headroom_cpu, 2),
            "headroomMemoryGib": round(self.headroom_memory_gib, 1),
        }


def gpu_node_allocatable(vcpus: float, memory_gib: float) -> tuple[float, float]:
    cpu = vcpus - gke_reserved_cpu(vcpus)
    memory = memory_gib * (1 - KERNEL_MEMORY_FRACTION) - gke_reserved_memory_gib(memory_gib) - GKE_EVICTION_GIB
    return cpu, memory


def gpu_node_room(vcpus: float, memory_gib: float) -> tuple[int, int]:
    cpu, memory = gpu_node_allocatable(vcpus, memory_gib)
    return math.floor(cpu - GPU_NODE_DAEMONSET_CPU), math.floor(memory - GPU_NODE_DAEMONSET_MEMORY_GIB)
