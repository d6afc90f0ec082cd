"""Would upgrading a live stack from an earlier release to this tree lose data or training? (docs/day-2.md)

    python -m tools.upgrade_check --from REF [--stack-file Pulumi.NAME.yaml ...] [--json]

Each stack file committed at REF is planned offline with REF's code and that file (a detached temporary
worktree), and with this tree's code and this tree's version of the file (the one `git checkout` of the new
release gives; REF's when this tree no longer has it); a `--stack-file` is planned with both codes. REF is a tag,
branch or commit, or a release CHANGELOG.md names on a `release-commit:` line (a clone has no tags). The rules
(fail: data, a run's checkpoints or its ledger lost; warn: nodes, Ray or a job restarted, with the cost) are
docs/day-2.md's; a run's continuity step is run for real on a temporary directory (tools/upgrade_continuity.py).
Exit codes (workloads/exit_codes.py): 0 nothing lost, 1 a failure, 2 usage, 3 environment, 128+N a signal N.
"""

from __future__ import annotations

import argparse
import base64
import functools
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, Callable, Iterator, Optional

from tools import upgrade_continuity
from tools.pool_replacement import FORCE_NEW, NODE_POOL_TYPE, SUBTREE, replacing_changes
from tools.upgrade_ref import (
    EnvironmentProblem,
    check_history,
    check_ref_text,
    committed_stacks,
    resolve,
    worktree,
)
from workloads import cli_args

ROOT = (
    Path(__file__).resolve().parent.parent
)  # the checkout (as infra.stack_file.ROOT; not imported: it loads the config)
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
NODES_RECREATED: dict[str, str] = dict.fromkeys(
    (
        "nodeConfig." + name
        for name in "machineType diskSizeGb diskType bootDisk containerdConfig imageType storagePools".split()
    ),
    SUBTREE,
)
"""Node pool inputs the provider updates in place (not ForceNew: the pool stays) through one UpdateNodePool call
(hashicorp/terraform-provider-google-beta 93c65b2d google-beta/services/container/node_config.go
`nodePoolNodeConfigUpdate`), which GKE applies by recreating every node of the pool with the pool's upgrade
strategy: `machineType`, `diskType`, `diskSizeGb`, `bootDisk`: "Initiates an upgrade operation that migrates the
nodes in the node pool to the specified ...", `containerdConfig`: "... that recreates the nodes with the new
config" (UpdateNodePoolRequest, google-cloud-container 2.67.0 container_v1/types/cluster_service.py);
`imageType`: "changing the image type will delete and recreate all nodes in the node pool" (pulumi-gcp 10.2.0
container NodePoolNodeConfigArgs); `storagePools` goes in the same call as the boot disk. The running attempt's
pods go with their nodes. Other in-place edits (labels, taints, `gcfsConfig`, ...) are not listed: GKE's
behaviour for them is not documented in these sources (CHANGELOG.md, "Image streaming on a live stack")."""
HELM_RELEASE_TYPE = "kubernetes:helm.sh/v3:Release"
HELM_FORCE_NEW: dict[str, str] = {"name": SUBTREE, "namespace": SUBTREE}
"""A Helm release's name and namespace replace it whatever `replaceOnChanges` says: pulumi/pulumi-kubernetes
provider/pkg/provider/helm_release.go `Diff` (01799d56): `forceNewFields := []string{".name", ".namespace"}`."""
DYNAMIC_PREFIX = "pulumi-python:dynamic/"
STACK_TYPE = "pulumi:pulumi:Stack"
PLAN_TIMEOUT_S = 600
LEDGER_LOST = "the run's ledger (spend, budget, attempt history) is lost"
NO_TRAINING_LOST = frozenset({"ledger-restarts"})
"""Warnings that cost no training (no minutes or dollars attached)."""

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


# ---- the comparison: pure functions over two plan documents (docs/architecture.md "The plan JSON contract"),
# but for the continuity step, run on a temporary directory


Continuity = Callable[[str, str, str, str], Optional[str]]


def compare_plans(
    before: dict[str, Any],
    after: dict[str, Any],
    stack: str,
    provider_problem: Callable[[str], Optional[str]] = lambda _pickled: None,
    continuity: Continuity = upgrade_continuity.problem,
) -> list[Finding]:
    """Every failure and warning of upgrading `stack` from the plan `before` (REF) to `after` (this tree), each
    warning with the training it may lose; `provider_problem(pickled)`: why a pickled provider does not load;
    `continuity(old_dir, new_dir, entrypoint, old_entrypoint)`: why the new job would not resume the run."""
    minutes, usd = _loss(before, after)
    found = [
        *resource_findings(before, after),
        *provider_findings(before, provider_problem),
        *run_findings(before, after, continuity),
    ]
    costly = [f.level == WARN and f.rule not in NO_TRAINING_LOST for f in found]
    return [
        replace(f, stack=stack, **({"minutes": minutes, "usd": usd} if training else {}))
        for f, training in zip(found, costly, strict=True)
    ]


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
    """A resource at the same URN: replaced by a ForceNew input (types with a table, a Helm release's name and
    namespace) or a `replaceOnChanges` one; a node pool updated in place by recreating its nodes."""
    o, n = old.get("inputs") or {}, new.get("inputs") or {}
    kind = new["type"]
    table = DATA_FORCE_NEW.get(kind) or {NODE_POOL_TYPE: FORCE_NEW, HELM_RELEASE_TYPE: HELM_FORCE_NEW}.get(kind, {})
    listed = (new.get("options") or {}).get("replaceOnChanges") or []
    changes = replacing_changes(o, n, table)
    changes += [f"{k} (replaceOnChanges)" for k in listed if o.get(k) != n.get(k) and k not in table]
    if changes:
        yield from _outcome(new, "; ".join(changes))
    elif kind == NODE_POOL_TYPE and (recreated := replacing_changes(o, n, NODES_RECREATED)):
        gpus = "GPU " if ((n.get("nodeConfig") or {}).get("guestAccelerators")) else ""
        yield Finding(
            WARN,
            "pool-nodes-recreated",
            f"{kind} {new['name']}",
            f"updated in place, but GKE applies it by recreating every {gpus}node of the pool ({'; '.join(recreated)}):"
            " the pods on them restart and the running attempt dies",
        )


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


def _entrypoint(doc: dict[str, Any]) -> str:
    value = ((_job(doc) or {}).get("inputs") or {}).get("entrypoint")
    return value if isinstance(value, str) else ""


def _spec_hash(doc: dict[str, Any]) -> Any:
    return ((_job(doc) or {}).get("inputs") or {}).get("spec_hash")


def checkpoint_dir(doc: dict[str, Any]) -> Optional[str]:
    """`outputs.checkpointDir`, else the NeMo-RL override of the job's entrypoint."""
    outputs = doc.get("outputs") or {}
    if isinstance(outputs.get("checkpointDir"), str):
        return outputs["checkpointDir"]
    found = re.search(r"checkpointing\.checkpoint_dir=(\S+)", _entrypoint(doc))
    return found.group(1).strip("'\"") if found else None


def run_findings(before: dict[str, Any], after: dict[str, Any], continuity: Continuity) -> Iterator[Finding]:
    """A run whose ledger goes, or that would not resume from its newest whole checkpoint, fails; a resubmitted
    or stopped attempt warns with its cost."""
    if _job(before) is None:
        return
    old_out, new_out = before.get("outputs") or {}, after.get("outputs") or {}
    old_run = old_out.get("runId")
    name = f"run {old_run or old_out.get('jobId') or '?'}"
    if _job(after) is None:
        yield Finding(WARN, "run-stopped", name, "this release submits no job: the running attempt stops")
        return
    new_run, old_dir, new_dir = new_out.get("runId"), checkpoint_dir(before), checkpoint_dir(after)
    failed = False
    if not old_run and new_run and old_out.get("jobId"):
        # Up to 1.0.0 the ledger was keyed by the spec's submission id (workloads/ledger.py `Ledger.from_dict`), so
        # a spec change started a new one then too: said as a cost, as the release notes say it.
        why = (
            f"{LEDGER_LOST} once: REF keyed it by the job's submission id, this release by the run id ({new_run}); "
            "`job.budgetUsd` counts from the upgrade"
        )
        yield Finding(WARN, "ledger-restarts", name, why)
    elif old_run and new_run and old_run != new_run:
        # The owner keeps one ledger per run id (workloads/ledger.py `LedgerFile.load`): a new id starts empty.
        why = f"its run id changes to {new_run}: {LEDGER_LOST}, and the budget counts from $0 again"
        yield Finding(FAIL, "ledger-lost", name, why)
        failed = True
    if old_dir is None or new_dir is None:
        problem: Optional[str] = "its checkpoint directory cannot be read from the plans"
    else:
        problem = continuity(old_dir, new_dir, _entrypoint(after), _entrypoint(before))
    if problem:
        yield Finding(FAIL, "run-restart", name, f"does not resume where it was: {problem}")
    elif not failed and _spec_hash(before) != _spec_hash(after):
        moved = "" if old_dir == new_dir else f", brought over from {old_dir} by its continuity step"
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


_CHILDREN: set[subprocess.Popen] = set()
_CHILDREN_LOCK = threading.Lock()


def plan(tree: Path, stack: str, config_file: Optional[Path] = None) -> tuple[Optional[dict[str, Any]], str]:
    """The offline plan's document in `tree` (this venv), or None and its last error line; a REF without
    `--assume-secrets` is asked without it."""
    flags = ["--config-file", str(config_file)] if config_file else []
    for extra in (["--assume-secrets"], []):
        cmd = [sys.executable, "-m", "infra.plan", "--stack", stack, "--json", *extra, *flags]
        env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
        code, out, err = _run_child(cmd, tree, env)
        if code is None:
            return None, f"the plan ran past {PLAN_TIMEOUT_S} s"
        errors = [line for line in err.splitlines() if line.strip()]
        if code != 0 and extra and any("--assume-secrets" in line for line in errors[-2:]):
            continue
        if code == 0:
            try:
                return json.loads(out), ""
            except ValueError:
                return None, "its output is not one JSON document"
        return None, (errors[-1] if errors else f"exit code {code}")[:300]
    return None, "unreachable"


def _run_child(cmd: list[str], cwd: Path, env: dict[str, str]) -> tuple[Optional[int], str, str]:
    """Run a plan, registered so that an interrupted check stops it (`_stop_children`); None: it timed out."""
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    with _CHILDREN_LOCK:
        _CHILDREN.add(proc)
    try:
        out, err = proc.communicate(timeout=PLAN_TIMEOUT_S)
        return proc.returncode, out, err
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        return None, "", ""
    finally:
        with _CHILDREN_LOCK:
            _CHILDREN.discard(proc)


def _stop_children() -> None:
    with _CHILDREN_LOCK:
        for proc in list(_CHILDREN):
            proc.kill()


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


class Interrupted(BaseException):
    """SIGTERM (or SIGINT) during the check: everything it started is stopped and removed on the way out."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


# ---- the check


@dataclass(frozen=True)
class Case:
    stack: str
    label: str
    before_file: Optional[Path]  # None: REF's own committed file
    after_file: Path
    note: str = ""


def cases_for(root: Path, tree: Path, stacks: list[str], named: list[Path]) -> list[Case]:
    """A committed stack: REF's file at REF, this tree's version of it here (REF's when this tree dropped it);
    a `--stack-file`: that file at both."""
    cases = []
    for stack in stacks:
        old, new = tree / f"Pulumi.{stack}.yaml", root / f"Pulumi.{stack}.yaml"
        if not new.is_file():
            cases.append(Case(stack, stack, None, old, "this tree has no such file: REF's is planned here too"))
            continue
        changed = _bytes(old) != _bytes(new)
        cases.append(Case(stack, stack, None, new, "the stack file changed since REF" if changed else ""))
    for path in named:
        cases.append(Case(_stack_of(path), str(path), path.resolve(), path.resolve()))
    return cases


def _bytes(path: Path) -> Optional[bytes]:
    try:
        return path.read_bytes()
    except OSError:
        return None


def compare_trees(
    root: Path,
    tree: Path,
    cases: list[Case],
    shown: str,
    jobs: int = 2,
    continuity: Continuity = upgrade_continuity.problem,
) -> tuple[list[dict[str, Any]], list[Finding]]:
    """Plan every case at `tree` (REF) and at `root` (this tree), compare: (the stacks, the findings)."""
    pool = ThreadPoolExecutor(max_workers=max(1, min(jobs, len(cases) or 1)))
    try:
        planned = list(pool.map(lambda c: _plan_both(root, tree, c), cases))
    except BaseException:
        _stop_children()
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    load = functools.cache(lambda pickled: provider_problem(pickled, root))
    findings: list[Finding] = []
    stacks: list[dict[str, Any]] = []
    for case, (before, before_error, after, after_error) in zip(cases, planned, strict=True):
        comparable = before is not None and after is not None
        stacks.append({"stack": case.stack, "file": case.label, "comparable": comparable, "note": case.note})
        if before is None:
            why = f"no plan at {shown}: {before_error}"
            findings.append(Finding(WARN, "not-comparable", "plan", why, stack=case.label))
        elif after is None:
            why = f"planned at {shown}, refused now: {after_error}"
            findings.append(Finding(FAIL, "no-longer-plans", "stack file", why, stack=case.label))
        else:
            findings += compare_plans(before, after, case.label, load, continuity)
    return stacks, findings


def _plan_both(root: Path, tree: Path, case: Case):
    before, before_error = plan(tree, case.stack, case.before_file)
    after, after_error = plan(root, case.stack, case.after_file) if before is not None else (None, "")
    return before, before_error, after, after_error


def check(root: Path, ref: str, named: list[Path], jobs: int = 2) -> dict[str, Any]:
    """Plan every case at REF and here, compare; the report `--json` prints."""
    started = time.monotonic()
    check_ref_text(ref)
    found = resolve(root, ref)
    stacks = committed_stacks(root, found.commit)
    check_history(root, found, stacks, named)
    with worktree(root, found.commit) as tree:
        cases = cases_for(root, tree, stacks, named)
        planned, findings = compare_trees(root, tree, cases, found.shown, jobs)
    if not any(s["comparable"] for s in planned):
        first = next((f.message for f in findings), "no stack file")
        raise EnvironmentProblem(
            f"--from {found.shown} ({found.commit[:10]}): none of its {len(planned)} stack file(s) could be compared, "
            f"so nothing is known: {first}"
        )
    return {
        "from": found.shown,
        "commit": found.commit,
        "resolved": found.via,
        "ok": not any(f.level == FAIL for f in findings),
        "stacks": planned,
        "findings": [asdict(f) for f in findings],
        "seconds": round(time.monotonic() - started, 1),
    }


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
    via = f", {report['resolved']}" if report.get("resolved") else ""
    lines = [
        f"upgrade check: {report['from']} ({report['commit'][:10]}{via}) -> this tree: {compared} of "
        f"{len(report['stacks'])} stack files compared in {report['seconds']:g} s"
    ]
    lines += [f"note {s['file']}: {s['note']}" for s in report["stacks"] if s.get("note")]
    lines += [f.line() for f in sorted(findings, key=lambda f: (f.level != FAIL, f.stack))]
    fails = sum(f.level == FAIL for f in findings)
    loses = "this upgrade loses data or training; it needs a new major version and an upgrade note"
    lines.append(f"{fails} failure(s): {loses}" if fails else f"ok: nothing lost ({len(findings)} warning(s))")
    return "\n".join(lines)


def _on_signal(signum: int, _frame: Any) -> None:
    raise Interrupted(signum)


def main(argv: Optional[list[str]] = None, root: Path = ROOT) -> int:
    parser = cli_args.OneLineParser(
        prog="python -m tools.upgrade_check", description="Would upgrading a live stack from REF lose data or training?"
    )
    parser.add_argument("--from", dest="ref", required=True, metavar="REF", help="the release a live stack runs")
    also = "also compare this stack file"
    parser.add_argument("--stack-file", type=Path, action="append", default=[], metavar="F", help=also)
    parser.add_argument("--json", action="store_true", help="print the report as one JSON document")
    parser.add_argument("--jobs", type=cli_args.positive_int, default=2, help="plans run at once (default 2)")
    handlers = {}
    if threading.current_thread() is threading.main_thread():
        handlers = {sig: signal.signal(sig, _on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        args = parser.parse_args(argv)
        for path in args.stack_file:
            _stack_of(path)
        report = check(root, args.ref, args.stack_file, args.jobs)
    except (cli_args.UsageError, argparse.ArgumentTypeError, EnvironmentProblem) as err:
        print(f"error: {cli_args.without_credentials(str(err))}", file=sys.stderr)
        return ENVIRONMENT if isinstance(err, EnvironmentProblem) else USAGE
    except (Interrupted, KeyboardInterrupt) as err:
        signum = err.signum if isinstance(err, Interrupted) else signal.SIGINT
        name = signal.Signals(signum).name
        print(
            f"error: interrupted ({name}): the plans were stopped and the temporary worktree removed", file=sys.stderr
        )
        return 128 + signum
    finally:
        for sig, handler in handlers.items():
            signal.signal(sig, handler)
    print(json.dumps(report, indent=2) if args.json else render(report))
    return OK if report["ok"] else BROKEN


if __name__ == "__main__":
    sys.exit(main())
