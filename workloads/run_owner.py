"""The one owner of a run's life: the acceptance gate, then the training attempt, for every attempt.

Three parties can start training on a stack: the post-deploy hook (`workloads/hook.py`), a user's
`python -m jobctl submit`, and the preemption watcher (`workloads/recovery/`). They used to
decide alone and race: the watcher could not see the gate's Ray job (it carries only
`nemo-rl-gke/gate` metadata), so with `resubmit_missing` it submitted attempt 1 beside a running
gate, which then failed for the wrong reason or let training start before the verdict; and an
attempt resubmitted after a preemption landed on replacement nodes nothing had checked.

All three now go through `clear_attempt` before they submit an attempt, and share their state
through the cluster's own Ray job table, which outlives any one of them:

- a gate run is a Ray job with metadata `nemo-rl-gke/gate: <stack>`, `nemo-rl-gke/gate-for: <the
  submission id of the training attempt it clears>` and `nemo-rl-gke/gate-nodes: <the Ray node ids
  of the workers alive when it started>`; its verdict is the report its driver prints
  (`workloads.gate.parse_result`).

Rules:
1. While any gate run of the stack is pending or running, nobody submits training: the gate holds
   every GPU, and a job started beside it takes them (and makes the gate fail for the wrong reason).
   This holds whatever the policy, `off` included (a gate run by hand is running).
2. Under `enforce` and `warn`, attempt N (the first, and each one after a preemption) is submitted
   only after a gate run FOR attempt N has ended on the nodes alive now; under `enforce` only if it
   passed. A gate run on other nodes than those alive now (a node was replaced since) does not count.
3. A failed gate under `enforce` holds that attempt: the watcher reports it (the gate names the failing
   nodes) and starts a new gate only once the set of worker nodes changes (the bad node replaced or
   removed), so no training lands on a node that failed. A user's `submit` (and `pulumi up`) gates
   again at once: they may have fixed what failed.
4. Gate ids are deterministic (`<attempt id>-gate-<k>`, k counting the runs for that attempt): two
   parties starting the same gate start one; the second adopts it, as with the attempts' own ids.

Imports: `workloads.gate`, `workloads.gang_wait` (standard library only) and `workloads.submit`
(Ray's job SDK, no Pulumi): the watcher's pod ships this module.
"""

from __future__ import annotations

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
"""Ray job metadata of a gate run: the submission id of the training attempt it clears."""
META_GATE_NODES = "nemo-rl-gke/gate-nodes"
"""Ray job metadata of a gate run: the (sorted, comma-joined) Ray node ids of the workers alive when it started."""
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
        """The setup under the one rule of a gate that is off (`workloads.gate.gate_in_force`): off carries no
        plan and says `off`, wherever the setup comes from (the config, the hook's props, run.json, a flag)."""
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
    """The Ray node ids of the ALIVE nodes that have `resource` (the gate plan's `worker_resource`), sorted:
    the node set a gate verdict belongs to. `rows` are Ray's node table (`submit.ray_nodes`)."""
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
    """Submit the attempt now."""
    WAIT = "wait"
    """A gate runs (ours or someone's): look again later."""
    HELD = "held"
    """The gate for this attempt failed under enforce, on the nodes alive now."""


@dataclass(frozen=True)
class GateOutcome:
    clearance: Clearance
    reason: str
    report: Optional[GateReport] = None
    gate_id: Optional[str] = None
    started: bool = False
    """This call started the gate run `gate_id`."""


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
    """May attempt `attempt_submission_id` of the stack be submitted now (the module docstring's rules)?

    Starts the gate run when one is due (and returns WAIT: the caller looks again). `jobs` is Ray's job
    list and `node_rows` its node table when the caller has them already. `retry_failed(run)` says
    whether a failed gate run under enforce is to be run again although the nodes did not change (a
    user's submission: a run from before it). Raises `submit.JobError`s of the Job API.
    """
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
"""Verdicts of ended gate runs, by job id: an ended run's log never changes, so it is read once."""


def _report(client: Any, plan: GatePlan, run: Any) -> GateReport:
    from workloads.gate.gate_job import result_on_cluster

    key = f"{client.get_address()}|{run.submission_id}"
    if key not in _REPORTS:
        _REPORTS[key] = result_on_cluster(client, plan, run.submission_id, _status(run))
    return _REPORTS[key]


def next_attempt(
    client: Any, spec: JobSpec, ledger: Optional[Callable[[], Optional["Ledger"]]] = None
) -> tuple[int, Optional[Any]]:
    """The attempt of `spec` to submit next, and the spec's job to keep instead (pending, running or succeeded;
    None: submit). From the job table when it holds an attempt of the spec; else from the run ledger
    (`ledger()`), the one count that outlives the head: a head restarted without GCS fault tolerance empties
    the table, and numbering from it would submit `<id>` again beside the watcher's `<id>-r<N+1>`, reset the
    restart count and reuse attempt 1's ledger record. The watcher numbers the same way (`Watcher.step`), so
    both submit one id and Ray keeps one job: the second party adopts it (`submit.submit_attempt`)."""
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
"""How often `submit_gated` looks at a gate it waits for (a gate runs for minutes; tests shorten it)."""


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
) -> tuple[Any, Optional[GateReport]]:
    """`submit.submit` as the run's owner does it: the hook's and the CLI's way to start a run.

    Other specs' unfinished jobs of the stack are stopped; the same spec already pending, running or
    succeeded is returned as is (no gate: it would wait for the job's own GPUs). Otherwise the next
    attempt is cleared by `clear_attempt` (waiting for a gate anyone runs; starting one when due; a
    failed gate from before this call is run again) and submitted. Returns the `SubmitResult` and the
    gate's report (None when no gate ran for it). A gate that had failed before this call is run again
    (the user may have fixed its cause); one running at the call is waited for and is the verdict. Raises
    `gate.GateFailed` under enforce
    before anything is submitted, `submit.WaitTimeout` when no verdict came within `timeout`
    (default: two gate runs' bound). `ledger` reads the run ledger (`workloads.ledger.read_on_head`): the
    attempt number when the job table knows none of the spec (`next_attempt`).
    """
    from workloads import destroy_mark, submit

    destroy_mark.refuse_if_destroying(client, spec.submission_id)  # nothing starts once `pulumi destroy` began

    stopped = submit.stop_other_specs(client, spec)
    attempt, newest = next_attempt(client, spec, ledger)
    if newest is not None:
        return submit.SubmitResult(newest.submission_id, newest.status, created=False, stopped=stopped), None
    target = submit.attempt_id(spec.submission_id, attempt)
    # Runs that had ended before this call are run again when they failed (the user may have fixed the
    # cause); one still running now is the verdict this call waits for. Ids, not times: the Ray head's
    # clock and this machine's need not agree.
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
    """What the run's owner needs besides the `JobSpec`: plain values decided at plan time, shipped to the
    watcher as `run.json` of its ConfigMap (`infra.run_plan.run_plan_for_stack` builds it)."""

    run_id: Optional[str] = None
    """The run the stack's spec is an attempt of (`workloads.job_types.run_id_for`): the ledger is the run's."""
    gate_policy: str = "off"
    gate_plan: Optional[dict] = None
    """`GatePlan.to_dict()`; None: no gate."""
    checkpoint_dir: Optional[str] = None
    """Where the owner reads the run's checkpoints (in the watcher pod: its mount of them); None: not visible."""
    node_count: int = 0
    """GPU nodes an attempt holds (the pool's)."""
    node_hour_usd: Optional[float] = None
    """The plan's price of one GPU node-hour of the first rung (with one rung, the pool's provisioning): an
    attempt whose mix of rungs is not known is priced at it, and so is a node of a rung `rung_node_hour_usd`
    does not price; None: spend not known."""
    rung_node_hour_usd: dict[str, float] = field(default_factory=dict)
    """A capacity ladder's price of one GPU node-hour per rung label ({"spot": ..., "onDemand": ...}, the plan's
    ladder prices): the ledger prices an attempt's nodes of each rung at its rung's price; {}: one rung."""
    node_hour_estimate: Optional[str] = None
    """Why a node-hour price above is an estimate of data/prices.yaml (per rung); None: each was read from its
    cited source. The ledger marks its spend as resting on estimated prices when set."""
    budget_usd: Optional[float] = None
    """`job.budgetUsd`; None: no budget."""
    save_period: Optional[int] = None
    """`checkpointing.save_period` of the job (steps)."""
    step_seconds: Optional[float] = None
    """The plan's estimate of one training step."""
    checkpoint_write_seconds: Optional[float] = None
    """The plan's estimate of writing one checkpoint (`infra.run_plan.checkpoint_write_seconds_for`): a save
    cycle is `save_period` steps plus this write (the budget stop's wait; the `checkpointSave` goodput bucket)."""
    gang_max_wait_minutes: Optional[int] = None
    """`gpuPool.capacity.maxWaitMinutes`: how long the owner waits for the whole gang (`node_count` worker
    pods Running) before an attempt, then says so (`workloads/gang_wait.py`); None: no gang wait (no
    `gpuPool.capacity`: the owner only waits for the pool's GPUs in Ray, without a bound)."""
    gang_on_timeout: str = "keep"
    """What the owner does when the wait is over: `releaseWorkers` (scale the Ray worker group to 0) or `keep`."""
    gang_kept_why: str = KEEP_WHY
    """Why the workers are kept (`gang_on_timeout` keep): the config says so, or the pool is fixed-size."""
    gang_rungs: tuple[tuple[str, str], ...] = ()
    """(node pool, rung) in ladder order: which rung each GPU node pool's nodes are of (`rung_pools`)."""
    gang_default_rung: Optional[str] = None
    """The rung of a GPU node whose pool `gang_rungs` does not name: a one-rung stack's only rung."""
    ray_namespace: Optional[str] = None
    """The namespace of the RayCluster and its pods (`KubeGangView`)."""
    ray_cluster: Optional[str] = None
    """The RayCluster whose worker group is the gang."""
    ray_worker_group: Optional[str] = None
    """Its GPU worker group (`ray.io/group`)."""
    release_workers_after_run: bool = False
    """`recovery.releaseWorkersAfterRun`: the owner scales the worker group to 0 once the run has ended
    (`workloads/recovery/owner_loop.py` `Watcher._release_after_run`)."""
    recovery: dict[str, Any] = field(default_factory=dict)
    """The recovery policy (`workloads.recovery.RecoveryPolicy.to_dict`: check interval, restarts, backoff, the
    pool's GPUs to wait for, `resubmit_missing`); {}: its defaults. Plain values: this module may not import
    the recovery package, which imports it."""

    @property
    def gang_wait(self) -> bool:
        """The owner waits for the gang before each attempt (a bound, and the RayCluster to look at)."""
        return self.gang_max_wait_minutes is not None and bool(self.ray_cluster and self.ray_worker_group)

    @property
    def releases_workers(self) -> bool:
        """The owner releases the workers at the run's end (the setting, and the RayCluster to patch)."""
        return self.release_workers_after_run and bool(
            self.ray_namespace and self.ray_cluster and self.ray_worker_group
        )

    @property
    def gate(self) -> GateSetup:
        return GateSetup.of(self.gate_policy, GatePlan.from_dict(self.gate_plan) if self.gate_plan else None)

    @property
    def save_window_seconds(self) -> Optional[float]:
        """One save cycle in seconds, `save_period` steps and the checkpoint's write: how long a budget stop
        waits for the next checkpoint (a stop at `save_period` steps alone lands in the write it waits for)."""
        if not self.save_period or not self.step_seconds:
            return None
        return self.save_period * self.step_seconds + (self.checkpoint_write_seconds or 0.0)

    def to_dict(self) -> dict[str, Any]:
        import dataclasses

        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "RunPlan":
        import dataclasses

        names = {f.name for f in dataclasses.fields(cls)}
        values = {k: v for k, v in data.items() if k in names}
        if "gang_rungs" in values:  # JSON has lists; pairs in order (a JSON object would be sorted by pool)
            values["gang_rungs"] = tuple((str(pool), str(rung)) for pool, rung in values["gang_rungs"] or ())
        return cls(**values)
