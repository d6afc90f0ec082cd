"""`cost`: inputs of the estimates the offline plan prints; nothing is deployed from them."""

from __future__ import annotations

from typing import Annotated, Optional

from pydantic import AfterValidator, Field

from infra.config.base import Model
from infra.config.errors import shown

MAX_PRICE_USD = 1_000_000
"""The most a price override may be (the dearest in data/prices.yaml is about 100 USD a node-hour): a price near
float's limit becomes `inf` in the estimates, which no JSON document can hold (`--json` would stop half printed)."""


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
    bucket_gib: Optional[float] = Field(None, ge=0)
    """Average GiB kept in the artifacts bucket; default: one bf16 export of the recipe's model."""
    checkpoint_write_target_seconds: int = Field(300, ge=1, le=86400)
    """Warn when writing one checkpoint to Lustre is estimated to take longer than this."""

    spot_preemptions_per_node_day: float = Field(0.25, ge=0, le=24)
    """Assumed preemptions of one spot GPU node per day, for the plan's goodput (steps lost and re-started): an
    ASSUMPTION, Google publishes no preemption rate for Spot VMs ("Spot VMs": Compute Engine may preempt them at any
    time, how often varies by zone, machine type and time). A preemption of any node stops the whole gang. Used only
    when the first rung is spot."""
