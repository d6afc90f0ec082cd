"""`cost`: inputs of the estimates the offline plan prints; nothing is deployed from them."""

from __future__ import annotations

from typing import Annotated, Any, Optional

from pydantic import AfterValidator, Field

from infra.config.base import Model
from infra.config.errors import KeyedValueError, shown

MAX_PRICE_USD = 1_000_000
"""The most a price override may be (the dearest in data/prices.yaml is about 100 USD a node-hour): a price near
float's limit becomes `inf` in the estimates, which no JSON document can hold (`--json` would stop half printed)."""


MAX_BUCKET_GIB = 1 << 20
"""The most `cost.bucketGib` may be: 1 PiB, some thousand exports of the largest recipe's model (72B in bf16 is ~145
GiB); beyond it the estimate is a typo (1e300 printed as `$inf`), not a bucket."""

MAX_GANG_PREEMPTIONS_PER_DAY = 24
"""The most preemptions a day of the whole spot gang (`gpuPool.nodeCount` x `cost.spotPreemptionsPerNodeDay`) the
goodput model takes: it counts each preemption once, as a fixed restart (GPU scale-up, image, gate and start-up:
about 20 to 30 minutes, tools/deploy_time.py) plus the training lost since the last save, and no preemption during
a restart or a save. That holds while the gang runs far longer between preemptions than a restart and a save
cycle; at more than one an hour the restarts alone approach the time between preemptions, no step would be kept,
and the model's numbers (5x the cost estimate's at 24 a node-day on two nodes) mean nothing."""


def check_preemption_model(cfg: Any) -> None:
    """`cost.spotPreemptionsPerNodeDay` x `gpuPool.nodeCount` within `MAX_GANG_PREEMPTIONS_PER_DAY`, where the first
    rung is spot (the only one the goodput model preempts); `cfg` is the `StackConfig`."""
    from infra.config.gpu_pool import Provisioning

    nodes, rate = cfg.gpu_pool.node_count, cfg.cost.spot_preemptions_per_node_day
    if cfg.gpu_pool.ladder[0].provisioning is not Provisioning.SPOT or nodes * rate <= MAX_GANG_PREEMPTIONS_PER_DAY:
        return
    raise KeyedValueError(
        "cost.spotPreemptionsPerNodeDay",
        f"{rate:g} a node-day on {nodes} spot nodes preempts the gang {nodes * rate:g} times a day, more than the "
        f"goodput model holds for (a restart takes 20 to 30 minutes: at more than once an hour no step is kept); "
        f"allowed: at most {MAX_GANG_PREEMPTIONS_PER_DAY / nodes:g} with gpuPool.nodeCount {nodes}",
    )


def check_prices_not_negative(v: dict[str, float]) -> dict[str, float]:
    """Every price override is 0 or more, and at most `MAX_PRICE_USD` (so every estimate stays finite); which keys
    exist is the price table's business (tools/cost.py)."""
    for key, value in v.items():
        if not 0 <= value <= MAX_PRICE_USD:
            raise ValueError(
                f"price {shown(key)}: {shown(value)} is not allowed; allowed: a number, 0 or more, at most "
                f"{MAX_PRICE_USD}"
            )
    return v


class CostConfig(Model):
    """Inputs of the estimates the offline plan prints (cost, checkpoint sizing); nothing is deployed from them."""

    price_overrides: Annotated[dict[str, float], AfterValidator(check_prices_not_negative)] = Field(
        default_factory=dict
    )
    """Replace prices of data/prices.yaml, keyed by price-table key (e.g. `gpu.a4-highgpu-8g.spot` in USD per node-hour,
    `lustre.500.gibMonth` in USD per GiB-month), each 0 to 1000000; applies to the stack's region."""
    bucket_gib: Optional[float] = Field(None, ge=0, le=MAX_BUCKET_GIB)
    """Average GiB kept in the artifacts bucket, at most 1048576 (1 PiB); default: one bf16 export of the recipe's
    model."""
    checkpoint_write_target_seconds: int = Field(300, ge=1, le=86400)
    """Warn when writing one checkpoint to Lustre is estimated to take longer than this."""

    spot_preemptions_per_node_day: float = Field(0.25, ge=0, le=24)
    """Assumed preemptions of one spot GPU node per day, for the plan's goodput (steps lost and re-started): an
    ASSUMPTION, Google publishes no preemption rate for Spot VMs ("Spot VMs": Compute Engine may preempt them at any
    time, how often varies by zone, machine type and time). A preemption of any node stops the whole gang. Used only
    when the first rung is spot."""
