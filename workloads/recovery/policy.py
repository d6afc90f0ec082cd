"""The recovery policy: when the watcher looks, how often it restarts, how long it backs off
(`backoff_seconds * 2**restarts`, at most `max_backoff_seconds`), and the GPUs it waits for. Built at plan
time (`infra.run_plan.run_plan_for_stack`) and carried in run.json's `recovery`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class RecoveryPolicy:
    check_interval_seconds: float = 60.0
    max_restarts: int = 10
    backoff_seconds: float = 120.0
    max_backoff_seconds: float = 1800.0
    pool_gpus: int = 0
    """GPUs alive in Ray before a resubmission; 0: do not wait."""
    resubmit_missing: bool = False
    """`job.submit`: a spec with no job on the cluster is submitted."""

    def __post_init__(self) -> None:
        if self.check_interval_seconds <= 0 or self.max_restarts < 0 or self.backoff_seconds < 0:
            raise ValueError("check interval must be > 0, max restarts and backoff >= 0")
        if self.max_backoff_seconds < self.backoff_seconds:
            raise ValueError("max backoff must be at least the backoff")
        if self.pool_gpus < 0:
            raise ValueError("pool GPUs must be >= 0")

    @classmethod
    def from_config(cls, recovery: Any, *, pool_gpus: int = 0, resubmit_missing: bool = False) -> "RecoveryPolicy":
        return cls(
            check_interval_seconds=float(recovery.check_interval_seconds),
            max_restarts=int(recovery.max_restarts),
            backoff_seconds=float(recovery.backoff_seconds),
            max_backoff_seconds=float(recovery.max_backoff_seconds),
            pool_gpus=int(pool_gpus),
            resubmit_missing=bool(resubmit_missing),
        )

    def backoff(self, restarts_so_far: int) -> float:
        return min(self.backoff_seconds * (2 ** min(restarts_so_far, 62)), self.max_backoff_seconds)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "RecoveryPolicy":
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})
