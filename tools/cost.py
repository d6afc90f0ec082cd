"""What a stack costs to keep up, from the offline plan and the dated price table data/prices.yaml (infra/prices.py).

GPU nodes at spot and on-demand prices and at their rung's (`infra.prices.node_hour_price`; a ladder is one gang
at its first rung's price); CPU pools per vCPU and GiB; Lustre per GiB-month / 730 h; on Autopilot the GPU pods as
whole nodes plus the premium, the heads at pod rates; the GKE fee; the bucket at `cost.bucketGib`. Not included:
boot disks, egress, logging, GCS operations, taxes, discounts. The job total is the hourly cost x the recipe's
`expected_hours`, scaled by `job.maxNumSteps`. A price from the table's fallback rule is marked estimated.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Optional

from infra import machines
from infra.config import Provisioning
from infra.naming import COMPUTE_CLASS_LABEL
from infra.prices import PRICE_KIND, PRICES_FILE, Price, PriceError, PriceTable, node_hour_price

if TYPE_CHECKING:
    from infra.config import StackConfig

HOURS_PER_DAY = 24
NODE_POOL = "gcp:container/nodePool:NodePool"
CLUSTER = "gcp:container/cluster:Cluster"
LUSTRE = "gcp:lustre/instance:Instance"
BUCKET = "gcp:storage/bucket:Bucket"
LADDER = "capacity ladder"


@dataclass
class LineItem:
    name: str
    detail: str
    spot_per_hour: float
    on_demand_per_hour: float
    applies: str = "list"  # a GPU rung's `infra.prices.PRICE_KIND`, or `list` (no spot/on-demand distinction)
    prices: list[Price] = field(default_factory=list)
    billed_from: str = ""  # the resource from whose readiness it is billed ("": the deploy's start); `first_run`
    applies_per_hour: Optional[float] = None  # GPU nodes at their rung's price, as the ledger prices them

    @property
    def per_hour(self) -> float:
        if self.applies_per_hour is not None:
            return self.applies_per_hour
        return self.spot_per_hour if self.applies == "spot" else self.on_demand_per_hour

    @property
    def gpu(self) -> bool:
        return self.name.startswith("GPU nodes")

    @property
    def estimate(self) -> bool:
        return any(p.estimate for p in self.prices)

    @property
    def overridden(self) -> bool:
        return any(p.overridden for p in self.prices)

    @classmethod
    def flat(cls, name: str, detail: str, hourly: float, prices: list[Price], billed_from: str = "") -> "LineItem":
        """An item with one price whatever the GPUs' capacity type."""
        return cls(name, detail, hourly, hourly, "list", prices, billed_from)

    def to_json(self) -> dict[str, Any]:
        rates = {"spot": self.spot_per_hour, "onDemand": self.on_demand_per_hour}
        return {
            "name": self.name,
            "detail": self.detail,
            "applies": self.applies,
            "perHour": {**{k: round(v, 4) for k, v in rates.items()}, "applies": round(self.per_hour, 4)},
            "perDay": {k: round(v * HOURS_PER_DAY, 2) for k, v in rates.items()},
            "estimate": self.estimate,
            "overridden": self.overridden,
            "prices": [
                {
                    "key": p.key,
                    "value": p.value,
                    "unit": p.unit,
                    "asOf": p.as_of,
                    **({"estimate": p.estimate} if p.estimate else {}),
                    **({"overridden": True} if p.overridden else {}),
                }
                for p in self.prices
            ],
        }


@dataclass
class CostEstimate:
    region: str
    currency: str
    items: list[LineItem]
    job_hours: Optional[float]
    job_hours_basis: str
    warnings: list[str] = field(default_factory=list)
    sources: dict[str, dict[str, str]] = field(default_factory=dict)
    hours_per_month: float = 730.0

    @property
    def spot_per_hour(self) -> float:
        return sum(i.spot_per_hour for i in self.items)

    @property
    def on_demand_per_hour(self) -> float:
        return sum(i.on_demand_per_hour for i in self.items)

    @property
    def per_hour(self) -> float:
        """At the prices the stack's pools actually use."""
        return sum(i.per_hour for i in self.items)

    @property
    def gpu_per_hour(self) -> float:
        """The GPU nodes at the prices that apply: what a minute of the gang costs."""
        return sum(i.per_hour for i in self.items if i.gpu)

    @property
    def estimated_items(self) -> list[str]:
        return [i.name for i in self.items if i.estimate]

    def job_total(self, per_hour: float) -> Optional[float]:
        return None if self.job_hours is None else per_hour * self.job_hours

    def to_json(self) -> dict[str, Any]:
        rates = {"spot": self.spot_per_hour, "onDemand": self.on_demand_per_hour, "applies": self.per_hour}
        return {
            "currency": self.currency,
            "region": self.region,
            "items": [i.to_json() for i in self.items],
            "perHour": {k: rounded(v) for k, v in rates.items()},
            "perDay": {k: rounded(v * HOURS_PER_DAY) for k, v in rates.items()},
            "job": {
                "hours": self.job_hours,
                "basis": self.job_hours_basis,
                **{k: rounded(self.job_total(v)) for k, v in rates.items()},
            },
            "estimatedItems": self.estimated_items,
            "sources": self.sources,
            "warnings": list(self.warnings),
        }


def rounded(value: Optional[float]) -> Optional[float]:
    """Money in the plan document: cents, or None."""
    return None if value is None else round(value, 2)


def _node_count(pool: Any) -> int:
    """The nodes a pool is planned to run: its fixed count, or an autoscaled pool's maximum (a flex-start or
    ladder pool starts at 0 and grows to the gang)."""
    inputs = pool.inputs
    autoscaled = (inputs.get("autoscaling") or {}).get("totalMaxNodeCount")
    return int(inputs.get("nodeCount") or inputs.get("initialNodeCount") or autoscaled or 0)


def is_ladder_pool(pool: Any) -> bool:
    """A pool of the capacity ladder: it carries the ComputeClass node label (infra/compute_class.py)."""
    return COMPUTE_CLASS_LABEL in ((pool.inputs.get("nodeConfig") or {}).get("labels") or {})


def gang_nodes(pools: list[Any]) -> int:
    """The GPU nodes a set of pools runs at once: the ladder's pools share one gang (the largest maximum),
    every other pool adds its own."""
    ladder = [_node_count(p) for p in pools if is_ladder_pool(p)]
    return sum(_node_count(p) for p in pools if not is_ladder_pool(p)) + max(ladder, default=0)


def job_hours(cfg: "StackConfig") -> tuple[Optional[float], str]:
    recipe, steps = cfg.recipe, cfg.job.max_num_steps
    if recipe.expected_hours is None:
        return None, f"recipe {recipe.name} has no expected_hours"
    if steps and steps != recipe.max_num_steps:
        scaled = f"{recipe.expected_hours:g} h for {recipe.max_num_steps} steps, scaled to {steps} steps"
        return recipe.expected_hours * steps / recipe.max_num_steps, f"recipe {recipe.name}: {scaled}"
    return (
        recipe.expected_hours,
        f"recipe {recipe.name}: expected_hours {recipe.expected_hours:g} ({recipe.max_num_steps} steps)",
    )


def estimate(
    plan: Any, cfg: "StackConfig", table: Optional[PriceTable] = None, bucket_gib: Optional[float] = None
) -> CostEstimate:
    """Cost of `plan` in `cfg.region`. `bucket_gib` is used when `cfg.cost.bucketGib` is unset."""
    table = table or PriceTable.load(cfg.cost.price_overrides)
    region = cfg.region
    warnings: list[str] = []
    pools = plan.by_type(NODE_POOL)
    ladder = [p for p in pools if is_ladder_pool(p)]
    items = [i for p in pools if not is_ladder_pool(p) and (i := _pool_item(p, table, region, warnings)) is not None]
    if ladder:
        items += _ladder_item(ladder, cfg, table, region, warnings)
    items += _autopilot_items(plan, table, region, warnings)
    items += _lustre_items(plan, table, region, warnings)
    items += _cluster_and_bucket_items(plan, cfg, table, bucket_gib)
    items.sort(key=_rank)
    hours, basis = job_hours(cfg)
    used = {p.section for i in items for p in i.prices}
    sources = {
        name: {
            "asOf": str(table.section(name).get("as_of", "")),
            "source": " ".join(str(table.section(name).get("source", "")).split()),
        }
        for name in sorted(used)
    }
    return CostEstimate(region, table.currency, items, hours, basis, warnings, sources, table.hours_per_month)


def _pool_item(pool: Any, table: PriceTable, region: str, warnings: list[str]) -> Optional[LineItem]:
    """A node pool: GPU nodes at spot and on-demand prices, or CPU nodes at the series' rates."""
    node_config = pool.inputs.get("nodeConfig") or {}
    machine = node_config.get("machineType", "?")
    nodes = _node_count(pool)
    if node_config.get("guestAccelerators"):
        item = LineItem(f"GPU nodes ({pool.name})", f"{nodes} x {machine}", 0.0, 0.0, billed_from=pool.name)
        return _gpu_item(item, pool.name, machine, nodes, pool_provisioning(pool), table, region, warnings)
    shape = machines.machine_shape(machine)
    if shape is None:
        warnings.append(
            f"{pool.name}: machine type {machine!r} is not a predefined <series>-<shape>-<vcpus> type; not priced"
        )
        return None
    series, (vcpus, gib) = machines.machine_series(machine), shape
    try:
        vcpu_rate = table.get(f"cpu.{series}.vcpuHour", region)
        gib_rate = table.get(f"cpu.{series}.gibHour", region)
    except PriceError as err:
        warnings.append(f"{pool.name}: {err}; add cpu.{series}.vcpuHour/gibHour to {PRICES_FILE.name}")
        return None
    hourly = nodes * (vcpus * vcpu_rate.value + gib * gib_rate.value)
    if node_config.get("spot"):
        warnings.append(f"{pool.name}: spot CPU nodes shown at the on-demand price")
    detail = f"{nodes} x {machine} ({vcpus} vCPU, {gib:g} GiB)"
    return LineItem.flat(f"CPU pool ({pool.name})", detail, hourly, [vcpu_rate, gib_rate], pool.name)


def pool_provisioning(pool: Any) -> Provisioning:
    """How a GPU node pool of the plan obtains its nodes, read off its inputs as infra/cluster.py
    `provisioning_settings` writes them: `spot`, `flexStart`, a SPECIFIC reservation, else on-demand."""
    node_config = pool.inputs.get("nodeConfig") or {}
    if node_config.get("spot"):
        return Provisioning.SPOT
    if node_config.get("flexStart"):
        return Provisioning.FLEX_START
    if (node_config.get("reservationAffinity") or {}).get("consumeReservationType") == "SPECIFIC_RESERVATION":
        return Provisioning.RESERVATION
    return Provisioning.ON_DEMAND


def _gpu_item(
    item: LineItem,
    who: str,
    machine: str,
    nodes: int,
    provisioning: Provisioning,
    table: PriceTable,
    region: str,
    warnings: list[str],
    autopilot: bool = False,
) -> Optional[LineItem]:
    """`item` priced: GPU nodes at spot and on-demand prices, and at the price of the rung that obtains them (the
    one rung-to-price function, `infra.prices.node_hour_price`), which the "applies" total counts; None, with
    a warning of `who`, when the table has no price."""
    try:
        spot, on_demand, rung = (
            node_hour_price(table, machine, region, kind, autopilot=autopilot)
            for kind in (Provisioning.SPOT, Provisioning.ON_DEMAND, provisioning)
        )
    except PriceError as err:
        warnings.append(f"{who}: {err}; {'Autopilot GPU pods' if autopilot else 'GPU nodes'} not priced")
        return None
    if provisioning is Provisioning.RESERVATION and who != LADDER:
        warnings.append(f"{who}: reserved capacity is billed on its own terms; shown at the on-demand list price")
    item.applies = PRICE_KIND[provisioning]
    # The table entries the item rests on (their sections, dates, estimates and overrides), not the sums.
    keys = dict.fromkeys(f"gpu.{machine}.{kind}" for kind in ("spot", "onDemand", item.applies))
    if autopilot:
        keys.update(dict.fromkeys(f"autopilot.{machine}.premium.{kind}" for kind in ("spot", "onDemand")))
    item.prices = [table.get(key, region) for key in keys]
    item.spot_per_hour, item.on_demand_per_hour = nodes * spot.value, nodes * on_demand.value
    item.applies_per_hour = nodes * rung.value
    return item


def _ladder_item(
    pools: list[Any], cfg: "StackConfig", table: PriceTable, region: str, warnings: list[str]
) -> list[LineItem]:
    """The ladder's pools hold one gang between them: priced once, at the first rung's rate (each rung's
    price is in the plan's "Capacity ladder" section; a gang from several rungs costs in between)."""
    first = pools[0]
    machine = (first.inputs.get("nodeConfig") or {}).get("machineType", "?")
    nodes = gang_nodes(pools)
    names = ", ".join(p.name for p in pools)
    item = LineItem(f"GPU nodes (ladder: {names})", f"{nodes} x {machine}, from any rung", 0.0, 0.0)
    item.billed_from = first.name
    item = _gpu_item(item, LADDER, machine, nodes, cfg.gpu_pool.ladder[0].provisioning, table, region, warnings)
    return [] if item is None else [item]


def _lustre_items(plan: Any, table: PriceTable, region: str, warnings: list[str]) -> list[LineItem]:
    items = []
    for instance in plan.by_type(LUSTRE):
        capacity = int(float(instance.inputs.get("capacityGib", 0)))
        tier = int(float(instance.inputs.get("perUnitStorageThroughput", 0)))
        try:
            price = table.get(f"lustre.{tier}.gibMonth", region)
        except PriceError as err:
            warnings.append(f"{instance.name}: {err}")
            continue
        hourly = capacity * price.value / table.hours_per_month
        items.append(
            LineItem.flat("Managed Lustre", f"{capacity} GiB at {tier} MB/s/TiB", hourly, [price], instance.name)
        )
    return items


def _cluster_and_bucket_items(
    plan: Any, cfg: "StackConfig", table: PriceTable, bucket_gib: Optional[float]
) -> list[LineItem]:
    items = []
    region = cfg.region
    clusters = len(plan.by_type(CLUSTER))
    if clusters:
        fee = table.get("gke.clusterHour", region)
        detail = f"{clusters} cluster{'s' if clusters != 1 else ''}"
        items.append(LineItem.flat("GKE management fee", detail, clusters * fee.value, [fee]))
    buckets = len(plan.by_type(BUCKET))
    if buckets:
        gib = cfg.cost.bucket_gib if cfg.cost.bucket_gib is not None else (bucket_gib or 0.0)
        basis = "cost.bucketGib" if cfg.cost.bucket_gib is not None else "one bf16 export of the model"
        price = table.get("gcs.standard.gibMonth", region)
        hourly = buckets * gib * price.value / table.hours_per_month
        items.append(LineItem.flat("GCS bucket", f"{buckets} x {gib:,.0f} GiB ({basis})", hourly, [price]))
    return items


def _autopilot_items(plan: Any, table: PriceTable, region: str, warnings: list[str]) -> list[LineItem]:
    """An Autopilot plan's pods: GPU pods by the node they occupy plus the Autopilot premium, at Spot prices for
    Spot Pods (GKE "Deploy GPU workloads in Autopilot", from 1.29.4-gke.1427000), the rest per vCPU and GiB."""
    from tools import autopilot_plan

    items: list[LineItem] = []
    for group in autopilot_plan.gpu_pods(plan):
        machine = group.machine_type
        item = LineItem(
            f"GPU nodes (Autopilot pods of {group.release})",
            f"{group.pods} x {machine} + Autopilot premium",
            0.0,
            0.0,
            billed_from=group.release,
        )
        item = _gpu_item(item, group.release, machine, group.pods, group.capacity, table, region, warnings, True)
        items += [] if item is None else [item]
    for pod in autopilot_plan.general_purpose_pods(plan):
        try:
            vcpu_rate = table.get("autopilot.generalPurpose.vcpuHour", region)
            gib_rate = table.get("autopilot.generalPurpose.gibHour", region)
        except PriceError as err:
            warnings.append(f"{pod.name}: {err}; not priced")
            continue
        hourly = pod.cpu * vcpu_rate.value + pod.memory_gib * gib_rate.value
        detail = f"{pod.cpu:g} vCPU, {pod.memory_gib:g} GiB on Autopilot general-purpose"
        items.append(LineItem.flat(f"CPU pods: {pod.name}", detail, hourly, [vcpu_rate, gib_rate]))
    return items


def lustre_monthly_price(table: PriceTable, region: str):
    """tier -> USD per GiB-month in `region` (None when the table has no price)."""

    return lambda tier: (
        table.get(f"lustre.{tier}.gibMonth", region).value if table.has(f"lustre.{tier}.gibMonth") else None
    )


def money(value: Optional[float]) -> str:
    if value is None:
        return "—"
    if value >= 1000:
        return f"${value:,.0f}"
    if value >= 1:
        return f"${value:,.2f}"
    return f"${value:.3f}"


_ORDER = ("GPU nodes", "CPU pool", "CPU pods", "Managed Lustre", "GKE", "GCS")


def _rank(item: LineItem) -> int:
    return next((i for i, prefix in enumerate(_ORDER) if item.name.startswith(prefix)), len(_ORDER))


def render(est: CostEstimate) -> list[str]:
    lines = [
        f"Cost ({est.currency}, {est.region}; list prices of {PRICES_FILE.relative_to(PRICES_FILE.parent.parent)}):"
    ]
    items = sorted(est.items, key=_rank)
    width = max([len(i.name) for i in items] + [10])
    detail = max([len(i.detail) for i in items] + [14])
    for item in items:
        mark = " *" if item.estimate else ""
        mark += " (override)" if item.overridden else ""
        if item.applies == "list":
            price = f"{money(item.per_hour)}/h"
        else:
            spot_mark = " (applies)" if item.applies == "spot" else ""
            od_mark = " (applies)" if item.applies == "onDemand" else ""
            price = (
                f"{money(item.spot_per_hour)}/h spot{spot_mark}, {money(item.on_demand_per_hour)}/h on-demand{od_mark}"
            )
            if item.applies not in ("spot", "onDemand"):
                price += f", {money(item.per_hour)}/h {item.applies} (applies)"
        lines.append(f"  {item.name:<{width}}  {item.detail:<{detail}}  {price}{mark}")
    rows = [("per hour", 1, ""), ("per day", HOURS_PER_DAY, "")]
    if est.job_hours is not None:
        rows.append((f"job, {est.job_hours:g} h", est.job_hours, f" ({est.job_hours_basis})"))
    for i, (label, factor, note) in enumerate(rows):
        spot, on_demand = money(est.spot_per_hour * factor), money(est.on_demand_per_hour * factor)
        name = "total" if i == 0 else ""
        lines.append(f"  {name:<{width}}  {label:<{detail}}  {spot} with spot GPUs, {on_demand} on-demand{note}")
    if est.job_hours is None:
        lines.append(f"  job total: unknown ({est.job_hours_basis})")
    if est.estimated_items:
        lines.append("  * rests on an estimated price (see data/prices.yaml); override with cost.priceOverrides")
    dates = ", ".join(f"{name} {src['asOf']}" for name, src in est.sources.items())
    if dates:
        lines.append(f"  prices as of: {dates}")
    lines += [f"  warning: {w}" for w in est.warnings]
    return lines
