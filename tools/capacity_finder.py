"""Capacity finder: before the first `pulumi up`, which catalogued zone can this project get the GPUs in?

    python -m tools.capacity_finder --stack NAME [--json] [--timeout SECONDS]   # docs/capacity.md

Per zone of data/zones.yaml with the flavour: each rung's regional GPU quota and the zone's reservations, ranked
by the gang's hourly price (`infra.prices.node_hour_price`). Stock-outs show in no API: the ladder copes with them.
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Optional, TextIO

from google.api_core import exceptions as gexc

from infra.config import Provisioning, Rung, StackConfig
from infra.placement import rung_quota_metric
from infra.prices import PriceError, PriceTable, node_hour_price, price_table
from infra.stack_file import StackFile
from infra.zones import catalogue, region_of
from tools.doctor.check_context import DEFAULT_TIMEOUT
from tools.doctor.doctor_command import EXIT_OK, Fail, command_parser, run_command
from tools.doctor.google_clients import Clients, connect
from tools.doctor.zone_checks import lustre_zones

FITS, SHORT, UNKNOWN = "fits", "short", "unknown"
LIVE_LUSTRE = "the project's Managed Lustre locations (read now)"
STATIC_LUSTRE = "the static list of data/zones.yaml (the live Managed Lustre locations could not be read)"
# How zones of the same hourly price are ordered (all US B200 zones share one price, for instance).
TIES = "equal prices: sourced before estimated, then the stack's own zone, then by name"


@dataclass
class RungAnswer:
    rung: str
    status: str  # FITS (the whole gang), SHORT, or UNKNOWN (no such quota listed, or not read)
    detail: str
    gang_hour: Optional[float]
    estimate: Optional[str] = None  # why the node-hour price is an estimate (data/prices.yaml); None: sourced


@dataclass
class ZoneAnswer:
    zone: str
    region: str
    lustre: bool
    rungs: list[RungAnswer]
    reservations: list[str] = field(default_factory=list)  # of the flavour's machine type: `name free/total`
    change: str = ""
    current: bool = False
    lustre_from: str = ""  # LIVE_LUSTRE, or STATIC_LUSTRE (then only the zones it lists are considered)

    @property
    def best(self) -> Optional[RungAnswer]:
        """The first rung (ladder order) that can supply the whole gang here."""
        return next((r for r in self.rungs if r.status == FITS), None)

    def rank(self) -> tuple[bool, int, float, bool, bool, str]:
        """Managed Lustre first; then a rung holds the gang (by its price), the quota is unknown, the rest."""
        best = self.best
        if best is not None:
            tier, price = 0, best.gang_hour if best.gang_hour is not None else float("inf")
        else:
            tier, price = (1 if any(r.status == UNKNOWN for r in self.rungs) else 2), 0.0
        estimated = best is not None and best.estimate is not None
        return (not self.lustre, tier, price, estimated, not self.current, self.zone)


def _reservations(clients: Clients, project: str, zone: str, machine: str, timeout: float) -> dict[str, tuple]:
    """The zone's specific reservations of `machine`: name -> (free, total)."""
    found = {}
    for r in clients.reservations.list(project=project, zone=zone, timeout=timeout):
        sku = r.specific_reservation
        if sku.instance_properties.machine_type.rsplit("/", 1)[-1] == machine:
            found[r.name] = (int(sku.count) - int(sku.in_use_count), int(sku.count))
    return found


def _rung_answer(
    cfg: StackConfig, rung: Rung, region: str, table: PriceTable, quotas: Any, reservations: dict[str, tuple[int, int]]
) -> RungAnswer:
    """What one rung finds in a zone of `region`, priced as the plan prices it (`infra.prices.node_hour_price`)."""
    flavour, nodes = cfg.flavour_spec, cfg.gpu_pool.node_count
    need = nodes * flavour.gpus_per_node
    autopilot = cfg.cluster.mode == "autopilot"
    try:
        price = node_hour_price(table, flavour.machine_type, region, rung.provisioning, autopilot=autopilot)
        gang_hour: Optional[float] = round(price.value * nodes, 2)
        estimate = price.estimate
    except PriceError as err:
        gang_hour, estimate = None, str(err)

    def answer(status: str, detail: str) -> RungAnswer:
        return RungAnswer(rung.label, status, detail, gang_hour, estimate)

    if rung.provisioning is Provisioning.RESERVATION:
        if rung.reservation_name not in reservations:
            return answer(SHORT, f"no reservation {rung.reservation_name} here")
        free, total = reservations[rung.reservation_name]
        return answer(FITS if free >= nodes else SHORT, f"{free} of {total} free, need {nodes}")
    metric = rung_quota_metric(flavour.gpu_quota_metric, rung.provisioning)
    if isinstance(quotas, Exception):
        return answer(UNKNOWN, f"quota not read ({type(quotas).__name__})")
    if metric not in quotas:
        return answer(UNKNOWN, f"{region} lists no {metric}")
    limit, usage = quotas[metric]
    return answer(FITS if limit - usage >= need else SHORT, f"{metric} {limit - usage:g} free, need {need}")


def find(stack: str, cfg: StackConfig, clients: Clients, timeout: float = DEFAULT_TIMEOUT) -> list[ZoneAnswer]:
    """Every zone of the machine catalogue for the flavour, with what each rung finds there, best first."""
    flavour = cfg.flavour_spec
    table = price_table(cfg)
    project = cfg.project
    machine_zones = sorted(catalogue().machine_types.get(flavour.machine_type, ()))
    try:
        offered: Optional[set[str]] = set(lustre_zones(clients, project, timeout))
    except gexc.GoogleAPICallError:
        offered = None
    # Without the live Lustre locations, the static list of data/zones.yaml narrows the zones (`lustre_from`).
    zones = machine_zones if offered is not None else catalogue().zones_for(flavour.machine_type)

    @functools.cache
    def quotas_in(region: str) -> Any:
        """The region's quotas, metric -> (limit, usage), or the error that stopped their reading."""
        try:
            found = clients.regions.get(project=project, region=region, timeout=timeout)
        except gexc.GoogleAPICallError as exc:
            return exc
        return {q.metric: (q.limit, q.usage) for q in found.quotas}

    answers = []
    for zone in zones:
        region = region_of(zone)
        quotas = quotas_in(region)
        try:
            reservations = _reservations(clients, project, zone, flavour.machine_type, timeout)
        except gexc.GoogleAPICallError:
            reservations = {}
        rungs = [_rung_answer(cfg, rung, region, table, quotas, reservations) for rung in cfg.gpu_pool.ladder]
        move = f"pulumi config set --stack {stack} region {region} && pulumi config set --stack {stack} zone {zone}"
        answers.append(
            ZoneAnswer(
                zone,
                region,
                offered is None or zone in offered,
                rungs,
                [f"{n} {f}/{t}" for n, (f, t) in sorted(reservations.items())],
                "(the stack's zone)" if zone == cfg.zone else move,
                zone == cfg.zone,
                LIVE_LUSTRE if offered is not None else STATIC_LUSTRE,
            )
        )
    answers.sort(key=ZoneAnswer.rank)
    return answers


def render_text(stack: str, cfg: StackConfig, answers: list[ZoneAnswer]) -> str:
    ladder = " > ".join(r.label for r in cfg.gpu_pool.ladder)
    machine = cfg.flavour_spec.machine_type
    lustre_from = answers[0].lustre_from if answers else LIVE_LUSTRE
    lines = [
        f"capacity finder: stack {stack}, {cfg.gpu_pool.node_count} x {machine}, ladder {ladder}; zones of "
        f"data/zones.yaml with {machine}, Managed Lustre from {lustre_from}; best first: by the gang's hourly price "
        f"at the first rung that holds it (list prices of data/prices.yaml, * an estimate); {TIES}"
    ]
    estimates: dict[str, str] = {}
    for a in answers:
        best = a.best
        if best and best.estimate:
            estimates.setdefault(f"{a.region} {best.rung}", best.estimate)
        cost = "quota unknown" if any(r.status == UNKNOWN for r in a.rungs) else "no rung holds the gang"
        if best and best.gang_hour is not None:
            cost = f"${best.gang_hour:,.2f}/h at {best.rung}{' *' if best.estimate else ''}"
        lustre = "" if a.lustre else " (Managed Lustre not offered to this project here)"
        lines.append(f"  {a.zone}{lustre}: {cost}")
        lines += [f"      {r.status:7}  {r.rung}: {r.detail}" for r in a.rungs]
        if a.reservations:
            lines.append(f"      reservations of {machine}: {', '.join(a.reservations)}")
        lines.append(f"      use it: {a.change}")
    lines += [f"  * {where}: {why}" for where, why in estimates.items()]
    lines.append(
        "A live stack does not move zones (Lustre and the RoCE network are zonal): choose before the first `pulumi up`."
    )
    return "\n".join(lines)


def main(
    argv: Optional[list[str]] = None,
    out: Optional[TextIO] = None,
    err: Optional[TextIO] = None,
    connect: Callable[[str], Clients] = connect,
) -> int:
    def body(args: argparse.Namespace, stack: StackFile, out: TextIO, fail: Fail) -> int:
        answers = find(stack.name, stack.config, connect(stack.config.project), args.timeout)
        doc = {"stack": stack.name, "zones": [asdict(a) for a in answers]}
        out.write((json.dumps(doc, indent=2) if args.json else render_text(stack.name, stack.config, answers)) + "\n")
        return EXIT_OK

    p = command_parser(
        "python -m tools.capacity_finder", __doc__.splitlines()[0], "print the zones as JSON", "seconds per API call"
    )
    return run_command(argv, out, err, p, body, empty=())


if __name__ == "__main__":
    sys.exit(main())
