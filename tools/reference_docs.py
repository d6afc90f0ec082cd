"""Generated sections of the docs/ pages and the README: the config reference (from the pydantic
models), the resources each stack builds and the dev stack's resource graph, and the README's cost,
time and destroy table of every committed stack (from the offline plans).
`tests/test_reference_docs.py` fails when a page is stale.

    python -m tools.reference_docs --write     # regenerate the sections (`make docs`)
    python -m tools.reference_docs             # list stale pages; exit 1 if any

Only the text between `<!-- NAME:start -->` and `<!-- NAME:end -->` is generated; the prose around
it is written by hand.
"""

from __future__ import annotations

import argparse
import collections
import enum
import json
import re
import sys
import types
import typing
from typing import Any

from pydantic import BaseModel
from pydantic_core import PydanticUndefined

from infra.config import PROJECT, SECRET_KEYS, StackConfig
from infra.project_apis import REQUIRED_APIS
from infra.stack_file import ROOT
from tools.deployer_permissions import roles_table

STACKS = tuple(sorted(p.name[len("Pulumi.") : -len(".yaml")] for p in ROOT.glob("Pulumi.*.yaml")))
"""Every committed stack file: a new one shows up in the generated tables (and makes them stale)."""


def _type_name(ann: Any) -> str:
    origin = typing.get_origin(ann)
    args = [a for a in typing.get_args(ann) if a is not type(None)]
    if origin is typing.Union:
        return " or ".join(_type_name(a) for a in args) if len(args) > 1 else _type_name(args[0])
    if origin is typing.Literal:
        return " \\| ".join(f"`{a}`" for a in typing.get_args(ann))
    if origin in (tuple, list):
        return f"list of {_type_name(args[0])}"
    if origin is typing.Annotated:
        return _type_name(args[0])
    if origin is dict or (isinstance(ann, type) and issubclass(ann, BaseModel)):
        return "map"
    if isinstance(ann, type) and issubclass(ann, enum.Enum):
        return " \\| ".join(f"`{m.value}`" for m in ann)
    return {"str": "string", "int": "integer", "bool": "boolean", "float": "number"}.get(
        getattr(ann, "__name__", ""), getattr(ann, "__name__", str(ann))
    )


def _default(field) -> str:
    if field.default is PydanticUndefined and field.default_factory is None:
        return "**required**"
    value = field.default_factory() if field.default_factory is not None else field.default
    if isinstance(value, BaseModel):
        return "see below"
    if isinstance(value, enum.Enum):
        value = value.value
    if value is None or value == "" or value == () or value == {}:
        return "—"
    if isinstance(value, tuple):
        value = list(value)
    return f"`{json.dumps(value) if not isinstance(value, str) else value}`"


def _rows(model: type[BaseModel], prefix: str) -> list[str]:
    rows, nested = [], []
    for name, field in model.model_fields.items():
        key = f"{prefix}{field.alias or name}"
        ann = field.annotation
        inner = typing.get_args(ann)[0] if typing.get_origin(ann) is tuple else ann
        optional = [a for a in typing.get_args(ann) if a is not type(None)]
        if typing.get_origin(ann) in (typing.Union, types.UnionType) and len(optional) == 1:
            inner = ann = optional[0]  # Optional[Section]: its keys, as for a section that is always there
        desc = (field.description or "").replace("|", "\\|").replace("\n", " ")
        rows.append(f"| `{key}` | {_type_name(ann)} | {_default(field)} | {desc} |")
        if isinstance(inner, type) and issubclass(inner, BaseModel):
            nested.append((inner, f"{key}[]." if inner is not ann else f"{key}."))
    for sub, sub_prefix in nested:
        rows += _rows(sub, sub_prefix)
    return rows


def config_reference() -> str:
    lines = [
        f"Keys live under the `{PROJECT}:` namespace in `Pulumi.<stack>.yaml`; maps are YAML maps.",
        "",
        "| key | type | default | description |",
        "|---|---|---|---|",
        *_rows(StackConfig, ""),
    ]
    lines += [
        f"| `{k}` | secret string | — | Set with `pulumi config set --secret {k}`; refused in plaintext. |"
        for k in SECRET_KEYS
    ]
    return "\n".join(lines)


def stack_resources(plan_of: typing.Callable[[str], Any] | None = None) -> str:
    """Resource counts by type for each committed stack, from the offline plan."""
    from tools.offline_plan import committed_plan, summary

    plan_of = plan_of or committed_plan
    counts: dict[str, dict[str, int]] = collections.defaultdict(dict)
    totals, gpus = {}, {}
    for stack in STACKS:
        s = summary(plan_of(stack))
        totals[stack], gpus[stack] = s["resources"], f"{s['gpuNodes']} nodes / {s['gpus']} GPUs"
        for typ, n in s["byType"].items():
            counts[typ][stack] = n
    lines = ["| resource type | " + " | ".join(STACKS) + " |", "|---|" + "---:|" * len(STACKS)]
    for typ in sorted(counts):
        lines.append(f"| `{typ}` | " + " | ".join(str(counts[typ].get(s, 0)) for s in STACKS) + " |")
    lines.append("| **total** | " + " | ".join(f"**{totals[s]}**" for s in STACKS) + " |")
    lines.append("| GPU capacity | " + " | ".join(gpus[s] for s in STACKS) + " |")
    return "\n".join(lines)


def resource_graph(plan_of: typing.Callable[[str], Any] | None = None, stack: str = "dev") -> str:
    """The Mermaid resource graph of one stack (tools/graph.py), as a fenced code block."""
    from tools.graph import build, mermaid
    from tools.offline_plan import committed_plan

    plan_of = plan_of or committed_plan
    return "```mermaid\n" + mermaid(build(plan_of(stack))) + "```"


def required_apis() -> str:
    """The APIs the stack enables (infra/project_apis.py), as the command for `manageApis: false`."""
    return "```sh\ngcloud services enable --project MY-PROJECT \\\n    " + " \\\n    ".join(REQUIRED_APIS) + "\n```"


def _money(value: float) -> str:
    return f"${value:,.0f}" if value >= 100 else f"${value:,.2f}"


def _minutes(value: str) -> int:
    return int(value.rstrip("m"))


_TIMEOUT_NAMES = {
    "Instance": "Lustre",
    "NodePool": "a node pool",
    "Release": "the Ray release",
    "Cluster": "the cluster",
    "DaemonSet": "the image pre-pull",
}


def stack_costs(plan_of: typing.Callable[[str], Any] | None = None) -> str:
    """The README's table: per committed stack, what it costs per hour and per typical first run, how
    long the first `pulumi up` typically takes, and what `pulumi destroy` deletes and keeps; then the
    timeouts, from the same plans, so that typical time and limit are said once, side by side."""
    from tools import estimates
    from tools.goodput_estimate import goodput_json
    from tools.offline_plan import committed_plan, summary
    from workloads.hook import RAY_CLUSTER_TIMEOUT

    plan_of = plan_of or committed_plan
    lines = [
        "| stack | GPUs | per hour: spot GPUs (on-demand) | first `pulumi up`, typical | first run: `up` + job, spot "
        "(on-demand) | goodput; first step at, spot spend before it | `pulumi destroy` deletes | and keeps |",
        "|---|---|---|---|---|---|---|---|",
    ]
    limits: dict[str, int] = {}
    estimated: list[str] = []
    for stack in STACKS:
        plan = plan_of(stack)
        est = estimates.compute(plan)
        cfg = estimates.stack_config(plan)
        run = estimates.first_run(est, plan)
        s = summary(plan)
        good = goodput_json(est, cfg)
        first = (
            f"{'not modelled' if good is None else format(good['fraction'], '.1%')}; ~{run.first_step_minutes:.0f} "
            f"min, {_money(run.before_first_step('spot', est.cost.spot_per_hour))}"
        )
        spot, on_demand = run.total("spot", est.cost.spot_per_hour), run.total("onDemand", est.cost.on_demand_per_hour)
        job = "no job estimate" if spot is None else f"{_money(spot)} ({_money(on_demand)}) for {run.hours:.1f} h"
        lustre = "Lustre **without export**"
        if cfg.lustre.export_on_destroy:
            lustre = "Lustre, after exporting `checkpoints/` and `logs/` to the bucket"
        bucket_deleted = cfg.storage.delete_bucket_on_destroy
        deletes = f"everything{'' if not bucket_deleted else ', **the bucket too**'}: cluster, networks, {lustre}"
        keeps = "nothing" if bucket_deleted else "the bucket (exports, job output): Pulumi forgets it"
        if cfg.cluster.deletion_protection:
            deletes += "; refused until `cluster.deletionProtection: false` is applied"
        mark = " *" if est.cost.estimated_items else ""
        if mark:
            estimated.append(f"`{stack}` {', '.join(est.cost.estimated_items)}")
        lines.append(
            f"| `{stack}` | {s['gpuNodes']} x {cfg.flavour_spec.machine_type} ({s['gpus']}) | "
            f"{_money(est.cost.spot_per_hour)} ({_money(est.cost.on_demand_per_hour)}){mark} | "
            f"~{run.deploy_minutes:.0f} min | {job} | {first} | {deletes} | {keeps} |"
        )
        for r in plan.resources:
            create = ((r.options or {}).get("customTimeouts") or {}).get("create")
            if create and _minutes(create) >= 60:
                kind = _TIMEOUT_NAMES.get(r.type.rsplit(":", 1)[-1], r.type.rsplit(":", 1)[-1])
                limits[kind] = max(limits.get(kind, 0), _minutes(create))
    limits["the job's wait for its GPU workers"] = int(RAY_CLUSTER_TIMEOUT // 60)
    named = ", ".join(
        f"{kind} {minutes} min" for kind, minutes in sorted(limits.items(), key=lambda kv: (-kv[1], kv[0]))
    )
    lines += [
        "",
        "The times are typical, not limits: most of the first `up` is Managed Lustre's creation (about an hour). "
        f"Pulumi gives up on a step only after its own timeout ({named}), so an `up` that waits for spot GPU capacity "
        "can run for hours before it fails. Prices are list prices of `data/prices.yaml`; the first "
        "run adds the hours the stack is billed while it is built (GPU nodes from when the pending Ray workers "
        "bring them: every GPU pool scales from 0) to the job's own hours, and leaves out later runs, preemptions "
        "and the time until you destroy. Goodput is the modelled share of the first run's paid GPU time in kept "
        "training steps (`goodput` of `python -m infra.plan --json`, with an assumed spot preemption rate; "
        "Autopilot: not modelled); the first step comes NeMo-RL's start-up after the submission.",
    ]
    if estimated:
        lines[-1] += (
            f" \\* rests on estimated prices (`data/prices.yaml` says how each was derived): {'; '.join(estimated)}."
        )
    return "\n".join(lines)


SECTIONS = {
    "config-reference": config_reference,
    "stack-resources": stack_resources,
    "resource-graph": resource_graph,
    "required-apis": required_apis,
    "deployer-roles": roles_table,  # the deploying identity's roles per resource type
    "stack-costs": stack_costs,
}

PAGES: dict[str, tuple[str, ...]] = {
    "docs/configuration.md": ("config-reference",),
    "docs/resources.md": ("stack-resources", "resource-graph"),
    "docs/deploy.md": ("required-apis", "deployer-roles"),
    "README.md": ("stack-costs",),
}
"""Each page with generated sections (its path under the checkout) and the sections it holds."""


def render(text: str, sections: dict[str, typing.Callable[[], str]], page: str = "the page") -> str:
    """`text` with each named generated section replaced by its current content."""
    for name, make in sections.items():
        pattern = re.compile(rf"(<!-- {name}:start -->\n).*?(<!-- {name}:end -->)", re.S)
        if not pattern.search(text):
            raise SystemExit(f"{page} has no <!-- {name}:start --> ... <!-- {name}:end --> section")
        body = make()
        text = pattern.sub(lambda m, body=body: m.group(1) + body + "\n" + m.group(2), text)
    return text


def render_page(page: str, sections: dict[str, typing.Callable[[], str]] | None = None) -> tuple[str, str]:
    """(current text, regenerated text) of one page of PAGES."""
    sections = sections or SECTIONS
    text = (ROOT / page).read_text()
    return text, render(text, {name: sections[name] for name in PAGES[page]}, page)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.reference_docs", description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="rewrite the stale pages in docs/")
    args = parser.parse_args(argv)
    stale = []
    for page in PAGES:
        text, new = render_page(page)
        if new != text:
            stale.append(page)
            if args.write:
                (ROOT / page).write_text(new)
    if args.write:
        print(f"updated: {', '.join(stale)}" if stale else "generated sections already current")
        return 0
    for page in stale:
        print(f"{page} is stale: run `make docs`")
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
