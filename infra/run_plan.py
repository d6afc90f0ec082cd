"""The run's plan-time numbers, shared by the job and the watcher: the checkpoint write time and the save
period derived from it (`job.maxLostMinutes`), the GPU node-hour prices (the first rung's and, on a capacity
ladder, each rung's), the gang wait's bound and rungs (`gpuPool.capacity`), and the watcher's `RunPlan`.

Pure builders of the validated config (no resources, no Outputs), in a module of their own so that the
two components that need them (infra/training_job.py writes the save period into the entrypoint,
infra/watcher_deployment.py ships it in run.json) share one computation without importing each other;
the offline plan (tools/estimates.py) shows the same numbers.
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping
from typing import Any, Optional, Protocol

from infra.config import ConfigError, StackConfig, lustre_aggregate_mb_s
from infra.placement import gpu_nodes_autoscaled, is_ladder, rung_node_hour
from infra.prices import price_table
from infra.stack_context import GpuPoolFacts
from workloads.acceptance_gate import GatePlan
from workloads.gang_wait import KEEP_WHY
from workloads.job_spec import (
    CHECKPOINTS_DIR,
    checkpoint_write_seconds,
    derived_save_period,
    run_checkpoint_dir,
)
from workloads.run_owner import RunPlan

CHECKPOINTS_MOUNT = "/checkpoints"
"""Where the watcher sees `<ray.mountPath>/checkpoints` (the run's resume step and steps lost, and the
stale `tmp_step_*` it removes before a resubmission: workloads/checkpoints.py)."""


def checkpoint_write_seconds_for(cfg: StackConfig) -> float:
    """The plan's estimate of writing one of the recipe's checkpoints to the stack's Lustre (the job's save
    period is derived from it; the offline plan shows the same number, tools/sizing.py)."""
    return checkpoint_write_seconds(
        cfg.recipe.model_params_billion,
        lustre_aggregate_mb_s(cfg.lustre.capacity_gib, cfg.lustre.per_unit_storage_throughput),
    )


def save_period_for(cfg: StackConfig) -> int:
    """The job's `checkpointing.save_period` (what `job_spec_for_stack` writes into the entrypoint)."""
    return derived_save_period(cfg.recipe.step_seconds, checkpoint_write_seconds_for(cfg), cfg.job.max_lost_minutes)


def rung_node_hour_usd(cfg: StackConfig) -> dict[str, float]:
    """A ladder's price of one GPU node-hour per rung label (`{"spot": ..., "flexStart": ..., "onDemand": ...}`),
    exactly the numbers of the plan's "Capacity ladder" (`infra.placement.rung_node_hour`, which
    `capacity_ladder` prices each rung with): the ledger prices an attempt's nodes of each rung at its rung's
    price. A rung the table has no price for is left out; {} for one rung (every node is of it: `node_hour_usd`)."""
    if not is_ladder(cfg):
        return {}
    try:
        table = price_table(cfg)
    except ConfigError:  # an unknown `cost.priceOverrides` key: the offline plan reports it
        return {}
    prices = {rung.label: rung_node_hour(table, cfg, rung)[1] for rung in cfg.gpu_pool.ladder}
    return {label: price for label, price in prices.items() if price is not None}


def node_hour_usd(cfg: StackConfig, by_rung: Mapping[str, float]) -> Optional[float]:
    """The plan's price of one GPU node-hour of the FIRST rung, what an attempt whose mix of rungs is not known
    is priced at: on a ladder its first rung's price in `by_rung` (`rung_node_hour_usd`); with one rung that
    rung's price from the same function (`infra.placement.rung_node_hour`: a one-rung flexStart pool at the
    flex-start price, on Autopilot with the premium), as the cost estimate prices the pool. None when the
    table has no such price (the ledger then shows no spend)."""
    if is_ladder(cfg):
        return by_rung.get(cfg.gpu_pool.ladder[0].label)
    try:
        # An unknown `cost.priceOverrides` key is the offline plan's to report (its estimates read the same table).
        table = price_table(cfg)
    except ConfigError:
        return None
    return rung_node_hour(table, cfg, cfg.gpu_pool.ladder[0])[1]


def node_hour_estimate(cfg: StackConfig) -> Optional[str]:
    """Why a node-hour price of run.json (`node_hour_usd`, `rung_node_hour_usd`) is an estimate of
    data/prices.yaml, per rung (`"flexStart: 0.75 x ..."`); None when each was read from its cited source. The
    ledger says its spend rests on estimated prices when this is set."""
    try:
        table = price_table(cfg)
    except ConfigError:
        return None
    why = [(rung.label, rung_node_hour(table, cfg, rung)[2]) for rung in cfg.gpu_pool.ladder]
    return "; ".join(f"{label}: {reason}" for label, reason in why if reason) or None


class RayTarget(Protocol):
    """The RayCluster the gang wait looks at (the `RayCluster` component has these)."""

    @property
    def cluster_name(self) -> str: ...

    @property
    def namespace(self) -> str: ...

    @property
    def worker_group(self) -> str: ...


def gang_wait_minutes(cfg: StackConfig) -> Optional[int]:
    """How long the whole gang is waited for before an attempt (`gpuPool.capacity.maxWaitMinutes`); None
    without `gpuPool.capacity`. The one reading of it: the watcher's wait (`gang_values`) and the deploy's
    wait for the RayCluster (`infra.training_job.ray_cluster_timeout_s`) are bounded alike."""
    capacity = cfg.gpu_pool.capacity
    return capacity.max_wait_minutes if capacity is not None else None


def gang_values(cfg: StackConfig, gpu_pool: GpuPoolFacts, ray: Optional[RayTarget]) -> dict[str, Any]:
    """The `RunPlan` fields of the gang wait: with `gpuPool.capacity` (any number of rungs) a wait bounded by
    its `maxWaitMinutes`; without it none (the owner then waits, unbounded, for the pool's GPUs in Ray, as
    before the ladder). `onTimeout: releaseWorkers` frees the partial gang's nodes: every GPU pool is autoscaled from 0
    (`infra.placement.gpu_nodes_autoscaled`).
    The RayCluster, worker group and namespace are the Ray component's own (`ray`); None (the day-2 CLI on a
    laptop, which cannot reach the Kubernetes API from inside the cluster): no gang wait there."""
    capacity = cfg.gpu_pool.capacity
    if capacity is None:
        return {}
    release = capacity.on_timeout == "releaseWorkers" and gpu_nodes_autoscaled(cfg)
    rungs = tuple((p.name, p.rung) for p in gpu_pool.rung_pools)
    return {
        "gang_max_wait_minutes": gang_wait_minutes(cfg),
        "gang_on_timeout": "releaseWorkers" if release else "keep",
        "gang_kept_why": KEEP_WHY,
        "gang_rungs": rungs,
        # One rung: every GPU node is of it, whatever its pool is called (Autopilot names its pools itself).
        "gang_default_rung": None if rungs else cfg.gpu_pool.ladder[0].label,
        **(
            {"ray_namespace": ray.namespace, "ray_cluster": ray.cluster_name, "ray_worker_group": ray.worker_group}
            if ray is not None
            else {}
        ),
    }


def run_plan_for_stack(
    stack: str,
    cfg: StackConfig,
    gpu_pool: GpuPoolFacts,
    gate_plan: Optional[GatePlan],
    ray: Optional[RayTarget] = None,
) -> RunPlan:
    """What the watcher needs besides the spec, as plain values: the gate (policy and plan), where it sees
    the checkpoints, the pool's nodes and node-hour prices (the first rung's, and each rung's on a ladder),
    `job.budgetUsd`, the save period, the plan's step time (the recipe's expected hours over its steps) and
    the gang wait (`gang_values`)."""
    recipe = cfg.recipe
    policy = cfg.gate_policy if gate_plan is not None else "off"
    on_lustre = run_checkpoint_dir(recipe, cfg.job, cfg.ray.mount_path, stack)
    below = posixpath.relpath(on_lustre, posixpath.join(posixpath.normpath(cfg.ray.mount_path), CHECKPOINTS_DIR))
    step = recipe.step_seconds
    by_rung = rung_node_hour_usd(cfg)
    return RunPlan(
        gate_policy=policy,
        gate_plan=gate_plan.to_dict() if gate_plan is not None and policy != "off" else None,
        checkpoint_dir=posixpath.join(CHECKPOINTS_MOUNT, below),
        node_count=gpu_pool.node_count,
        node_hour_usd=node_hour_usd(cfg, by_rung),
        rung_node_hour_usd=by_rung,
        node_hour_estimate=node_hour_estimate(cfg),
        budget_usd=cfg.job.budget_usd,
        save_period=save_period_for(cfg),
        step_seconds=round(step, 1) if step else None,
        **gang_values(cfg, gpu_pool, ray),
    )
