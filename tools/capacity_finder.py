"""Capacity finder: before the first `pulumi up`, which catalogued zone can this project get the GPUs in?

    python -m tools.capacity_finder --stack NAME [--json] [--timeout SECONDS]

For every zone of the catalogue (data/zones.yaml) that offers the stack's flavour AND Managed Lustre, it
reads the project's GPU quota of the zone's region for each rung of the stack's capacity ladder
(`gpuPool.capacity`, or the one rung `provisioning`), and the zone's reservations of the flavour's machine
type; it ranks the zones by the ladder's cost (the gang's hourly price at the first rung that can supply
the whole gang there, data/prices.yaml) and prints the one-line config change that moves the stack there.

A live stack does not move zones: Lustre and the RoCE network are zonal, so changing `zone` replaces them
(and the data on Lustre). The finder is for the choice before the first `up`.

Only on the real cloud: the answers (quota values, reservations, whether Lustre is offered to this project
in the zone); stock-outs are not visible through any quota or reservation API, so a zone that fits can
still be out of capacity: the ladder is what copes with that. The calls are those of tools/doctor.py's
`Clients` (the same fakes test them).
"""

from __future__ import annotations

import json
import sys
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Optional, TextIO

from google.api_core import exceptions as gexc
from google.auth.exceptions import RefreshError

from infra.config import ConfigError, Provisioning, StackConfig
from infra.placement import rung_quota_metric
from infra.prices import PriceError, price_table
from infra.stack_file import StackFileError, load_stack
from infra.zones import catalogue, region_of
from tools import doctor
from workloads import cli_args

FITS, SHORT, UNKNOWN = "fits", "short", "unknown"
_PRICE_KIND = {
    Provisioning.SPOT: "spot",
    Provisioning.FLEX_START: "flexStart",
    Provisioning.ON_DEMAND: "onDemand",
    Provisioning.RESERVATION: "onDemand",
}


@dataclass
class RungAnswer:
    rung: str
    status: str
    """`fits` (the whole gang), `short` or `unknown` (the region lists no such quota / it could not be read)."""
    detail: str
    gang_hour: Optional[float]


@dataclass
class ZoneAnswer:
    zone: str
    region: str
    lustre: bool
    rungs: list[RungAnswer]
    reservations: list[str] = field(default_factory=list)
    """The zone's reservations of the flavour's machine type: `name free/total`."""
    change: str = ""
    current: bool = False

    @property
    def best(self) -> Optional[RungAnswer]:
        """The first rung (ladder order) that can supply the whole gang here."""
        return next((r for r in self.rungs if r.status == FITS), None)

    def rank(self) -> tuple[int, float, str]:
        best = self.best
        if best is not None:
            return (0, best.gang_hour if best.gang_hour is not None else float("inf"), self.zone)
        if any(r.status == UNKNOWN for r in self.rungs):
            return (1, 0.0, self.zone)
        return (2, 0.0, self.zone)


def _quotas(clients: doctor.Clients, project: str, region: str, timeout: float, cache: dict[str, Any]) -> Any:
    if region not in cache:
        try:
            found = clients.regions.get(project=project, region=region, timeout=timeout)
            cache[region] = {q.metric: (q.limit, q.usage) for q in found.quotas}
        except gexc.GoogleAPICallError as exc:
            cache[region] = exc
    return cache[region]


def _reservations(
    clients: doctor.Clients, project: str, zone: str, machine: str, timeout: float
) -> dict[str, tuple[int, int]]:
    """The zone's specific reservations of `machine`: name -> (free, total)."""
    found = {}
    for r in clients.reservations.list(project=project, zone=zone, timeout=timeout):
        sku = r.specific_reservation
        if sku.instance_properties.machine_type.rsplit("/", 1)[-1] == machine:
            found[r.name] = (int(sku.count) - int(sku.in_use_count), int(sku.count))
    return found


def find(
    stack: str, cfg: StackConfig, clients: doctor.Clients, timeout: float = doctor.DEFAULT_TIMEOUT
) -> list[ZoneAnswer]:
    """Every catalogued zone for the flavour and Lustre, with what each rung finds there, best first."""
    flavour = cfg.flavour_spec
    nodes = cfg.gpu_pool.node_count
    need = nodes * flavour.gpus_per_node
    table = price_table(cfg)
    project = cfg.project
    try:
        offered = {
            loc.location_id
            for loc in clients.lustre.list_locations(
                request={"name": f"projects/{project}", "page_size": 1000}, timeout=timeout
            ).locations
        }
    except gexc.GoogleAPICallError:
        offered = None  # the catalogue's word only
    cache: dict[str, Any] = {}
    answers = []
    for zone in catalogue().zones_for(flavour.machine_type):
        region = region_of(zone)
        quotas = _quotas(clients, project, region, timeout, cache)
        try:
            reservations = _reservations(clients, project, zone, flavour.machine_type, timeout)
        except gexc.GoogleAPICallError:
            reservations = {}
        rungs = []
        for rung in cfg.gpu_pool.ladder:
            try:
                price = table.get(f"gpu.{flavour.machine_type}.{_PRICE_KIND[rung.provisioning]}", region).value
                gang_hour: Optional[float] = round(price * nodes, 2)
            except PriceError:
                gang_hour = None
            if rung.provisioning is Provisioning.RESERVATION:
                if rung.reservation_name in reservations:
                    free, total = reservations[rung.reservation_name]
                    status = FITS if free >= nodes else SHORT
                    rungs.append(RungAnswer(rung.label, status, f"{free} of {total} free, need {nodes}", gang_hour))
                else:
                    rungs.append(
                        RungAnswer(rung.label, SHORT, f"no reservation {rung.reservation_name} here", gang_hour)
                    )
                continue
            metric = rung_quota_metric(flavour.gpu_quota_metric, rung.provisioning)
            if isinstance(quotas, Exception):
                rungs.append(RungAnswer(rung.label, UNKNOWN, f"quota not read ({type(quotas).__name__})", gang_hour))
            elif metric not in quotas:
                rungs.append(RungAnswer(rung.label, UNKNOWN, f"{region} lists no {metric}", gang_hour))
            else:
                limit, usage = quotas[metric]
                free = limit - usage
                rungs.append(
                    RungAnswer(
                        rung.label, FITS if free >= need else SHORT, f"{metric} {free:g} free, need {need}", gang_hour
                    )
                )
        current = zone == cfg.zone
        change = (
            "(the stack's zone)"
            if current
            else f"pulumi config set --stack {stack} region {region} && pulumi config set --stack {stack} zone {zone}"
        )
        answers.append(
            ZoneAnswer(
                zone,
                region,
                offered is None or zone in offered,
                rungs,
                [f"{n} {f}/{t}" for n, (f, t) in sorted(reservations.items())],
                change,
                current,
            )
        )
    answers.sort(key=lambda a: (not a.lustre, *a.rank()))
    return answers


def render_text(stack: str, cfg: StackConfig, answers: list[ZoneAnswer]) -> str:
    ladder = " > ".join(r.label for r in cfg.gpu_pool.ladder)
    lines = [
        f"capacity finder: stack {stack}, {cfg.gpu_pool.node_count} x {cfg.flavour_spec.machine_type}, "
        f"ladder {ladder}; zones of data/zones.yaml with {cfg.flavour_spec.machine_type} and Managed Lustre, best first"
    ]
    for a in answers:
        best = a.best
        cost = (
            f"{doctor_money(best.gang_hour)}/h at {best.rung}"
            if best and best.gang_hour is not None
            else "no rung holds the gang"
            if not any(r.status == UNKNOWN for r in a.rungs)
            else "quota unknown"
        )
        lustre = "" if a.lustre else " (Managed Lustre not offered to this project here)"
        lines.append(f"  {a.zone}{lustre}: {cost}")
        for r in a.rungs:
            lines.append(f"      {r.status:7}  {r.rung}: {r.detail}")
        if a.reservations:
            lines.append(f"      reservations of {cfg.flavour_spec.machine_type}: {', '.join(a.reservations)}")
        lines.append(f"      use it: {a.change}")
    lines.append(
        "A live stack does not move zones (Lustre and the RoCE network are zonal): choose before the first `pulumi up`."
    )
    return "\n".join(lines)


def doctor_money(value: float) -> str:
    return f"${value:,.2f}"


def main(
    argv: Optional[list[str]] = None,
    out: Optional[TextIO] = None,
    err: Optional[TextIO] = None,
    connect: Callable[[str], doctor.Clients] = doctor.connect,
) -> int:
    out, err = out or sys.stdout, err or sys.stderr
    p = cli_args.OneLineParser(prog="python -m tools.capacity_finder", description=__doc__.splitlines()[0])
    p.add_argument(
        "--stack",
        type=cli_args.stack_name,
        default=doctor.DEFAULT_STACK,
        help=f"stack name (Pulumi.<stack>.yaml); default {doctor.DEFAULT_STACK}",
    )
    p.add_argument("--json", action="store_true", help="print the zones as JSON")
    p.add_argument(
        "--timeout",
        type=cli_args.seconds(positive=True, maximum=doctor.MAX_TIMEOUT),
        default=doctor.DEFAULT_TIMEOUT,
        help="seconds per API call",
    )
    try:
        args = p.parse_args(argv)
    except cli_args.UsageError as exc:  # bad flags are one line and exit 2, as the doctor's
        err.write(f"error: {exc}\n")
        return doctor.EXIT_USAGE
    try:
        stack = load_stack(args.stack)
    except (StackFileError, ConfigError) as exc:
        err.write(f"error: {str(exc).replace(chr(10), '; ')}\n")
        return doctor.EXIT_USAGE
    try:
        clients = connect(stack.config.project)
        answers = find(stack.name, stack.config, clients, args.timeout)
    except doctor.NoCredentials as exc:
        err.write(f"error: {exc}\n")
        return doctor.EXIT_NO_CREDENTIALS
    except RefreshError as exc:
        err.write(f"error: {doctor.NO_CREDENTIALS.format(reason='refused: ' + doctor._first_line(exc))}\n")
        return doctor.EXIT_NO_CREDENTIALS
    except gexc.GoogleAPICallError as exc:
        err.write(
            f"error: could not ask project {stack.config.project}: {type(exc).__name__} ({doctor._first_line(exc)})\n"
        )
        return doctor.EXIT_NO_CREDENTIALS
    if args.json:
        out.write(json.dumps({"stack": stack.name, "zones": [asdict(a) for a in answers]}, indent=2) + "\n")
    else:
        out.write(render_text(stack.name, stack.config, answers) + "\n")
    return doctor.EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
