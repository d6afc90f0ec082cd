"""The zone catalogue (data/zones.yaml, with its sources): which zones offer a machine type and Managed Lustre."""

from __future__ import annotations

import difflib
import functools
from dataclasses import dataclass
from pathlib import Path

import yaml

CATALOGUE_FILE = Path(__file__).resolve().parent.parent / "data" / "zones.yaml"


@dataclass(frozen=True)
class ZoneCatalogue:
    checked: str
    machine_types: dict[str, frozenset[str]]
    managed_lustre: frozenset[str]

    def zones_for(self, machine_type: str) -> list[str]:
        return sorted(self.machine_types.get(machine_type, frozenset()) & self.managed_lustre)


def region_of(zone: str) -> str:
    return zone.rsplit("-", 1)[0]


def nearest(target: str, candidates: list[str], count: int = 3) -> list[str]:
    """Same region first, then the same geography (`us`, `europe`, ...), then by spelling."""
    region, area = region_of(target), target.split("-", 1)[0]

    def rank(c: str) -> tuple[int, float, str]:
        tier = 0 if c.startswith(region + "-") or c == region else 1 if c.split("-", 1)[0] == area else 2
        return (tier, -difflib.SequenceMatcher(None, target, c).ratio(), c)

    return sorted(candidates, key=rank)[:count]


@functools.lru_cache(maxsize=1)
def catalogue() -> ZoneCatalogue:
    data = yaml.safe_load(CATALOGUE_FILE.read_text(encoding="utf-8"))
    return ZoneCatalogue(
        checked=str(data["checked"]),
        machine_types={k: frozenset(v) for k, v in data["machineTypes"].items()},
        managed_lustre=frozenset(data["managedLustre"]),
    )
