"""The offline plan (`python -m infra.plan`): run the real Pulumi program under mocks, with no credentials, CLI,
plugins or network, and show what it would build; docs/offline-plan.md is the user's page, the `--json` document's
contract is in docs/architecture.md ("The plan JSON contract"). Secrets show as "[secret]"; `secure:` values of the
stack file are never decrypted. Every bad flag or config is one line on stderr and exit code 2, before anything
is written.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import json
import os
import runpy
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

import yaml

from infra.naming import PROJECT
from infra.stack_file import (
    DEFAULT_STACK,
    ROOT,
    StackFileError,
    read_stack_file,
    stack_path,
    validate_flat,
    with_required_secrets,
)
from tools.plan_compare import compare_lines, read_compare
from tools.plan_output import GRAPH_FILE, check_output_dirs, output_dir, plan_files, write_failed, write_files
from workloads import cli_args

_RESOURCE_KEYS = ("urn", "type", "name", "parent", "custom", "provider", "inputs", "dependencies", "options")
"""The keys of a resource in the `--json` document, in their order."""


@dataclass
class Plan:
    """Everything one program run registered."""

    project: str
    stack: str
    resources: list[Any]  # list[tools.mocks.Registration]
    outputs: dict[str, Any]
    component_outputs: dict[str, dict[str, Any]] = field(default_factory=dict)
    config: dict[str, str] = field(default_factory=dict)
    """The flat config map the program ran with (`namespace:key` -> string/JSON), secrets as placeholders."""

    def to_json(self) -> dict[str, Any]:
        return {
            "project": self.project,
            "stack": self.stack,
            "resources": [
                {key: _shown_inputs(r) if key == "inputs" else getattr(r, key) for key in _RESOURCE_KEYS}
                for r in self.resources
            ],
            "outputs": self.outputs,
        }

    def by_type(self, typ: str) -> list[Any]:
        return [r for r in self.resources if r.type == typ]

    def one(self, typ: str, name_suffix: str = "") -> Any:
        found = [r for r in self.by_type(typ) if r.name.endswith(name_suffix)]
        if len(found) != 1:
            raise AssertionError(f"expected one {typ} named *{name_suffix}, found {[r.name for r in found]}")
        return found[0]

    def by_urn(self) -> dict[str, Any]:
        return {r.urn: r for r in self.resources}


def _shown_inputs(resource: Any) -> dict[str, Any]:
    """A resource's inputs as the plan document shows them: the watcher's code ConfigMap with its modules by
    name and content hash (`infra.watcher_deployment.shipped_digests`), every other resource as it is."""
    from infra.watcher_deployment import CODE_CONFIG_MAP, shipped_digests

    if resource.type != "kubernetes:core/v1:ConfigMap" or resource.name != CODE_CONFIG_MAP:
        return resource.inputs
    return {**resource.inputs, "binaryData": shipped_digests(resource.inputs.get("binaryData") or {})}


def project_name() -> str:
    return yaml.safe_load((ROOT / "Pulumi.yaml").read_text())["name"]


def run_program(
    stack: str = DEFAULT_STACK,
    config: Optional[dict[str, str]] = None,
    secret_keys: Optional[list[str]] = None,
    *,
    preview: bool = False,
    program: Optional[Path] = None,
) -> Plan:
    """Run `__main__.py` under mocks; `config` defaults to the stack file's. In a fresh thread, so Pulumi's
    context-local runtime state starts empty every time; the program's own exception (`ConfigError`) is raised."""
    if config is None:
        config, secret_keys = read_stack_file(stack_path(stack, ROOT))
    with ThreadPoolExecutor(1, thread_name_prefix=f"plan-{stack}") as pool:
        run = pool.submit(_run_in_thread, stack, config, secret_keys or [], preview, program or ROOT / "__main__.py")
        return run.result()


def committed_plan(stack: str) -> Plan:
    """The plan of a committed stack file as after the README's setup, the secrets its job needs set
    (placeholders): what the golden plans and the generated docs show."""
    return run_program(stack, *with_required_secrets(stack, *read_stack_file(stack_path(stack, ROOT))))


def _run_in_thread(stack: str, config: dict[str, str], secret_keys: list[str], preview: bool, program: Path) -> Plan:
    import pulumi
    from pulumi.runtime import config as runtime_config
    from pulumi.runtime import mocks, settings
    from pulumi.runtime.stack import wait_for_rpcs

    from tools.mocks import PlanMocks, RecordingMonitor, canonical_order

    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    project = project_name()
    runtime_config.set_all_config(dict(config), list(secret_keys))
    gcp_project = config.get(f"{project}:project", "offline-project")
    plan_mocks = PlanMocks(project_id=gcp_project, preview=preview)
    monitor = RecordingMonitor(plan_mocks)
    # MockSettings leaves `outputs` and `lock` unset, and Pulumi's context properties fall back to
    # the values first set in any thread: give this run its own, or it waits on another loop's tasks.
    settings.SETTINGS.outputs = set()
    settings.SETTINGS.lock = threading.Lock()
    mocks.set_mocks(plan_mocks, project=project, stack=stack, preview=preview, monitor=monitor)
    settings.SETTINGS.root_directory = str(program.parent)

    error: Optional[BaseException] = None
    cwd = os.getcwd()
    try:
        os.chdir(program.parent)
        runpy.run_path(str(program), run_name="__main__")
    except BaseException as exc:  # noqa: BLE001 reported after outstanding RPCs settle
        error = exc
    finally:
        os.chdir(cwd)
    loop.run_until_complete(wait_for_rpcs())
    if error is not None:
        loop.close()
        raise error

    root = settings.get_root_resource()
    outputs: dict[str, Any] = {}

    async def resolve() -> None:
        from tools.mocks import SECRET_PLACEHOLDER, plain

        for key, value in root.outputs.items():
            out = pulumi.Output.from_input(value)
            resolved = await out.future(with_unknowns=True)
            outputs[key] = SECRET_PLACEHOLDER if await out.is_secret() else plain(_jsonable(resolved))

    loop.run_until_complete(resolve())
    loop.run_until_complete(wait_for_rpcs())
    loop.close()
    return Plan(
        project=project,
        stack=stack,
        resources=canonical_order(monitor.registrations),
        outputs=outputs,
        component_outputs=dict(monitor.component_outputs),
        config=dict(config),
    )


def _jsonable(value: Any) -> Any:
    """`value` as JSON has it: a preview's unknown output as "[unknown]", what JSON lacks as its text."""
    from pulumi.output import Unknown

    return json.loads(json.dumps(value, default=lambda v: "[unknown]" if isinstance(v, Unknown) else str(v)))


# ---------------------------------------------------------------- rendering


def summary(plan: Plan) -> dict[str, Any]:
    """Resource counts by type and the GPU capacity: the GPU pools' gang, or an Autopilot plan's GPU pods."""
    from tools.autopilot_plan import summary_counts
    from tools.cost import gang_nodes
    from tools.gpu_arrival import gpu_pools

    pools = gpu_pools(plan)
    per_node = max(
        (sum(int(a.get("count", 0)) for a in p.inputs["nodeConfig"]["guestAccelerators"]) for p in pools), default=0
    )
    nodes = gang_nodes(pools)  # the ladder's pools share one gang
    gpu_nodes, gpus = summary_counts(plan) or (nodes, nodes * per_node)  # Autopilot: each GPU pod takes a node
    counts = collections.Counter(r.type for r in plan.resources)
    return {
        "resources": len(plan.resources),
        "byType": dict(sorted(counts.items())),
        "gpuNodes": gpu_nodes,
        "gpus": gpus,
    }


def render_tree(plan: Plan) -> str:
    children: dict[str, list[Any]] = collections.defaultdict(list)
    urns = plan.by_urn()
    for r in plan.resources:
        children[r.parent if r.parent in urns else ""].append(r)
    lines = [f"{plan.project} / {plan.stack}"]

    def walk(parent: str, indent: str) -> None:
        items = children.get(parent, [])
        for i, r in enumerate(items):
            last = i == len(items) - 1
            lines.append(f"{indent}{'└─ ' if last else '├─ '}{r.name}  [{r.type}]")
            walk(r.urn, indent + ("   " if last else "│  "))

    walk("", "")
    s = summary(plan)
    lines += ["", f"Resources: {s['resources']}"]
    lines += [f"  {n:4d}  {t}" for t, n in s["byType"].items()]
    lines += [f"GPU nodes: {s['gpuNodes']}   GPUs: {s['gpus']}"]
    from infra.version_matrix import report_line
    from tools.estimates import render_for_plan
    from tools.pool_replacement import summary_lines

    replacing = summary_lines(plan.resources)
    lines += ["", *replacing] if replacing else []
    lines += ["", *render_for_plan(plan), "", *size_ladder_lines(size_ladder_report(plan))]
    lines += ["", f"Version matrix: {report_line(version_matrix_report(plan))}"]
    if plan.outputs:
        lines += ["", "Outputs:"]
        lines += [f"  {k}: {json.dumps(v) if not isinstance(v, str) else v}" for k, v in plan.outputs.items()]
    return "\n".join(lines)


def plan_document(plan: Plan) -> dict[str, Any]:
    """The `--json` document (docs/offline-plan.md): the plan with its estimates."""
    from tools import estimates
    from tools.goodput_estimate import goodput_json

    doc = plan.to_json()
    est = estimates.compute(plan)
    doc["estimates"] = estimates.to_json(est, plan)
    doc["goodput"] = goodput_json(est, estimates.stack_config(plan))
    doc["versionMatrix"] = version_matrix_report(plan)
    doc["sizeLadder"] = size_ladder_report(plan)
    return doc


def size_ladder_report(plan: Plan) -> dict[str, Any]:
    """The node counts the run can train on (`infra.run_plan.size_ladder`, the one computation the run plan ships),
    each refused one with why, and whether `recovery.shrink` is on (docs/preemption-recovery.md)."""
    from infra.placement import gpu_pool_facts
    from infra.run_plan import cannot_shrink, size_ladder
    from infra.stack_context import StackContext
    from tools.estimates import stack_config

    cfg = stack_config(plan)
    rungs = size_ladder(cfg, gpu_pool_facts(StackContext.from_config(plan.stack, cfg), cfg))
    shrink = cfg.recovery.shrink
    return {
        "nodes": [r.nodes for r in rungs if r.valid],
        "refused": [{"nodes": r.nodes, "why": r.refused} for r in rungs if not r.valid],
        "cannotShrink": cannot_shrink(cfg, rungs),
        "shrink": {
            "enabled": shrink.enabled,
            "minNodes": shrink.min_nodes,
            "waitMinutes": shrink.wait_minutes,
            "leaseMinutes": shrink.lease_minutes,
        },
    }


def size_ladder_lines(report: dict[str, Any]) -> list[str]:
    """The text plan's "Size ladder" block."""
    shrink, sizes = report["shrink"], ", ".join(map(str, report["nodes"]))
    if report["cannotShrink"] is not None:
        why = report["cannotShrink"]
        head = f"Size ladder: {sizes} node(s); cannot shrink ({why}): a preempted run waits for its gang"
    elif shrink["enabled"]:
        head = (
            f"Size ladder: {sizes} nodes; recovery.shrink on: {shrink['waitMinutes']} min after a preemption without "
            f"the whole gang, the run trains on the largest of these the alive nodes hold (at least "
            f"{shrink['minNodes']}), on {shrink['leaseMinutes']}-min leases, and grows back when the nodes return"
        )
    else:
        head = f"Size ladder: {sizes} nodes; recovery.shrink off: a preempted run waits for its gang"
    return [head, *(f"  {r['nodes']} refused: {r['why']}" for r in report["refused"])]


def version_matrix_report(plan: Plan) -> dict[str, Any]:
    """The row of data/version_matrix.yaml the stack's pins matched (infra/version_matrix.py report)."""
    from infra.version_matrix import report
    from tools.estimates import stack_config

    return report(stack_config(plan).version_pins)


def _write_out(write: Any) -> int:
    """Run `write` (what goes to stdout): a reader that went away (`| head -1`) ends the command quietly, as
    for `cat`; a stdout that cannot take it (`> /dev/full`) is one line and exit 3 (the environment)."""
    try:
        write()
        sys.stdout.flush()
        return 0
    except OSError as err:
        # Python would fail again flushing stdout at exit: point it at nothing first.
        with contextlib.suppress(OSError, ValueError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        if isinstance(err, BrokenPipeError):
            return 0
        print(f"error: cannot write to standard output ({err.strerror or err})", file=sys.stderr)
        return 3


def _parser() -> argparse.ArgumentParser:
    parser = cli_args.OneLineParser(prog="python -m infra.plan", description="Show what a stack would build, offline.")
    parser.add_argument(
        "--stack",
        type=cli_args.stack_name,
        default=DEFAULT_STACK,
        help=f"stack name (Pulumi.<stack>.yaml); default {DEFAULT_STACK}",
    )
    parser.add_argument(
        "--config-file",
        type=Path,
        metavar="PATH",
        help="read the stack config from PATH (as `pulumi up --config-file`)",
    )
    parser.add_argument(
        "--assume-secrets",
        action="store_true",
        help="plan as if the secrets the stack's job needs were set (placeholders)",
    )
    parser.add_argument("--json", action="store_true", help="print the plan as one JSON document")
    parser.add_argument("--out", type=output_dir, help="write Kubernetes manifests and Helm values to this directory")
    parser.add_argument(
        "--compare",
        type=Path,
        metavar="BEFORE.json",
        help="say which node pools this plan replaces against a previous --json plan (or tests/golden/<stack>.json)",
    )
    parser.add_argument(
        "--graph",
        type=output_dir,
        nargs="?",
        const=Path("plan-out"),
        metavar="DIR",
        help="write the resource graph, graph.mmd (Mermaid), to DIR (default plan-out/, git-ignored)",
    )
    return parser


def _checked_flags(args: argparse.Namespace) -> Optional[dict[str, Any]]:
    """`--out` and `--graph` checked, before anything runs, and the `--compare` document read; `ValueError`
    is the one line that refuses them."""
    check_output_dirs({"--out": args.out, "--graph": args.graph}, ROOT)
    if args.compare is None:
        return None
    try:
        return read_compare(args.compare, args.stack, project_name())
    except ValueError as detail:
        allowed = "allowed: a plan document of `python -m infra.plan --json`"
        raise ValueError(f"--compare {args.compare}: {detail}; {allowed}") from None


def main(argv: Optional[list[str]] = None) -> int:
    try:
        args = _parser().parse_args(argv)
        previous = _checked_flags(args)
    except (cli_args.UsageError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2

    from infra.config import ConfigError, MissingSecretError
    from tools import estimates

    try:
        stack_file = args.config_file or stack_path(args.stack, ROOT)
        config, secret_keys = read_stack_file(stack_file)
        for key in sorted(k for k, v in config.items() if v == "" and k.startswith(f"{PROJECT}:")):
            # The Pulumi CLI warns of an empty value and passes ""; the program reads it as unset.
            print(f"note: {key}: empty in the stack file; its defaults apply, as under `pulumi up`", file=sys.stderr)
        if args.assume_secrets:
            before = set(secret_keys)
            config, secret_keys = with_required_secrets(args.stack, config, secret_keys)
            for key in sorted(set(secret_keys) - before):
                # Said on stderr, so a --json document stays clean: this plan shows more than `pulumi up` would run.
                print(
                    f"note: {key}: not set; planned as if it were (--assume-secrets), `pulumi up` refuses until "
                    f"`pulumi config set --secret {key.split(':', 1)[1]} ...`",
                    file=sys.stderr,
                )
        # Everything the program checks first, checked here before it runs: a refusal costs no mock run.
        shown = f"--config-file {args.config_file}" if args.config_file else None
        validate_flat(args.stack, config, secret_keys, stack_file, shown)
        plan = run_program(args.stack, config, secret_keys)
        # The estimates' own inputs (cost.priceOverrides) are checked before anything is printed.
        estimates.price_table(estimates.stack_config(plan))
    except (ConfigError, StackFileError) as err:
        # Offline there is nothing to decrypt: say how to see the plan anyway.
        hint = "; or plan offline as if it were set: --assume-secrets" if isinstance(err, MissingSecretError) else ""
        for line in str(err).splitlines():
            print(f"error: {line}{hint}", file=sys.stderr)
        return 2
    # Every file of --out and --graph checked before the first is written: a refusal writes none of them.
    files = plan_files(plan, args.out, args.graph)
    try:
        write_files(files)
    except OSError as err:
        # The flag of the file it failed on (its temporary file is named after it): the graph's, or a manifest's.
        failed = Path(err.filename) if err.filename else None
        graph = args.graph is not None and failed is not None and GRAPH_FILE in failed.name
        if graph or args.out is None:
            return write_failed("--graph", args.graph, err)
        return write_failed("--out", args.out, err)
    if args.out:
        print(f"wrote {sum(p.parent == args.out for p in files)} files to {args.out}", file=sys.stderr)
    if args.graph:
        print(f"wrote {args.graph / GRAPH_FILE}", file=sys.stderr)
    # allow_nan=False: the document is JSON or nothing (the config refuses inf and nan up front); rendered
    # whole before the first byte is written, so a failure never leaves half a document.
    text = (json.dumps(plan_document(plan), indent=2, allow_nan=False) if args.json else render_tree(plan)) + "\n"
    if previous is not None:
        lines = compare_lines(previous, plan.to_json())
        if args.json:  # on stderr, so the document stays one JSON value
            print(lines, file=sys.stderr)
        else:  # last, where it is read
            text += f"\nNode pools against {args.compare}:\n{lines}\n"
    return _write_out(lambda: sys.stdout.write(text))


if __name__ == "__main__":
    sys.exit(main())
