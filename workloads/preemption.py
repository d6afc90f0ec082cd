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

On Ray 2.46 (the NeMo-RL v0.4.0 image) the server sets no `error_type`; the message its job manager
writes stands for one instead (`RAY_246_MESSAGES`, `error_type_of`), so rules 1 and 2 hold there too.

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
5. The driver died of a signal (exit code -9/-15 killed directly, or 137/143 = 128+9/15, the way the
   shell Ray starts the entrypoint with reports its child's signal; checked on Ray 2.60). The driver
   runs on the Ray head, on the on-demand CPU pool, never on a spot GPU node: SIGKILL (-9/137) there is
   the out-of-memory kill of the head container -> application (raise `ray.headMemoryGib`); SIGTERM
   (-15/143) is the head pod being stopped (a drain of its node) -> preemption-like.
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
before fails in NeMo-RL's placement wait): the resubmission happens when the pool is back. With
`gpuPool.capacity` it first waits for the whole gang of Ray worker pods, at most
`capacity.maxWaitMinutes`, then says so in one line and releases the workers or keeps them
(`Watcher._gang_held`, workloads/gang_wait.py).

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

This module imports only `workloads` modules (`job_spec`, `submit`: Ray's job SDK, no Pulumi; the gate, the
ledger, the checkpoints and the gang wait lazily), so it runs in the Ray image: the watcher pod ships the
`workloads` package in a ConfigMap.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import os
import re
import time
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, Optional, Sequence, TextIO

from workloads import cli_args
from workloads.job_spec import META_SPEC_HASH, JobSpec

if TYPE_CHECKING:
    from workloads.gang_wait import GangView
    from workloads.ledger import Attempt, Ledger, LedgerFile
    from workloads.run_owner import GateSetup, RunPlan

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
            "--check-interval",
            _num(self.check_interval_seconds),
            "--max-restarts",
            str(self.max_restarts),
            "--backoff",
            _num(self.backoff_seconds),
            "--max-backoff",
            _num(self.max_backoff_seconds),
            "--pool-gpus",
            str(self.pool_gpus),
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
HEAD_OOM_EXIT_CODES = frozenset({-9, 137})
"""The driver runs on the Ray head (KubeRay's head pod on the on-demand CPU pool: Ray's job manager
places the supervisor on the head unless RAY_JOB_ALLOW_DRIVER_ON_WORKER_NODES, ray/dashboard/modules/job/
job_manager.py), which no spot preemption takes: a SIGKILLed driver is the kernel's out-of-memory kill
of the head container's memory cgroup. Restarting gives the same kill; raising ray.headMemoryGib does not."""

# Ray 2.46 (the NeMo-RL v0.4.0 image) sets no `error_type`: the job manager says what happened in the
# message only. Each prefix is the start of one f-string of ray/dashboard/modules/job/job_manager.py at
# ray-2.46.0 (lines 174, 234, 261, 274, 285, 572), with the error type later Rays give the same case;
# the recorded messages are tests/reference/ray-2.46.0/job_failure_messages.json. Matched only at the
# start of a message with no driver exit code, never in a driver's log tail.
RAY_246_MESSAGES: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"Job supervisor actor failed to start within "), "JOB_SUPERVISOR_ACTOR_START_TIMEOUT"),
    (re.compile(r"Unexpected error occurred: failed to get job supervisor\."), "JOB_SUPERVISOR_ACTOR_START_FAILURE"),
    (re.compile(r"runtime_env setup failed: "), "RUNTIME_ENV_SETUP_FAILURE"),
    (re.compile(r"Job supervisor actor could not be scheduled: "), "JOB_SUPERVISOR_ACTOR_UNSCHEDULABLE"),
    (re.compile(r"Failed to start supervisor actor "), "JOB_SUPERVISOR_ACTOR_START_FAILURE"),
    # Ray 2.46 reports the supervisor's ActorDiedError here too (later Rays split it off: line 305 at 2.60).
    (re.compile(r"Unexpected error occurred: The actor died"), "JOB_SUPERVISOR_ACTOR_DIED"),
    (re.compile(r"Unexpected error occurred: "), "JOB_SUPERVISOR_ACTOR_UNKNOWN_FAILURE"),
)


def error_type_of(info: Any) -> Optional[str]:
    """Ray's `error_type`, or on a Ray that sets none (2.46) the type its job manager's message stands for."""
    error_type = _value(getattr(info, "error_type", None))
    if error_type is not None or getattr(info, "driver_exit_code", None) is not None:
        return error_type
    message = str(getattr(info, "message", None) or "")
    return next((kind for pattern, kind in RAY_246_MESSAGES if pattern.match(message)), None)


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
        n
        for n in nodes
        if not n.alive and n.gpus > 0 and n.end_ms is not None and start <= n.end_ms <= end + NODE_DEATH_SLACK_MS
    ]


def classify(info: Any, nodes: Sequence[RayNode] = ()) -> Verdict:
    """Why a FAILED job failed (see the module docstring for the rules and their order).

    `info` is a Ray `JobInfo`/`JobDetails` or anything with `error_type`, `driver_exit_code` and
    `message` (older Rays lack the first two; they read as None); `nodes` is Ray's node table.
    """
    error_type = error_type_of(info)
    exit_code = getattr(info, "driver_exit_code", None)
    message = str(getattr(info, "message", None) or "")
    said = "Ray reports" if _value(getattr(info, "error_type", None)) else "Ray's message stands for"
    if error_type in INFRA_ERROR_TYPES:
        return Verdict(Cause.PREEMPTION, f"{said} {error_type}")
    if error_type in APPLICATION_ERROR_TYPES:
        return Verdict(Cause.APPLICATION, f"{said} {error_type}")
    lost = gpu_nodes_lost_during(info, nodes)
    if lost:
        node = lost[0]
        why = f": {node.message}" if node.message else ""
        return Verdict(Cause.PREEMPTION, f"Ray lost GPU node {node.ip or node.node_id[:12]} during the attempt{why}")
    found = _CAPACITY.search(message)
    if found:
        return Verdict(Cause.CAPACITY, f"NeMo-RL gave up waiting for GPUs ({found.group(0)!r})")
    if exit_code in HEAD_OOM_EXIT_CODES:
        return Verdict(
            Cause.APPLICATION,
            f"the driver on the Ray head was killed by SIGKILL (exit code {exit_code}): an out-of-memory kill on the "
            "head, which no preemption takes; raise ray.headMemoryGib",
        )
    if exit_code in SIGNAL_EXIT_CODES:
        return Verdict(
            Cause.PREEMPTION,
            f"the driver was killed by {SIGNAL_EXIT_CODES[exit_code]} (exit code {exit_code}): its pod was stopped",
        )
    for pattern, cause in (
        (_NODE_LOSS, Cause.PREEMPTION),
        (_OWN_FAULT, Cause.APPLICATION),
        (_ACTOR_LOSS, Cause.PREEMPTION),
    ):
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
        return Decision(
            Action.GIVE_UP, f"attempt {attempt} failed on its own ({verdict.evidence}); not restarted", verdict.cause
        )
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
        what = (
            f"attempt {attempt} failed waiting for GPUs ({verdict.evidence}); resubmitted when the GPUs are "
            "back, not counted as a restart"
        )
        if now < due:
            return Decision(Action.WAIT, f"{what}, in {due - now:.0f}s", verdict.cause, not_before=due)
        return Decision(
            Action.RESUBMIT,
            what,
            verdict.cause,
            next_attempt=attempt + 1,
            restarts=done,
            capacity_waits=capacity_waits + 1,
        )
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
        f"attempt {attempt} failed, {verdict.cause.value} ({verdict.evidence}); restart {done + 1} of "
        f"{policy.max_restarts}",
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
        gate: Optional["GateSetup"] = None,
        run: Optional["RunPlan"] = None,
        ledger: Optional["LedgerFile"] = None,
        gang: Optional["GangView"] = None,
    ):
        from workloads.run_owner import RunPlan

        self.client, self.spec, self.policy, self.clock, self.state = client, spec, policy, clock, state
        self.run = run if run is not None else RunPlan()
        self.gate = gate if gate is not None else self.run.gate
        self.seen: Optional[Seen] = state.load(spec.spec_hash) if state is not None else None
        self.resubmitted: list[str] = []
        self.ledger_file = ledger
        self.ledger = self._load_ledger()
        self.notes: list[str] = []
        """Lines for the watcher's log besides the decision (attempts ended, budget); `watch` prints them."""
        self.gang = gang
        """The worker pods and nodes of the gang wait (`workloads.gang_wait.KubeGangView` in the cluster);
        None: no gang wait (the stack has no `gpuPool.capacity`, or the watcher runs outside the cluster)."""

    def _load_ledger(self) -> "Ledger":
        from workloads.ledger import Ledger

        if self.ledger_file is not None:
            ledger = self.ledger_file.load(self.spec.stack, self.spec.submission_id)
        else:
            ledger = Ledger(self.spec.stack, self.spec.submission_id)
        ledger.node_hour_usd, ledger.budget_usd = self.run.node_hour_usd, self.run.budget_usd
        ledger.rung_node_hour_usd = dict(self.run.rung_node_hour_usd)
        return ledger

    def _save_ledger(self) -> None:
        if self.ledger_file is not None:
            self.ledger_file.save(self.ledger)

    def _note(self, line: str, event: bool = False) -> None:
        self.notes.append(line)
        if event:
            self._event(line)

    def _event(self, line: str) -> None:
        """Record `line` in the ledger's events (shown by `status`) without saying it again in the log."""
        self.ledger.events.append(f"{time.strftime('%Y-%m-%d %H:%M', time.gmtime(self.clock()))} {line}")

    def _remember(self, seen: Seen) -> None:
        changed = self.seen is None or seen.to_json() != self.seen.to_json()
        self.seen = seen
        if changed and self.state is not None:
            self.state.save(seen)

    def _node_rows(self) -> list[dict[str, Any]]:
        """Ray's node table (`submit.ray_nodes`); the tests fake a preemption here."""
        from workloads import submit

        return submit.ray_nodes(self.client)

    def _nodes(self) -> list[RayNode]:
        return [RayNode.from_row(row) for row in self._node_rows()]

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
                return Decision(
                    Action.DONE, f"superseded by {newer[-1].submission_id} (another spec of stack {self.spec.stack})"
                )
            attempt = submit.attempt_of(newest)
            restarts = submit.metadata_int(newest, META_AUTO_RESTARTS, 0)
            capacity_waits = submit.metadata_int(newest, META_CAPACITY_WAITS, 0)
            if _value(newest.status) == "FAILED":
                try:
                    nodes = self._nodes()
                except submit.JobError:  # no node evidence then; the log rules still apply
                    nodes = []
            info: Any = newest
            decision = decide(
                info, attempt, self.policy, now, restarts=restarts, capacity_waits=capacity_waits, nodes=nodes
            )
            budget = self._account(newest, attempt, decision, now)
            if budget is not None:
                decision = budget
            self._remember(
                Seen(
                    self.spec.spec_hash,
                    newest.submission_id,
                    attempt,
                    restarts,
                    capacity_waits,
                    status=str(_value(newest.status)),
                    final=decision.action in _FINAL,
                )
            )
        elif any(_value(j.status) in ("PENDING", "RUNNING") for j in jobs):
            # No job of this spec, but the stack runs another one (a `submit` by hand, a deploy in
            # progress): submitting ours too would fight it for the GPUs.
            running = next(j for j in jobs if _value(j.status) in ("PENDING", "RUNNING"))
            return Decision(
                Action.WAIT,
                f"no job of this spec; {running.submission_id} (another spec of stack {self.spec.stack}) runs",
            )
        elif self.seen is not None and self.seen.final:
            return Decision(
                Action.DONE,
                f"{self.seen.submission_id} had ended ({self.seen.status.lower() or 'given up'}) before the cluster "
                "forgot it; nothing to recover",
            )
        elif self.seen is not None:
            if self.seen.lost_since is None:
                self.seen.lost_since = now
            attempt, restarts = self.seen.attempt, self.seen.restarts
            info = LostJob(self.seen.submission_id, end_time=int(self.seen.lost_since * 1000))
            decision = decide(info, attempt, self.policy, now, restarts=restarts)
            self._account(info, attempt, decision, now)
        else:
            decision = decide(None, 0, self.policy, now)
        if decision.action is Action.RESUBMIT:
            decision = self._resubmit(decision)
        return decision

    # ---------------------------------------------------------------- checkpoints, ledger, budget

    def _latest_checkpoint(self) -> Optional[int]:
        from workloads import checkpoints

        return checkpoints.scan(self.run.checkpoint_dir).latest if self.run.checkpoint_dir else None

    def _account(self, job: Any, attempt: int, decision: Decision, now: float) -> Optional[Decision]:
        """Keep the ledger's record of `job` (the newest attempt) current; the budget's decision, if any."""
        from workloads.ledger import Attempt

        record = self.ledger.find(job.submission_id)
        if record is None:  # submitted by the deploy or by hand: first seen now
            start = (getattr(job, "start_time", None) or now * 1000) / 1000
            record = Attempt(
                attempt,
                job.submission_id,
                start,
                self.run.node_count,
                resume_step=self._latest_checkpoint() or 0,
                rungs=self._gang_mix(job.submission_id),
            )
            self.ledger.attempts.append(record)
            self._save_ledger()
        status = _value(job.status)
        if status in ("PENDING", "RUNNING"):
            return self._budget(job, record, now) if status == "RUNNING" else None
        if record.end is None:
            self._finish(job, record, decision, now)
        return None

    def _finish(self, job: Any, record: "Attempt", decision: Decision, now: float) -> None:
        from workloads import checkpoints, submit

        status = _value(job.status)
        record.end = (getattr(job, "end_time", None) or now * 1000) / 1000
        if status == "SUCCEEDED":
            record.cause = "succeeded"
        elif status == "STOPPED":
            record.cause = "budget" if self.ledger.stop_requested_at is not None else "stopped"
        else:
            record.cause = decision.cause.value if decision.cause is not None else "failed"
        record.saved_step = self._latest_checkpoint()
        text = str(getattr(job, "message", "") or "")
        last = checkpoints.last_started_step(text)
        if last is None and not isinstance(job, LostJob):
            try:  # the message holds only the log's tail; the whole log is read once, here
                last = checkpoints.last_started_step("".join(submit.logs(self.client, job.submission_id)))
            except submit.JobError:
                last = None
        record.last_step = last
        if status == "SUCCEEDED":
            record.steps_lost = 0
        elif record.saved_step is not None:
            record.steps_lost = checkpoints.steps_lost(last, max(record.saved_step, record.resume_step))
        spend = self.ledger.attempt_spend(record, now)
        lost = "steps lost not known" if record.steps_lost is None else f"{record.steps_lost} step(s) lost"
        saved = (
            "no checkpoint visible"
            if record.saved_step is None
            else f"last complete checkpoint step_{record.saved_step}"
        )
        ran = "" if last is None else f", was in step {last}"
        self._note(
            f"attempt {record.attempt} ({record.submission_id}) ended: {record.cause}{ran}; resumed from step "
            f"{record.resume_step}, {saved}: {lost}; {record.node_hours(now):.2f} node-hours"
            + ("" if spend is None else f", ${spend:,.2f}"),
            event=True,
        )
        self._save_ledger()
        # One JSON line per ended attempt: Cloud Logging parses it into jsonPayload, and the dashboard's
        # log-based metrics count it and extract its numbers (infra/observability.py). The money comes
        # from the ledger, as `status` prints it: this attempt's spend and $ per step, and the run's spend
        # so far (the sum over its attempts, which the dashboard charts: Monitoring cannot sum the values
        # of a distribution itself).
        per_step, run_spend = self.ledger.usd_per_step(record, now), self.ledger.spend(now)
        self.notes.append(
            json.dumps(
                {
                    "nemoRlGke": "attempt-ended",
                    "stack": self.spec.stack,
                    "attempt": record.attempt,
                    "submissionId": record.submission_id,
                    "cause": record.cause,
                    "resumeStep": record.resume_step,
                    "savedStep": record.saved_step,
                    "stepsDone": record.steps_done,
                    "stepsLost": record.steps_lost,
                    "nodeHours": round(record.node_hours(now), 4),
                    "spendUsd": None if spend is None else round(spend, 2),
                    "usdPerStep": None if per_step is None else round(per_step, 4),
                    "runSpendUsd": None if run_spend is None else round(run_spend, 2),
                },
                sort_keys=True,
            )
        )

    def _budget(self, job: Any, record: "Attempt", now: float) -> Optional[Decision]:
        """At 80 % of `job.budgetUsd` warn once; at 100 % stop the run after its next complete checkpoint,
        or at once when none comes within one save period (module `workloads.ledger`)."""
        from workloads import submit
        from workloads.ledger import WARN_FRACTION

        budget, spent = self.ledger.budget_usd, self.ledger.spend(now)
        if budget is None or spent is None:
            return None
        if spent >= WARN_FRACTION * budget and not self.ledger.budget_warned:
            self.ledger.budget_warned = True
            self._note(
                f"budget warning: ${spent:,.2f} spent, {100 * spent / budget:.0f} % of job.budgetUsd ${budget:,.2f}",
                event=True,
            )
            self._save_ledger()
        if spent < budget:
            return None
        latest = self._latest_checkpoint()
        if self.ledger.stop_requested_at is None:
            self.ledger.stop_requested_at, self.ledger.stop_requested_step = now, latest
            window = self.run.save_window_seconds
            self._note(
                f"budget reached: ${spent:,.2f} of job.budgetUsd ${budget:,.2f}; {job.submission_id} is stopped "
                "after its next "
                f"complete checkpoint"
                + (
                    f" (or in {window:.0f} s, one save period, if none comes)"
                    if window
                    else " (no save period known: now)"
                ),
                event=True,
            )
            self._save_ledger()
        window = self.run.save_window_seconds or 0.0
        since = self.ledger.stop_requested_step
        saved = latest is not None and since is not None and latest > since  # 0: no checkpoint yet
        if not saved and now - self.ledger.stop_requested_at < window:
            return Decision(
                Action.WAIT,
                f"budget reached; {job.submission_id} stops after its next complete checkpoint (newer than "
                f"step_{since or 0})",
            )
        with contextlib.suppress(submit.UnknownJob):
            submit.stop(self.client, job.submission_id)
        why = (
            f"after its checkpoint step_{latest}" if saved else "at once: no complete checkpoint within one save period"
        )
        record.note = f"stopped by the budget {why}"
        self._note(f"budget: stopped {job.submission_id} {why} (${spent:,.2f} of ${budget:,.2f})", event=True)
        self._save_ledger()
        return Decision(Action.DONE, f"job.budgetUsd ${budget:,.2f} spent: stopped {job.submission_id} {why}")

    def _resubmit(self, decision: Decision) -> Decision:
        from workloads import run_owner, submit

        if self.ledger.budget_usd is not None and (self.ledger.spend(self.clock()) or 0) >= self.ledger.budget_usd:
            return dataclasses.replace(
                decision,
                action=Action.GIVE_UP,
                reason=f"{decision.reason}: not resubmitted, job.budgetUsd ${self.ledger.budget_usd:,.2f} is spent",
            )
        jobs = submit._guard(self.client.get_address(), self.client.list_jobs)
        busy = run_owner.running_gate(jobs, self.spec.stack)
        if busy is not None:  # whoever runs it (the deploy, a user, this watcher): it holds every GPU
            return dataclasses.replace(
                decision,
                action=Action.WAIT,
                reason=f"{decision.reason}: acceptance gate {busy.submission_id} is running; nothing is submitted "
                "while a gate runs",
            )
        if self.gang is not None and self.run.gang_wait and self.run.node_count > 0:
            held = self._gang_held(decision)
            if held is not None:
                return held
        rows: Optional[list[dict[str, Any]]] = None
        if self.policy.pool_gpus:
            rows = self._node_rows()
            have = alive_gpus(RayNode.from_row(r) for r in rows)
            if have < self.policy.pool_gpus:
                return dataclasses.replace(
                    decision,
                    action=Action.WAIT,
                    reason=f"{decision.reason}: waiting for the GPU pool, {have} of {self.policy.pool_gpus} GPUs "
                    "alive in Ray",
                )
        if self.gate.on:
            # Every attempt, the first and each after a preemption (onto the nodes that replaced the
            # lost ones), gets its own gate; enforce holds it after a failed one (workloads/run_owner.py).
            target = submit.attempt_id(self.spec.submission_id, decision.next_attempt or 1)
            outcome = run_owner.clear_attempt(
                self.client,
                self.spec.stack,
                target,
                self.gate,
                jobs=jobs,
                node_rows=rows if rows is not None else self._node_rows(),
            )
            if outcome.clearance is not run_owner.Clearance.CLEARED:
                return dataclasses.replace(decision, action=Action.WAIT, reason=f"{decision.reason}: {outcome.reason}")
            decision = dataclasses.replace(decision, reason=f"{decision.reason}: {outcome.reason}")
        job_id = self.resubmit(decision.next_attempt, decision.restarts or 0, decision.capacity_waits)
        return dataclasses.replace(decision, reason=f"{decision.reason}: resubmitted as {job_id}")

    def _gang_held(self, decision: Decision) -> Optional[Decision]:
        """One look at the gang before attempt `decision.next_attempt` (workloads/gang_wait.py): None when
        it is whole (its mix goes on the attempt's ledger record), else the decision that holds the attempt.

        The wait is the watcher's own steps, never a sleep: its start is kept in the ledger (`GangWait`), so
        the bound (`gpuPool.capacity.maxWaitMinutes`) holds across the watcher's restarts. On the timeout the
        gang wait's one line is the decision's reason (printed once, as every unchanged decision) and a
        ledger event; with `releaseWorkers` the worker group is scaled to 0 and nothing is submitted for
        this attempt (a submission by hand, after the workers are back, starts it); with `keep` the watcher
        goes on looking without a bound and submits once the gang is whole.
        """
        from workloads import gang_wait, submit
        from workloads.ledger import GANG_COMPLETE, GANG_KEPT, GANG_RELEASED, GANG_WAITING, GangWait

        assert self.gang is not None and self.run.gang_max_wait_minutes is not None
        run, now = self.run, self.clock()
        attempt = decision.next_attempt or 1
        target = submit.attempt_id(self.spec.submission_id, attempt)
        wait = self.ledger.gang
        if wait is None or wait.submission_id != target:
            wait = self.ledger.gang = GangWait(attempt, target, now, run.node_count)
            self._save_ledger()
        if wait.outcome == GANG_RELEASED:
            return dataclasses.replace(
                decision, action=Action.GIVE_UP, reason=f"{decision.reason}: {wait.line}; nothing is submitted"
            )
        bound = 60.0 * run.gang_max_wait_minutes
        try:
            seen = gang_wait.look_at_gang(
                self.gang,
                want=run.node_count,
                rungs=dict(run.gang_rungs),
                waited_s=now - wait.since,
                max_wait_s=math.inf if wait.outcome == GANG_KEPT else bound,
                release=run.gang_on_timeout == "releaseWorkers",
                default_rung=run.gang_default_rung,
                kept_why=run.gang_kept_why,
            )
        except (OSError, ValueError, LookupError, StopIteration) as err:  # the API's errors (urllib's are OSErrors)
            return dataclasses.replace(
                decision, action=Action.WAIT, reason=f"{decision.reason}: cannot look at the gang: {err}"
            )
        changed = (seen.ready, seen.mix) != (wait.ready, wait.mix)
        wait.ready, wait.mix = seen.ready, seen.mix
        if seen.complete:
            if wait.outcome != GANG_COMPLETE:
                wait.outcome, wait.line, changed = GANG_COMPLETE, seen.line, True
                self.notes.append(seen.line)
            if changed:
                self._save_ledger()
            return None
        if wait.outcome == GANG_COMPLETE:  # a node went away before the attempt was submitted: a new wait
            wait.outcome, wait.since, wait.line = GANG_WAITING, now, ""
        if seen.timed_out:
            wait.outcome, wait.line = (GANG_RELEASED if seen.released else GANG_KEPT), seen.line
            self._event(seen.line)
            self._save_ledger()
            if seen.released:
                return dataclasses.replace(
                    decision, action=Action.GIVE_UP, reason=f"{decision.reason}: {seen.line}; nothing is submitted"
                )
            return dataclasses.replace(decision, action=Action.WAIT, reason=f"{decision.reason}: {seen.line}")
        if changed:
            self._save_ledger()
        since = time.strftime("%H:%M UTC", time.gmtime(wait.since))
        bounded = (
            f"past its bound of {run.gang_max_wait_minutes} min, kept ({run.gang_kept_why})"
            if wait.outcome == GANG_KEPT
            else f"for at most {run.gang_max_wait_minutes} min (gpuPool.capacity.maxWaitMinutes)"
        )
        return dataclasses.replace(
            decision, action=Action.WAIT, reason=f"{decision.reason}: {seen.line}, waiting since {since} {bounded}"
        )

    def _gang_mix(self, submission_id: str) -> str:
        """The rungs of the whole gang the watcher saw before `submission_id` ("spot 3, onDemand 5"); "": none."""
        from workloads.ledger import GANG_COMPLETE

        gang = self.ledger.gang
        whole = gang is not None and gang.submission_id == submission_id and gang.outcome == GANG_COMPLETE
        return gang.mix if whole and gang is not None else ""

    def resubmit(self, attempt: int, restarts: int, capacity_waits: int = 0) -> str:
        """Submit attempt `attempt` of the spec (same entrypoint, runtime env and checkpoint dir)."""
        from workloads import submit

        meta = {META_AUTO_RESTARTS: str(restarts)}
        if capacity_waits:
            meta[META_CAPACITY_WAITS] = str(capacity_waits)
        # Not created when someone (a user, another watcher, the deploy) submitted this very attempt first:
        # that is the job.
        from workloads import checkpoints
        from workloads.ledger import Attempt

        cleaned: list[str] = []
        if self.run.checkpoint_dir:
            # No attempt runs now: a `tmp_step_<N>` is a dead run's partial save, which NeMo-RL would
            # reuse with its stale shards (workloads/checkpoints.py).
            cleaned = checkpoints.clean_partial(self.run.checkpoint_dir)
        resume = self._latest_checkpoint()
        job_id, _ = submit.submit_attempt(self.client, self.spec, attempt, meta)
        self.resubmitted.append(job_id)
        if self.ledger.find(job_id) is None:
            self.ledger.attempts.append(
                Attempt(
                    attempt,
                    job_id,
                    self.clock(),
                    self.run.node_count,
                    resume_step=resume or 0,
                    cleaned=cleaned,
                    rungs=self._gang_mix(job_id),
                )
            )
            self._save_ledger()
        if resume is not None:
            start = f"resumes from step_{resume}" if resume else "starts at step 0 (no complete checkpoint)"
            removed = f"; removed the partial save(s) {', '.join(cleaned)}" if cleaned else ""
            self._note(f"attempt {attempt} ({job_id}) {start}{removed}", event=True)
            self._save_ledger()
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
    gate: Optional["GateSetup"] = None,
    run: Optional["RunPlan"] = None,
    gang: Optional["GangView"] = None,
) -> Decision:
    """Check the spec's job every `policy.check_interval_seconds` and resubmit it after a preemption.

        Runs until `until(decision)` is true (forever by default: a Deployment's pod must not exit), or
        once with `once`. A dashboard that does not answer (the head restarting) is reported and retried,
        not fatal. A line is written to `out` whenever the decision changes; `heartbeat` is touched after
        every look (the pod's liveness probe reads its age); `state` keeps what the watcher saw across its
        own restarts (`StateFile`); `gate` is the stack's acceptance gate, run before every attempt
    (`workloads.run_owner`); `gang` the view of the gang wait before every attempt (`Watcher._gang_held`).
    Returns the last decision.
    """
    from workloads import submit
    from workloads.ledger import LedgerFile, ledger_path

    watcher = Watcher(
        client,
        spec,
        policy,
        clock=clock,
        state=StateFile(state) if state is not None else None,
        gate=gate,
        run=run,
        ledger=LedgerFile(ledger_path(state)) if state is not None else None,
        gang=gang,
    )
    last_line = None
    while True:
        try:
            decision = watcher.step()
        except submit.JobError as err:
            decision = Decision(Action.WAIT, f"cannot look at the job: {err}")
        if heartbeat is not None:
            _touch(heartbeat)
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(clock()))
        if out is not None:
            for note in watcher.notes:
                out.write(note + "\n" if note.startswith("{") else f"{stamp} {spec.submission_id} {note}\n")
        watcher.notes.clear()
        line = f"{decision.action.value}: {decision.reason}"
        if out is not None and (line != last_line or decision.action is Action.RESUBMIT):
            out.write(f"{stamp} {spec.submission_id} {line}\n")
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
    # The bounded reader of user-named files: a FIFO or /dev/zero is refused, not waited on or read forever.
    data: Mapping[str, Any] = json.loads(cli_args.read_user_file(path))
    if not isinstance(data, dict):
        raise ValueError("not a JSON object; allowed: the spec.json of the watcher's ConfigMap")
    return JobSpec.from_dict(data)
