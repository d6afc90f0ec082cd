"""The estimates the offline plan shows after its summary (`render`) and carries under "estimates" (`to_json`):
cost (tools/cost.py), checkpoint sizing (tools/sizing.py), deploy time (tools/deploy_time.py) and what they add up
to, from a `Plan` and the stack config it ran with."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Optional

from infra import weight_staging
from infra.config import ConfigError, StackConfig, namespaced, parse
from infra.placement import FALLBACK_NOTE, capacity_ladder, is_ladder
from infra.prices import price_table
from infra.run_plan import save_period_for
from infra.stack_context import StackContext
from tools import cost, deploy_time, gpu_arrival, sizing

LUSTRE = "gcp:lustre/instance:Instance"


@dataclass
class Estimates:
    cost: cost.CostEstimate
    checkpoints: Optional[sizing.CheckpointEstimate]
    deploy: deploy_time.DeployEstimate
    worker_fit: Optional[dict[str, Any]] = None  # the RayCluster component's `workerFit` output
    preemption: Optional[dict[str, Any]] = None  # `preemption_loss`
    ladder: Optional[dict[str, Any]] = None  # `ladder_plan`


def ladder_plan(plan: Any, cfg: StackConfig) -> Optional[dict[str, Any]]:
    """The capacity ladder's rungs, priced (`infra.placement.capacity_ladder`), and the gang wait; None for one pool."""
    if not is_ladder(cfg):
        return None
    nodes, capacity = cfg.gpu_pool.node_count, cfg.gpu_pool.capacity
    rungs = capacity_ladder(StackContext.from_config(plan.stack, cfg), cfg)
    return {
        "rungs": [
            {
                "rung": r.rung,
                "pool": r.pool,
                "priceKey": r.price_key,
                "nodeHour": r.node_hour,
                "gangHour": r.gang_hour(nodes),
                "estimate": r.estimate,
                "quota": r.quota,
                "limits": r.limits,
            }
            for r in rungs
        ],
        "nodes": nodes,
        "maxWaitMinutes": capacity.max_wait_minutes,
        "onTimeout": capacity.on_timeout,
        "fallback": FALLBACK_NOTE,
    }


def render_ladder(ladder: Optional[dict[str, Any]]) -> list[str]:
    if ladder is None:
        return []
    lines = [
        f"Capacity ladder ({ladder['nodes']} nodes from any rungs, tried in this order by GKE's autoscaler "
        f"through a ComputeClass; infra/compute_class.py):"
    ]
    width = max(len(r["rung"]) for r in ladder["rungs"])
    for i, r in enumerate(ladder["rungs"], 1):
        price = (
            "no price"
            if r["nodeHour"] is None
            else f"{cost.money(r['nodeHour'])}/node-h, {cost.money(r['gangHour'] or 0)}/h for the gang"
        )
        mark = " *" if r["estimate"] else ""
        lines.append(f"  {i}. {r['rung']:{width}}  pool {r['pool']}: {price}{mark}; quota {r['quota']}; {r['limits']}")
    release = ladder["onTimeout"] == "releaseWorkers"
    lines += [
        f"  wait: the run owner waits {ladder['maxWaitMinutes']} min for the whole gang, then says so and "
        + (
            "scales the workers to 0 (gpuPool.capacity.onTimeout releaseWorkers)"
            if release
            else "keeps waiting (gpuPool.capacity.onTimeout keep)"
        ),
        f"  per rung: {FALLBACK_NOTE}",
        "",
    ]
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
    # The save period the job gets (derived from job.maxLostMinutes, not an override).
    policy = dataclasses.replace(
        sizing.CheckpointPolicy.from_overrides([*recipe.overrides, *cfg.job.overrides], steps),
        save_period=save_period_for(cfg),
    )
    return sizing.estimate(
        model=recipe.model,
        params_billion=recipe.model_params_billion,
        policy=policy,
        capacity_gib=int(float(inputs.get("capacityGib", 0))),
        tier=int(float(inputs.get("perUnitStorageThroughput", 0))),
        target_seconds=cfg.cost.checkpoint_write_target_seconds,
        monthly_price=cost.lustre_monthly_price(table, cfg.region),
    )


def preemption_loss(
    cfg: StackConfig, checkpoints: Optional[sizing.CheckpointEstimate], est: cost.CostEstimate
) -> Optional[dict[str, Any]]:
    """What a preemption at a random moment throws away at the job's save period: half a save cycle on average,
    at worst a whole one and the save in flight, priced at the GPU nodes' rate; None without a step time."""
    step = cfg.recipe.step_seconds
    if not step:
        return None
    period = save_period_for(cfg)
    write = checkpoints.write_seconds if checkpoints is not None else 0.0
    expected, worst = period * step / 2, period * step + write
    gpu_per_hour = est.gpu_per_hour
    job = est.job_total(est.per_hour)
    return {
        "savePeriod": period,
        "stepMinutes": round(step / 60, 1),
        "expectedLossMinutes": round(expected / 60, 1),
        "worstLossMinutes": round(worst / 60, 1),
        "expectedLossUsd": round(gpu_per_hour * expected / 3600, 2),
        "budgetUsd": cfg.job.budget_usd,
        "jobUsd": None if job is None else round(job, 2),
    }


def render_preemption(loss: Optional[dict[str, Any]], currency: str = "USD") -> list[str]:
    if loss is None:
        return []
    budget = loss["budgetUsd"]
    watch = "none (job.budgetUsd)"
    if budget is not None:
        watch = f"job.budgetUsd {currency} {budget:,.2f}: the watcher warns at 80 %, stops after the next checkpoint "
        watch += "at 100 %"
    job = "" if loss["jobUsd"] is None else f"; the whole job is expected to cost {currency} {loss['jobUsd']:,.2f}"
    return [
        f"  save period           {loss['savePeriod']} step(s) at ~{loss['stepMinutes']:g} min/step "
        "(checkpointing.save_period)",
        f"  loss per preemption   ~{loss['expectedLossMinutes']:g} min of training expected, at worst "
        f"~{loss['worstLossMinutes']:g} min "
        f"(a whole save cycle and the save in flight); ~{currency} {loss['expectedLossUsd']:,.2f} of GPU time expected",
        f"  budget                {watch}{job}",
    ]


def compute(plan: Any, cfg: Optional[StackConfig] = None) -> Estimates:
    cfg = cfg or stack_config(plan)
    table = price_table(cfg)
    checkpoints = checkpoint_estimate(plan, cfg, table)
    bucket_gib = cfg.recipe.model_params_billion * 1e9 * sizing.BYTES_PER_PARAM_BF16 / sizing.GIB
    costs = cost.estimate(plan, cfg, table, bucket_gib=bucket_gib)
    return Estimates(
        cost=costs,
        checkpoints=checkpoints,
        deploy=deploy_time.estimate(plan),
        worker_fit=worker_fit(plan),
        preemption=preemption_loss(cfg, checkpoints, costs),
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
        f"  requests  {fit['cpu']} CPU / {fit['memoryGib']:,} GiB (/dev/shm up to {fit['shmGib']} GiB counts "
        "within it)",
        f"  of        ~{fit['allocatableCpu']:g} CPU / ~{fit['allocatableMemoryGib']:,.1f} GiB allocatable",
        f"  headroom  {fit['headroomCpu']:g} CPU / {fit['headroomMemoryGib']:,.1f} GiB for GKE's DaemonSets and "
        "system pods "
        "(their real share shows on a node: `kubectl describe node`); ray.workerCpu / ray.workerMemoryGib change it",
        "",
    ]


@dataclass(frozen=True)
class FirstRun:
    """A typical first run: the first `pulumi up` to the job's submission, then the job. Before the job the stack
    is billed while it is built: each item from its resource's typical readiness (tools/deploy_time.py), the GPU
    nodes from their creation (every pool starts empty; on Autopilot from the Ray release's start). A lower
    bound: a resource is billed while it is created too, and spot capacity can take far longer."""

    deploy_minutes: float
    job_hours: Optional[float]
    before_job: dict[str, float]  # `spot`/`onDemand`: the cost of the hours before the job starts
    gpu_before_job: float = 0.0  # of it, the GPU nodes' share at the prices that apply
    startup_minutes: float = gpu_arrival.NEMO_RL_STARTUP.minutes  # the submission to the first step (`GpuArrival`)
    download_minutes: float = 0.0  # of it, the first attempt's own download of the weights where none are staged

    def total(self, kind: str, per_hour: float) -> Optional[float]:
        return None if self.job_hours is None else self.before_job[kind] + per_hour * self.job_hours

    @property
    def first_step_minutes(self) -> float:
        """Minutes from the first `pulumi up` to the job's first training step (`startup_minutes` after it)."""
        return self.deploy_minutes + self.startup_minutes

    def before_first_step(self, kind: str, per_hour: float) -> float:
        """The deploy's spend, then the whole stack's hourly cost through NeMo-RL's start-up."""
        return self.before_job[kind] + per_hour * self.startup_minutes / 60

    @property
    def hours(self) -> Optional[float]:
        return None if self.job_hours is None else self.deploy_minutes / 60 + self.job_hours


def first_run(est: Estimates, plan: Any) -> FirstRun:
    from tools.autopilot_plan import is_autopilot

    deploy = est.deploy
    submit = deploy.total_minutes
    starts = {s.name: s.start for s in deploy.critical_path}
    autopilot = is_autopilot(plan)
    before = {"spot": 0.0, "onDemand": 0.0}
    gpu = 0.0
    for item in est.cost.items:
        ready = deploy.finish_by_name.get(item.billed_from, 0.0) if item.billed_from else 0.0
        if autopilot and item.billed_from in starts:  # the release's wait is the GPU nodes coming up
            ready = starts[item.billed_from]
        if item.gpu and deploy.gpu_nodes_from is not None:
            # Every GPU pool starts empty: billed from the nodes' creation (tools/gpu_arrival.py GpuArrival).
            ready = deploy.gpu_nodes_from
        hours = max(0.0, submit - ready) / 60
        before["spot"] += item.spot_per_hour * hours  # as `cost.perHour.spot`: every GPU at its spot price
        before["onDemand"] += item.on_demand_per_hour * hours
        if item.gpu:
            gpu += item.per_hour * hours
    arrival = deploy.arrival
    startup = gpu_arrival.NEMO_RL_STARTUP.minutes if arrival is None else arrival.startup_minutes
    download = first_attempt_download(est, plan)
    return FirstRun(submit, est.cost.job_hours, before, gpu, startup + download, download)


def first_attempt_download(est: Estimates, plan: Any) -> float:
    """Minutes the first attempt's NeMo-RL spends downloading the model into the cold HF cache on Lustre, on the
    GPU nodes' time: 0 where the plan stages the weights (infra/weight_staging.py), else the staging Job's own figure
    (an assumed rate, `weight_staging.HF_DOWNLOAD_MB_PER_S`)."""
    if est.checkpoints is None or any(deploy_time.is_weight_staging(r) for r in plan.resources):
        return 0.0
    return weight_staging.download_minutes(est.checkpoints.hf_export_bytes)


def first_run_json(est: Estimates, plan: Any) -> dict[str, Any]:
    run, money = first_run(est, plan), cost.rounded
    rates = {"spot": est.cost.spot_per_hour, "onDemand": est.cost.on_demand_per_hour}
    return {
        "deployMinutes": round(run.deploy_minutes, 1),
        "firstStepMinutes": round(run.first_step_minutes, 1),
        "gpuNodes": "cold" if est.deploy.arrival is None else est.deploy.arrival.mode,
        "jobHours": run.job_hours,
        "beforeJob": {k: money(v) for k, v in run.before_job.items()},
        "gpuBeforeJob": money(run.gpu_before_job),
        "beforeFirstStep": {k: money(run.before_first_step(k, v)) for k, v in rates.items()},
        "total": {k: money(run.total(k, v)) for k, v in rates.items()},
        "basis": "the deploy's hours before the job (each item billed from its resource's typical readiness) plus "
        "the job's",
        **({"gpuArrival": arrival} if (arrival := arrival_costs(est)) is not None else {}),
    }


MODE_NAMES = {"cold": "cold", "justInTime": "just in time", "warm": "warm"}
AFTER_LUSTRE_SLACK_MINUTES = 3.0
"""What the first step may take after Lustre is ready beyond the gate and NeMo-RL's start-up (issue 44): the claim,
the Ray release and the submission."""


def arrival_costs(est: Estimates) -> Optional[dict[str, Any]]:
    """Cold, just in time and warm at Lustre's typical and slow creation (tools/gpu_arrival.py `scenarios`), the
    GPU gang's spend before the job at the pool's hourly price, and the issue's bound at the typical time: the cold
    spend plus the boot and pull that now overlap Lustre. None without the comparison (Autopilot)."""
    timing = est.deploy.timing
    if timing is None:
        return None
    rate = est.cost.gpu_per_hour / 60
    rows = [
        {
            "mode": s.mode,
            "lustreCreateMinutes": s.lustre_minutes,
            "lustreReadyMinute": s.lustre_ready,
            "submitMinute": s.submit,
            "firstStepMinute": s.first_step,
            "gpuMinutesBeforeJob": s.gpu_minutes,
            "gpuUsdBeforeJob": round(rate * s.gpu_minutes, 2),
            "note": s.note,
        }
        for s in gpu_arrival.scenarios(timing)
    ]
    typical = {r["mode"]: r for r in rows[: len(gpu_arrival.MODES)]}
    bound = typical["cold"]["gpuMinutesBeforeJob"] + timing.lead
    own = typical[est.deploy.arrival.mode if est.deploy.arrival is not None else "cold"]
    gate = est.deploy.gate_minutes or 0.0
    after = round(own["firstStepMinute"] - own["lustreReadyMinute"], 1)
    return {
        # Issue 44's limit: the first step within 3 minutes plus the gate and NeMo-RL's start-up after Lustre.
        "afterLustre": {
            "minutes": after,
            "gateMinutes": gate,
            "startupMinutes": timing.startup,
            "restMinutes": round(after - gate - timing.startup, 1),
            "limitMinutes": round(AFTER_LUSTRE_SLACK_MINUTES + gate + timing.startup, 1),
        },
        "scenarios": rows,
        "boundMinutes": round(bound, 1),
        "boundUsd": round(rate * bound, 2),
        "boundBasis": "the cold spend before the job plus the boot and pull that now overlap Lustre (the lead), at "
        "Lustre's typical creation time",
        "gpuNodes": "cold" if est.deploy.arrival is None else est.deploy.arrival.mode,
    }


def render_arrival(doc: Optional[dict[str, Any]], timing: Any, currency: str) -> list[str]:
    if doc is None:
        return []
    after = doc["afterLustre"]
    lines = [
        f"GPU arrival (this stack: {MODE_NAMES[doc['gpuNodes']]}; minutes from the first `pulumi up`, the GPU gang's "
        "spend before the job):",
        f"  {'create':<8} {'GPU nodes':<13} {'Lustre':>6} {'job':>6} {'1st step':>8} {'GPU from':>8} {'GPU min':>7} "
        f"{'spend':>11}  note",
    ]
    for r in doc["scenarios"]:
        lines.append(
            f"  {format(r['lustreCreateMinutes'], 'g') + ' min':<8} {MODE_NAMES[r['mode']]:<13} "
            f"{r['lustreReadyMinute']:6.1f} {r['submitMinute']:6.1f} {r['firstStepMinute']:8.1f} "
            f"{r['submitMinute'] - r['gpuMinutesBeforeJob']:8.1f} {r['gpuMinutesBeforeJob']:7.1f} "
            f"{currency + ' ' + format(r['gpuUsdBeforeJob'], ',.2f'):>11}  {r['note']}"
        )
    lines += [
        f"  just in time: the timer starts the placeholders {timing.delay:g} min after its creation (minute "
        f"{timing.timer_at:.1f}; this plan's model says {timing.ideal_delay:g}), {timing.lead:g} min before the Ray "
        "release is expected (Lustre ready, its claim); they wait at most "
        f"{timing.hold:g} min from their start, then the nodes go back "
        f"(removed {gpu_arrival.SCALE_DOWN_MINUTES:g} min later) and the Ray workers ask again "
        "(infra/jit_gpu_nodes.py; real times are known only on the cloud)",
        f"  bound at Lustre's typical time: cold {currency} "
        f"{doc['scenarios'][0]['gpuUsdBeforeJob']:,.2f} + the overlapping boot and pull ({timing.lead:g} min) = "
        f"{currency} {doc['boundUsd']:,.2f}; just in time {currency} {doc['scenarios'][1]['gpuUsdBeforeJob']:,.2f}",
        f"  first step {after['minutes']:g} min after Lustre is ready (this stack, typical time): the gate "
        f"{after['gateMinutes']:g} + NeMo-RL's start-up {after['startupMinutes']:g} + {after['restMinutes']:g} for the "
        f"claim, the Ray release and the submission (limit {after['limitMinutes']:g} = "
        f"{AFTER_LUSTRE_SLACK_MINUTES:g} + the gate + the start-up); the weights are staged in the bucket while Lustre "
        "is created and imported beside the Ray release (infra/weight_staging.py)",
    ]
    return lines


def to_json(est: Estimates, plan: Any = None) -> dict[str, Any]:
    doc = {
        "cost": est.cost.to_json(),
        "checkpoints": None if est.checkpoints is None else est.checkpoints.to_json(),
        "deployTime": est.deploy.to_json(),
        "workerFit": est.worker_fit,
        "acceptanceGate": gate_cost(est),
        "preemption": est.preemption,
        # Only for a ladder, so a one-rung stack's plan document is what it was before the ladder existed.
        **({"capacityLadder": est.ladder} if est.ladder is not None else {}),
    }
    if plan is not None:
        doc["firstRun"] = first_run_json(est, plan)
    return doc


def render_checkpoints(est: Optional[sizing.CheckpointEstimate], current_monthly: Optional[float] = None) -> list[str]:
    if est is None:
        return ["Checkpoints: no Managed Lustre instance in the plan"]
    policy = est.policy
    keep = "null: all" if policy.keep_top_k is None else str(policy.keep_top_k)
    lines = [
        f"Checkpoints ({est.model}, {est.params / 1e9:g}B parameters, Adam mixed precision "
        f"{sizing.BYTES_PER_PARAM_CHECKPOINT} B/param):",
        f"  one checkpoint        {sizing.format_bytes(est.checkpoint_bytes)}  (bf16 HF export "
        f"{sizing.format_bytes(est.hf_export_bytes)})",
        f"  write to Lustre       {est.write_seconds:.1f} s at {est.throughput_mb_s:,.0f} MB/s "
        f"({est.capacity_gib} GiB x {est.tier} MB/s/TiB; target {est.target_seconds} s)",
        f"  capacity needed       {est.required_gib:,} GiB for {policy.kept_checkpoints + 1} checkpoints on disk + "
        f"HF cache {sizing.format_bytes(est.hf_cache_bytes)}, +{round((sizing.HEADROOM - 1) * 100)}% headroom; "
        f"the instance has {est.capacity_gib:,} GiB",
        f"                        = {policy.kept_checkpoints} kept (keep_top_k {keep}, {policy.keep_top_k_source}; "
        f"{policy.saves} save(s) in {policy.max_num_steps} steps at save_period {policy.save_period}) "
        "+ 1 being written",
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
            f"  smallest valid Lustre {s.capacity_gib:,} GiB at {s.tier} MB/s/TiB, the cheapest that holds it and "
            f"writes within the target ({s.write_seconds:.1f} s per checkpoint{price}; {verdict})"
        )
    else:
        lines.append("  no single Managed Lustre tier meets both the capacity and the write-time target")
    lines += [f"  warning: {w}" for w in est.warnings]
    return lines


def gate_cost(est: Estimates) -> Optional[dict[str, float]]:
    """The acceptance gate's typical run: its minutes on the deploy-time path, priced at the whole
    stack's hourly cost (the gate holds every GPU node while it runs); None when the stack has no gate."""
    minutes = est.deploy.gate_minutes
    return None if minutes is None else {"minutes": minutes, "perRun": round(est.cost.per_hour * minutes / 60, 2)}


def render(est: Estimates, plan: Any = None) -> list[str]:
    lustre = [i for i in est.cost.items if i.name == "Managed Lustre"]
    monthly = lustre[0].per_hour * est.cost.hours_per_month if lustre else None
    lines = [
        *cost.render(est.cost),
        "",
        *render_ladder(est.ladder),
        *render_checkpoints(est.checkpoints, monthly),
        *render_preemption(est.preemption, est.cost.currency),
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
    if plan is not None:
        run, money, spot_rate = first_run(est, plan), cost.money, est.cost.spot_per_hour
        if run.job_hours is not None:
            spot, on_demand = run.total("spot", spot_rate), run.total("onDemand", est.cost.on_demand_per_hour)
            lines += [
                "",
                f"First run (the first `pulumi up`, ~{run.deploy_minutes:.0f} min, then the job, {run.job_hours:g} h): "
                f"{money(spot)} with spot GPUs, {money(on_demand)} on-demand; of it {money(run.before_job['spot'])} "
                f"(spot) before the job starts, {gpu_billing(est)} (a lower bound); the first step at "
                f"~{run.first_step_minutes:.0f} min, after {money(run.before_first_step('spot', spot_rate))} (spot)"
                + (
                    f"; it includes the first attempt's own download of the weights into the cold HF cache, "
                    f"~{run.download_minutes:g} min at an assumed rate (no weights are staged on this stack)"
                    if run.download_minutes
                    else ""
                ),
            ]
        arrival = render_arrival(arrival_costs(est), est.deploy.timing, est.cost.currency)
        lines += ["", *arrival] if arrival else []
        from tools import goodput_estimate

        block = goodput_estimate.render(goodput_estimate.goodput_json(est, stack_config(plan)))
        lines += ["", *block] if block else []
    return lines


def gpu_billing(est: Estimates) -> str:
    """When the first run's GPU nodes start billing (tools/deploy_time.py `gpu_nodes_from`): every pool starts
    empty, so the nodes come only when something pending needs them."""
    deploy = est.deploy
    if deploy.gpu_nodes_from is None:  # Autopilot: the Ray release's worker pods make them
        return "the GPU nodes billed from the Ray release's start, whose pending workers bring them"
    how = {
        "warm": "the warm-up placeholders bring them (gpuPool.warmMinutes)",
        "justInTime": "the timer starts the placeholders at the lead time before Lustre (gpuPool.justInTime)",
    }.get(deploy.arrival.mode if deploy.arrival is not None else "cold", "the pending Ray workers bring them")
    return f"the GPU nodes billed from minute {deploy.gpu_nodes_from:.1f}, when {how}"


def render_for_plan(plan: Any) -> list[str]:
    """The estimate block of the plan's text output; one line of explanation if it cannot be computed."""
    try:
        return render(compute(plan), plan)
    except (ConfigError, cost.PriceError) as err:
        return [f"Estimates unavailable: {str(err).splitlines()[0]}"]
