"""The gate's plan (`GatePlan`), the one "gate off" rule (`gate_in_force`), its typical duration, and the
bus bandwidth as nccl-tests computes it: busbw = algbw * (n-1)/n for all_gather, * 2(n-1)/n for all_reduce,
algbw = bytes / 1e9 / seconds (NVIDIA/nccl-tests src/all_gather.cu AllGatherGetBw, src/all_reduce.cu
AllReduceGetBw, doc/PERFORMANCE.md). Standard library only.
"""

from __future__ import annotations

import base64
import dataclasses
import json
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Optional, TypeVar

POLICIES = ("enforce", "warn", "off")
"""`job.gate`: enforce (a failed gate holds the attempt), warn, off."""
GB = 1e9

P = TypeVar("P")


def gate_in_force(policy: Optional[str], plan: Optional[P]) -> tuple[str, Optional[P]]:
    """The one rule of "gate off": a gate runs only under a policy other than `off` and with a plan; returns
    ("off", None) otherwise, else both as given. Every place that decides whether a gate runs asks this."""
    if not policy or policy == "off" or plan is None:
        return "off", None
    return policy, plan


@dataclass(frozen=True)
class GatePlan:
    """What to check and against which numbers (`infra.gate_plan.gate_plan_for_stack`), shipped as JSON."""

    node_count: int
    gpus_per_node: int
    gpu_name: str
    """A substring every device name must contain ("B200"; "cpu" on CPU)."""
    busbw_floor_gbps: float
    """Bus bandwidth the collective must reach; 0: one node, nothing to measure."""
    busbw_source: str
    mount_path: str
    storage_expected_gbps: float
    storage_floor_gbps: float
    storage_source: str
    storage_bytes_per_node: int
    storage_streams: int = 4
    backend: str = "nccl"
    device: str = "cuda"
    expect_net: Optional[str] = "gIB"
    """The NCCL net plugin the log must show; None: no NCCL log (gloo)."""
    collective: str = "all_gather"
    message_bytes: int = 1 << 30
    """Total bytes of the collective, as nccl-tests' "size"."""
    warmup_iters: int = 5
    iters: int = 20
    worker_resource: str = "GPU"
    timeout_s: float = 600.0
    python: str = "python"
    expect_nccl: Optional[str] = None
    """The NCCL release of the version-matrix row ("2.27.5"); None: not checked."""
    expect_gib: Optional[str] = None

    def __post_init__(self) -> None:
        if self.collective not in _BUS_FACTOR:
            raise ValueError(f"collective {self.collective!r}; allowed: {', '.join(_BUS_FACTOR)}")
        if self.node_count < 1 or self.gpus_per_node < 1:
            raise ValueError("node_count and gpus_per_node must be at least 1")

    @property
    def world_size(self) -> int:
        return self.node_count * self.gpus_per_node

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "GatePlan":
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})

    def encode(self) -> str:
        """The plan as one shell-safe token for the job's entrypoint."""
        return base64.urlsafe_b64encode(json.dumps(self.to_dict(), sort_keys=True).encode()).decode()

    @classmethod
    def decode(cls, token: str) -> "GatePlan":
        return cls.from_dict(json.loads(base64.urlsafe_b64decode(token.encode())))


def estimated_seconds(plan: GatePlan) -> float:
    """Typical (not a bound): job start and actors ~30 s, the processes ~30 s, the collective and the storage
    phase at the floor."""
    world = plan.world_size
    collective = (
        (plan.warmup_iters + plan.iters)
        * plan.message_bytes
        * _BUS_FACTOR[plan.collective](world)
        / (max(plan.busbw_floor_gbps, 1.0) * GB)
    )
    rate = plan.storage_expected_gbps or plan.storage_floor_gbps or 1.0
    storage = 2 * plan.node_count * plan.storage_bytes_per_node / (rate * GB)
    return 60.0 + collective + storage


def _bus_factor_all_gather(n: int) -> float:
    return (n - 1) / n


def _bus_factor_all_reduce(n: int) -> float:
    return 2 * (n - 1) / n


_BUS_FACTOR: dict[str, Callable[[int], float]] = {
    "all_gather": _bus_factor_all_gather,
    "all_reduce": _bus_factor_all_reduce,
}


def bus_bandwidth(collective: str, size_bytes: int, seconds: float, world: int) -> tuple[float, float]:
    """(algbw, busbw) in GB/s, as nccl-tests computes them."""
    algbw = size_bytes / GB / seconds
    return algbw, algbw * _BUS_FACTOR[collective](world)
