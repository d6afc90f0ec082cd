"""Plan-time placement: on which nodes the training runs, decided once before any resource exists, and the
capacity ladder's rungs priced (docs/architecture.md, "Rooms": the room for a capacity decision).

`gpu_pool_facts` is where the GPU workers land (the node pool's name on Standard; on Autopilot the node labels
GKE makes nodes for) and what those nodes are; `system_pool_name` is where the CPU pods go. The program, the CLI
and the offline estimates call the same functions, so they build the same job.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from infra.autopilot_pods import gpu_node_labels
from infra.config import Provisioning, Rung, StackConfig
from infra.naming import COMPUTE_CLASS_LABEL, Limit
from infra.network import nic_attachments
from infra.pod_facts import kubernetes_taint
from infra.prices import PRICE_KIND, PriceError, PriceTable, node_hour_price, price_table
from infra.stack_context import GpuPoolFacts, RungPool, StackContext

CUSTOM_COMPUTE_CLASS_MIN_GKE = "1.30.3-gke.1451000"
"""Custom ComputeClasses in Standard clusters ("About custom ComputeClasses",
https://cloud.google.com/kubernetes-engine/docs/concepts/about-custom-compute-classes, read 2026-12-03)."""
FLEX_START_MIN_GKE = "1.32.2-gke.1652000"
"""Flex-start for GPUs ("About flex-start provisioning mode", Requirements,
https://cloud.google.com/kubernetes-engine/docs/concepts/dws, read 2026-12-03)."""
FLEX_START_MAX_RUN_DAYS = 7
"""A flex-start node runs at most seven days, then GKE removes it (same page; the blog "Introducing
Flex-start VMs", 2025: "can run uninterrupted for a maximum of seven days and consume preemptible quota")."""

FALLBACK_NOTE = (
    "GKE's cluster autoscaler tries the ComputeClass priorities in order and moves to the next when a scale-up "
    "of the current pool fails (a stockout or quota error fails at once) or its nodes do not come up within the "
    "autoscaler's node-provisioning timeout; GKE does not publish its value; open-source cluster-autoscaler "
    "defaults are --max-node-provision-time=15m and a failed pool backed off 5 min doubling to 30 min "
    "(kubernetes/autoscaler cluster-autoscaler FAQ.md and main.go). Only a real cluster shows GKE's numbers."
)
"""How long a rung is tried before the next: the plan states this (docs/capacity.md)."""

_POOL_ROLE = {Provisioning.SPOT: "spot", Provisioning.FLEX_START: "flex", Provisioning.ON_DEMAND: "ondemand"}


def rung_pool_role(rung: Rung) -> str:
    """The pool's naming role: by kind, not by position, so reordering the ladder replaces no pool."""
    if rung.provisioning is Provisioning.RESERVATION:
        return f"gpu-res-{rung.reservation_name}"
    return f"gpu-{_POOL_ROLE[rung.provisioning]}"


def compute_class_name(ctx: StackContext) -> str:
    """The ladder's ComputeClass (a cluster-scoped object and a node label value)."""
    return ctx.name("gpu-ladder", Limit.LABEL_VALUE)


def is_ladder(cfg: StackConfig) -> bool:
    """More than one rung: one pool per rung and a ComputeClass. One rung plans exactly as a single pool."""
    return cfg.cluster.mode != "autopilot" and len(cfg.gpu_pool.ladder) > 1


def system_pool_name(ctx: StackContext, cfg: StackConfig) -> Optional[str]:
    """The CPU pool's name: the Ray head and the watcher select it by this (plan-time) value. None on
    Autopilot, which has no pools: they run on its default general-purpose compute class."""
    if cfg.cluster.mode == "autopilot":
        return None
    return ctx.name("system", Limit.GKE_NODE_POOL)


def gpu_pool_facts(ctx: StackContext, cfg: StackConfig) -> GpuPoolFacts:
    """What workloads need to know about the GPU nodes, decided before any resource exists."""
    flavour, ladder = cfg.flavour_spec, is_ladder(cfg)
    if cfg.cluster.mode == "autopilot":
        # No pool: the workers select the GPU nodes GKE makes for them by label (infra/autopilot_pods.py).
        pool_name = f"autopilot-{flavour.accelerator_type}"
        node_labels = gpu_node_labels(
            zone=ctx.zone,
            accelerator_type=flavour.accelerator_type,
            gpus_per_node=flavour.gpus_per_node,
            provisioning=cfg.gpu_pool.provisioning,
            reservation_name=cfg.gpu_pool.reservation_name,
        )
    else:
        # On a ladder the workers select the class; GKE's autoscaler picks the pool by its priorities.
        pool_name, node_labels = compute_class_name(ctx) if ladder else ctx.name("gpu", Limit.GKE_NODE_POOL), ()
    taints = (kubernetes_taint(flavour.gpu_taint),)
    if ladder:
        # The class's pools carry this taint (see COMPUTE_CLASS_LABEL); the workers tolerate it explicitly.
        taints += ({"key": COMPUTE_CLASS_LABEL, "value": pool_name, "effect": "NoSchedule"},)
    return GpuPoolFacts(
        pool_name=pool_name,
        node_count=cfg.gpu_pool.node_count,
        gpus_per_node=flavour.gpus_per_node,
        accelerator_type=flavour.accelerator_type,
        machine_type=flavour.machine_type,
        vcpus=flavour.vcpus,
        memory_gib=flavour.memory_gib,
        nccl_tuner_config=flavour.nccl_tuner_config,
        taints=taints,
        nics=nic_attachments(ctx, flavour),
        node_labels=node_labels,
        compute_class=pool_name if ladder else None,
        rung_pools=tuple(
            RungPool(ctx.name(rung_pool_role(r), Limit.GKE_NODE_POOL), r.label) for r in cfg.gpu_pool.ladder if ladder
        ),
    )


@dataclass(frozen=True)
class RungPlan:
    """What the plan says of one rung: its pool, price, the quota it draws on and its limits."""

    rung: str
    pool: str
    price_key: str
    node_hour: Optional[float]
    """USD per node-hour from data/prices.yaml (with cost.priceOverrides); None: no such price."""
    estimate: Optional[str]
    quota: str
    limits: str

    def gang_hour(self, nodes: int) -> Optional[float]:
        return None if self.node_hour is None else round(self.node_hour * nodes, 4)


def rung_quota_metric(flavour_metric: str, provisioning: Provisioning) -> Optional[str]:
    """The regional Compute Engine GPU quota a rung draws on; None for a reservation (it brings its own).
    Spot and flex-start count against the preemptible quota (blog "Introducing Flex-start VMs", 2025)."""
    if provisioning is Provisioning.RESERVATION:
        return None
    return f"PREEMPTIBLE_{flavour_metric}" if provisioning is not Provisioning.ON_DEMAND else flavour_metric


_LIMITS = {
    Provisioning.SPOT: "preemptible at any time (about 30 s notice); no run-time limit",
    Provisioning.FLEX_START: f"at most {FLEX_START_MAX_RUN_DAYS} days per node, then GKE removes it; not preempted "
    "before",
    Provisioning.ON_DEMAND: "not preempted; no run-time limit",
    Provisioning.RESERVATION: "only the reservation's free VMs (the doctor counts them); billed at the on-demand rate",
}


def rung_node_hour(table: PriceTable, cfg: StackConfig, rung: Rung) -> tuple[str, Optional[float], Optional[str]]:
    """A rung's price key, USD per node-hour in the stack's region (None: no such price) and why that is an
    estimate, from the one rung-to-price function `infra.prices.node_hour_price` (the plan's ladder, run.json)."""
    machine = cfg.flavour_spec.machine_type
    key = f"gpu.{machine}.{PRICE_KIND[rung.provisioning]}"
    autopilot = cfg.cluster.mode == "autopilot"
    try:
        price = node_hour_price(table, machine, cfg.region, rung.provisioning, autopilot=autopilot)
    except PriceError as err:
        return key, None, str(err)
    return key, round(price.value, 4), price.estimate


def capacity_ladder(ctx: StackContext, cfg: StackConfig) -> tuple[RungPlan, ...]:
    """Every rung in order with its pool, price per node-hour, quota metric and limits (the plan's ladder)."""
    flavour = cfg.flavour_spec
    table = price_table(cfg)
    facts_pools = {p.rung: p.name for p in gpu_pool_facts(ctx, cfg).rung_pools}
    plans = []
    for rung in cfg.gpu_pool.ladder:
        key, node_hour, estimate = rung_node_hour(table, cfg, rung)
        metric = rung_quota_metric(flavour.gpu_quota_metric, rung.provisioning)
        quota = f"{metric} in {cfg.region}" if metric else f"reservation {rung.reservation_name} in {cfg.zone}"
        pool = facts_pools.get(rung.label, ctx.name("gpu", Limit.GKE_NODE_POOL))
        plans.append(RungPlan(rung.label, pool, key, node_hour, estimate, quota, _LIMITS[rung.provisioning]))
    return tuple(plans)
