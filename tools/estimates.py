"""The estimates the offline plan shows after its summary: cost (tools/cost.py), checkpoint sizing
(tools/sizing.py) and deploy time (tools/deploy_time.py), all computed from a `Plan` and the stack
config it ran with. `python -m tools.offline_plan` prints `render()`; `--json` adds `to_json()` under the
top-level key "estimates".
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Optional

from tools import cost
from tools import deploy_time
from tools import sizing
from infra.config import ConfigError, StackConfig, namespaced, parse
from infra.placement import FALLBACK_NOTE, RungPlan, capacity_ladder, is_ladder
from infra.prices import price_table
from infra.stack_context import StackContext

LUSTRE = "gcp:lustre/instance:Instance"


@dataclass
class Estimates:
    cost: cost.CostEstimate
    checkpoints: Optional[sizing.CheckpointEstimate]
    deploy: deploy_time.DeployEstimate
    worker_fit: Optional[dict[str, Any]] = None
    """The RayCluster component's `workerFit` output: worker requests and the node's headroom."""
    ladder: Optional["Ladder"] = None
    """The capacity ladder (two or more rungs); None for one pool."""


@dataclass
class Ladder:
    rungs: tuple[RungPlan, ...]
    nodes: int
    max_wait_minutes: int
    on_timeout: str

    def to_json(self) -> dict[str, Any]:
        return {
            "rungs": [
                {"rung": r.rung, "pool": r.pool, "priceKey": r.price_key, "nodeHour": r.node_hour,
                 "gangHour": r.gang_hour(self.nodes), "estimate": r.estimate, "quota": r.quota, "limits": r.limits}
                for r in self.rungs
            ],
            "nodes": self.nodes,
            "maxWaitMinutes": self.max_wait_minutes,
            "onTimeout": self.on_timeout,
            "fallback": FALLBACK_NOTE,
        }


def ladder_plan(plan: Any, cfg: StackConfig) -> Optional[Ladder]:
    if not is_ladder(cfg):
        return None
    capacity = cfg.gpu_pool.capacity
    return Ladder(capacity_ladder(StackContext.from_config(plan.stack, cfg), cfg), cfg.gpu_pool.node_count,
                  capacity.max_wait_minutes, capacity.on_timeout)


def render_ladder(ladder: Optional[Ladder], currency: str = "USD") -> list[str]:
    if ladder is None:
        return []
    lines = [f"Capacity ladder ({ladder.nodes} nodes from any rungs, tried in this order by GKE's autoscaler "
             f"through a ComputeClass; infra/compute_class.py):"]
    width = max(len(r.rung) for r in ladder.rungs)
    for i, r in enumerate(ladder.rungs, 1):
        price = ("no price" if r.node_hour is None
                 else f"{cost.money(r.node_hour)}/node-h, {cost.money(r.gang_hour(ladder.nodes) or 0)}/h for the gang")
        mark = " *" if r.estimate else ""
        lines.append(f"  {i}. {r.rung:{width}}  pool {r.pool}: {price}{mark}; quota {r.quota}; {r.limits}")
    lines.append(f"  wait: the run owner waits {ladder.max_wait_minutes} min for the whole gang, then says so and "
                 + ("scales the workers to 0 (gpuPool.capacity.onTimeout releaseWorkers)" if ladder.on_timeout == "releaseWorkers"
                    else "keeps waiting (gpuPool.capacity.onTimeout keep)"))
    lines.append(f"  per rung: {FALLBACK_NOTE}")
    lines.append("")
    return lines


def stack_config(plan: Any) -> StackConfig:
    """The validated config `plan` ran with (its flat `namespace:key` map, structured values as JSON)."""
    raw = namespaced(getattr(plan, "config", None) or {})
    return parse(raw, plan.stack)


def checkpoint_estimate(plan: Any, cfg: StackConfig, table: cost.PriceTable) -> Optional[sizing.CheckpointEstimate]:
    instances = plan.by_type(LUSTRE)
    if not instances:
        return None
    inputs = instances[0].inputs
    recipe = cfg.recipe
    steps = cfg.job.max_num_steps or recipe.max_num_steps
    policy = sizing.CheckpointPolicy.from_overrides([*recipe.overrides, *cfg.job.overrides], steps)
    return sizing.estimate(
        model=recipe.model,
        params_billion=recipe.model_params_billion,
        policy=policy,
        capacity_gib=int(float(inputs.get("capacityGib", 0))),
        tier=int(float(inputs.get("perUnitStorageThroughput", 0))),
        target_seconds=cfg.cost.checkpoint_write_target_seconds,
        monthly_price=cost.lustre_monthly_price(table, cfg.region),
    )


def compute(plan: Any, cfg: Optional[StackConfig] = None) -> Estimates:
    cfg = cfg or stack_config(plan)
    table = price_table(cfg)
    checkpoints = checkpoint_estimate(plan, cfg, table)
    bucket_gib = sizing.bf16_bytes(cfg.recipe.model_params_billion * 1e9) / sizing.GIB
    return Estimates(
        cost=cost.estimate(plan, cfg, table, bucket_gib=bucket_gib),
        checkpoints=checkpoints,
        deploy=deploy_time.estimate(plan),
        worker_fit=worker_fit(plan),
        ladder=ladder_plan(plan, cfg),
    )


def worker_fit(plan: Any) -> Optional[dict[str, Any]]:
    """What infra/ray_cluster.py published for the workers (one route: not recomputed here)."""
    fits = [o["workerFit"] for o in getattr(plan, "component_outputs", {}).values() if "workerFit" in o]
    return fits[0] if fits else None


def render_worker_fit(fit: Optional[dict[str, Any]]) -> list[str]:
    if fit is None:
        return []
    return [
        f"Ray worker pod on each {fit['machineType']} node (requests = limits, GKE's published reservations):",
        f"  requests  {fit['cpu']} CPU / {fit['memoryGib']:,} GiB (/dev/shm up to {fit['shmGib']} GiB counts within it)",
        f"  of        ~{fit['allocatableCpu']:g} CPU / ~{fit['allocatableMemoryGib']:,.1f} GiB allocatable",
        f"  headroom  {fit['headroomCpu']:g} CPU / {fit['headroomMemoryGib']:,.1f} GiB for GKE's DaemonSets and system pods "
        "(their real share shows on a node: `kubectl describe node`); ray.workerCpu / ray.workerMemoryGib change it",
        "",
    ]


def to_json(est: Estimates) -> dict[str, Any]:
    return {
        "cost": est.cost.to_json(),
        "checkpoints": None if est.checkpoints is None else est.checkpoints.to_json(),
        "deployTime": est.deploy.to_json(),
        "workerFit": est.worker_fit,
        "acceptanceGate": gate_cost(est),
        # Only for a ladder, so a one-rung stack's plan document is what it was before the ladder existed.
        **({"capacityLadder": est.ladder.to_json()} if est.ladder is not None else {}),
    }


def render_checkpoints(est: Optional[sizing.CheckpointEstimate], current_monthly: Optional[float] = None) -> list[str]:
    if est is None:
        return ["Checkpoints: no Managed Lustre instance in the plan"]
    policy = est.policy
    keep = "null: all" if policy.keep_top_k is None else str(policy.keep_top_k)
    saves = math.ceil(policy.max_num_steps / max(1, policy.save_period))
    lines = [
        f"Checkpoints ({est.model}, {est.params / 1e9:g}B parameters, Adam mixed precision "
        f"{sizing.BYTES_PER_PARAM_CHECKPOINT} B/param):",
        f"  one checkpoint        {sizing.format_bytes(est.checkpoint_bytes)}  (bf16 HF export {sizing.format_bytes(est.hf_export_bytes)})",
        f"  write to Lustre       {est.write_seconds:.1f} s at {est.throughput_mb_s:,.0f} MB/s "
        f"({est.capacity_gib} GiB x {est.tier} MB/s/TiB; target {est.target_seconds} s)",
        f"  capacity needed       {est.required_gib:,} GiB for {policy.kept_checkpoints + 1} checkpoints on disk + HF cache "
        f"{sizing.format_bytes(est.hf_cache_bytes)}, +{round((sizing.HEADROOM - 1) * 100)}% headroom; "
        f"the instance has {est.capacity_gib:,} GiB",
        f"                        = {policy.kept_checkpoints} kept (keep_top_k {keep}, {policy.keep_top_k_source}; "
        f"{saves} save(s) in {policy.max_num_steps} steps at save_period {policy.save_period}) + 1 being written",
    ]
    if est.suggestion is not None:
        s = est.suggestion
        same = s.capacity_gib == est.capacity_gib and s.tier == est.tier
        price = "" if s.monthly_usd is None else f", {cost.money(s.monthly_usd)}/month"
        if same:
            verdict = "the stack's instance is already it"
        else:
            current = "" if current_monthly is None else f"the stack's costs {cost.money(current_monthly)}/month; "
            verdict = f"{current}the tier cannot change after creation"
        lines.append(
            f"  smallest valid Lustre {s.capacity_gib:,} GiB at {s.tier} MB/s/TiB, the cheapest that holds it and writes "
            f"within the target ({sizing.checkpoint_write_seconds(est.checkpoint_bytes, s.capacity_gib, s.tier):.1f} s per "
            f"checkpoint{price}; {verdict})"
        )
    else:
        lines.append("  no single Managed Lustre tier meets both the capacity and the write-time target")
    lines += [f"  warning: {w}" for w in est.warnings]
    return lines


def gate_cost(est: Estimates) -> Optional[dict[str, float]]:
    """The acceptance gate's typical run: its minutes on the deploy-time path, priced at the whole
    stack's hourly cost (the gate holds every GPU node while it runs); None when the stack has no gate."""
    steps = [s for s in est.deploy.critical_path if s.name == deploy_time.GATE_STEP]
    if not steps:
        return None
    minutes = steps[0].minutes
    return {"minutes": minutes, "perRun": round(est.cost.per_hour * minutes / 60, 2)}


def render(est: Estimates) -> list[str]:
    lustre = [i for i in est.cost.items if i.name == "Managed Lustre"]
    monthly = lustre[0].per_hour * est.cost.hours_per_month if lustre else None
    lines = [
        *cost.render(est.cost),
        "",
        *render_ladder(est.ladder, est.cost.currency),
        *render_checkpoints(est.checkpoints, monthly),
        "",
        *render_worker_fit(est.worker_fit),
        *deploy_time.render(est.deploy),
    ]
    gate = gate_cost(est)
    if gate:
        lines.append(
            f"  acceptance gate before each submission: ~{gate['minutes']:g} min, ~{est.cost.currency} "
            f"{gate['perRun']:.2f} per run at the stack's hourly cost (docs/acceptance-gate.md)"
        )
    return lines


def render_for_plan(plan: Any) -> list[str]:
    """The estimate block of the plan's text output; one line of explanation if it cannot be computed."""
    try:
        return render(compute(plan))
    except (ConfigError, cost.PriceError) as err:
        return [f"Estimates unavailable: {str(err).splitlines()[0]}"]
