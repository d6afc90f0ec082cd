"""The dated price table (data/prices.yaml) with a stack's `cost.priceOverrides`: a pure reader in `infra/`, so
the program (run.json's node-hour prices, through `node_hour_price`) and the offline tooling (tools/cost.py,
tools/estimates.py, the capacity finder) price from the same table and function.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Mapping, Optional

import yaml

from infra.config import PROJECT, ConfigError, Provisioning, StackConfig

PRICES_FILE = Path(__file__).resolve().parent.parent / "data" / "prices.yaml"


class PriceError(KeyError):
    """A price the table does not have."""

    def __str__(self) -> str:  # KeyError quotes its message otherwise
        return str(self.args[0])


@dataclass(frozen=True)
class Price:
    key: str
    region: str
    value: float
    unit: str
    section: str
    as_of: str
    estimate: Optional[str] = None
    """Why the number is an estimate; None when it was read from the cited source."""
    overridden: bool = False


@lru_cache(maxsize=4)
def _load(path: str) -> dict[str, Any]:
    return yaml.safe_load(Path(path).read_text())


class PriceTable:
    """data/prices.yaml with `cost.priceOverrides` applied."""

    def __init__(self, doc: Mapping[str, Any], overrides: Optional[Mapping[str, float]] = None):
        self.doc = doc
        self.hours_per_month = float(doc.get("hours_per_month", 730))
        self.currency = doc.get("currency", "USD")
        self._keys: dict[str, str] = {}
        for name, section in (doc.get("sections") or {}).items():
            for key in section.get("prices") or {}:
                self._keys[key] = name
        self.overrides = dict(overrides or {})
        unknown = sorted(set(self.overrides) - set(self._keys))
        if unknown:
            raise PriceError(f"unknown price key(s) {', '.join(unknown)}; allowed: {', '.join(sorted(self._keys))}")

    @classmethod
    def load(cls, overrides: Optional[Mapping[str, float]] = None, path: Path = PRICES_FILE) -> "PriceTable":
        return cls(_load(str(path)), overrides)

    def keys(self) -> list[str]:
        return sorted(self._keys)

    def section(self, name: str) -> dict[str, Any]:
        return self.doc["sections"][name]

    def has(self, key: str) -> bool:
        return key in self._keys

    def get(self, key: str, region: str) -> Price:
        if key not in self._keys:
            raise PriceError(f"no price {key!r} in {PRICES_FILE.name}")
        name = self._keys[key]
        section = self.section(name)
        unit, as_of = section.get("unit", ""), str(section.get("as_of", ""))
        if key in self.overrides:
            return Price(key, region, float(self.overrides[key]), unit, name, as_of, overridden=True)
        by_region = section["prices"][key]
        if region in by_region:
            value, estimate = _entry(by_region[region])
            return Price(key, region, value, unit, name, as_of, estimate)
        fallback = self.doc.get("fallback") or {}
        base = fallback.get("base_region", "us-central1")
        if base not in by_region:
            raise PriceError(f"no price {key!r} for region {region!r} nor the fallback base {base!r}")
        value, _ = _entry(by_region[base])
        multiplier = float(fallback.get("default_multiplier", 1.0))
        for prefix, m in (fallback.get("prefix_multipliers") or {}).items():
            if region.startswith(prefix):
                multiplier = float(m)
                break
        return Price(
            key,
            region,
            value * multiplier,
            unit,
            name,
            as_of,
            f"{base} price x {multiplier:g} (fallback rule for {region})",
        )


def _entry(raw: Any) -> tuple[float, Optional[str]]:
    if isinstance(raw, Mapping):
        return float(raw["value"]), str(raw.get("estimate") or "") or None
    return float(raw), None


def price_table(cfg: StackConfig) -> PriceTable:
    """The price table with the stack's `cost.priceOverrides`; an unknown key is a config error."""
    try:
        return PriceTable.load(cfg.cost.price_overrides)
    except PriceError as err:
        raise ConfigError(f"{PROJECT}:cost.priceOverrides: {err}") from None


PRICE_KIND = {
    Provisioning.SPOT: "spot",
    Provisioning.FLEX_START: "flexStart",
    Provisioning.ON_DEMAND: "onDemand",
    # A reservation is billed at the on-demand rate of what it reserves (less any commitment).
    Provisioning.RESERVATION: "onDemand",
}
"""The price-table kind each way of obtaining GPU nodes is billed at (`gpu.<machine>.<kind>`)."""


def node_hour_price(
    table: PriceTable, machine_type: str, region: str, provisioning: Provisioning, *, autopilot: bool = False
) -> Price:
    """One GPU node-hour of `machine_type` in `region` as `provisioning` obtains it: THE rung-to-price mapping
    (the plan's ladder, run.json, the cost estimate and the capacity finder all use it). On Autopilot plus the
    premium (spot's for spot, else on-demand's: the table has no other). Raises `PriceError`."""
    gpu = table.get(f"gpu.{machine_type}.{PRICE_KIND[provisioning]}", region)
    if not autopilot:
        return gpu
    premium_kind = "spot" if provisioning is Provisioning.SPOT else "onDemand"
    premium = table.get(f"autopilot.{machine_type}.premium.{premium_kind}", region)
    estimates = [gpu.estimate, premium.estimate and f"Autopilot premium: {premium.estimate}"]
    if provisioning in (Provisioning.FLEX_START, Provisioning.RESERVATION):
        estimates.append(f"the on-demand Autopilot premium assumed for {provisioning.value}")
    return dataclasses.replace(
        gpu,
        value=gpu.value + premium.value,
        estimate="; ".join(e for e in estimates if e) or None,
        overridden=gpu.overridden or premium.overridden,
    )
