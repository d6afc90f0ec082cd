"""Managed Lustre catalogue: the capacities each performance tier accepts, the throughput they give, and the
GKE node versions the Lustre CSI driver needs. Facts about Google Cloud, not stack settings."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional


@dataclass(frozen=True)
class LustreTier:
    """Steps of `step_gib` up to `threshold_gib`, then multiples of `large_step_gib` (managed-lustre docs,
    "Increase capacity")."""

    min_gib: int
    step_gib: int
    threshold_gib: int
    large_step_gib: int
    max_gib: int

    def accepts(self, capacity_gib: int) -> bool:
        if not self.min_gib <= capacity_gib <= self.max_gib:
            return False
        step = self.step_gib if capacity_gib <= self.threshold_gib else self.large_step_gib
        return capacity_gib % step == 0

    def round_up(self, need_gib: float) -> Optional[int]:
        capacity = max(self.min_gib, math.ceil(need_gib / self.step_gib) * self.step_gib)
        if capacity > self.threshold_gib:
            capacity = math.ceil(need_gib / self.large_step_gib) * self.large_step_gib
        return capacity if capacity <= self.max_gib else None

    def allowed(self) -> str:
        text = f"{self.min_gib} to {self.threshold_gib} GiB in steps of {self.step_gib}"
        if self.threshold_gib < self.max_gib:
            text += f", or up to {self.max_gib} GiB in multiples of {self.large_step_gib}"
        return text


# Managed Lustre performance tiers, MB/s per TiB -> capacities (checked
# against docs.cloud.google.com/managed-lustre/docs/performance-tiers and .../increase-capacity, 2026-12).
LUSTRE_TIERS: dict[int, LustreTier] = {
    1000: LustreTier(9_000, 9_000, 1_530_000, 72_000, 10_008_000),
    500: LustreTier(18_000, 18_000, 3_060_000, 144_000, 20_016_000),
    250: LustreTier(36_000, 36_000, 6_120_000, 288_000, 40_032_000),
    125: LustreTier(72_000, 72_000, 12_240_000, 72_000, 12_240_000),
}

# From this node version the CSI driver reaches plain instances on 988, no legacy flag (container.v1 API rev
# 20261027, LustreCsiDriverConfig.enableLegacyLustrePort,
# https://cloud.google.com/kubernetes-engine/docs/reference/rest/v1/projects.locations.clusters; the GKE Lustre
# page names the later 1.33.2-gke.4780000 for the default port change).
LUSTRE_PORT_988_MIN_GKE = "1.33.2-gke.4655000"


def lustre_aggregate_mb_s(capacity_gib: float, tier: int) -> float:
    """Capacity in TiB x the tier's MB/s per TiB (https://cloud.google.com/managed-lustre/docs/performance-tiers)."""
    return capacity_gib / 1024 * tier


# The oldest node version the Lustre CSI add-on supports (GKE "About the Managed Lustre CSI driver"); older
# guidance refused Secure Boot on CPU nodes, which the system pool mounting Lustre for the Ray head has.
LUSTRE_CSI_MIN_GKE = "1.33.2-gke.1111000"
