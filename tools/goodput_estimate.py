"""The plan's goodput: how the paid GPU node-time of a stack's first run (the first `pulumi up` plus the job) is
expected to split into the run ledger's buckets (`BUCKETS`), and the share in kept training steps. Every bucket
is modelled from the plan's own numbers (deploy time, gate, expected hours, checkpoint writes, save period) and
an assumed spot preemption rate (`cost.spotPreemptionsPerNodeDay`); each preemption (a spot first rung only)
costs the expected steps lost (tools/estimates.py `preemption_loss`) and a restart (scale-up, image, gate,
start-up). After the run: the owner releases the workers at its first look after the job's end (half of
`recovery.checkIntervalSeconds` on average, `idleAfterRun`), and the autoscaler removes the nodes once unneeded for its
scale-down delay (`scaleDown`, workloads/goodput.py `SCALE_DOWN_S`: `--scale-down-unneeded-time`, 10 minutes,
kubernetes/autoscaler cluster-autoscaler FAQ.md; GKE's default "balanced" profile keeps it, "About GKE cluster
autoscaling"). With `recovery.releaseWorkersAfterRun` false the workers stay billed until released by hand: not
modelled. Beside it, `stockOut`: the same run through one assumed stock-out (`STOCK_OUT_SOURCE`: half the gang's nodes
gone for 2 hours), waiting for the gang and, with `recovery.shrink`, training on fewer nodes meanwhile (`stock_out`).
"""

from __future__ import annotations

import math
from types import SimpleNamespace
from typing import Any, Optional

from infra.config import Provisioning, StackConfig
from infra.run_plan import size_ladder
from tools import deploy_time, gpu_arrival
from workloads.goodput import BUCKETS, GOODPUT, REDUCED, SCALE_DOWN_S  # the run ledger's buckets, by the same names
from workloads.size_ladder import smaller_sizes

SCALE_DOWN_UNNEEDED_MINUTES = SCALE_DOWN_S / 60  # cluster-autoscaler's default `--scale-down-unneeded-time`

PREEMPTION_RATE_SOURCE = (
    "assumed (cost.spotPreemptionsPerNodeDay): Google publishes no preemption rate for Spot VMs; a preemption of "
    "any node stops the gang"
)


def expected_preemptions(cfg: StackConfig, job_hours: float) -> float:
    """Expected preemptions of the gang during the job: only a spot first rung; any node's preemption counts."""
    if cfg.gpu_pool.ladder[0].provisioning is not Provisioning.SPOT:
        return 0.0
    return cfg.gpu_pool.node_count * cfg.cost.spot_preemptions_per_node_day * job_hours / 24


def buckets_minutes(est: Any, cfg: StackConfig) -> Optional[dict[str, float]]:
    """Minutes of paid gang time per bucket (GPU node-time over the node count); None without a job estimate, on
    Autopilot (no GPU arrival model there), or with `recovery.enabled` false: then no run owner runs, so nothing
    resubmits a preempted job or releases the workers after the run, which the buckets model."""
    if not cfg.recovery.enabled:
        return None
    deploy = est.deploy
    arrival, job_hours = deploy.arrival, est.cost.job_hours
    if arrival is None or deploy.gpu_nodes_from is None or job_hours is None:
        return None
    gate = deploy.gate_minutes or 0.0
    startup = deploy_time.DYNAMIC_RESOURCE.minutes + arrival.startup_minutes  # a replacement node streams too
    # Before the job: from the nodes' creation to the submission, less the image, the gate and the submission.
    before = deploy.total_minutes - deploy.gpu_nodes_from
    # The ledger's `imagePull` is pods bound -> started: the image left once the node offers its GPUs.
    first_wait = max(0.0, before - arrival.image_after_driver - gate - deploy_time.DYNAMIC_RESOURCE.minutes)
    preemptions = expected_preemptions(cfg, job_hours)
    loss = (est.preemption or {}).get("expectedLossMinutes", 0.0)
    saves = 0.0 if est.checkpoints is None else est.checkpoints.policy.saves * est.checkpoints.write_seconds / 60
    job = job_hours * 60
    released = cfg.recovery.enabled and cfg.recovery.release_workers_after_run
    return {
        "gangWait": first_wait + preemptions * gpu_arrival.GPU_SCALE_UP.minutes,
        "imagePull": (1 + preemptions) * arrival.image_after_driver,
        "gate": (1 + preemptions) * gate,
        "startup": (1 + preemptions) * startup,
        "stepsKept": max(0.0, job - saves),
        "stepsLost": preemptions * loss,
        "checkpointSave": min(saves, job),
        # The job ends anywhere within a check period: the owner's release comes half of one later on average.
        "idleAfterRun": cfg.recovery.check_interval_seconds / 120 if released else 0.0,
        "scaleDown": SCALE_DOWN_UNNEEDED_MINUTES if released else 0.0,
        REDUCED: 0.0,  # the first run at full size; a stock-out's share: `stock_out`
    }


STOCK_OUT_HOURS = 2.0
STOCK_OUT_SHARE = 0.5
STOCK_OUT_SOURCE = (
    "assumed: one spot stock-out during the job takes half the gang's nodes for 2 hours (Google publishes no "
    "stock-out statistics); the surviving nodes stay billed"
)


def _fraction(minutes: dict[str, float]) -> Optional[float]:
    total = sum(minutes.values())
    return round(sum(minutes[b] for b in GOODPUT) / total, 3) if total else None


def stock_out(base: dict[str, float], cfg: StackConfig, sizes: list[int], restart: float, lost: float) -> dict:
    """The first run's buckets (`base`, gang-minutes) with one `STOCK_OUT_HOURS` stock-out of `STOCK_OUT_SHARE` of
    the nodes: waiting for the gang (the survivors billed idle), and with `recovery.shrink` on the largest size of
    the ladder (`sizes`, below the full gang) the survivors hold, on leases, after `waitMinutes`. Training work is
    node-time (the same global batch on fewer GPUs takes proportionally longer), so a reduced step's node-time
    replaces the same of the full-size job's. `restart` is one restart's gang-minutes (image, gate, start-up),
    `lost` the steps lost at the preemption."""
    nodes, window = cfg.gpu_pool.node_count, STOCK_OUT_HOURS * 60
    alive = nodes - round(nodes * STOCK_OUT_SHARE)
    a = alive / nodes
    waiting = dict(base)
    waiting["gangWait"] += a * window  # the survivors, billed, wait for the gang
    waiting["startup"] += restart
    waiting["stepsLost"] += lost
    out: dict[str, Any] = {
        "hours": STOCK_OUT_HOURS,
        "nodes": nodes,
        "nodesLost": nodes - alive,
        "source": STOCK_OUT_SOURCE,
        "fractionWaiting": _fraction(waiting),
        "size": None,
        "fraction": _fraction(waiting),
    }
    shrink = cfg.recovery.shrink
    fits = [n for n in sizes if n <= alive and n >= shrink.min_nodes]
    if not shrink.enabled or not fits:
        return out
    n = max(fits)
    r = n / nodes
    wait, lease = min(float(shrink.wait_minutes), window), float(shrink.lease_minutes)
    leases = max(1, math.ceil((window - wait) / lease))
    ends = wait + leases * lease  # the last lease runs past the nodes' return: they wait for its end
    per_lease = restart + (base["checkpointSave"] / max(base["stepsKept"], 1.0)) * lease  # restart, its saves
    reduced = max(0.0, r * (leases * lease - leases * per_lease))
    shrunk = dict(base)
    shrunk["gangWait"] += a * wait + (a - r) * leases * lease + (1 - a) * max(0.0, ends - window)
    shrunk["startup"] += restart + r * leases * restart  # the full-size restart, each lease's on n nodes
    shrunk["checkpointSave"] += r * leases * (per_lease - restart)
    shrunk["stepsLost"] += lost
    shrunk[REDUCED] = min(reduced, shrunk["stepsKept"])
    shrunk["stepsKept"] -= shrunk[REDUCED]
    out.update(size=n, fraction=_fraction(shrunk), leases=leases)
    return out


def goodput_json(est: Any, cfg: StackConfig) -> Optional[dict[str, Any]]:
    """The plan's top-level `goodput`: `fraction` (kept steps over all paid GPU time) and `buckets` (`name`,
    `minutes` of gang time, `usd` at the GPU pool's hourly price that applies); None where not modelled."""
    minutes = buckets_minutes(est, cfg)
    if minutes is None:
        return None
    per_hour = est.cost.gpu_per_hour
    deploy, arrival = est.deploy, est.deploy.arrival
    restart = (
        arrival.image_after_driver
        + (deploy.gate_minutes or 0.0)
        + minutes["startup"] / (1 + expected_preemptions(cfg, est.cost.job_hours))
    )
    pool = SimpleNamespace(node_count=cfg.gpu_pool.node_count, gpus_per_node=cfg.flavour_spec.gpus_per_node)
    sizes = list(smaller_sizes(size_ladder(cfg, pool)))
    lost = (est.preemption or {}).get("expectedLossMinutes", 0.0)
    return {
        "fraction": _fraction(minutes),
        "buckets": [
            {"name": name, "minutes": round(minutes[name], 1), "usd": round(per_hour * minutes[name] / 60, 2)}
            for name in BUCKETS
        ],
        "gpuNodes": est.deploy.arrival.mode,
        "expectedPreemptions": round(expected_preemptions(cfg, est.cost.job_hours), 2),
        "preemptionRate": {"perNodeDay": cfg.cost.spot_preemptions_per_node_day, "source": PREEMPTION_RATE_SOURCE},
        "idleAfterRunBasis": "the run owner releases the workers at its first look after the run's end (half of "
        "recovery.checkIntervalSeconds on average); cluster-autoscaler then removes the nodes after its default "
        "--scale-down-unneeded-time 10m (kubernetes/autoscaler FAQ.md), the scaleDown bucket"
        if cfg.recovery.enabled and cfg.recovery.release_workers_after_run
        else "recovery.releaseWorkersAfterRun false: the workers stay billed until released by hand (not modelled)",
        "basis": "modelled for the first run (the first `pulumi up` plus the job): tools/goodput_estimate.py",
        "stockOut": stock_out(minutes, cfg, sizes, restart, lost),
    }


def render(doc: Optional[dict[str, Any]]) -> list[str]:
    """The text plan's "Goodput (first run)" block: the fraction, one line per bucket, the preemption assumption."""
    if doc is None:
        return []
    rate = doc["preemptionRate"]
    lines = [
        f"Goodput (first run, modelled; GPU nodes {doc['gpuNodes']}): {doc['fraction']:.1%} of paid GPU time in kept "
        "steps (tools/goodput_estimate.py)",
        *(f"  {b['name']:<15} {b['minutes']:7.1f} min  {'$' + format(b['usd'], ',.2f'):>11}" for b in doc["buckets"]),
        f"  preemptions: {doc['expectedPreemptions']:g} expected, at {rate['perNodeDay']:g} per spot node-day, "
        f"{rate['source']}",
    ]
    out = doc["stockOut"]
    when = f"{out['nodesLost']} of {out['nodes']} nodes gone for {out['hours']:g} h"
    if out["size"] is None:
        lines.append(f"  with {when}: {out['fractionWaiting']:.1%}, waiting for the gang ({out['source']})")
    else:
        lines.append(
            f"  with {when}: {out['fraction']:.1%} training on {out['size']} nodes in {out['leases']} lease(s) "
            f"(recovery.shrink), {out['fractionWaiting']:.1%} waiting for the gang ({out['source']})"
        )
    return lines
