"""The one owner of a run's life: the acceptance gate, then the training attempt, for every attempt.

The hook, `jobctl submit` and the watcher all go through `clear_attempt` before they submit, and share
their state through the Ray job table. A gate run is a Ray job with metadata `nemo-rl-gke/gate: <stack>`,
`nemo-rl-gke/gate-for: <attempt id>` and `nemo-rl-gke/gate-nodes: <worker node ids>`. Rules:
1. While any gate run of the stack is active nobody submits training (whatever the policy).
2. Under enforce and warn, attempt N goes in only after a gate run for it ended on the nodes alive now;
   under enforce only if it passed.
3. A failed gate under enforce holds the attempt until the worker nodes change; a user's submit gates again.
4. Gate ids are deterministic (`<attempt id>-gate-<k>`): two parties start one.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, Optional, Sequence

from workloads.gang_wait import KEEP_WHY
from workloads.gate import META_GATE, POLICIES, GateFailed, GatePlan, GateReport, estimated_seconds, gate_in_force
from workloads.job_types import META_SPEC_HASH, JobSpec

if TYPE_CHECKING:
    from workloads.ledger import Ledger

META_GATE_FOR = "nemo-rl-gke/gate-for"
META_GATE_NODES = "nemo-rl-gke/gate-nodes"
ACTIVE = ("PENDING", "RUNNING")


def _status(job: Any) -> str:
    value = getattr(job, "status", "")
    return str(getattr(value, "value", value))


@dataclass(frozen=True)
class GateSetup:
    """The stack's gate: its policy (`job.gate`) and plan (`infra.gate_plan.gate_plan_for_stack`)."""

    policy: str = "off"
    plan: Optional[GatePlan] = None

    def __post_init__(self) -> None:
        if self.policy not in POLICIES:
            raise ValueError(f"gate policy {self.policy!r}; allowed: {', '.join(POLICIES)}")

    @classmethod
    def of(cls, policy: Optional[str], plan: Optional[GatePlan]) -> "GateSetup":
        """The setup under `workloads.gate.gate_in_force`: off carries no plan."""
        return cls(*gate_in_force(policy, plan))

    @property
    def on(self) -> bool:
        return self.plan is not None and self.policy != "off"


def gate_runs(jobs: Iterable[Any], stack: str) -> list[Any]:
    """The stack's gate runs among `jobs` (Ray's job list), oldest first."""
    runs = [
        j
        for j in jobs
        if (getattr(j, "metadata", None) or {}).get(META_GATE) == stack and getattr(j, "submission_id", None)
    ]
    return sorted(runs, key=lambda j: (j.start_time or 0, j.submission_id))


def running_gate(jobs: Iterable[Any], stack: str) -> Optional[Any]:
    """A gate run of the stack that is pending or running, or None."""
    return next((j for j in gate_runs(jobs, stack) if _status(j) in ACTIVE), None)


def worker_node_ids(rows: Iterable[Mapping[str, Any]], resource: str = "GPU") -> tuple[str, ...]:
    """The sorted Ray node ids of the ALIVE nodes with `resource`: the node set a gate verdict belongs to."""
    found = [
        str(r.get("node_id", ""))
        for r in rows
        if str(r.get("state", "")).upper() == "ALIVE"
        and float((r.get("resources_total") or {}).get(resource, 0) or 0) > 0
    ]
    return tuple(sorted(found))


def _nodes_of(run: Any) -> tuple[str, ...]:
    text = (run.metadata or {}).get(META_GATE_NODES, "")
    return tuple(sorted(n for n in text.split(",") if n))


def gate_job_id(attempt_submission_id: str, k: int) -> str:
    return f"{attempt_submission_id}-gate-{k}"


class Clearance(str, Enum):
    CLEARED = "cleared"
    WAIT = "wait"
    HELD = "held"


@dataclass(frozen=True)
class GateOutcome:
    clearance: Clearance
    reason: str
    report: Optional[GateReport] = None
    gate_id: Optional[str] = None
    started: bool = False


def clear_attempt(
    client: Any,
    stack: str,
    attempt_submission_id: str,
    gate: GateSetup,
    *,
    jobs: Optional[Sequence[Any]] = None,
    node_rows: Optional[Sequence[Mapping[str, Any]]] = None,
    retry_failed: Callable[[Any], bool] = lambda _run: False,
    on_line: Callable[[str], None] = lambda _l: None,
) -> GateOutcome:
    """May attempt `attempt_submission_id` be submitted now (the module docstring's rules)? Starts the gate run
    when one is due (then WAIT). `retry_failed(run)`: run a failed gate again although the nodes did not change."""
    from workloads import submit

    if jobs is None:
        jobs = submit.all_jobs(client)
    busy = running_gate(jobs, stack)
    if busy is not None:
        return GateOutcome(
            Clearance.WAIT,
            f"acceptance gate {busy.submission_id} is {_status(busy).lower()}; nothing is submitted while a gate runs",
            gate_id=busy.submission_id,
        )
    if not gate.on:
        return GateOutcome(Clearance.CLEARED, "no gate (job.gate off)")
    plan = gate.plan
    assert plan is not None
    if node_rows is None:
        node_rows = submit.ray_nodes(client)
    nodes = worker_node_ids(node_rows, plan.worker_resource)
    mine = [r for r in gate_runs(jobs, stack) if (r.metadata or {}).get(META_GATE_FOR) == attempt_submission_id]
    current = [r for r in mine if _nodes_of(r) == nodes]
    if current:
        run = current[-1]
        report = _report(client, plan, run)
        if report.ok or gate.policy == "warn":
            verdict = "passed" if report.ok else "FAILED (job.gate warn: submitted anyway)"
            return GateOutcome(
                Clearance.CLEARED, f"acceptance gate {run.submission_id} {verdict}", report, run.submission_id
            )
        if not retry_failed(run):
            return GateOutcome(
                Clearance.HELD,
                f"{report.summary()} (gate {run.submission_id} on {len(nodes)} worker node(s)); attempt "
                f"{attempt_submission_id} is not submitted (job.gate enforce); the gate runs again once the worker "
                "nodes change",
                report,
                run.submission_id,
            )
    job_id = gate_job_id(attempt_submission_id, len(mine) + 1)
    why = "the worker nodes changed since its last gate" if mine and not current else "before it is submitted"
    on_line(
        f"acceptance gate for {attempt_submission_id} ({why}): {plan.node_count} node(s) x {plan.gpus_per_node} GPUs, "
        f"~{estimated_seconds(plan) / 60:.1f} min expected (job {job_id})"
    )
    from workloads.gate.gate_job import start_on_cluster

    created = start_on_cluster(
        client,
        plan,
        job_id=job_id,
        label=stack,
        metadata={META_GATE_FOR: attempt_submission_id, META_GATE_NODES: ",".join(nodes)},
    )
    verb = "started" if created else "already started by another party:"
    return GateOutcome(
        Clearance.WAIT, f"acceptance gate {verb} {job_id} for {attempt_submission_id}", gate_id=job_id, started=created
    )


_REPORTS: dict[str, GateReport] = {}
"""Verdicts of ended gate runs: an ended run's log never changes."""


def _report(client: Any, plan: GatePlan, run: Any) -> GateReport:
    from workloads.gate.gate_job import result_on_cluster

    key = f"{client.get_address()}|{run.submission_id}"
    if key not in _REPORTS:
        _REPORTS[key] = result_on_cluster(client, plan, run.submission_id, _status(run))
    return _REPORTS[key]


def next_attempt(
    client: Any, spec: JobSpec, ledger: Optional[Callable[[], Optional["Ledger"]]] = None
) -> tuple[int, Optional[Any]]:
    """The attempt of `spec` to submit next, and the spec's job to keep instead (None: submit): from the job table,
    else the run ledger (`ledger()`), the count that outlives a head restart; the watcher numbers the same way."""
    from workloads import submit

    same = [j for j in submit.list_jobs(client, spec.stack) if (j.metadata or {}).get(META_SPEC_HASH) == spec.spec_hash]
    if same:
        newest = max(same, key=submit.attempt_of)
        if newest.status not in submit.RETRYABLE:
            return submit.attempt_of(newest), newest
        return submit.attempt_of(newest) + 1, None
    recorded = ledger() if ledger is not None else None
    if recorded is None or recorded.run_id != spec.run_id:
        return 1, None
    return recorded.last_attempt(spec.submission_id) + 1, None


GATE_POLL_SECONDS = 2.0


def submit_gated(
    client: Any,
    spec: JobSpec,
    gate: GateSetup,
    *,
    on_line: Callable[[str], None] = lambda _l: None,
    poll_interval: Optional[float] = None,
    timeout: Optional[float] = None,
    sleep: Callable[[float], None] = time.sleep,
    ledger: Optional[Callable[[], Optional["Ledger"]]] = None,
    ensure_workers: Optional[Callable[[], Any]] = None,
) -> tuple[Any, Optional[GateReport]]:
    """Start a run as the run's owner does (the hook, the CLI): stop other specs' jobs, keep the same spec's
    active or succeeded job, else ask for the workers and wait for them (`ensure_workers`, a
    `workloads.worker_group.ensure_workers` call: a released group has none), clear the next attempt
    (`clear_attempt`; a gate that failed before this call runs again) and submit it. Returns the `SubmitResult`
    and the gate's report; raises `GateFailed` under enforce, `submit.WaitTimeout` after `timeout` (default: two
    gate runs' bound), `worker_group.WorkersNotReady` when the workers do not come."""
    from workloads import destroy_mark, submit

    destroy_mark.refuse_if_destroying(client, spec.submission_id)  # nothing starts once `pulumi destroy` began

    stopped = submit.stop_other_specs(client, spec)
    attempt, newest = next_attempt(client, spec, ledger)
    if newest is not None:
        return submit.SubmitResult(newest.submission_id, newest.status, created=False, stopped=stopped), None
    target = submit.attempt_id(spec.submission_id, attempt)
    if ensure_workers is not None:
        ensure_workers()
    # Failed runs that had ended before this call run again; one running now is the verdict. Ids, not times:
    # the head's clock and this machine's need not agree.
    before = {r.submission_id for r in gate_runs(submit.all_jobs(client), spec.stack) if _status(r) not in ACTIVE}
    bound = timeout if timeout is not None else 2 * ((gate.plan.timeout_s if gate.plan else 600.0) + 120)
    deadline = time.monotonic() + bound
    shown: list[str] = []
    while True:
        outcome = clear_attempt(
            client,
            spec.stack,
            target,
            gate,
            retry_failed=lambda run: run.submission_id in before,
            on_line=on_line,
        )
        if (not shown or shown[-1] != outcome.reason) and (gate.on or outcome.clearance is Clearance.WAIT):
            shown.append(outcome.reason)
            if outcome.clearance is not Clearance.HELD:  # a held gate's line is GateFailed's message
                on_line(outcome.reason)
        if outcome.clearance is Clearance.HELD:
            assert outcome.report is not None
            raise GateFailed(outcome.report)
        if outcome.clearance is Clearance.CLEARED:
            break
        if time.monotonic() > deadline:
            raise submit.WaitTimeout(outcome.gate_id or target, submit.JobStatus.RUNNING, bound)
        sleep(poll_interval if poll_interval is not None else GATE_POLL_SECONDS)
    job_id, created = submit.submit_attempt(client, spec, attempt)
    return submit.SubmitResult(job_id, submit.status(client, job_id), created=created, stopped=stopped), outcome.report


@dataclass(frozen=True)
class RunPlan:
    """The owner's plan-time values besides the `JobSpec`: run.json (`infra.run_plan.run_plan_for_stack`)."""

    run_id: Optional[str] = None
    gate_policy: str = "off"
    gate_plan: Optional[dict] = None
    """`GatePlan.to_dict()`; None: no gate."""
    checkpoint_dir: Optional[str] = None
    """The run's checkpoints as the owner sees them; None: not visible."""
    node_count: int = 0
    node_hour_usd: Optional[float] = None
    """The first rung's node-hour price: an attempt of unknown mix is priced at it; None: spend not known."""
    rung_node_hour_usd: dict[str, float] = field(default_factory=dict)
    """Node-hour price per rung label of a capacity ladder; {}: one rung."""
    node_hour_estimate: Optional[str] = None
    """Why a price above is an estimate of data/prices.yaml; None: each is cited."""
    budget_usd: Optional[float] = None
    save_period: Optional[int] = None
    step_seconds: Optional[float] = None
    checkpoint_write_seconds: Optional[float] = None
    """The plan's estimate of writing one checkpoint: a save cycle is `save_period` steps plus this."""
    gang_max_wait_minutes: Optional[int] = None
    """`gpuPool.capacity.maxWaitMinutes` (workloads/gang_wait.py); None: no gang wait."""
    gang_on_timeout: str = "keep"
    """`releaseWorkers` or `keep`."""
    gang_kept_why: str = KEEP_WHY
    gang_rungs: tuple[tuple[str, str], ...] = ()
    """(node pool, rung) in ladder order."""
    gang_default_rung: Optional[str] = None
    """The rung of a node whose pool `gang_rungs` does not name."""
    ray_namespace: Optional[str] = None
    """The RayCluster's namespace, name and GPU worker group (`KubeGangView`)."""
    ray_cluster: Optional[str] = None
    ray_worker_group: Optional[str] = None
    release_workers_after_run: bool = False
    recovery: dict[str, Any] = field(default_factory=dict)
    """`RecoveryPolicy.to_dict()`; {}: its defaults (plain values: the recovery package imports this module)."""
    shrink_sizes: list[dict[str, Any]] = field(default_factory=list)
    """`recovery.shrink`: each node count below `node_count` the run can train on, largest first, with the overrides
    its attempts run with (`{"nodes": 4, "overrides": [...]}`, workloads/size_ladder.py); []: it waits for the gang."""
    shrink_wait_minutes: Optional[int] = None
    """How long after an attempt ended short of nodes the owner waits for the whole gang before it shrinks."""
    shrink_lease_minutes: Optional[int] = None
    """How long an attempt on fewer nodes trains before it saves and ends (its `checkpoint_must_save_by`)."""

    @property
    def gang_wait(self) -> bool:
        return self.gang_max_wait_minutes is not None and bool(self.ray_cluster and self.ray_worker_group)

    @property
    def releases_workers(self) -> bool:
        return self.release_workers_after_run and bool(
            self.ray_namespace and self.ray_cluster and self.ray_worker_group
        )

    @property
    def gate(self) -> GateSetup:
        return GateSetup.of(self.gate_policy, GatePlan.from_dict(self.gate_plan) if self.gate_plan else None)

    @property
    def save_window_seconds(self) -> Optional[float]:
        """One save cycle in seconds (`save_period` steps and the write): how long a budget stop waits."""
        if not self.save_period or not self.step_seconds:
            return None
        return self.save_period * self.step_seconds + (self.checkpoint_write_seconds or 0.0)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "RunPlan":
        names = {f.name for f in dataclasses.fields(cls)}
        values = {k: v for k, v in data.items() if k in names}
        if "gang_rungs" in values:  # JSON has lists; pairs in order (a JSON object would be sorted by pool)
            values["gang_rungs"] = tuple((str(pool), str(rung)) for pool, rung in values["gang_rungs"] or ())
        return cls(**values)
