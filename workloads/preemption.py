"""Spot-preemption recovery: resubmit the stack's job when infrastructure, not the job, killed it.

A RayJob with `clusterSelector` refuses `backoffLimit > 0` (FACTS.md "KubeRay"), so resubmission
has to come from outside KubeRay. `watch` is that outside loop; it runs in the cluster (the
`PreemptionWatcher` Deployment of `infra/watcher_deployment.py`) and from a laptop (`python -m workloads watch`).

Resubmitting is safe because a resubmission is the *same* `JobSpec`: same entrypoint, same
`checkpointing.checkpoint_dir` on Lustre, so NeMo-RL loads the highest `step_N` there and resumes
(FACTS.md "NeMo-RL"). Ray never reuses a submission id, so attempt N runs as `<id>-r<N>`
(`submit.attempt_id`); the attempt number and the count of consecutive *automatic* restarts travel in
the job's metadata (`nemo-rl-gke/attempt`, `nemo-rl-gke/auto-restarts`), so a restarted watcher
picks up where the last one stopped.

Classifier (`classify`), applied to a FAILED job, first match wins. It reads what Ray 2.x records in
`JobInfo` (ray/dashboard/modules/job/common.py, job_manager.py, job_supervisor.py of Ray 2.60):
`error_type` (`JobErrorType`), `driver_exit_code`, and `message`, which for a non-zero exit holds the
last 20,000 characters of the driver's log, i.e. the traceback.

1. `error_type` says the job supervisor itself was lost or could not be placed
   (`JOB_SUPERVISOR_ACTOR_DIED`, `..._UNKNOWN_FAILURE`, `..._START_FAILURE`, `..._START_TIMEOUT`,
   `..._UNSCHEDULABLE`): the driver's host went away while the head survived -> preemption-like.
   A job the cluster no longer knows at all (the head restarted and lost its job table) is reported
   as `JOB_LOST` by the watcher -> preemption-like.
2. `error_type` is `RUNTIME_ENV_SETUP_FAILURE` or `JOB_ENTRYPOINT_COMMAND_START_ERROR`: the job could
   not even start; a restart changes nothing -> application.
3. The driver died of a signal: exit code -9/-15 (killed directly) or 137/143 (128+9/15, the shell
   Ray starts the entrypoint with reports its child's signal that way; checked on Ray 2.60) -> preemption-like
   (GKE stops pods of a preempted node with SIGTERM, then SIGKILL).
4. The log tail shows a node was lost: `NodeDiedError`, "node has died", "marked dead", "raylet died",
   `LocalRayletDiedError`, "preempt" -> preemption-like.
5. The log tail shows memory exhaustion (`OutOfMemoryError`, `NODE_OUT_OF_MEMORY`, "out of memory",
   "memory pressure") or an actor whose constructor raised ("error raised in its creation task")
   -> application: the same job would fail the same way.
6. The log tail shows an actor or worker was lost without saying why (`ActorDiedError`,
   `RayActorError`, `ActorUnavailableError`, `WorkerCrashedError`, `OwnerDiedError`,
   `ObjectLostError`, "died unexpectedly", or NCCL seeing its peer vanish: `DistBackendError`,
   "remote process exited") -> preemption-like. On a spot pool a vanished GPU worker is the common
   reason; if it was a crash, the restart cap ends it.
7. Anything else, notably exit code 1 with a plain Python traceback -> application: not restarted.

A STOPPED job was stopped on purpose (`ray job stop`, `python -m workloads stop`, a new spec
replacing it): never restarted. SUCCEEDED is done.

Restarts are capped: when the failed attempt already was the `max_restarts`-th consecutive automatic
restart, the watcher gives up whatever the cause. Between restarts it waits
`backoff_seconds * 2**restarts_so_far` (at most `max_backoff_seconds`) after the failed attempt ended,
which also gives GKE time to bring a replacement spot node.

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
from typing import Any, Callable, Mapping, Optional, TextIO

from workloads.job_spec import META_SPEC_HASH, JobSpec

META_AUTO_RESTARTS = "nemo-rl-gke/auto-restarts"
"""Consecutive automatic restarts up to and including this attempt (absent = a submission by hand)."""
LOST = "JOB_LOST"
"""`error_type` the watcher gives a job it saw before and the cluster no longer knows."""


@dataclass(frozen=True)
class RecoveryPolicy:
    """When to look and how often to restart. `infra.config.RecoveryConfig` holds the stack's values."""

    check_interval_seconds: float = 60.0
    max_restarts: int = 10
    backoff_seconds: float = 120.0
    max_backoff_seconds: float = 1800.0

    def __post_init__(self) -> None:
        if self.check_interval_seconds <= 0 or self.max_restarts < 0 or self.backoff_seconds < 0:
            raise ValueError("check interval must be > 0, max restarts and backoff >= 0")
        if self.max_backoff_seconds < self.backoff_seconds:
            raise ValueError("max backoff must be at least the backoff")

    @classmethod
    def from_config(cls, recovery: Any) -> "RecoveryPolicy":
        """From the stack's `recovery` section (`infra.config.RecoveryConfig`)."""
        return cls(
            check_interval_seconds=float(recovery.check_interval_seconds),
            max_restarts=int(recovery.max_restarts),
            backoff_seconds=float(recovery.backoff_seconds),
            max_backoff_seconds=float(recovery.max_backoff_seconds),
        )

    def backoff(self, restarts_so_far: int) -> float:
        """Seconds to wait after a failure, given how many automatic restarts preceded it."""
        return min(self.backoff_seconds * (2 ** min(restarts_so_far, 62)), self.max_backoff_seconds)

    def cli_args(self) -> list[str]:
        """The `python -m workloads watch` flags that give this policy."""
        return [
            "--check-interval", _num(self.check_interval_seconds),
            "--max-restarts", str(self.max_restarts),
            "--backoff", _num(self.backoff_seconds),
            "--max-backoff", _num(self.max_backoff_seconds),
        ]


def _num(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


class Action(str, Enum):
    WAIT = "wait"
    """Nothing to do now: the job runs, or a resubmission waits for its backoff."""
    RESUBMIT = "resubmit"
    GIVE_UP = "give-up"
    """The job failed and will not be restarted (its own error, or the cap)."""
    DONE = "done"
    """The job succeeded, or was stopped on purpose; nothing to recover."""


class Cause(str, Enum):
    PREEMPTION = "preemption-like"
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

_NODE_LOSS = re.compile(
    r"NodeDiedError|\bnode (?:has |had )?died|marked (?:as )?dead|raylet (?:has |had )?died|LocalRayletDiedError|preempt",
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


def classify(info: Any) -> Verdict:
    """Why a FAILED job failed (see the module docstring for the rules and their order).

    `info` is a Ray `JobInfo`/`JobDetails` or anything with `error_type`, `driver_exit_code` and
    `message` (older Rays lack the first two; they read as None).
    """
    error_type = _value(getattr(info, "error_type", None))
    exit_code = getattr(info, "driver_exit_code", None)
    message = str(getattr(info, "message", None) or "")
    if error_type in INFRA_ERROR_TYPES:
        return Verdict(Cause.PREEMPTION, f"Ray reports {error_type}")
    if error_type in APPLICATION_ERROR_TYPES:
        return Verdict(Cause.APPLICATION, f"Ray reports {error_type}")
    if exit_code in SIGNAL_EXIT_CODES:
        return Verdict(Cause.PREEMPTION, f"the driver was killed by {SIGNAL_EXIT_CODES[exit_code]} (exit code {exit_code})")
    for pattern, cause in ((_NODE_LOSS, Cause.PREEMPTION), (_OWN_FAULT, Cause.APPLICATION), (_ACTOR_LOSS, Cause.PREEMPTION)):
        found = pattern.search(message)
        if found:
            return Verdict(cause, f"the log says {found.group(0)!r}")
    code = f"exit code {exit_code}" if exit_code is not None else "no exit code"
    return Verdict(Cause.APPLICATION, f"{code}, no sign of a lost node")


def decide(info: Any, attempt: int, policy: RecoveryPolicy, now: float, *, restarts: Optional[int] = None) -> Decision:
    """What to do about the newest attempt of the watched spec.

    Args:
        info: that attempt's `JobInfo`/`JobDetails` (status, message, error_type, driver_exit_code,
            end_time in ms), or None when the cluster has no job of the spec.
        attempt: its attempt number (1 = first submission); 0 with `info` None.
        policy: the recovery policy.
        now: the current time, epoch seconds.
        restarts: consecutive automatic restarts that led to this attempt; default `attempt - 1`.
    """
    if info is None:
        return Decision(Action.WAIT, "no job of this spec on the cluster yet")
    status = _value(info.status)
    if status in ("PENDING", "RUNNING"):
        return Decision(Action.WAIT, f"attempt {attempt} is {status.lower()}")
    if status == "SUCCEEDED":
        return Decision(Action.DONE, f"attempt {attempt} succeeded")
    if status == "STOPPED":
        return Decision(Action.DONE, f"attempt {attempt} was stopped on purpose; a stopped job is not restarted")
    verdict = classify(info)
    if verdict.cause is Cause.APPLICATION:
        return Decision(Action.GIVE_UP, f"attempt {attempt} failed on its own ({verdict.evidence}); not restarted", verdict.cause)
    done = max(attempt - 1, 0) if restarts is None else restarts
    if done >= policy.max_restarts:
        return Decision(
            Action.GIVE_UP,
            f"attempt {attempt} failed, {verdict.cause.value} ({verdict.evidence}), after {done} automatic restart(s); "
            f"the maximum is {policy.max_restarts}",
            verdict.cause,
        )
    # When the attempt ended (ms); without an end time (older Ray), when it started: never "now",
    # which would push the resubmission back on every look.
    ended_ms = getattr(info, "end_time", None) or getattr(info, "start_time", None) or 0
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
    )


# ------------------------------------------------------------------------------------ the loop


@dataclass(frozen=True)
class LostJob:
    """What the watcher reports for an attempt the cluster forgot (a restarted head without GCS FT)."""

    submission_id: str
    end_time: int
    status: str = "FAILED"
    error_type: str = LOST
    driver_exit_code: Optional[int] = None

    @property
    def message(self) -> str:
        return f"the cluster no longer knows job {self.submission_id} (the Ray head restarted?)"


@dataclass
class _Seen:
    submission_id: str
    attempt: int
    restarts: int
    lost_since: Optional[float] = None


class Watcher:
    """One watched spec. `step()` looks once, acts if needed, and returns the decision."""

    def __init__(self, client: Any, spec: JobSpec, policy: RecoveryPolicy, *, clock: Callable[[], float] = time.time):
        self.client, self.spec, self.policy, self.clock = client, spec, policy, clock
        self.seen: Optional[_Seen] = None
        self.resubmitted: list[str] = []

    def step(self) -> Decision:
        from workloads import submit

        now = self.clock()
        jobs = submit.list_jobs(self.client, self.spec.stack)
        mine = [j for j in jobs if (j.metadata or {}).get(META_SPEC_HASH) == self.spec.spec_hash]
        if mine:
            newest = max(mine, key=lambda j: (submit.attempt_of(j), j.start_time or 0))
            newer = [j for j in jobs if j not in mine and (j.start_time or 0) > (newest.start_time or 0)]
            if newer:
                return Decision(Action.DONE, f"superseded by {newer[-1].submission_id} (another spec of stack {self.spec.stack})")
            attempt = submit.attempt_of(newest)
            restarts = submit.metadata_int(newest, META_AUTO_RESTARTS, 0)
            self.seen = _Seen(newest.submission_id, attempt, restarts)
            info: Any = newest
        elif self.seen is not None:
            if self.seen.lost_since is None:
                self.seen.lost_since = now
            attempt, restarts = self.seen.attempt, self.seen.restarts
            info = LostJob(self.seen.submission_id, end_time=int(self.seen.lost_since * 1000))
        else:
            return decide(None, 0, self.policy, now)
        decision = decide(info, attempt, self.policy, now, restarts=restarts)
        if decision.action is Action.RESUBMIT:
            job_id = self.resubmit(decision.next_attempt, restarts + 1)
            decision = dataclasses.replace(decision, reason=f"{decision.reason}: resubmitted as {job_id}")
        return decision

    def resubmit(self, attempt: int, restarts: int) -> str:
        """Submit attempt `attempt` of the spec (same entrypoint, runtime env and checkpoint dir)."""
        from workloads import submit

        # Not created when someone (a user, another watcher) submitted this very attempt first: that is the job.
        job_id, _ = submit.submit_attempt(self.client, self.spec, attempt, {META_AUTO_RESTARTS: str(restarts)})
        self.resubmitted.append(job_id)
        self.seen = _Seen(job_id, attempt, restarts)
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
    until: Optional[Callable[[Decision], bool]] = None,
) -> Decision:
    """Check the spec's job every `policy.check_interval_seconds` and resubmit it after a preemption.

    Runs until `until(decision)` is true (forever by default: a Deployment's pod must not exit), or
    once with `once`. A dashboard that does not answer (the head restarting) is reported and retried,
    not fatal. A line is written to `out` whenever the decision changes; `heartbeat` is touched after
    every look (the pod's liveness probe reads its age). Returns the last decision.
    """
    from workloads import submit

    watcher = Watcher(client, spec, policy, clock=clock)
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
