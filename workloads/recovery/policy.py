"""The recovery policy: when the watcher looks, how often it restarts and how long it backs off.

Restarts are capped: when the failed attempt already was the `max_restarts`-th consecutive automatic
restart, the watcher gives up whatever the cause. Between restarts it waits
`backoff_seconds * 2**restarts_so_far` (at most `max_backoff_seconds`) after the failed attempt ended.
Before any resubmission it waits until Ray reports at least `pool_gpus` GPUs on ALIVE nodes (the GPU
pool's; GKE may take many minutes to bring a replacement spot node, and a job submitted before fails in
NeMo-RL's placement wait). With `resubmit_missing` (`job.submit` on: the deploy submits the job, so it
should exist) a watcher that finds no job of its spec at all and nothing recorded submits it too.

The stack's policy is computed once, at plan time (`infra.run_plan.run_plan_for_stack`, from the
`recovery` section, the GPU pool and `job.submit`), and travels in the run plan (`RunPlan.recovery`, the
watcher's run.json), never as flags.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class RecoveryPolicy:
    """When to look and how often to restart. `infra.config.RecoveryConfig` holds the stack's values."""

    check_interval_seconds: float = 60.0
    max_restarts: int = 10
    backoff_seconds: float = 120.0
    max_backoff_seconds: float = 1800.0
    pool_gpus: int = 0
    """GPUs that must be alive in Ray before a resubmission (the GPU pool's); 0: do not wait."""
    resubmit_missing: bool = False
    """The deploy submits the job (`job.submit`): a spec with no job on the cluster is submitted."""

    def __post_init__(self) -> None:
        if self.check_interval_seconds <= 0 or self.max_restarts < 0 or self.backoff_seconds < 0:
            raise ValueError("check interval must be > 0, max restarts and backoff >= 0")
        if self.max_backoff_seconds < self.backoff_seconds:
            raise ValueError("max backoff must be at least the backoff")
        if self.pool_gpus < 0:
            raise ValueError("pool GPUs must be >= 0")

    @classmethod
    def from_config(cls, recovery: Any, *, pool_gpus: int = 0, resubmit_missing: bool = False) -> "RecoveryPolicy":
        """From the stack's `recovery` section (`infra.config.RecoveryConfig`), the pool's GPUs and `job.submit`."""
        return cls(
            check_interval_seconds=float(recovery.check_interval_seconds),
            max_restarts=int(recovery.max_restarts),
            backoff_seconds=float(recovery.backoff_seconds),
            max_backoff_seconds=float(recovery.max_backoff_seconds),
            pool_gpus=int(pool_gpus),
            resubmit_missing=bool(resubmit_missing),
        )

    def backoff(self, restarts_so_far: int) -> float:
        """Seconds to wait after a failure, given how many automatic restarts preceded it."""
        return min(self.backoff_seconds * (2 ** min(restarts_so_far, 62)), self.max_backoff_seconds)

    def to_dict(self) -> dict[str, Any]:
        """The policy as the run plan carries it (`RunPlan.recovery`, the watcher's run.json)."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "RecoveryPolicy":
        """The policy of `to_dict`; a key it does not know is left out, a missing one is the default."""
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})
