"""The run's plan-time numbers, shared by the job and the watcher: the checkpoint write time and the save
period derived from it (`job.maxLostMinutes`), the pool's GPU node-hour price, and the watcher's `RunPlan`.

Pure builders of the validated config (no resources, no Outputs), in a module of their own so that the
two components that need them (infra/training_job.py writes the save period into the entrypoint,
infra/watcher_deployment.py ships it in run.json) share one computation without importing each other;
the offline plan (tools/estimates.py) shows the same numbers.
"""

from __future__ import annotations

import posixpath
from typing import Optional

from infra.config import ConfigError, Provisioning, StackConfig, lustre_aggregate_mb_s
from infra.prices import PriceError, gpu_node_hour_usd, price_table
from workloads.acceptance_gate import GatePlan
from workloads.job_spec import (
    CHECKPOINTS_DIR,
    PoolShape,
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


def node_hour_usd(cfg: StackConfig) -> Optional[float]:
    """The plan's price of one GPU node-hour at the pool's provisioning (infra/prices.py, with
    `cost.priceOverrides`); None when the table has no such price (the ledger then shows no spend)."""
    try:
        # An unknown `cost.priceOverrides` key is the offline plan's to report (its estimates read the same table).
        table = price_table(cfg)
        return gpu_node_hour_usd(
            table,
            cfg.flavour_spec.machine_type,
            cfg.region,
            spot=cfg.gpu_pool.provisioning is Provisioning.SPOT,
            autopilot=cfg.cluster.mode == "autopilot",
        )
    except (ConfigError, PriceError):
        return None


def run_plan_for_stack(stack: str, cfg: StackConfig, gpu_pool: PoolShape, gate_plan: Optional[GatePlan]) -> RunPlan:
    """What the watcher needs besides the spec, as plain values: the gate (policy and plan), where it sees
    the checkpoints, the pool's nodes and node-hour price, `job.budgetUsd`, the save period and the plan's
    step time (the recipe's expected hours over its steps)."""
    recipe = cfg.recipe
    policy = cfg.gate_policy if gate_plan is not None else "off"
    on_lustre = run_checkpoint_dir(recipe, cfg.job, cfg.ray.mount_path, stack)
    below = posixpath.relpath(on_lustre, posixpath.join(posixpath.normpath(cfg.ray.mount_path), CHECKPOINTS_DIR))
    step = recipe.step_seconds
    return RunPlan(
        gate_policy=policy,
        gate_plan=gate_plan.to_dict() if gate_plan is not None and policy != "off" else None,
        checkpoint_dir=posixpath.join(CHECKPOINTS_MOUNT, below),
        node_count=gpu_pool.node_count,
        node_hour_usd=node_hour_usd(cfg),
        budget_usd=cfg.job.budget_usd,
        save_period=save_period_for(cfg),
        step_seconds=round(step, 1) if step else None,
    )
