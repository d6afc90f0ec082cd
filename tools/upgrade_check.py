"""Would upgrading a live stack from an earlier release to this tree lose data or training? (docs/day-2.md)

    python -m tools.upgrade_check --from REF [--stack-file Pulumi.NAME.yaml ...] [--json]

Each stack file is planned offline with REF's code (a detached temporary worktree) and with this tree's, from
the same file; the rules (fail: data lost, run restarted; warn: nodes, Ray or a job restarted, with the cost)
are docs/day-2.md's. Exit codes (workloads/exit_codes.py): 0 nothing lost, 1 a failure, 2 usage, 3 environment.
"""

from __future__ import annotations

import argparse
import base64
import functools
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, Callable, Iterator, Optional

from infra.stack_file import ROOT
from tools.pool_replacement import FORCE_NEW, NODE_POOL_TYPE, SUBTREE, replacing_changes
from workloads import cli_args

OK, BROKEN, USAGE, ENVIRONMENT = 0, 1, 2, 3
FAIL, WARN = "fail", "warn"

# ForceNew inputs of the data-bearing resources, as the program spells them, read from
# hashicorp/terraform-provider-google-beta at 93c65b2d (main, 2026): google-beta/services/lustre/
# resource_lustre_instance.go, storage/resource_storage_bucket.go, container/resource_container_cluster.go.
# The cluster's `nodeConfig` is left out: the program sets `ignoreChanges: [nodeConfig]` on it.
DATA_FORCE_NEW: dict[str, dict[str, str]] = {
    "gcp:lustre/instance:Instance": dict.fromkeys(
        "filesystem instanceId location network dynamicTierOptions kmsKey perUnitStorageThroughput project".split(),
        SUBTREE,
    ),
    "gcp:storage/bucket:Bucket": dict.fromkeys(
        "name location project enableObjectRetention customPlacementConfig.dataLocations hierarchicalNamespace".split(),
        SUBTREE,
    ),
    "gcp:container/cluster:Cluster": dict.fromkeys(
        """name location project network subnetwork description clusterIpv4Cidr enableKubernetesAlpha enableTpu
        enableAutopilot initialNodeCount confidentialNodes masterAuth.clientCertificateConfig nodePools
        ipAllocationPolicy networkingMode privateClusterConfig.masterIpv4CidrBlock
        privateClusterConfig.privateEndpointSubnetwork defaultMaxPodsPerNode datapathProvider dataplaneOptimizationMode
        userManagedKeysConfig clusterAutoscaling.autoProvisioningDefaults.bootDiskKmsKey""".split(),
        SUBTREE,
    ),
}
HELM_RELEASE_TYPE = "kubernetes:helm.sh/v3:Release"
DYNAMIC_PREFIX = "pulumi-python:dynamic/"
STACK_TYPE = "pulumi:pulumi:Stack"
PLAN_TIMEOUT_S = 600

# What Pulumi's dynamic provider host does with `__provider` (pulumi/pulumi sdk/python/lib/pulumi/dynamic/
# __main__.py): base64, then dill.loads, in the project's directory.
LOAD_PROVIDER = "import base64, sys, dill; dill.loads(base64.b64decode(sys.stdin.read()))"


@dataclass(frozen=True)
class Finding:
    level: str  # `fail` (work or data lost: exit 1) or `warn` (a cost, said with its price)
    rule: str
    resource: str
    message: str
    minutes: Optional[float] = None  # training lost at most (warnings); filled in by `compare_plans`
    usd: Optional[float] = None
    stack: str = ""

    def line(self) -> str:
        cost = ""
        if self.minutes is not None:
            usd = "" if self.usd is None else f", ${self.usd:,.2f}"
            cost = f" [cost: at most {self.minutes:g} min of training{usd}]"
        return f"{self.level.upper()} {self.stack}: {self.resource}: {self.message}{cost}"


# ---- the comparison: pure functions over two plan documents (docs/architecture.md "The plan JSON contract")


def compare_plans(
    before: dict[str, Any],
    after: dict[str, Any],
    stack: str,
    provider_problem: Callable[[str], Optional[str]] = lambda _pickled: None,
) -> list[Finding]:
    """Every failure and warning of upgrading `stack` from the plan `before` (REF) to `after` (this tree), each
    warning with the training it may lose; `provider_problem(pickled)`: why a pickled provider does not load."""
    minutes, usd = _loss(before, after)
    found = [
        *resource_findings(before, after),
        *provider_findings(before, provider_problem),
        *run_findings(before, after),
    ]
    return [replace(f, stack=stack, **({"minutes": minutes, "usd": usd} if f.level == WARN else {})) for f in found]


def _resources(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {r["urn"]: r for r in doc.get("resources") or []}


def resource_findings(before: dict[str, Any], after: dict[str, Any]) -> Iterator[Finding]:
    old, new = _resources(before), _resources(after)
    aliased = {urn for r in new.values() for urn in alias_urns(r, new)}
    new_only_by_name: dict[str, list[dict[str, Any]]] = {}
    for urn in set(new) - set(old):
        new_only_by_name.setdefault(new[urn]["name"], []).append(new[urn])
    for urn in sorted(old):
        r = old[urn]
        if urn in new:
            yield from _replacement(r, new[urn])
        elif urn not in aliased:
            yield from _gone(r, new_only_by_name.get(r["name"], []))


# (kind, replaced rather than deleted) -> (level, rule, message)
OUTCOMES = {
    ("data", False): (FAIL, "data-deleted", "deleted: its data goes with it"),
    ("data", True): (FAIL, "data-replaced", "REPLACED, its data lost ({why})"),
    ("pool", False): (WARN, "pool-replaced", "deleted: its nodes go"),
    ("pool", True): (WARN, "pool-replaced", "replaced, deleted first: its nodes go ({why})"),
    ("ray", False): (WARN, "ray-restart", "uninstalled: the running attempt stops"),
    ("ray", True): (WARN, "ray-restart", "Ray cluster reinstalled, the running attempt stops ({why})"),
}


def _outcome(r: dict[str, Any], why: Optional[str] = None) -> Iterator[Finding]:
    """What deleting `r` (`why` None) or replacing it for `why` costs, for the kinds of resource that lose something."""
    kind = "data" if r["type"] in DATA_FORCE_NEW else {NODE_POOL_TYPE: "pool", HELM_RELEASE_TYPE: "ray"}.get(r["type"])
    if kind is not None:
        level, rule, message = OUTCOMES[kind, why is not None]
        yield Finding(level, rule, f"{r['type']} {r['name']}", message.format(why=why))


def _gone(r: dict[str, Any], namesakes: list[dict[str, Any]]) -> Iterator[Finding]:
    if not namesakes:
        yield from _outcome(r)
        return
    urns = ", ".join(sorted(n["urn"] for n in namesakes))
    yield Finding(
        FAIL,
        "urn-changed",
        f"{r['type']} {r['name']}",
        f"URN {r['urn']} became {urns} without an alias: "
        "Pulumi deletes it and creates a new one; add `aliases=[...]` naming the old URN",
    )


def _replacement(old: dict[str, Any], new: dict[str, Any]) -> Iterator[Finding]:
    """A resource at the same URN: replaced by a ForceNew input (types with a table) or a `replaceOnChanges` one."""
    o, n = old.get("inputs") or {}, new.get("inputs") or {}
    table = DATA_FORCE_NEW.get(new["type"], FORCE_NEW if new["type"] == NODE_POOL_TYPE else {})
    listed = (new.get("options") or {}).get("replaceOnChanges") or []
    changes = replacing_changes(o, n, table) + [f"{k} (replaceOnChanges)" for k in listed if o.get(k) != n.get(k)]
    if changes:
        yield from _outcome(new, "; ".join(changes))


def alias_urns(r: dict[str, Any], by_urn: dict[str, dict[str, Any]]) -> list[str]:
    """The URNs a resource's aliases name: an alias is a URN, or a spec whose missing parts are the resource's
    own (pulumi/pulumi proto/pulumi/alias.proto; URN format sdk/go/common/resource/urn.go)."""
    found = []
    for alias in (r.get("options") or {}).get("aliases") or []:
        if isinstance(alias, str) or alias.get("urn"):
            found.append(alias if isinstance(alias, str) else alias["urn"])
            continue
        spec = alias.get("spec") or {}
        stack_part, project, _qualified, _name = _urn_parts(r["urn"])
        parent = "" if spec.get("noParent") else spec.get("parentUrn") or r.get("parent") or ""
        # The parent's type prefixes the child's, except the root stack's.
        parent_type = _urn_parts(parent)[2] if parent else STACK_TYPE
        kind = spec.get("type") or r["type"]
        qualified = kind if parent_type == STACK_TYPE else f"{parent_type}${kind}"
        found.append(
            f"urn:pulumi:{spec.get('stack') or stack_part}::{spec.get('project') or project}::{qualified}::"
            f"{spec.get('name') or r['name']}"
        )
    return found


def _urn_parts(urn: str) -> tuple[str, str, str, str]:
    """`urn:pulumi:<stack>::<project>::<qualified type>::<name>`."""
    head, project, qualified, name = (urn.split("::", 3) + ["", "", ""])[:4]
    return head.removeprefix("urn:pulumi:"), project, qualified, name


def provider_findings(before: dict[str, Any], provider_problem: Callable[[str], Optional[str]]) -> Iterator[Finding]:
    for r in before.get("resources") or []:
        pickled = (r.get("inputs") or {}).get("__provider")
        if r["type"].startswith(DYNAMIC_PREFIX) and isinstance(pickled, str):
            problem = provider_problem(pickled)
            if problem:
                why = f"its provider, pickled in the stack's state, no longer loads: {problem}"
                yield Finding(FAIL, "provider-import", f"{r['type']} {r['name']}", why)


# ---- runs


def _job(doc: dict[str, Any]) -> Optional[dict[str, Any]]:
    return next((r for r in doc.get("resources") or [] if r["type"].endswith(":JobSubmission")), None)


def checkpoint_dir(doc: dict[str, Any]) -> Optional[str]:
    """`outputs.checkpointDir`, else the NeMo-RL override of the job's entrypoint."""
    outputs, job = doc.get("outputs") or {}, _job(doc)
    if isinstance(outputs.get("checkpointDir"), str):
        return outputs["checkpointDir"]
    found = re.search(r"checkpointing\.checkpoint_dir=(\S+)", str(((job or {}).get("inputs") or {}).get("entrypoint")))
    return found.group(1).strip("'\"") if found else None


def names_dir(doc: dict[str, Any], directory: str) -> bool:
    """Whether the plan names `directory` (below its `checkpoints/` root, whatever the mount) where a run reads it:
    the job submission's inputs, a ConfigMap's `.json` data (the watcher's run.json), the outputs."""
    tail = directory[directory.find("checkpoints/") :] if "checkpoints/" in directory else directory
    pattern = re.compile(re.escape(tail) + r"(?![\w./-])")
    places: list[Any] = [doc.get("outputs") or {}, ((_job(doc) or {}).get("inputs") or {})]
    for r in doc.get("resources") or []:
        if r["type"] == "kubernetes:core/v1:ConfigMap":
            data = (r.get("inputs") or {}).get("data") or {}
            places += [v for k, v in data.items() if k.endswith(".json")]
    return bool(pattern.search(json.dumps(places, ensure_ascii=False)))


def run_findings(before: dict[str, Any], after: dict[str, Any]) -> Iterator[Finding]:
    """A running run restarted from step 0 fails; a resubmitted or stopped attempt warns with its cost."""
    if _job(before) is None:
        return
    old_run = (before.get("outputs") or {}).get("runId")
    name = f"run {old_run or (before.get('outputs') or {}).get('jobId') or '?'}"
    if _job(after) is None:
        yield Finding(WARN, "run-stopped", name, "this release submits no job: the running attempt stops")
        return
    new_run, old_dir, new_dir = (after.get("outputs") or {}).get("runId"), checkpoint_dir(before), checkpoint_dir(after)
    restarts = []
    if old_run and new_run and old_run != new_run:
        restarts.append(f"its run id changes to {new_run}")
    if old_dir is None or new_dir is None:
        restarts.append("its checkpoint directory cannot be read from the plans")
    elif old_dir != new_dir and not names_dir(after, old_dir):
        restarts.append(f"its checkpoints move from {old_dir} to {new_dir}; this release does not look in the old one")
    if restarts:
        why = f"restarts from step 0: {'; '.join(restarts)} (its old step_N checkpoints orphaned)"
        yield Finding(FAIL, "run-restart", name, why)
    elif (_job(before).get("inputs") or {}).get("spec_hash") != (_job(after).get("inputs") or {}).get("spec_hash"):
        moved = "" if old_dir == new_dir else f", found in {old_dir}"
        why = "the job spec changed: the running attempt stops and the next resumes from its last complete checkpoint"
        yield Finding(WARN, "job-resubmitted", name, why + moved)


def _loss(before: dict[str, Any], after: dict[str, Any]) -> tuple[Optional[float], Optional[float]]:
    """At most one save period of training (minutes) and its price: `estimates.preemption` of REF's plan, else
    this tree's (the estimate is newer than 1.0.0's predecessor); dollars at the loss estimate's own rate."""
    for doc in (before, after):
        p = (doc.get("estimates") or {}).get("preemption") or {}
        if isinstance(p.get("worstLossMinutes"), (int, float)):
            minutes, rate_usd = p["worstLossMinutes"], None
            if p.get("expectedLossMinutes") and isinstance(p.get("expectedLossUsd"), (int, float)):
                rate_usd = p["expectedLossUsd"] / p["expectedLossMinutes"]
            return round(minutes, 1), None if rate_usd is None else round(minutes * rate_usd, 2)
    return None, None


# ---- planning at two trees


def plan(tree: Path, stack: str, config_file: Optional[Path] = None) -> tuple[Optional[dict[str, Any]], str]:
    """The offline plan's document in `tree` (this venv), or None and its last error line; a REF without
    `--assume-secrets` is asked without it."""
    flags = ["--config-file", str(config_file)] if config_file else []
    for extra in (["--assume-secrets"], []):
        cmd = [sys.executable, "-m", "infra.plan", "--stack", stack, "--json", *extra, *flags]
        env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
        try:
            proc = subprocess.run(cmd, cwd=tree, capture_output=True, text=True, timeout=PLAN_TIMEOUT_S, env=env)
        except subprocess.TimeoutExpired:
            return None, f"the plan ran past {PLAN_TIMEOUT_S} s"
        errors = [line for line in proc.stderr.splitlines() if line.strip()]
        if proc.returncode != 0 and extra and any("--assume-secrets" in line for line in errors[-2:]):
            continue
        if proc.returncode == 0:
            try:
                return json.loads(proc.stdout), ""
            except ValueError:
                return None, "its output is not one JSON document"
        return None, (errors[-1] if errors else f"exit code {proc.returncode}")[:300]
    return None, "unreachable"


def provider_problem(pickled: str, tree: Path = ROOT) -> Optional[str]:
    """Why a pickled dynamic provider does not load in a fresh process at `tree` (None: it loads)."""
    try:
        base64.b64decode(pickled, validate=True)
    except ValueError:
        return None  # not a pickle (e.g. "[secret]"): nothing the state would load either
    proc = subprocess.run(
        [sys.executable, "-c", LOAD_PROVIDER], input=pickled, cwd=tree, capture_output=True, text=True, timeout=120
    )
    if proc.returncode == 0:
        return None
    lines = proc.stderr.strip().splitlines()
    return lines[-1] if lines else f"exit code {proc.returncode}"


class EnvironmentProblem(Exception):
    """Git cannot give the check REF (exit 3)."""


def _git(root: Path, *args: str) -> str:
    proc = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True)
    if proc.returncode != 0:
        lines = proc.stderr.strip().splitlines()
        raise EnvironmentProblem(lines[-1] if lines else f"git {args[0]} exit code {proc.returncode}")
    return proc.stdout.strip()


@contextmanager
def worktree(root: Path, commit: str) -> Iterator[Path]:
    """A detached worktree of `commit` in a temp directory, removed after."""
    parent = Path(tempfile.mkdtemp(prefix="upgrade-check-"))
    tree = parent / "ref"
    try:
        _git(root, "worktree", "add", "--detach", "--quiet", str(tree), commit)
        yield tree
    finally:
        subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=root, capture_output=True)
        shutil.rmtree(parent, ignore_errors=True)
        subprocess.run(["git", "worktree", "prune"], cwd=root, capture_output=True)


def committed_stacks(root: Path, commit: str) -> list[str]:
    names = _git(root, "ls-tree", "--name-only", commit).splitlines()
    return sorted(n[len("Pulumi.") : -len(".yaml")] for n in names if re.fullmatch(r"Pulumi\.[^/]+\.yaml", n))


def resolve(root: Path, ref: str) -> str:
    if not _git(root, "rev-parse", "--is-inside-work-tree") == "true":
        raise EnvironmentProblem(f"{root} is not a git checkout")
    try:
        return _git(root, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
    except EnvironmentProblem:
        raise EnvironmentProblem(
            f"--from {ref}: not a commit of this repository; allowed: a release tag, branch or commit id "
            "(a clone without tags: `git fetch --tags`)"
        ) from None


def check(root: Path, ref: str, named: list[Path], jobs: int = 2) -> dict[str, Any]:
    """Plan every case at REF and here, compare; the report `--json` prints."""
    started = time.monotonic()
    commit = resolve(root, ref)
    # (stack, label, the stack file the user named: None for a committed one, planned from REF's file)
    cases = [(s, s, None) for s in committed_stacks(root, commit)]
    cases += [(_stack_of(path), str(path), path.resolve()) for path in named]
    findings: list[Finding] = []
    stacks: list[dict[str, Any]] = []
    with worktree(root, commit) as tree, ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        planned = list(pool.map(lambda c: _plan_both(root, tree, c[0], c[2]), cases))
    load = functools.cache(lambda pickled: provider_problem(pickled, root))
    for (stack, label, _), (before, before_error, after, after_error) in zip(cases, planned, strict=True):
        stacks.append({"stack": stack, "file": label, "comparable": before is not None and after is not None})
        if before is None:
            findings.append(Finding(WARN, "not-comparable", "plan", f"no plan at {ref}: {before_error}", stack=label))
        elif after is None:
            why = f"planned at {ref}, refused now: {after_error}"
            findings.append(Finding(FAIL, "no-longer-plans", "stack file", why, stack=label))
        else:
            findings += compare_plans(before, after, label, load)
    return {
        "from": ref,
        "commit": commit,
        "ok": not any(f.level == FAIL for f in findings),
        "stacks": stacks,
        "findings": [asdict(f) for f in findings],
        "seconds": round(time.monotonic() - started, 1),
    }


def _plan_both(root: Path, tree: Path, stack: str, named: Optional[Path]):
    before, before_error = plan(tree, stack, named)
    after, after_error = plan(root, stack, named or tree / f"Pulumi.{stack}.yaml") if before is not None else (None, "")
    return before, before_error, after, after_error


def _stack_of(path: Path) -> str:
    match = re.fullmatch(r"Pulumi\.(.+)\.yaml", path.name)
    if not match or not path.is_file():
        raise cli_args.UsageError(
            f"--stack-file {path}: {'not a file' if match else 'not named Pulumi.<stack>.yaml'}; allowed: a stack "
            "file Pulumi.<stack>.yaml (the stack's name is read from it)"
        )
    return cli_args.stack_name(match.group(1))


def render(report: dict[str, Any]) -> str:
    findings = [Finding(**f) for f in report["findings"]]
    compared = sum(s["comparable"] for s in report["stacks"])
    lines = [
        f"upgrade check: {report['from']} ({report['commit'][:10]}) -> this tree: {compared} of "
        f"{len(report['stacks'])} stack files compared in {report['seconds']:g} s"
    ]
    lines += [f.line() for f in sorted(findings, key=lambda f: (f.level != FAIL, f.stack))]
    fails = sum(f.level == FAIL for f in findings)
    loses = "this upgrade loses data or training; it needs a new major version and an upgrade note"
    lines.append(f"{fails} failure(s): {loses}" if fails else f"ok: nothing lost ({len(findings)} warning(s))")
    return "\n".join(lines)


def main(argv: Optional[list[str]] = None, root: Path = ROOT) -> int:
    parser = cli_args.OneLineParser(
        prog="python -m tools.upgrade_check", description="Would upgrading a live stack from REF lose data or training?"
    )
    parser.add_argument("--from", dest="ref", required=True, metavar="REF", help="the release a live stack runs")
    also = "also compare this stack file"
    parser.add_argument("--stack-file", type=Path, action="append", default=[], metavar="F", help=also)
    parser.add_argument("--json", action="store_true", help="print the report as one JSON document")
    parser.add_argument("--jobs", type=cli_args.positive_int, default=2, help="plans run at once (default 2)")
    try:
        args = parser.parse_args(argv)
        for path in args.stack_file:
            _stack_of(path)
        report = check(root, args.ref, args.stack_file, args.jobs)
    except (cli_args.UsageError, argparse.ArgumentTypeError, EnvironmentProblem) as err:
        print(f"error: {err}", file=sys.stderr)
        return ENVIRONMENT if isinstance(err, EnvironmentProblem) else USAGE
    print(json.dumps(report, indent=2) if args.json else render(report))
    return OK if report["ok"] else BROKEN


if __name__ == "__main__":
    sys.exit(main())
