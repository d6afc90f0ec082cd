"""The run's plan-time numbers, shared by the job and the watcher: the checkpoint write time and the save
period derived from it (`job.maxLostMinutes`), the GPU node-hour prices (the first rung's and, on a capacity
ladder, each rung's), the gang wait's bound and rungs (`gpuPool.capacity`), the recovery policy, and the
watcher's `RunPlan`.

Pure builders of the validated config (no resources, no Outputs). The `RunPlan` is built once per
program, in `__main__.py` before any resource (`run_plan_for_stack`), and handed whole to the components:
infra/training_job.py takes the save period, the gate and the gang wait from it, infra/watcher_deployment.py
ships it as run.json. `python -m jobctl` (jobctl/stack.py) builds the same plan with the same function; the
offline plan (tools/estimates.py) shows the same numbers.
"""

from __future__ import annotations

import math
import posixpath
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Optional

from infra.config import ConfigError, StackConfig, lustre_aggregate_mb_s
from infra.placement import gpu_nodes_autoscaled, is_ladder, rung_node_hour
from infra.prices import price_table
from infra.stack_context import GpuPoolFacts
from workloads.gang_wait import KEEP_WHY
from workloads.gate import GatePlan
from workloads.job_spec import run_checkpoint_subdir_for, run_id_of
from workloads.recovery import RecoveryPolicy
from workloads.run_owner import GateSetup, RunPlan

if TYPE_CHECKING:
    from infra.ray_cluster import RayTarget

CHECKPOINTS_MOUNT = "/checkpoints"
"""Where the watcher sees `<ray.mountPath>/checkpoints` (the run's resume step and steps lost, and the
stale `tmp_step_*` it removes before a resubmission: workloads/checkpoints.py)."""


NEMO_RL_DEFAULT_SAVE_PERIOD = 10
"""`checkpointing.save_period` of NeMo-RL's examples/configs/grpo_math_1B.yaml, which every recipe's config
inherits: used only when the plan has no step-time estimate for the recipe."""
CHECKPOINT_BYTES_PER_PARAM = 16
"""Bytes per parameter of one saved training checkpoint (mixed-precision Adam; tools/sizing.py says why)."""
SAVE_OVERHEAD = 0.10
"""Without `job.maxLostMinutes`, a save period keeps writing checkpoints to at most this share of training time."""


def derived_save_period(step_seconds: "float | None", write_seconds: float, max_lost_minutes: "float | None") -> int:
    """`checkpointing.save_period` from a bound on the training one preemption may throw away.

    A preemption loses the steps since the last complete checkpoint, and the save in flight: at worst
    `save_period x step + write`. With `job.maxLostMinutes` the period is the largest that keeps that
    within the bound (at least 1: a step cannot be split). Without one it is the smallest period whose
    writes take at most `SAVE_OVERHEAD` of the training time, so the loss stays near a step and the
    checkpoint's own write time instead of NeMo-RL's default of 10 steps (hours on the big recipes).
    With no step-time estimate: NeMo-RL's default."""
    if not step_seconds:
        return NEMO_RL_DEFAULT_SAVE_PERIOD
    if max_lost_minutes is not None:
        return max(1, int((max_lost_minutes * 60 - write_seconds) // step_seconds))
    return max(1, math.ceil(write_seconds / (SAVE_OVERHEAD * step_seconds)))


def checkpoint_write_seconds(params_billion: float, aggregate_mb_s: float) -> float:
    """One checkpoint written at the Lustre instance's aggregate throughput (MB/s): the best case."""
    return params_billion * 1e9 * CHECKPOINT_BYTES_PER_PARAM / (aggregate_mb_s * 1e6) if aggregate_mb_s > 0 else 0.0


def checkpoint_write_seconds_for(cfg: StackConfig) -> float:
    """The plan's estimate of writing one of the recipe's checkpoints to the stack's Lustre (the job's save
    period is derived from it; the offline plan shows the same number, tools/sizing.py)."""
    return checkpoint_write_seconds(
        cfg.recipe.model_params_billion,
        lustre_aggregate_mb_s(cfg.lustre.capacity_gib, cfg.lustre.per_unit_storage_throughput),
    )


def save_period_for(cfg: StackConfig) -> int:
    """The run's `checkpointing.save_period` (`RunPlan.save_period`; `job_spec_for_stack` writes the run plan's
    into the entrypoint)."""
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


def gang_wait_minutes(cfg: StackConfig) -> Optional[int]:
    """How long the whole gang is waited for before an attempt (`gpuPool.capacity.maxWaitMinutes`); None
    without `gpuPool.capacity`. Read once, into `RunPlan.gang_max_wait_minutes`: the watcher's wait and the
    deploy's wait for the RayCluster (infra/training_job.py takes it from the run plan) are bounded alike."""
    capacity = cfg.gpu_pool.capacity
    return capacity.max_wait_minutes if capacity is not None else None


def gang_values(cfg: StackConfig, gpu_pool: GpuPoolFacts) -> dict[str, Any]:
    """The `RunPlan` fields of the gang wait: with `gpuPool.capacity` (any number of rungs) a wait bounded by
    its `maxWaitMinutes`; without it none (the owner then waits, unbounded, for the pool's GPUs in Ray, as
    before the ladder). `onTimeout: releaseWorkers` frees the partial gang's nodes: every GPU pool is autoscaled
    from 0 (`infra.placement.gpu_nodes_autoscaled`). The RayCluster it looks at is `ray_target_values`'s."""
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
    }


def ray_target_values(cfg: StackConfig, ray: Optional[RayTarget]) -> dict[str, Any]:
    """The `RunPlan` fields of the RayCluster the owner patches: the gang wait's look and release, and the
    release of the workers when the run ends (`recovery.releaseWorkersAfterRun`), on every stack. None (the
    day-2 CLI on a laptop, which cannot reach the Kubernetes API from inside the cluster): no target, so
    neither the gang wait nor the release at the run's end happens there."""
    if ray is None:
        return {}
    return {
        "ray_namespace": ray.namespace,
        "ray_cluster": ray.cluster_name,
        "ray_worker_group": ray.worker_group,
    }


def recovery_values(cfg: StackConfig, gpu_pool: GpuPoolFacts) -> dict[str, Any]:
    """The watcher's recovery policy (`RunPlan.recovery`): the `recovery` section, the GPUs it waits for before a
    resubmission (the pool's, from its facts: the one count of them) and, with `job.submit` on (the deploy submits
    the job), a spec without a job on the cluster resubmitted."""
    pool_gpus = gpu_pool.node_count * gpu_pool.gpus_per_node
    return RecoveryPolicy.from_config(cfg.recovery, pool_gpus=pool_gpus, resubmit_missing=cfg.job.submit).to_dict()


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
    checkpoint write time, the gang wait (`gang_values`) and the recovery policy (`recovery_values`)."""
    recipe = cfg.recipe
    gate = GateSetup.of(cfg.gate_policy, gate_plan)
    step = recipe.step_seconds
    by_rung = rung_node_hour_usd(cfg)
    return RunPlan(
        run_id=run_id_of(recipe, cfg.job, stack),
        gate_policy=gate.policy,
        gate_plan=gate.plan.to_dict() if gate.plan is not None else None,
        checkpoint_dir=posixpath.join(CHECKPOINTS_MOUNT, run_checkpoint_subdir_for(recipe, cfg.job, stack)),
        node_count=gpu_pool.node_count,
        node_hour_usd=node_hour_usd(cfg, by_rung),
        rung_node_hour_usd=by_rung,
        node_hour_estimate=node_hour_estimate(cfg),
        budget_usd=cfg.job.budget_usd,
        save_period=save_period_for(cfg),
        step_seconds=round(step, 1) if step else None,
        checkpoint_write_seconds=round(checkpoint_write_seconds_for(cfg), 1),
        recovery=recovery_values(cfg, gpu_pool),
        # The owner releases only where it has a RayCluster to patch (`ray_target_values`).
        release_workers_after_run=cfg.recovery.release_workers_after_run,
        **gang_values(cfg, gpu_pool),
        **ray_target_values(cfg, ray),
    )
