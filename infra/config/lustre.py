"""`lustre`: the Managed Lustre instance, checked against the tier catalogue (infra/lustre_catalogue.py)."""

from __future__ import annotations

from typing import Annotated, Optional

from pydantic import AfterValidator, Field

from infra.config.base import Model
from infra.config.errors import KeyedValueError, shown
from infra.config.patterns import LUSTRE_FILESYSTEM, RESOURCE_ID
from infra.lustre_catalogue import LUSTRE_PORT_988_MIN_GKE, LUSTRE_TIERS


def check_lustre_tier(v: int) -> int:
    """The throughput tier is one of the catalogue's (infra/lustre_catalogue.py)."""
    if v not in LUSTRE_TIERS:
        raise ValueError(f"{shown(v)} is not allowed; allowed: {', '.join(map(str, sorted(LUSTRE_TIERS)))}")
    return v


def check_import_from(v: Optional[str]) -> Optional[str]:
    """No `.` or `..` folder in the import path: Cloud Storage object names are literal, so `a/../b/` names a
    folder called `..`, never the `b/` the user meant."""
    if v is not None and any(part in (".", "..") for part in v.removeprefix("gs://").split("/")):
        raise ValueError(
            f"{shown(v)} has a '.' or '..' folder, which Cloud Storage reads literally; allowed: gs://bucket/path/ "
            "without '.' or '..' folders"
        )
    return v


def check_lustre_capacity(lustre: LustreConfig) -> None:
    """The capacity is one the tier accepts (its minimum, maximum and step)."""
    tier = LUSTRE_TIERS[lustre.per_unit_storage_throughput]
    if not tier.accepts(lustre.capacity_gib):
        raise KeyedValueError(
            "capacityGib",
            f"{lustre.capacity_gib} is not valid for perUnitStorageThroughput {lustre.per_unit_storage_throughput}; "
            f"allowed: {tier.allowed()}",
        )


class LustreConfig(Model):
    """The Managed Lustre instance (checkpoints, HF cache)."""

    capacity_gib: int = 18000
    """Capacity in GiB; at least the tier's minimum and a multiple of its step."""
    per_unit_storage_throughput: Annotated[int, AfterValidator(check_lustre_tier)] = 500
    """Throughput tier in MB/s per TiB: 125, 250, 500 or 1000. Cannot change after creation."""
    filesystem: str = Field("lustrefs", pattern=LUSTRE_FILESYSTEM)
    """Lustre filesystem name: 1-8 letters or digits."""
    instance_id: Optional[str] = Field(None, pattern=RESOURCE_ID)
    """Instance id (lowercase letters, digits, hyphens; 1-63; starts with a letter). Default `<prefix>-lustre`."""
    legacy_port: bool = Field(
        False,
        description="Use the legacy Lustre port 6988 (gkeSupportEnabled instances on GKE older than "
        f"{LUSTRE_PORT_988_MIN_GKE}).",
    )
    export_on_destroy: bool = True
    """Before `pulumi destroy` deletes the instance, export its `checkpoints/` and `logs/` to
    `gs://<bucket>/lustre-export/` and wait; a failed export stops the destroy. false for scratch stacks."""
    import_from: Annotated[Optional[str], AfterValidator(check_import_from)] = Field(
        None, pattern=r"^gs://[a-z0-9][a-z0-9._-]{1,220}[a-z0-9]/([A-Za-z0-9._=@+-][A-Za-z0-9._=@+/-]*/)?$"
    )
    """When the instance is created, import this Cloud Storage folder (`gs://bucket/path/`, ending in `/`; e.g. an
    earlier stack's `gs://<bucket>/lustre-export/`) into the filesystem root, and wait."""

    checks = (check_lustre_capacity,)
