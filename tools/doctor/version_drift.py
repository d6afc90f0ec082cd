"""The doctor's version-matrix check: the live cluster's versions and the channel's next ones against the stack's
row of data/version_matrix.yaml. Why: the channel moves a cluster on its own, and past the row's GKE range the GPU
driver and the add-ons change under a job tested on the old ones (docs/version-matrix.md)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Callable, NamedTuple, Optional

from google.api_core import exceptions as gexc

from infra.cluster import cluster_location
from infra.flavours import parse_gke_version
from infra.naming import Limit
from infra.version_matrix import gke_in_row, gke_range, known_bad, load, report
from tools.doctor.check_context import FAIL, PASS, WARN, Context, Result, passed, warning

KNOWN_BAD, UPGRADES = "version-known-bad", "version-upgrades"
# Stops minor control-plane upgrades and every node upgrade (GKE maintenance exclusions, gcloud
# `--add-maintenance-exclusion-scope=no_minor_or_node_upgrades`).
HOLD_SCOPE = "NO_MINOR_OR_NODE_UPGRADES"


def _minor(version: str) -> tuple[int, ...]:
    return parse_gke_version(version)[:2]


def _holds(cluster: Any) -> list[str]:
    """Names of the cluster's exclusions of scope no_minor_or_node_upgrades."""
    window = cluster.maintenance_policy.window
    return sorted(
        name
        for name, w in window.maintenance_exclusions.items()
        if w.maintenance_exclusion_options.scope.name == HOLD_SCOPE
    )


def _hold_fix(cfg: Any, name: str, location: str) -> str:
    if cfg.cluster.block_node_upgrades:
        how = "pulumi up  # cluster.blockNodeUpgrades: true adds the no-minor-or-node-upgrades exclusion"
    else:
        how = "pulumi config set --path cluster.blockNodeUpgrades true && pulumi up"
    return (
        f"{how}; or: gcloud container clusters update {name} --location {location} "
        "--add-maintenance-exclusion-name=hold-version-matrix --add-maintenance-exclusion-start=<now> "
        "--add-maintenance-exclusion-end=<date> --add-maintenance-exclusion-scope=no_minor_or_node_upgrades"
    )


def _channels_inside(channels: dict[str, Any], row: Any) -> list[str]:
    return [
        n
        for n in ("RAPID", "REGULAR", "STABLE", "EXTENDED")
        if n in channels and channels[n].default_version and gke_in_row(channels[n].default_version, row)
    ]


def check_version_matrix(ctx: Context) -> list[Result]:
    """`version-matrix`, `version-known-bad` and `version-upgrades` of the live cluster (or the one to come)."""
    cfg = ctx.cfg
    rep = report(cfg.version_pins)
    if rep["row"] is None:
        nearest = f"allowUntestedVersions; nearest row {rep['nearestRow']}"
        return [warning(f"the stack is outside the version matrix ({nearest}): live versions not compared")]
    row = next(r for r in load()["rows"] if r["id"] == rep["row"])
    location = cfg.region if cfg.cluster.mode == "autopilot" else cluster_location(ctx.names, cfg.cluster)
    name = ctx.names.name("gke", Limit.GKE_CLUSTER)
    parent = f"projects/{ctx.project}/locations/{location}"
    server = ctx.clients.clusters.get_server_config(name=parent, timeout=ctx.timeout)
    channels = {c.channel.name: c for c in server.channels}
    channel = channels.get(cfg.cluster.release_channel)
    try:
        cluster: Optional[Any] = ctx.clients.clusters.get_cluster(name=f"{parent}/clusters/{name}", timeout=ctx.timeout)
    except gexc.NotFound:
        cluster = None
    if channel is None:  # the gke-versions check fails this already, with its fix
        return [warning(f"{location} offers no {cfg.cluster.release_channel} channel: upgrades not compared")]
    live = Live(cfg, row, name, location, channel, channels)
    if cluster is None:
        return _before_the_cluster(live)
    return _live_cluster(live, cluster)


class Live(NamedTuple):
    cfg: Any
    row: Any
    name: str
    location: str
    channel: Any
    channels: dict[str, Any]

    @property
    def where(self) -> str:
        # The row's gIB tag too: the one line that says which installer the gate's run is expected with (NCCL's
        # log names the plugin, not its release: docs/version-matrix.md).
        return f"row {self.row['id']} (GKE {gke_range(self.row)}; gIB {self.row['gib']['tag']})"


def _before_the_cluster(live: Live) -> list[Result]:
    cfg, row, channel = live.cfg, live.row, live.channel
    start = cfg.cluster.min_master_version or channel.default_version
    inside = sorted((v for v in channel.valid_versions if gke_in_row(v, row)), key=parse_gke_version)
    clean = [v for v in inside if not _known_bad(cfg, row, v)]
    pin = f"pulumi config set --path cluster.minMasterVersion {clean[-1]}" if clean else None
    bad = known_bad_findings(live, [("new cluster", start)] if start else [], lambda what, v: pin)
    would = f"no cluster {live.name} yet; {cfg.cluster.release_channel} would create it on {start}"
    if start and not gke_in_row(start, row):
        other = (_channels_inside(live.channels, row) or ["STABLE"])[0]
        fix = pin or f"pulumi config set --path cluster.releaseChannel {other}"
        return [warning(f"{would}, outside {live.where}", fix), *bad]
    return [passed(f"{would}, inside {live.where}"), *bad]


def _live_cluster(live: Live, cluster: Any) -> list[Result]:
    cfg, row, where = live.cfg, live.row, live.where
    master = cluster.current_master_version
    pools = {p.name: p.version for p in cluster.node_pools}
    config = cluster.addons_config
    on = {"Ray operator": config.ray_operator_config.enabled, "Lustre CSI": config.lustre_csi_driver_config.enabled}
    addons = [label for label, enabled in on.items() if enabled]
    seen = f"control plane {master}" + "".join(f", pool {n} {v}" for n, v in sorted(pools.items()))
    running = [("control plane", master), *((f"pool {n}", v) for n, v in sorted(pools.items()))]
    outside = [f"{what} {v}" for what, v in running if not gke_in_row(v, row)]
    if outside:
        first = warning(
            f"{', '.join(outside)} already outside {where}; run the acceptance gate "
            "(python -m jobctl gate) and record a row, or hold the cluster",
            _hold_fix(cfg, live.name, live.location),
        )
    else:
        addons_seen = f" (add-ons {', '.join(addons)} at the cluster's version)" if addons else ""
        first = passed(f"{seen}{addons_seen}: inside {where}")
    bad = known_bad_findings(live, running, lambda what, v: _upgrade_fix(live, what))
    if not bad:
        bad = [Result(KNOWN_BAD, PASS, f"no known-bad entry of data/version_matrix.yaml meets {seen}")]
    return [first, *bad, _upgrades(live, cluster, master, pools)]


def _upgrades(live: Live, cluster: Any, master: str, pools: dict[str, str]) -> Result:
    row, where, channel, name = live.row, live.where, live.channel, live.cfg.cluster.release_channel
    newest = parse_gke_version(max([master, *pools.values()], key=parse_gke_version))
    candidates = {v for v in [*channel.valid_versions, channel.upgrade_target_version, channel.default_version] if v}
    ahead = sorted((v for v in candidates if parse_gke_version(v) > newest), key=parse_gke_version)
    leaving = [v for v in ahead if not gke_in_row(v, row)]
    if not leaving:
        newer = ", ".join(ahead[-3:]) or "none"
        return Result(UPGRADES, PASS, f"{name}'s newer versions ({newer}) stay inside {where}")
    holds = _holds(cluster)
    # The exclusion stops minor upgrades and node upgrades; control-plane patches of the same minor go on.
    unheld = [v for v in leaving if not holds or _minor(v) == _minor(master)]
    if not unheld:
        held = f"held by maintenance exclusion {', '.join(holds)} (no_minor_or_node_upgrades)"
        return Result(UPGRADES, PASS, f"{name} offers {', '.join(leaving)}, outside {where}, {held}")
    others = _channels_inside(live.channels, row)
    hint = f"; channels whose default is inside the row: {', '.join(others)}" if others else ""
    summary = f"{name} may upgrade {live.name} to {', '.join(unheld)}, outside {where}"
    fix = _hold_fix(live.cfg, live.name, live.location)
    return Result(UPGRADES, WARN, f"{summary}, and no no_minor_or_node_upgrades exclusion holds it{hint}", fix)


def _known_bad(cfg: Any, row: Any, gke: str) -> list[Any]:
    """Known-bad entries naming a GKE version that meet `gke` with the stack's other pins: the config checks only
    `cluster.minMasterVersion`; a cluster on the channel's default, or moved since, only the doctor sees (issue 33)."""
    return [
        rule
        for rule in known_bad(replace(cfg.version_pins, gke=gke), row)
        if "gke" in (rule.get("when") or {}) and rule["effect"] in ("refuse", "caution")
    ]


def known_bad_findings(
    live: Live, running: list[tuple[str, str]], fix: Callable[[str, str], Optional[str]]
) -> list[Result]:
    """One finding per (what runs it, version) a known-bad entry meets: `refuse` fails, `caution` warns."""
    found = []
    for what, version in running:
        for rule in _known_bad(live.cfg, live.row, version):
            summary = f"{what} {version} is a known-bad combination ({rule['id']}: {rule['issue']})"
            found.append(Result(KNOWN_BAD, FAIL if rule["effect"] == "refuse" else WARN, summary, fix(what, version)))
    return found


def _upgrade_fix(live: Live, what: str) -> str:
    target = "--master" if what == "control plane" else f"--node-pool {what.removeprefix('pool ')}"
    return (
        f"gcloud container clusters upgrade {live.name} --location {live.location} {target} --cluster-version "
        f"<a version of row {live.row['id']} not known-bad>"
    )
