"""The doctor's GKE version check: the release channel offers a version the stack works with."""

from __future__ import annotations

from typing import Any

from infra.config import LUSTRE_CSI_MIN_GKE, LUSTRE_PORT_988_MIN_GKE, Provisioning, StackConfig
from infra.flavours import parse_gke_version
from infra.placement import CUSTOM_COMPUTE_CLASS_MIN_GKE, FLEX_START_MIN_GKE, is_ladder
from tools.doctor.check_context import Context, Result, failed, passed


def minimum_gke_version(cfg: StackConfig) -> tuple[str, str]:
    """The lowest control-plane version the stack works with, and why."""
    flavour = cfg.flavour_spec
    # The Managed Lustre CSI driver's own floor holds with the legacy port too (infra/config.py, the same
    # three floors for cluster.minMasterVersion).
    needs = [
        (flavour.min_gke_version, f"flavour {flavour.name}"),
        (LUSTRE_CSI_MIN_GKE, "the Managed Lustre CSI driver"),
    ]
    if not cfg.lustre.legacy_port:
        needs.append((LUSTRE_PORT_988_MIN_GKE, "Lustre on port 988"))
    if is_ladder(cfg):
        needs.append((CUSTOM_COMPUTE_CLASS_MIN_GKE, "the capacity ladder's custom ComputeClass"))
    if any(r.provisioning is Provisioning.FLEX_START for r in cfg.gpu_pool.ladder):
        needs.append((FLEX_START_MIN_GKE, "flex-start GPUs"))
    return max(needs, key=lambda n: parse_gke_version(n[0]))


def check_gke_versions(ctx: Context) -> Result:
    """The release channel in the zone offers a version at or above the flavour's (and Lustre's) minimum."""
    cfg = ctx.cfg
    name, where = cfg.cluster.release_channel, f"in {cfg.zone}"
    minimum, why = minimum_gke_version(cfg)
    config = ctx.clients.clusters.get_server_config(
        name=f"projects/{ctx.project}/locations/{cfg.zone}", timeout=ctx.timeout
    )
    channels = {c.channel.name: c for c in config.channels}
    channel = channels.get(name)
    if channel is None:
        offered = ", ".join(sorted(channels))
        return failed(f"{cfg.zone} offers no {name} channel (offered: {offered})", f"{SET_CHANNEL} REGULAR")
    pinned = cfg.cluster.min_master_version
    floor = pinned or minimum
    fits = sorted((v for v in channel.valid_versions if _at_least(v, floor)), key=parse_gke_version)
    if pinned:
        if fits:
            return passed(f"{name} {where} offers {fits[0]} for cluster.minMasterVersion {floor}")
        newest = max(channel.valid_versions, key=parse_gke_version, default="none")
        summary = f"{name} {where} offers nothing at or above cluster.minMasterVersion {floor} (newest {newest})"
        return failed(summary, _channel_fix(channels, floor))
    default = channel.default_version
    if default and _at_least(default, minimum):
        return passed(f"{name} default {where} is {default}, at or above {minimum} ({why})")
    if fits:
        pin = f"pulumi config set --path cluster.minMasterVersion {fits[0]}"
        return failed(f"{name} default {where} is {default}, below {minimum} ({why})", pin)
    return failed(f"{name} {where} offers nothing at or above {minimum} ({why})", _channel_fix(channels, minimum))


SET_CHANNEL = "pulumi config set --path cluster.releaseChannel"


def _at_least(version: str, floor: str) -> bool:
    return parse_gke_version(version) >= parse_gke_version(floor)


def _channel_fix(channels: dict[str, Any], floor: str) -> str:
    for name in ("RAPID", "REGULAR", "STABLE", "EXTENDED"):
        if name in channels and any(_at_least(v, floor) for v in channels[name].valid_versions):
            return f"{SET_CHANNEL} {name}"
    return f"no channel offers {floor} yet: wait, or pick another zone"
