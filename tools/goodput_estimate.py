"""The plan's goodput: how the paid GPU node-time of a stack's first run (the first `pulumi up` plus the job) is
expected to split into the run ledger's buckets (`BUCKETS`), and the share in kept training steps. Every bucket
is modelled from the plan's own numbers (deploy time, gate, expected hours, checkpoint writes, save period) and
an assumed spot preemption rate (`cost.spotPreemptionsPerNodeDay`); each preemption (a spot first rung only)
costs the expected steps lost (tools/estimates.py `preemption_loss`) and a restart (scale-up, image, gate,
start-up). Idle after the run is the autoscaler's scale-down delay: a node unneeded for 10 minutes is removed
(`--scale-down-unneeded-time`, kubernetes/autoscaler cluster-autoscaler FAQ.md "How does scale-down work?";
GKE's "balanced" profile keeps it, "About GKE cluster autoscaling").
"""

from __future__ import annotations

from typing import Any, Optional

from infra.config import Provisioning, StackConfig
from tools import deploy_time
from workloads.goodput import BUCKETS  # the run ledger's buckets, by the same names

SCALE_DOWN_UNNEEDED_MINUTES = 10.0  # cluster-autoscaler's default `--scale-down-unneeded-time`: idle is never longer

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
    """Minutes of paid gang time per bucket (GPU node-time over the node count); None without a job estimate or
    on Autopilot (no GPU arrival model there)."""
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
    return {
        "gangWait": first_wait + preemptions * deploy_time.GPU_SCALE_UP.minutes,
        "imagePull": (1 + preemptions) * arrival.image_after_driver,
        "gate": (1 + preemptions) * gate,
        "startup": (1 + preemptions) * startup,
        "stepsKept": max(0.0, job - saves),
        "stepsLost": preemptions * loss,
        "checkpointSave": min(saves, job),
        "idleAfterRun": SCALE_DOWN_UNNEEDED_MINUTES,
    }


def goodput_json(est: Any, cfg: StackConfig) -> Optional[dict[str, Any]]:
    """The plan's top-level `goodput`: `fraction` (kept steps over all paid GPU time) and `buckets` (`name`,
    `minutes` of gang time, `usd` at the GPU pool's hourly price that applies); None where not modelled."""
    minutes = buckets_minutes(est, cfg)
    if minutes is None:
        return None
    per_hour = est.cost.gpu_per_hour
    total = sum(minutes.values())
    return {
        "fraction": round(minutes["stepsKept"] / total, 3) if total else None,
        "buckets": [
            {"name": name, "minutes": round(minutes[name], 1), "usd": round(per_hour * minutes[name] / 60, 2)}
            for name in BUCKETS
        ],
        "gpuNodes": "warm" if est.deploy.arrival.warm else "cold",
        "expectedPreemptions": round(expected_preemptions(cfg, est.cost.job_hours), 2),
        "preemptionRate": {"perNodeDay": cfg.cost.spot_preemptions_per_node_day, "source": PREEMPTION_RATE_SOURCE},
        "idleAfterRunBasis": "cluster-autoscaler default --scale-down-unneeded-time 10m (kubernetes/autoscaler "
        "FAQ.md); the run owner releases the workers at the run's end",
        "basis": "modelled for the first run (the first `pulumi up` plus the job): tools/goodput_estimate.py",
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
    return lines
