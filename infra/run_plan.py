"""The run's plan-time numbers, shared by the job and the watcher: the save period (`job.maxLostMinutes`), the
GPU node-hour prices, the gang wait, the recovery policy, and the `RunPlan` that `__main__.py` builds once and
hands whole to the job and the watcher (run.json); `python -m jobctl` and the offline plan call the same functions.
"""

from __future__ import annotations

import math
import posixpath
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Optional

from infra.config import ConfigError, StackConfig, lustre_aggregate_mb_s
from infra.naming import PROJECT
from infra.placement import is_ladder, rung_node_hour
from infra.prices import price_table
from infra.stack_context import GpuPoolFacts
from workloads.gang_wait import KEEP_WHY
from workloads.gate import GatePlan
from workloads.job_spec import PoolShape, run_checkpoint_subdir_for, run_id_of, train_global_batch_size
from workloads.recipes import TrainingBackend
from workloads.recovery import RecoveryPolicy
from workloads.run_owner import GateSetup, RunPlan
from workloads.size_ladder import NodeCount, Shape, ladder, size_overrides, smaller_sizes

if TYPE_CHECKING:
    from infra.ray_cluster import RayTarget

CHECKPOINTS_MOUNT = "/checkpoints"
"""Where the watcher sees `<ray.mountPath>/checkpoints` (workloads/checkpoints.py)."""


NEMO_RL_DEFAULT_SAVE_PERIOD = 10
"""`checkpointing.save_period` of NeMo-RL's examples/configs/grpo_math_1B.yaml, which every recipe inherits."""
CHECKPOINT_BYTES_PER_PARAM = 16
"""Bytes per parameter of one saved training checkpoint (mixed-precision Adam; tools/sizing.py says why)."""
SAVE_OVERHEAD = 0.10
"""Without `job.maxLostMinutes`, a save period keeps writing checkpoints to at most this share of training time."""


def derived_save_period(step_seconds: "float | None", write_seconds: float, max_lost_minutes: "float | None") -> int:
    """`checkpointing.save_period`: a preemption loses at worst `save_period x step + write`. With
    `job.maxLostMinutes` the largest period within it (at least 1); else the smallest whose writes take at most
    `SAVE_OVERHEAD` of training time (NeMo-RL's 10 steps are hours on the big recipes)."""
    if not step_seconds:
        return NEMO_RL_DEFAULT_SAVE_PERIOD
    if max_lost_minutes is not None:
        return max(1, int((max_lost_minutes * 60 - write_seconds) // step_seconds))
    return max(1, math.ceil(write_seconds / (SAVE_OVERHEAD * step_seconds)))


def checkpoint_write_seconds(params_billion: float, aggregate_mb_s: float) -> float:
    """One checkpoint written at the Lustre instance's aggregate throughput (MB/s): the best case."""
    return params_billion * 1e9 * CHECKPOINT_BYTES_PER_PARAM / (aggregate_mb_s * 1e6) if aggregate_mb_s > 0 else 0.0


STATE_SUBPATH = ".nemo-rl-gke/watcher"
"""Where on Lustre the watcher keeps its state and the run ledger (its pod mounts it at /state)."""


def ledger_on_lustre(mount_path: str, stack: str) -> str:
    """The run ledger on Lustre as the Ray head mounts it (the hook and `jobctl status` read it there)."""
    from workloads.ledger import ledger_path

    return str(ledger_path(posixpath.join(posixpath.normpath(mount_path), STATE_SUBPATH, f"{stack}.json")))


def checkpoint_write_seconds_for(cfg: StackConfig) -> float:
    """One of the recipe's checkpoints written to the stack's Lustre (the offline plan shows the same number)."""
    return checkpoint_write_seconds(
        cfg.recipe.model_params_billion,
        lustre_aggregate_mb_s(cfg.lustre.capacity_gib, cfg.lustre.per_unit_storage_throughput),
    )


def save_period_for(cfg: StackConfig) -> int:
    """`RunPlan.save_period`, which `job_spec_for_stack` writes into the entrypoint."""
    return derived_save_period(cfg.recipe.step_seconds, checkpoint_write_seconds_for(cfg), cfg.job.max_lost_minutes)


def _rungs(cfg: StackConfig) -> list[tuple[str, Optional[float], Optional[str]]]:
    """(label, node-hour price, why it is an estimate) of each rung (`infra.placement.rung_node_hour`, what the
    plan's "Capacity ladder" shows); [] with an unknown `cost.priceOverrides` key, the offline plan's to report."""
    try:
        table = price_table(cfg)
    except ConfigError:
        return []
    return [(rung.label, *rung_node_hour(table, cfg, rung)[1:3]) for rung in cfg.gpu_pool.ladder]


def rung_node_hour_usd(cfg: StackConfig) -> dict[str, float]:
    """A ladder's GPU node-hour price per rung label; a rung without a price is left out; {} for one rung."""
    if not is_ladder(cfg):
        return {}
    return {label: price for label, price, _ in _rungs(cfg) if price is not None}


def node_hour_usd(cfg: StackConfig, by_rung: Mapping[str, float]) -> Optional[float]:
    """The FIRST rung's GPU node-hour price, for an attempt of unknown mix; None when the table has none (the
    ledger then shows no spend)."""
    if is_ladder(cfg):
        return by_rung.get(cfg.gpu_pool.ladder[0].label)
    return next((price for _, price, _ in _rungs(cfg)), None)


def node_hour_estimate(cfg: StackConfig) -> Optional[str]:
    """Why run.json's node-hour prices are estimates, per rung (`"flexStart: 0.75 x ..."`); None when each was
    read from its cited source."""
    return "; ".join(f"{label}: {reason}" for label, _, reason in _rungs(cfg) if reason) or None


def gang_wait_minutes(cfg: StackConfig) -> Optional[int]:
    """`gpuPool.capacity.maxWaitMinutes`, the bound of the watcher's and the deploy's wait for the gang."""
    capacity = cfg.gpu_pool.capacity
    return capacity.max_wait_minutes if capacity is not None else None


def gang_values(cfg: StackConfig, gpu_pool: GpuPoolFacts) -> dict[str, Any]:
    """The `RunPlan` fields of the gang wait, with `gpuPool.capacity` only (without it the owner waits, unbounded,
    for the pool's GPUs in Ray); `releaseWorkers` only where the GPU pools autoscale from 0."""
    capacity = cfg.gpu_pool.capacity
    if capacity is None:
        return {}
    release = capacity.on_timeout == "releaseWorkers"  # every GPU pool autoscales from 0 (infra/cluster.py)
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
    """The `RunPlan` fields of the RayCluster the owner looks at and patches; none for the day-2 CLI (`ray`
    None), which has no in-cluster Kubernetes API."""
    if ray is None:
        return {}
    return {
        "ray_namespace": ray.namespace,
        "ray_cluster": ray.cluster_name,
        "ray_worker_group": ray.worker_group,
    }


def recovery_values(cfg: StackConfig, gpu_pool: GpuPoolFacts) -> dict[str, Any]:
    """`RunPlan.recovery`: the `recovery` section, the pool's GPUs (from its facts) and, with `job.submit`, a
    missing job resubmitted."""
    pool_gpus = gpu_pool.node_count * gpu_pool.gpus_per_node
    return RecoveryPolicy.from_config(cfg.recovery, pool_gpus=pool_gpus, resubmit_missing=cfg.job.submit).to_dict()


def _last_int(cfg: StackConfig, key: str) -> Optional[int]:
    """The whole number the recipe's then the user's overrides last give `key`, or None (the config file's)."""
    from workloads.overrides import parse_override

    values = [
        o.value for o in map(parse_override, (*cfg.recipe.overrides, *cfg.job.overrides)) if o.assigns and o.key == key
    ]
    return int(values[-1]) if values and values[-1].isdigit() else None


def size_shape(cfg: StackConfig, gpu_pool: PoolShape) -> Shape:
    """What decides which node counts the run can train on (`workloads.size_ladder.Shape`): the pool, the recipe's
    layout with the user's parallelism overrides, the global batch and the rollouts of a step (when the recipe's or
    the user's overrides set both), the context and vLLM pipeline parallel sizes (1 unless an override sets them)."""
    par = cfg.job.parallelism
    backend = "megatron_cfg" if par.backend is TrainingBackend.MEGATRON else "dtensor_cfg"
    prompts = _last_int(cfg, "grpo.num_prompts_per_step")
    generations = _last_int(cfg, "grpo.num_generations_per_prompt")
    return Shape(
        full_nodes=gpu_pool.node_count,
        gpus_per_node=gpu_pool.gpus_per_node,
        train_tensor_parallel=par.train_tensor_parallel,
        train_pipeline_parallel=par.train_pipeline_parallel,
        context_parallel=_last_int(cfg, f"policy.{backend}.context_parallel_size") or 1,
        colocated=par.colocated,
        generation_nodes=par.generation_nodes,
        generation_tensor_parallel=par.generation_tensor_parallel,
        generation_pipeline_parallel=_last_int(cfg, "policy.generation.vllm_cfg.pipeline_parallel_size") or 1,
        global_batch=train_global_batch_size(cfg.recipe, cfg.job.overrides),
        rollouts_per_step=prompts * generations if prompts and generations else None,
        min_nodes=par.min_nodes,
    )


def size_ladder(cfg: StackConfig, gpu_pool: PoolShape) -> tuple[NodeCount, ...]:
    """Every node count from the pool's down to 1, each valid or refused with why (`workloads.size_ladder.ladder`)."""
    return ladder(size_shape(cfg, gpu_pool))


def cannot_shrink(cfg: StackConfig, rungs: tuple[NodeCount, ...]) -> Optional[str]:
    """Why the run can train on no smaller node count (at least `recovery.shrink.minNodes`), or None."""
    if smaller_sizes(rungs, cfg.recovery.shrink.min_nodes):
        return None
    smaller = [r for r in rungs[1:] if r.nodes >= cfg.recovery.shrink.min_nodes]
    if len(rungs) == 1:
        return "the pool has 1 node: no smaller size"
    if not smaller:
        return (
            f"no node count below {rungs[0].nodes} is at least recovery.shrink.minNodes {cfg.recovery.shrink.min_nodes}"
        )
    return "; ".join(f"{r.nodes}: {r.refused}" for r in smaller)


def shrink_values(cfg: StackConfig, gpu_pool: GpuPoolFacts) -> dict[str, Any]:
    """The `RunPlan` fields of training on fewer nodes (`recovery.shrink`): each smaller valid size with the overrides
    its attempts run with; none when it is off. On where the ladder has no smaller size is a `ConfigError`."""
    shrink = cfg.recovery.shrink
    if not shrink.enabled:
        return {}
    rungs = size_ladder(cfg, gpu_pool)
    why = cannot_shrink(cfg, rungs)
    if why is not None:
        raise ConfigError(
            f"{PROJECT}:recovery.shrink.enabled: job.recipe {cfg.job.recipe!r} on {rungs[0].nodes} node(s) can train "
            f"on no fewer ({why}); allowed: false"
        )
    return {
        "shrink_sizes": [
            {"nodes": n, "overrides": list(size_overrides(n, shrink.lease_minutes))}
            for n in smaller_sizes(rungs, shrink.min_nodes)
        ],
        "shrink_wait_minutes": shrink.wait_minutes,
        "shrink_lease_minutes": shrink.lease_minutes,
    }


def run_plan_for_stack(
    stack: str,
    cfg: StackConfig,
    gpu_pool: GpuPoolFacts,
    gate_plan: Optional[GatePlan],
    ray: Optional[RayTarget] = None,
) -> RunPlan:
    """What the job and the watcher need besides the spec, as plain values (`workloads.run_owner.RunPlan`)."""
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
        **shrink_values(cfg, gpu_pool),
    )
