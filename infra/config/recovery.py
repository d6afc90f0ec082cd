"""`recovery`: spot-preemption recovery by the in-cluster watcher (workloads/recovery/)."""

from __future__ import annotations

from pydantic import Field

from infra.config.base import Model
from infra.config.errors import KeyedValueError


def check_backoff_bounds(recovery: RecoveryConfig) -> None:
    """The doubling wait's bound is at least the first wait."""
    if recovery.max_backoff_seconds < recovery.backoff_seconds:
        raise KeyedValueError(
            "maxBackoffSeconds",
            f"{recovery.max_backoff_seconds} is below recovery.backoffSeconds ({recovery.backoff_seconds}); allowed: "
            f"{recovery.backoff_seconds} to 86400",
        )


class ShrinkConfig(Model):
    """Training on fewer GPU nodes while spot capacity is short (docs/preemption-recovery.md, "Training on fewer
    nodes")."""

    enabled: bool = False
    """When the whole gang has not come back `waitMinutes` after a preemption, resubmit the same run (same run id,
    checkpoints and global batch) on the largest node count of the plan's size ladder that the nodes alive in Ray can
    hold, on a lease (`leaseMinutes`); when the lease ends on a whole checkpoint, resubmit at full size if the nodes
    are back, else on a new lease. Refused where the recipe can train on no smaller node count (the plan says why)."""
    min_nodes: int = Field(1, ge=1, le=1024)
    """The fewest GPU nodes to train on; smaller sizes of the ladder are left out."""
    wait_minutes: int = Field(15, ge=0, le=10080)
    """How long after a preemption to wait for the whole gang before training on fewer nodes."""
    lease_minutes: int = Field(60, ge=5, le=10080)
    """How long an attempt on fewer nodes trains before it saves a whole checkpoint and ends (NeMo-RL's
    `checkpointing.checkpoint_must_save_by`), so that the run grows back to its full size within one lease of the
    nodes' return; at most one save period of training is lost per change of size."""


class RecoveryConfig(Model):
    """Spot-preemption recovery: the in-cluster watcher that resubmits a preempted job (workloads/recovery/)."""

    enabled: bool = True
    """Run the preemption watcher (a small Deployment on the CPU pool). After a preemption-like failure it resubmits the
    same job, which resumes from the latest checkpoint on Lustre; a job that failed on its own (e.g. a Python exception)
    or was stopped is never resubmitted."""
    check_interval_seconds: int = Field(60, ge=5, le=3600)
    """How often the watcher looks at the job's status."""
    max_restarts: int = Field(10, ge=0, le=1000)
    """Consecutive automatic resubmissions before the watcher gives up; a submission by hand starts the count again."""
    backoff_seconds: int = Field(120, ge=0, le=86400)
    """Wait after a preemption before the first resubmission (time for GKE to bring a replacement spot node); doubles
    with every further consecutive restart."""
    max_backoff_seconds: int = Field(1800, ge=0, le=86400)
    """Upper bound of the doubling wait; at least `backoffSeconds`."""
    release_workers_after_run: bool = True
    """When a run ends for any reason (succeeded, gave up, stopped, budget), the watcher scales the Ray GPU worker group
    to 0 and says so in one line, so the autoscaler removes the GPU nodes after its scale-down delay; `python -m jobctl
    submit` scales it back before the next run. false: keep the workers (and their nodes, billed) to look at them after
    the run. A later `pulumi up` does not restore a released group (docs/day-2.md)."""

    shrink: ShrinkConfig = Field(default_factory=ShrinkConfig)
    """Training on fewer GPU nodes while the whole gang is short (off by default)."""

    checks = (check_backoff_bounds,)
