"""The acceptance gate's plan: what to check and against which numbers (`GatePlan`), when a gate runs at
all (`gate_in_force`, the one rule of `job.gate: off`), what it typically takes, and the nccl-tests
bandwidth arithmetic the plan and the verdict share.

Bus bandwidth, as nccl-tests computes it: busbw = algbw * (n-1)/n for all_gather and algbw * 2(n-1)/n for
all_reduce, algbw = bytes / 1e9 / seconds (NVIDIA/nccl-tests src/all_gather.cu AllGatherGetBw,
src/all_reduce.cu AllReduceGetBw, doc/PERFORMANCE.md).

Imports: the standard library only (the plan travels to the gate job's driver, the watcher and the hook).
"""

from __future__ import annotations

import base64
import dataclasses
import json
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Optional, TypeVar

POLICIES = ("enforce", "warn", "off")
"""`job.gate`: enforce (a failed gate holds the attempt), warn (its lines are shown, the attempt goes in), off."""
GB = 1e9
"""nccl-tests report GB/s as 1e9 bytes per second; so does the gate, for busbw and Lustre alike."""

P = TypeVar("P")


def gate_in_force(policy: Optional[str], plan: Optional[P]) -> tuple[str, Optional[P]]:
    """The one rule of "gate off": a gate runs only under a policy other than `off` AND with a plan. Returns
    (policy, plan) as every party must see them: ("off", None) when either says no gate (an absent policy
    is off), otherwise both as given. `plan` is a `GatePlan` or its dict: the rule does not look inside.

    Every place that decides whether a gate runs asks this: the plan-time builders (`infra.training_job`,
    `infra.run_plan`), the run's owner (`GateSetup.on`), the hook, `jobctl submit` and the deploy-time
    estimate (tools/deploy_time.py)."""
    if not policy or policy == "off" or plan is None:
        return "off", None
    return policy, plan


@dataclass(frozen=True)
class GatePlan:
    """What to check and against which numbers. Built on the client from the stack config and
    data/acceptance_gate.yaml (`infra.gate_plan.gate_plan_for_stack`), shipped to the driver as JSON."""

    node_count: int
    gpus_per_node: int
    gpu_name: str
    """A substring every device name must contain (`torch.cuda.get_device_name`, e.g. "B200"); "cpu" on CPU."""
    busbw_floor_gbps: float
    """Bus bandwidth the collective must reach; 0 checks nothing (one node: no fabric to measure)."""
    busbw_source: str
    mount_path: str
    storage_expected_gbps: float
    """The Lustre instance's aggregate throughput, capacity x tier."""
    storage_floor_gbps: float
    storage_source: str
    storage_bytes_per_node: int
    storage_streams: int = 4
    backend: str = "nccl"
    device: str = "cuda"
    expect_net: Optional[str] = "gIB"
    """The NCCL net plugin the log must show ("Using network gIB"); None: no NCCL log to check (gloo)."""
    collective: str = "all_gather"
    message_bytes: int = 1 << 30
    """Total bytes of the collective, as nccl-tests' "size" (all_gather: the gathered output)."""
    warmup_iters: int = 5
    iters: int = 20
    worker_resource: str = "GPU"
    """Ray resource that marks a worker node (the head has none of it)."""
    timeout_s: float = 600.0
    """Upper bound of the whole run; each phase gets a share (`_deadline`)."""
    python: str = "python"
    """The interpreter the gate job's entrypoint runs (the image's; tests give this venv's)."""
    expect_nccl: Optional[str] = None
    """The NCCL release the stack's version-matrix row says the pods load (e.g. "2.27.5"); None: not checked."""
    expect_gib: Optional[str] = None
    """The gIB installer tag of the row; reported beside what NCCL shows (workloads/version_check.py)."""

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
        """The plan as one shell-safe token (urlsafe base64 of its JSON) for the job's entrypoint."""
        return base64.urlsafe_b64encode(json.dumps(self.to_dict(), sort_keys=True).encode()).decode()

    @classmethod
    def decode(cls, token: str) -> "GatePlan":
        return cls.from_dict(json.loads(base64.urlsafe_b64decode(token.encode())))


def estimated_seconds(plan: GatePlan) -> float:
    """What the gate typically takes (the plan's deploy-time step, the cost line before a run).

    Job start and actors ~30 s, the per-GPU processes importing torch and forming the group ~30 s, the
    collective at the floor, and the write and read of the storage phase at the floor (or, with no floor,
    the expected throughput). Typical, not a bound: `timeout_s` is the bound."""
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
    """(algbw, busbw) in GB/s, as nccl-tests computes them (module docstring)."""
    algbw = size_bytes / GB / seconds
    return algbw, algbw * _BUS_FACTOR[collective](world)
