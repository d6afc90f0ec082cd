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
    channel_name = cfg.cluster.release_channel
    minimum, why = minimum_gke_version(cfg)
    config = ctx.clients.clusters.get_server_config(
        name=f"projects/{ctx.project}/locations/{cfg.zone}", timeout=ctx.timeout
    )
    channels = {c.channel.name: c for c in config.channels}
    channel = channels.get(channel_name)
    if channel is None:
        return failed(
            f"{cfg.zone} offers no {channel_name} channel (offered: {', '.join(sorted(channels))})",
            "pulumi config set --path cluster.releaseChannel REGULAR",
        )
    floor = cfg.cluster.min_master_version or minimum
    fits = sorted(
        (v for v in channel.valid_versions if parse_gke_version(v) >= parse_gke_version(floor)), key=parse_gke_version
    )
    if cfg.cluster.min_master_version:
        if fits:
            return passed(
                f"{channel_name} in {cfg.zone} offers {fits[0]} for cluster.minMasterVersion {floor}",
            )
        return failed(
            f"{channel_name} in {cfg.zone} offers nothing at or above cluster.minMasterVersion "
            f"{floor} (newest {max(channel.valid_versions, key=parse_gke_version, default='none')})",
            _channel_fix(channels, floor),
        )
    default = channel.default_version
    if default and parse_gke_version(default) >= parse_gke_version(minimum):
        return passed(f"{channel_name} default in {cfg.zone} is {default}, at or above {minimum} ({why})")
    if fits:
        return failed(
            f"{channel_name} default in {cfg.zone} is {default}, below {minimum} ({why})",
            f"pulumi config set --path cluster.minMasterVersion {fits[0]}",
        )
    return failed(
        f"{channel_name} in {cfg.zone} offers nothing at or above {minimum} ({why})",
        _channel_fix(channels, minimum),
    )


def _channel_fix(channels: dict[str, Any], floor: str) -> str:
    for name in ("RAPID", "REGULAR", "STABLE", "EXTENDED"):
        channel = channels.get(name)
        if channel and any(parse_gke_version(v) >= parse_gke_version(floor) for v in channel.valid_versions):
            return f"pulumi config set --path cluster.releaseChannel {name}"
    return f"no channel offers {floor} yet: wait, or pick another zone"
