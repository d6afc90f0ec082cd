"""Node sizes: what GKE leaves for pods on a machine, and the shape of the CPU machine types.

Reservations are GKE Standard's ("Plan GKE node sizes", memory and CPU reservations): a tiered share
of the machine's memory and vCPUs for the kubelet and system daemons, plus a 100 MiB eviction
threshold. The real allocatable of a node can only be read on the cloud
(`kubectl get node -o jsonpath='{.status.allocatable}'`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Optional

_GKE_MEMORY_TIERS = ((4, 0.25), (4, 0.20), (8, 0.10), (112, 0.06), (math.inf, 0.02))  # (GiB in tier, share)
_GKE_CPU_TIERS = ((1, 0.06), (1, 0.01), (2, 0.005), (math.inf, 0.0025))  # (cores in tier, share)
GKE_EVICTION_GIB = 100 / 1024
KERNEL_MEMORY_FRACTION = 0.02
"""Memory the guest kernel keeps before the kubelet sees it (page tables, firmware and crash-kernel
areas): an estimate, the exact node capacity can only be read on a real node."""

SYSTEM_POOL_OVERHEAD_CPU = 1.0
SYSTEM_POOL_OVERHEAD_MEMORY_GIB = 2.0
"""Left on a CPU system node for what else runs there (kube-dns, konnectivity, metrics-server, the
CSI and networking DaemonSets, the preemption watcher): together about a core and a couple of GiB."""

# GiB per vCPU of the predefined types of the families whose ratios are uniform (Compute Engine
# machine families guide: N1 3.75/6.5/0.9; N2, N2D and E2 4/8/1). Other families (C3, C4, N4, ...)
# have ratios that differ per type; for them `machine_shape` returns None and nothing is checked.
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
    """CPU cores GKE reserves for the kubelet and system daemons on a node of `vcpus`."""
    return _tiered(vcpus, _GKE_CPU_TIERS)


def gke_reserved_memory_gib(memory_gib: float) -> float:
    """GiB GKE reserves for the kubelet and system daemons (eviction threshold not included)."""
    if memory_gib < 1:
        return 255 / 1024
    return _tiered(memory_gib, _GKE_MEMORY_TIERS)


# The CPU system pool's catalogue: the machine types the program can price (data/prices.yaml has
# per-vCPU and per-GiB rates for the N2 series only) with their shapes, (vCPUs, GiB). Compute Engine's
# general-purpose machine family, N2 table (https://cloud.google.com/compute/docs/general-purpose-machines
# #n2_machine_types, as read 2026-12-03): standard 4 GB and highmem 8 GB per vCPU, highcpu 1 GB, except
# n2-highmem-128 with 864 GB (not 8 x 128); the machine tables' "GB" are GiB (n2-standard-2 = 8192 MiB).
# A type outside it needs `cluster.systemPool.allowUncataloguedMachineType` (then it is not priced).
SYSTEM_POOL_MACHINES: dict[str, tuple[int, float]] = {
    **{f"n2-standard-{n}": (n, 4.0 * n) for n in (2, 4, 8, 16, 32, 48, 64, 80, 96, 128)},
    **{f"n2-highmem-{n}": (n, 8.0 * n) for n in (2, 4, 8, 16, 32, 48, 64, 80, 96)},
    "n2-highmem-128": (128, 864.0),
    **{f"n2-highcpu-{n}": (n, 1.0 * n) for n in (2, 4, 8, 16, 32, 48, 64, 80, 96)},
}


def machine_series(machine_type: str) -> str:
    """`n2` of `n2-highmem-16`: the series whose rates price a CPU machine (data/prices.yaml `cpu.<series>.*`)."""
    return machine_type.split("-", 1)[0]


def is_gpu_machine_type(machine_type: str) -> bool:
    """A machine type of Compute Engine's accelerator-optimized families (A2, A3, A4, A4X, G2, G4: series
    names `a<n>` and `g<n>`), whose GPUs a CPU pool would pay for and never use."""
    return bool(re.match(r"[ag]\d+[a-z]*-", machine_type))


def machine_shape(machine_type: str) -> Optional[tuple[int, float]]:
    """(vCPUs, GiB) of a catalogued type, or of a predefined N1/N2/N2D/E2 type by its family's ratio;
    None when not known here."""
    if machine_type in SYSTEM_POOL_MACHINES:
        return SYSTEM_POOL_MACHINES[machine_type]
    m = _PREDEFINED.match(machine_type)
    if not m or m["family"] not in _GIB_PER_VCPU:
        return None
    vcpus = int(m["vcpus"])
    return vcpus, vcpus * _GIB_PER_VCPU[m["family"]][m["kind"]]


def system_node_room(machine_type: str) -> Optional[tuple[float, float]]:
    """(CPU, GiB) a pod can request on one CPU system node of `machine_type`, or None when unknown."""
    shape = machine_shape(machine_type)
    if shape is None:
        return None
    vcpus, memory_gib = shape
    cpu = vcpus - gke_reserved_cpu(vcpus) - SYSTEM_POOL_OVERHEAD_CPU
    capacity = memory_gib * (1 - KERNEL_MEMORY_FRACTION)
    memory = capacity - gke_reserved_memory_gib(memory_gib) - GKE_EVICTION_GIB - SYSTEM_POOL_OVERHEAD_MEMORY_GIB
    return cpu, memory


# GKE Autopilot's general-purpose compute class (the default class, where the Ray head and the preemption
# watcher run): the most one pod may request, and the GiB of memory per vCPU it must ask for (GKE
# "Resource requests in Autopilot", minimum and maximum per compute class; recalled, as the table could
# not be read back here: 30 vCPU, 110 GiB, 1:1 to 1:6.5). Autopilot rejects a pod above the maximum, so
# the config refuses a head beyond it before any resource; a request outside the ratio Autopilot raises,
# and so does infra/autopilot_pods.py, so the plan shows what runs.
# Only on the real cloud: newer GKE versions may allow more (then the check is merely conservative).
AUTOPILOT_GENERAL_PURPOSE_MAX_CPU = 30
AUTOPILOT_GENERAL_PURPOSE_MAX_MEMORY_GIB = 110
AUTOPILOT_GENERAL_PURPOSE_GIB_PER_CPU = (1.0, 6.5)


# ---------------------------------------------------------------- GPU nodes

GPU_NODE_DAEMONSET_CPU = 2.0
GPU_NODE_DAEMONSET_MEMORY_GIB = 16.0
"""The least a Ray worker must leave on a GPU node for what else runs there (anetd, fluentbit,
gke-metadata-server, the device plugin, Lustre/PD CSI nodes, the NCCL installer, the image pre-pull
pause pod, monitoring agents). GKE does not publish their sum: a request that leaves less is refused.
Only on a real node: `kubectl describe node` shows what they take."""


@dataclass(frozen=True)
class NodeFit:
    """What one Ray worker requests on a GPU node, against what GKE leaves for pods there."""

    machine_type: str
    cpu: int
    memory_gib: int
    shm_gib: int
    allocatable_cpu: float
    allocatable_memory_gib: float

    @property
    def headroom_cpu(self) -> float:
        """Allocatable CPU the worker leaves to the node's DaemonSets and GKE's own pods."""
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
    """(CPU, GiB) GKE leaves for pods on a GPU node: capacity minus its reservations and eviction threshold."""
    cpu = vcpus - gke_reserved_cpu(vcpus)
    memory = memory_gib * (1 - KERNEL_MEMORY_FRACTION) - gke_reserved_memory_gib(memory_gib) - GKE_EVICTION_GIB
    return cpu, memory


def gpu_node_room(vcpus: float, memory_gib: float) -> tuple[int, int]:
    """The largest whole (CPU, GiB) a worker may request: allocatable minus the DaemonSet budget."""
    cpu, memory = gpu_node_allocatable(vcpus, memory_gib)
    return math.floor(cpu - GPU_NODE_DAEMONSET_CPU), math.floor(memory - GPU_NODE_DAEMONSET_MEMORY_GIB)
