"""Spot-preemption recovery: resubmit the stack's job when infrastructure, not the job, killed it.

A RayJob with `clusterSelector` refuses `backoffLimit > 0` (ray-project/kuberay v1.7.0
ray-operator/controllers/ray/utils/validation.go), so resubmission
has to come from outside KubeRay. `watch` is that outside loop; it runs in the cluster (the
`PreemptionWatcher` Deployment of `infra/watcher_deployment.py`) and from a laptop (`python -m jobctl watch`).

Resubmitting is safe because a resubmission is the *same* `JobSpec`: same entrypoint, same
`checkpointing.checkpoint_dir` on Lustre, so NeMo-RL loads the highest `step_N` there and resumes
(NVIDIA-NeMo/RL nemo_rl/utils/checkpoint.py). Ray never reuses a submission id, so attempt N runs as `<id>-r<N>`
(`submit.attempt_id`); the attempt number, the count of consecutive *automatic* restarts and of
consecutive capacity waits travel in the job's metadata (`nemo-rl-gke/attempt`,
`nemo-rl-gke/auto-restarts`, `nemo-rl-gke/capacity-waits`).

Classifier (`classify`), applied to a FAILED job, first match wins. It reads what Ray 2.x records in
`JobInfo` (ray/dashboard/modules/job/common.py, job_manager.py, job_supervisor.py of Ray 2.60):
`error_type` (`JobErrorType`), `driver_exit_code`, and `message`, which for a non-zero exit holds the
last 20,000 characters of the driver's log, i.e. the traceback; and Ray's node table (the dashboard's
state API, `/api/v0/nodes`), which keeps dead nodes with their end time and death message.

1. `error_type` says the job supervisor itself was lost or could not be placed
   (`JOB_SUPERVISOR_ACTOR_DIED`, `..._UNKNOWN_FAILURE`, `..._START_FAILURE`, `..._START_TIMEOUT`,
   `..._UNSCHEDULABLE`): the driver's host went away while the head survived -> preemption-like.
   A job the cluster no longer knows at all (the head restarted and lost its job table) is reported
   as `JOB_LOST` by the watcher -> preemption-like.
2. `error_type` is `RUNTIME_ENV_SETUP_FAILURE` or `JOB_ENTRYPOINT_COMMAND_START_ERROR`: the job could
   not even start; a restart changes nothing -> application.
3. Node evidence: Ray's node table has a GPU node that died while the attempt ran -> preemption-like
   (its death message, e.g. the raylet's "received SIGTERM" or the health check's missed heartbeats,
   is the evidence shown).
4. The log tail ends in NeMo-RL's own capacity wait (nemo_rl/distributed/virtual_cluster.py, v0.4.0 to
   v0.7.0): `ResourceInsufficientError` after NRL_VIRTUAL_CLUSTER_MAX_RETRIES tries of "Not enough GPUs
   available", or "Timed out waiting for placement groups to be ready" (180 s, not retried) ->
   capacity wait: the GPUs were not back yet. Resubmitted once the GPUs are alive in Ray, and NOT
   counted as a restart (at most `CAPACITY_WAIT_LIMIT` in a row).
5. The driver died of a signal: exit code -9/-15 (killed directly) or 137/143 (128+9/15, the shell
   Ray starts the entrypoint with reports its child's signal that way; checked on Ray 2.60) -> preemption-like
   (GKE stops pods of a preempted node with SIGTERM, then SIGKILL).
6. Ray's own reports of a lost node in the log tail: `NodeDiedError`, "node has died", "marked dead",
   "raylet died", `LocalRayletDiedError` -> preemption-like. The word "preempt" is NOT evidence: a
   config dump or a user's print may contain it; what a node did is read from Ray (rule 3).
7. The log tail shows memory exhaustion (`OutOfMemoryError`, `NODE_OUT_OF_MEMORY`, "out of memory",
   "memory pressure") or an actor whose constructor raised ("error raised in its creation task")
   -> application: the same job would fail the same way.
8. The log tail shows an actor or worker was lost without saying why (`ActorDiedError`,
   `RayActorError`, `ActorUnavailableError`, `WorkerCrashedError`, `OwnerDiedError`,
   `ObjectLostError`, "died unexpectedly", or NCCL seeing its peer vanish: `DistBackendError`,
   "remote process exited") -> preemption-like. On a spot pool a vanished GPU worker is the common
   reason; if it was a crash, the restart cap ends it.
9. Anything else, notably exit code 1 with a plain Python traceback -> application: not restarted.

A STOPPED job was stopped on purpose (`ray job stop`, `python -m jobctl stop`, a new spec
replacing it): never restarted. SUCCEEDED is done.

Restarts are capped: when the failed attempt already was the `max_restarts`-th consecutive automatic
restart, the watcher gives up whatever the cause. Between restarts it waits
`backoff_seconds * 2**restarts_so_far` (at most `max_backoff_seconds`) after the failed attempt ended.
Then, before any resubmission, it waits until Ray reports at least `pool_gpus` GPUs on ALIVE nodes
(the GPU pool's; GKE may take many minutes to bring a replacement spot node, and a job submitted
before fails in NeMo-RL's placement wait): the resubmission happens when the pool is back.

A head restarted without GCS fault tolerance forgets every job; a watcher restarted with it (same
node drained, same eviction) forgets what it saw too, unless it kept it: with a state file
(`StateFile`, on Lustre in the cluster) it reloads the last attempt, its counts and whether it had
ended, and a job that was running is then found lost and resubmitted. With `resubmit_missing`
(`job.submit` on: the deploy submits the job, so it should exist) a watcher that finds no job of its
spec at all and nothing recorded submits it too, once the GPUs are alive (the id is deterministic:
if the deploy's own submission wins the race, that is the job). Neither happens while another spec's
job of the stack is pending or running (a submission by hand): two jobs would fight for the GPUs.

Not covered: a job that hangs instead of failing (NeMo-RL's surviving workers blocked in a collective
on a vanished peer until NCCL's timeout) is RUNNING to Ray, so it is only restarted once it fails.

This module imports only `workloads.job_spec` and `workloads.submit` (Ray's job SDK, no Pulumi), so it runs
in the Ray image: the watcher pod ships the `workloads` package in a ConfigMap.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import re
import time
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Optional, Sequence, TextIO

from workloads.job_spec import META_SPEC_HASH, JobSpec

META_AUTO_RESTARTS = "nemo-rl-gke/auto-restarts"
"""Consecutive automatic restarts up to and including this attempt (absent = a submission by hand)."""
META_CAPACITY_WAITS = "nemo-rl-gke/capacity-waits"
"""Consecutive resubmissions after a capacity wait up to and including this attempt (not restarts)."""
CAPACITY_WAIT_LIMIT = 24
"""Capacity waits in a row before giving up: with the GPUs alive in Ray at every resubmission, a job
that still cannot place them is held back by something a resubmission does not fix (another job on
the GPUs, a pool smaller than the recipe). 24 x (NeMo-RL's own wait of about 17 min + the backoff)
is most of a day."""
LOST = "JOB_LOST"
"""`error_type` the watcher gives a job it saw before and the cluster no longer knows."""
NODE_DEATH_SLACK_MS = 120_000
"""A GPU node that died this long before the attempt's end (or after it) still counts as the cause:
Ray marks a vanished node dead only after its health checks time out (about 30 s by default), and
the driver may notice the lost actors first."""


@dataclass(frozen=True)
class RecoveryPolicy:
    """When to look and how often to restart. `infra.config.RecoveryConfig` holds the stack's values."""

    check_interval_seconds: float = 60.0
    max_restarts: int = 10
    backoff_seconds: float = 120.0
    max_backoff_seconds: float = 1800.0
    pool_gpus: int = 0
    """GPUs that must be alive in Ray before a resubmission (the GPU pool's); 0: do not wait."""
    resubmit_missing: bool = False
    """The deploy submits the job (`job.submit`): a spec with no job on the cluster is submitted."""

    def __post_init__(self) -> None:
        if self.check_interval_seconds <= 0 or self.max_restarts < 0 or self.backoff_seconds < 0:
            raise ValueError("check interval must be > 0, max restarts and backoff >= 0")
        if self.max_backoff_seconds < self.backoff_seconds:
            raise ValueError("max backoff must be at least the backoff")
        if self.pool_gpus < 0:
            raise ValueError("pool GPUs must be >= 0")

    @classmethod
    def from_config(cls, recovery: Any, *, pool_gpus: int = 0, resubmit_missing: bool = False) -> "RecoveryPolicy":
        """From the stack's `recovery` section (`infra.config.RecoveryConfig`), the pool's GPUs and `job.submit`."""
        return cls(
            check_interval_seconds=float(recovery.check_interval_seconds),
            max_restarts=int(recovery.max_restarts),
            backoff_seconds=float(recovery.backoff_seconds),
            max_backoff_seconds=float(recovery.max_backoff_seconds),
            pool_gpus=int(pool_gpus),
            resubmit_missing=bool(resubmit_missing),
        )

    def backoff(self, restarts_so_far: int) -> float:
        """Seconds to wait after a failure, given how many automatic restarts preceded it."""
        return min(self.backoff_seconds * (2 ** min(restarts_so_far, 62)), self.max_backoff_seconds)

    def cli_args(self) -> list[str]:
        """The `python -m workloads.watcher` (and `python -m jobctl watch`) flags that give this policy."""
        return [
            "--check-interval", _num(self.check_interval_seconds),
            "--max-restarts", str(self.max_restarts),
            "--backoff", _num(self.backoff_seconds),
            "--max-backoff", _num(self.max_backoff_seconds),
            "--pool-gpus", str(self.pool_gpus),
            *(["--resubmit-missing"] if self.resubmit_missing else []),
        ]


def _num(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


class Action(str, Enum):
    WAIT = "wait"
    """Nothing to do now: the job runs, or a resubmission waits for its backoff or for the GPUs."""
    RESUBMIT = "resubmit"
    GIVE_UP = "give-up"
    """The job failed and will not be restarted (its own error, or the cap)."""
    DONE = "done"
    """The job succeeded, or was stopped on purpose; nothing to recover."""


class Cause(str, Enum):
    PREEMPTION = "preemption-like"
    CAPACITY = "capacity-wait"
    """NeMo-RL gave up waiting for GPUs that were not back yet; not counted as a restart."""
    APPLICATION = "application"


@dataclass(frozen=True)
class Verdict:
    cause: Cause
    evidence: str


@dataclass(frozen=True)
class Decision:
    action: Action
    reason: str
    cause: Optional[Cause] = None
    next_attempt: Optional[int] = None
    """With RESUBMIT: the attempt number to submit."""
    not_before: Optional[float] = None
    """With WAIT during a backoff: when (epoch seconds) the resubmission is due."""
    restarts: Optional[int] = None
    """With RESUBMIT: the consecutive automatic restarts the new attempt carries."""
    capacity_waits: int = 0
    """With RESUBMIT: the consecutive capacity waits the new attempt carries."""


@dataclass(frozen=True)
class RayNode:
    """One row of Ray's node table (the dashboard's `/api/v0/nodes`), as far as recovery needs it."""

    node_id: str
    ip: str
    alive: bool
    gpus: float
    end_ms: Optional[int] = None
    message: str = ""

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> "RayNode":
        return cls(
            node_id=str(row.get("node_id", "")),
            ip=str(row.get("node_ip", "")),
            alive=str(row.get("state", "")).upper() == "ALIVE",
            gpus=float((row.get("resources_total") or {}).get("GPU", 0) or 0),
            end_ms=int(row["end_time_ms"]) if row.get("end_time_ms") else None,
            message=str(row.get("state_message") or ""),
        )


def alive_gpus(nodes: Iterable[RayNode]) -> int:
    """GPUs on ALIVE nodes: what NeMo-RL's placement wait compares with (`ray.cluster_resources()`)."""
    return int(sum(n.gpus for n in nodes if n.alive))


# ------------------------------------------------------------------------------------ classifier

INFRA_ERROR_TYPES = frozenset(
    {
        "JOB_SUPERVISOR_ACTOR_DIED",
        "JOB_SUPERVISOR_ACTOR_UNKNOWN_FAILURE",
        "JOB_SUPERVISOR_ACTOR_START_FAILURE",
        "JOB_SUPERVISOR_ACTOR_START_TIMEOUT",
        "JOB_SUPERVISOR_ACTOR_UNSCHEDULABLE",
        LOST,
    }
)
APPLICATION_ERROR_TYPES = frozenset({"RUNTIME_ENV_SETUP_FAILURE", "JOB_ENTRYPOINT_COMMAND_START_ERROR"})
SIGNAL_EXIT_CODES = {-9: "SIGKILL", -15: "SIGTERM", 137: "SIGKILL", 143: "SIGTERM"}

_CAPACITY = re.compile(r"ResourceInsufficientError|Timed out waiting for placement groups to be ready")
_NODE_LOSS = re.compile(
    r"NodeDiedError|\bnode (?:has |had )?died|marked (?:as )?dead|raylet (?:has |had )?died|LocalRayletDiedError",
    re.IGNORECASE,
)
_OWN_FAULT = re.compile(
    r"OutOfMemoryError|NODE_OUT_OF_MEMORY|out of memory|memory pressure|error raised in its creation task",
    re.IGNORECASE,
)
_ACTOR_LOSS = re.compile(
    r"ActorDiedError|RayActorError|ActorUnavailableError|WorkerCrashedError|OwnerDiedError|ObjectLostError"
    r"|died unexpectedly|DistBackendError|remote process exited",
    re.IGNORECASE,
)


def _value(x: Any) -> Optional[str]:
    if x is None:
        return None
    return str(getattr(x, "value", x))


def gpu_nodes_lost_during(info: Any, nodes: Iterable[RayNode]) -> list[RayNode]:
    """GPU nodes Ray saw die while the attempt ran (from its start to its end, with `NODE_DEATH_SLACK_MS`)."""
    start = getattr(info, "start_time", None)
    end = getattr(info, "end_time", None)
    if not start or not end:
        return []
    return [
        n for n in nodes
        if not n.alive and n.gpus > 0 and n.end_ms is not None and start <= n.end_ms <= end + NODE_DEATH_SLACK_MS
    ]


def classify(info: Any, nodes: Sequence[RayNode] = ()) -> Verdict:
    """Why a FAILED job failed (see the module docstring for the rules and their order).

    `info` is a Ray `JobInfo`/`JobDetails` or anything with `error_type`, `driver_exit_code` and
    `message` (older Rays lack the first two; they read as None); `nodes` is Ray's node table.
    """
    error_type = _value(getattr(info, "error_type", None))
    exit_code = getattr(info, "driver_exit_code", None)
    message = str(getattr(info, "message", None) or "")
    if error_type in INFRA_ERROR_TYPES:
        return Verdict(Cause.PREEMPTION, f"Ray reports {error_type}")
    if error_type in APPLICATION_ERROR_TYPES:
        return Verdict(Cause.APPLICATION, f"Ray reports {error_type}")
    lost = gpu_nodes_lost_during(info, nodes)
    if lost:
        node = lost[0]
        why = f": {node.message}" if node.message else ""
        return Verdict(Cause.PREEMPTION, f"Ray lost GPU node {node.ip or node.node_id[:12]} during the attempt{why}")
    found = _CAPACITY.search(message)
    if found:
        return Verdict(Cause.CAPACITY, f"NeMo-RL gave up waiting for GPUs ({found.group(0)!r})")
    if exit_code in SIGNAL_EXIT_CODES:
        return Verdict(Cause.PREEMPTION, f"the driver was killed by {SIGNAL_EXIT_CODES[exit_code]} (exit code {exit_code})")
    for pattern, cause in ((_NODE_LOSS, Cause.PREEMPTION), (_OWN_FAULT, Cause.APPLICATION), (_ACTOR_LOSS, Cause.PREEMPTION)):
        found = pattern.search(message)
        if found:
            return Verdict(cause, f"the log says {found.group(0)!r}")
    code = f"exit code {exit_code}" if exit_code is not None else "no exit code"
    return Verdict(Cause.APPLICATION, f"{code}, no sign of a lost node")


def decide(
    info: Any,
    attempt: int,
    policy: RecoveryPolicy,
    now: float,
    *,
    restarts: Optional[int] = None,
    capacity_waits: int = 0,
    nodes: Sequence[RayNode] = (),
) -> Decision:
    """What to do about the newest attempt of the watched spec.

    Args:
        info: that attempt's `JobInfo`/`JobDetails` (status, message, error_type, driver_exit_code,
            start_time/end_time in ms), or None when the cluster has no job of the spec.
        attempt: its attempt number (1 = first submission); 0 with `info` None.
        policy: the recovery policy.
        now: the current time, epoch seconds.
        restarts: consecutive automatic restarts that led to this attempt; default `attempt - 1`.
        capacity_waits: consecutive capacity waits that led to this attempt.
        nodes: Ray's node table (node evidence for the classifier).
    """
    if info is None:
        if policy.resubmit_missing:
            return Decision(
                Action.RESUBMIT,
                "the deploy submits this spec (job.submit) but the cluster has no job of it",
                next_attempt=max(attempt, 0) + 1,
                restarts=0,
            )
        return Decision(Action.WAIT, "no job of this spec on the cluster yet")
    status = _value(info.status)
    if status in ("PENDING", "RUNNING"):
        return Decision(Action.WAIT, f"attempt {attempt} is {status.lower()}")
    if status == "SUCCEEDED":
        return Decision(Action.DONE, f"attempt {attempt} succeeded")
    if status == "STOPPED":
        return Decision(Action.DONE, f"attempt {attempt} was stopped on purpose; a stopped job is not restarted")
    verdict = classify(info, nodes)
    if verdict.cause is Cause.APPLICATION:
        return Decision(Action.GIVE_UP, f"attempt {attempt} failed on its own ({verdict.evidence}); not restarted", verdict.cause)
    done = max(attempt - 1, 0) if restarts is None else restarts
    ended_ms = getattr(info, "end_time", None) or getattr(info, "start_time", None) or 0
    if verdict.cause is Cause.CAPACITY:
        if capacity_waits >= CAPACITY_WAIT_LIMIT:
            return Decision(
                Action.GIVE_UP,
                f"attempt {attempt} failed waiting for GPUs ({verdict.evidence}) {capacity_waits + 1} times in a row "
                f"with the GPUs alive in Ray at each resubmission; something else holds them",
                verdict.cause,
            )
        # Not a restart: the count and its doubling backoff stay as they were.
        due = ended_ms / 1000.0 + policy.backoff_seconds
        what = f"attempt {attempt} failed waiting for GPUs ({verdict.evidence}); resubmitted when the GPUs are back, not counted as a restart"
        if now < due:
            return Decision(Action.WAIT, f"{what}, in {due - now:.0f}s", verdict.cause, not_before=due)
        return Decision(Action.RESUBMIT, what, verdict.cause, next_attempt=attempt + 1, restarts=done, capacity_waits=capacity_waits + 1)
    if done >= policy.max_restarts:
        return Decision(
            Action.GIVE_UP,
            f"attempt {attempt} failed, {verdict.cause.value} ({verdict.evidence}), after {done} automatic restart(s); "
            f"the maximum is {policy.max_restarts}",
            verdict.cause,
        )
    # When the attempt ended (ms); without an end time (older Ray), when it started: never "now",
    # which would push the resubmission back on every look.
    due = ended_ms / 1000.0 + policy.backoff(done)
    if now < due:
        return Decision(
            Action.WAIT,
            f"attempt {attempt} failed, {verdict.cause.value} ({verdict.evidence}); restart {done + 1} of "
            f"{policy.max_restarts} in {due - now:.0f}s",
            verdict.cause,
            not_before=due,
        )
    return Decision(
        Action.RESUBMIT,
        f"attempt {attempt} failed, {verdict.cause.value} ({verdict.evidence}); restart {done + 1} of {policy.max_restarts}",
        verdict.cause,
        next_attempt=attempt + 1,
        restarts=done + 1,
    )


# ------------------------------------------------------------------------------------ what the watcher saw


@dataclass(frozen=True)
class LostJob:
    """What the watcher reports for an attempt the cluster forgot (a restarted head without GCS FT)."""

    submission_id: str
    end_time: int
    status: str = "FAILED"
    error_type: str = LOST
    driver_exit_code: Optional[int] = None
    start_time: Optional[int] = None

    @property
    def message(self) -> str:
        return f"the cluster no longer knows job {self.submission_id} (the Ray head restarted?)"


@dataclass
class Seen:
    """The newest attempt the watcher saw, and whether it had ended for good (persisted by `StateFile`)."""

    spec_hash: str
    submission_id: str
    attempt: int
    restarts: int
    capacity_waits: int = 0
    status: str = ""
    final: bool = False
    """It succeeded, was stopped, or the watcher gave up on it: nothing to resubmit if it is gone."""
    lost_since: Optional[float] = None

    def to_json(self) -> str:
        data = dataclasses.asdict(self)
        data.pop("lost_since")
        return json.dumps(data, sort_keys=True)


class StateFile:
    """What the watcher last saw, in a file that outlives the watcher's pod and the Ray head.

    In the cluster it is on Lustre (`<mount>/.nemo-rl-gke/watcher/<stack>.json`): a Ray head restarted
    without GCS fault tolerance forgets its jobs, and a watcher restarted with it (same node drained)
    forgets what it saw, but Lustre keeps both this file and the checkpoints a resubmission resumes
    from, for exactly as long as the stack lives. Written by rename, so a reader never sees half a file.
    """

    def __init__(self, path: str | Path):
        self.path = Path(path)

    def load(self, spec_hash: str) -> Optional[Seen]:
        """The recorded attempt of `spec_hash`, or None (no file, another spec's, or unreadable)."""
        try:
            data = json.loads(self.path.read_text())
            seen = Seen(**{f.name: data[f.name] for f in dataclasses.fields(Seen) if f.name in data})
        except (OSError, ValueError, TypeError):
            return None
        return seen if seen.spec_hash == spec_hash else None

    def save(self, seen: Seen) -> None:
        """Record `seen`; a failed write is ignored (the watcher keeps working from memory)."""
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        with contextlib.suppress(OSError):
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp.write_text(seen.to_json() + "\n")
            os.replace(tmp, self.path)


# ------------------------------------------------------------------------------------ the loop


_FINAL = (Action.DONE, Action.GIVE_UP)


class Watcher:
    """One watched spec. `step()` looks once, acts if needed, and returns the decision."""

    def __init__(
        self,
        client: Any,
        spec: JobSpec,
        policy: RecoveryPolicy,
        *,
        clock: Callable[[], float] = time.time,
        state: Optional[StateFile] = None,
    ):
        self.client, self.spec, self.policy, self.clock, self.state = client, spec, policy, clock, state
        self.seen: Optional[Seen] = state.load(spec.spec_hash) if state is not None else None
        self.resubmitted: list[str] = []

    def _remember(self, seen: Seen) -> None:
        changed = self.seen is None or seen.to_json() != self.seen.to_json()
        self.seen = seen
        if changed and self.state is not None:
            self.state.save(seen)

    def _nodes(self) -> list[RayNode]:
        from workloads import submit

        return [RayNode.from_row(row) for row in submit.ray_nodes(self.client)]

    def step(self) -> Decision:
        from workloads import submit

        now = self.clock()
        jobs = submit.list_jobs(self.client, self.spec.stack)
        mine = [j for j in jobs if (j.metadata or {}).get(META_SPEC_HASH) == self.spec.spec_hash]
        nodes: list[RayNode] = []
        if mine:
            newest = max(mine, key=lambda j: (submit.attempt_of(j), j.start_time or 0))
            newer = [j for j in jobs if j not in mine and (j.start_time or 0) > (newest.start_time or 0)]
            if newer:
                return Decision(Action.DONE, f"superseded by {newer[-1].submission_id} (another spec of stack {self.spec.stack})")
            attempt = submit.attempt_of(newest)
            restarts = submit.metadata_int(newest, META_AUTO_RESTARTS, 0)
            capacity_waits = submit.metadata_int(newest, META_CAPACITY_WAITS, 0)
            if _value(newest.status) == "FAILED":
                try:
                    nodes = self._nodes()
                except submit.JobError:  # no node evidence then; the log rules still apply
                    nodes = []
            info: Any = newest
            decision = decide(info, attempt, self.policy, now, restarts=restarts, capacity_waits=capacity_waits, nodes=nodes)
            self._remember(
                Seen(self.spec.spec_hash, newest.submission_id, attempt, restarts, capacity_waits,
                     status=str(_value(newest.status)), final=decision.action in _FINAL)
            )
        elif any(_value(j.status) in ("PENDING", "RUNNING") for j in jobs):
            # No job of this spec, but the stack runs another one (a `submit` by hand, a deploy in
            # progress): submitting ours too would fight it for the GPUs.
            running = next(j for j in jobs if _value(j.status) in ("PENDING", "RUNNING"))
            return Decision(Action.WAIT, f"no job of this spec; {running.submission_id} (another spec of stack {self.spec.stack}) runs")
        elif self.seen is not None and self.seen.final:
            return Decision(
                Action.DONE,
                f"{self.seen.submission_id} had ended ({self.seen.status.lower() or 'given up'}) before the cluster forgot it; nothing to recover",
            )
        elif self.seen is not None:
            if self.seen.lost_since is None:
                self.seen.lost_since = now
            attempt, restarts = self.seen.attempt, self.seen.restarts
            info = LostJob(self.seen.submission_id, end_time=int(self.seen.lost_since * 1000))
            decision = decide(info, attempt, self.policy, now, restarts=restarts)
        else:
            decision = decide(None, 0, self.policy, now)
        if decision.action is Action.RESUBMIT:
            decision = self._resubmit(decision)
        return decision

    def _resubmit(self, decision: Decision) -> Decision:
        if self.policy.pool_gpus:
            have = alive_gpus(self._nodes())
            if have < self.policy.pool_gpus:
                return dataclasses.replace(
                    decision,
                    action=Action.WAIT,
                    reason=f"{decision.reason}: waiting for the GPU pool, {have} of {self.policy.pool_gpus} GPUs alive in Ray",
                )
        job_id = self.resubmit(decision.next_attempt, decision.restarts or 0, decision.capacity_waits)
        return dataclasses.replace(decision, reason=f"{decision.reason}: resubmitted as {job_id}")

    def resubmit(self, attempt: int, restarts: int, capacity_waits: int = 0) -> str:
        """Submit attempt `attempt` of the spec (same entrypoint, runtime env and checkpoint dir)."""
        from workloads import submit

        meta = {META_AUTO_RESTARTS: str(restarts)}
        if capacity_waits:
            meta[META_CAPACITY_WAITS] = str(capacity_waits)
        # Not created when someone (a user, another watcher, the deploy) submitted this very attempt first: that is the job.
        job_id, _ = submit.submit_attempt(self.client, self.spec, attempt, meta)
        self.resubmitted.append(job_id)
        self._remember(Seen(self.spec.spec_hash, job_id, attempt, restarts, capacity_waits, status="PENDING"))
        return job_id


def watch(
    client: Any,
    spec: JobSpec,
    policy: RecoveryPolicy,
    *,
    clock: Callable[[], float] = time.time,
    sleep: Callable[[float], None] = time.sleep,
    once: bool = False,
    out: Optional[TextIO] = None,
    heartbeat: Optional[Path] = None,
    state: Optional[Path] = None,
    until: Optional[Callable[[Decision], bool]] = None,
) -> Decision:
    """Check the spec's job every `policy.check_interval_seconds` and resubmit it after a preemption.

    Runs until `until(decision)` is true (forever by default: a Deployment's pod must not exit), or
    once with `once`. A dashboard that does not answer (the head restarting) is reported and retried,
    not fatal. A line is written to `out` whenever the decision changes; `heartbeat` is touched after
    every look (the pod's liveness probe reads its age); `state` keeps what the watcher saw across its
    own restarts (`StateFile`). Returns the last decision.
    """
    from workloads import submit

    watcher = Watcher(client, spec, policy, clock=clock, state=StateFile(state) if state is not None else None)
    last_line = None
    while True:
        try:
            decision = watcher.step()
        except submit.JobError as err:
            decision = Decision(Action.WAIT, f"cannot look at the job: {err}")
        if heartbeat is not None:
            _touch(heartbeat)
        line = f"{decision.action.value}: {decision.reason}"
        if out is not None and (line != last_line or decision.action is Action.RESUBMIT):
            out.write(f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime(clock()))} {spec.submission_id} {line}\n")
            out.flush()
        last_line = line
        if once or (until is not None and until(decision)):
            return decision
        sleep(policy.check_interval_seconds)


def _touch(path: Path) -> None:
    with contextlib.suppress(OSError):
        path.touch()
        os.utime(path)


def load_spec_file(path: str | Path) -> JobSpec:
    """A `JobSpec` from the JSON the watcher's ConfigMap holds (`JobSpec.to_dict()`)."""
    data: Mapping[str, Any] = json.loads(Path(path).read_text())
    return JobSpec.from_dict(data)
