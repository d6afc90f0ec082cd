"""Managed Lustre catalogue: the capacities each performance tier accepts, the throughput they give,
and the GKE node versions the Lustre CSI driver needs.

Facts about Google Cloud, not stack settings: the config model checks `lustre.*` and
`cluster.minMasterVersion` against them, and the storage component, the acceptance gate's storage
floor, the offline checkpoint sizing and the doctor read them too. They sit beside the other
catalogues (infra/flavours.py, infra/machines.py, infra/zones.py) so that a reader which is not the
config model does not go through it for a fact about the cloud.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional


@dataclass(frozen=True)
class LustreTier:
    """The capacities one Managed Lustre performance tier accepts.

    From `min_gib`, in steps of `step_gib` up to `threshold_gib`; above it, multiples of the larger
    `large_step_gib` up to `max_gib` (every tier's maximum is 139 of those). An instance created at or
    below the threshold can later grow only up to it (managed-lustre docs, "Increase capacity").
    """

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
        """The smallest accepted capacity of at least `need_gib`, or None when the tier cannot hold it."""
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

LUSTRE_PORT_988_MIN_GKE = "1.33.2-gke.4655000"
"""The one cut-off of the Lustre port, used everywhere: from this GKE node version the Lustre CSI driver
reaches plain instances on port 988 and the legacy flag (6988, `gkeSupportEnabled` instances) is not
needed (container.v1 API reference rev 20261027, LustreCsiDriverConfig.enableLegacyLustrePort,
https://cloud.google.com/kubernetes-engine/docs/reference/rest/v1/projects.locations.clusters).
The GKE Managed Lustre page names 1.33.2-gke.4780000 for the default port change;
the earlier of the two is the API's own statement about the flag."""


def lustre_aggregate_mb_s(capacity_gib: float, tier: int) -> float:
    """A Managed Lustre instance's aggregate throughput in MB/s: capacity in TiB x the tier's MB/s per TiB
    (https://cloud.google.com/managed-lustre/docs/performance-tiers). The checkpoint sizing (tools/sizing.py) and the
    acceptance gate's
    storage floor (infra/gate_plan.py) both use it."""
    return capacity_gib / 1024 * tier


LUSTRE_CSI_MIN_GKE = "1.33.2-gke.1111000"
"""The oldest node version the GKE Managed Lustre CSI add-on supports (GKE "About the Managed Lustre CSI
driver", limitations). Older guidance (managed-lustre "Connect from GKE", nodes from 1.31.5) allowed
Secure Boot only on GPU machine types; the current page has no such limit, and Google's Cluster Toolkit
daily test (examples/gke-managed-lustre.yaml, version_prefix 1.33) mounts Lustre on an n2-standard-16
pool with Secure Boot on. The system pool (Secure Boot on) mounts Lustre for the Ray head, so older
versions are refused."""
