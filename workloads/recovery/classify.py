"""Why a FAILED attempt failed, and what the watcher does about it (`classify`, `decide`).

Reads Ray's `JobInfo` (ray/dashboard/modules/job/common.py, job_manager.py, job_supervisor.py of Ray 2.60)
and node table (`/api/v0/nodes`). Rules, first match wins:
1. supervisor lost or unplaceable (`JOB_SUPERVISOR_ACTOR_*`), or `JOB_LOST` -> preemption-like;
2. `RUNTIME_ENV_SETUP_FAILURE` / `JOB_ENTRYPOINT_COMMAND_START_ERROR` -> application;
3. a GPU node died while the attempt ran -> preemption-like;
4. NeMo-RL's capacity wait gave up (nemo_rl/distributed/virtual_cluster.py v0.4.0 to v0.7.0) -> capacity
   wait, not counted as a restart (at most `CAPACITY_WAIT_LIMIT`);
5. driver killed by a signal (checked on Ray 2.60): SIGKILL is the head's OOM kill -> application;
   SIGTERM is the head pod drained -> preemption-like;
6. a lost node in the log -> preemption-like ("preempt" alone is no evidence);
7. memory exhaustion or an actor whose constructor raised -> application;
8. an actor or worker lost without a reason -> preemption-like (the restart cap ends a crash);
9. anything else -> application.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum
from typing import Any, Iterable, Mapping, Optional, Sequence

from workloads.recovery.policy import RecoveryPolicy

CAPACITY_WAIT_LIMIT = 24
"""Capacity waits in a row before giving up: 24 x (NeMo-RL's ~17 min wait + backoff) is most of a day."""
LOST = "JOB_LOST"
"""`error_type` of a job the watcher saw before and the cluster no longer knows."""
NODE_DEATH_SLACK_MS = 120_000
"""How long after the attempt's end a GPU node's death still counts: Ray marks a node dead only after its
health checks time out (~30 s)."""


class Action(str, Enum):
    WAIT = "wait"
    RESUBMIT = "resubmit"
    GIVE_UP = "give-up"
    DONE = "done"


FINAL = (Action.DONE, Action.GIVE_UP)
"""Decisions after which the owner resubmits nothing more of the run."""


class Cause(str, Enum):
    PREEMPTION = "preemption-like"
    CAPACITY = "capacity-wait"
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
    not_before: Optional[float] = None
    """With WAIT during a backoff: when (epoch seconds) the resubmission is due."""
    restarts: Optional[int] = None
    capacity_waits: int = 0


@dataclass(frozen=True)
class RayNode:
    """One row of Ray's node table, as far as recovery needs it."""

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
    """GPUs on ALIVE nodes, as NeMo-RL's placement wait counts them."""
    return int(sum(n.gpus for n in nodes if n.alive))


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
"""The driver runs on the on-demand head (ray/dashboard/modules/job/job_manager.py places it there unless
RAY_JOB_ALLOW_DRIVER_ON_WORKER_NODES): a SIGKILLed driver is the head's OOM kill; raise ray.headMemoryGib."""

# Ray 2.46 (the NeMo-RL v0.4.0 image) sets no `error_type`: each prefix starts one f-string of
# ray/dashboard/modules/job/job_manager.py at ray-2.46.0 (lines 174, 234, 261, 274, 285, 572), recorded in
# tests/reference/ray-2.46.0/job_failure_messages.json; matched only at the start of a message with no exit code.
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
    """Ray's `error_type`, or on Ray 2.46 the type its job manager's message stands for."""
    error_type = value_of(getattr(info, "error_type", None))
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


def value_of(x: Any) -> Optional[str]:
    if x is None:
        return None
    return str(getattr(x, "value", x))


def gpu_nodes_lost_during(info: Any, nodes: Iterable[RayNode]) -> list[RayNode]:
    """GPU nodes that died while the attempt ran (with `NODE_DEATH_SLACK_MS`)."""
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
    """Why a FAILED job failed (the module docstring's rules); `info` is a Ray `JobInfo`/`JobDetails`."""
    error_type = error_type_of(info)
    exit_code = getattr(info, "driver_exit_code", None)
    message = str(getattr(info, "message", None) or "")
    said = "Ray reports" if value_of(getattr(info, "error_type", None)) else "Ray's message stands for"
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
    """What to do about the newest attempt (`info`, None when the cluster has none) of the watched spec;
    `restarts` defaults to `attempt - 1`."""
    if info is None:
        if policy.resubmit_missing:
            return Decision(
                Action.RESUBMIT,
                "the deploy submits this spec (job.submit) but the cluster has no job of it",
                next_attempt=max(attempt, 0) + 1,
                restarts=0,
            )
        return Decision(Action.WAIT, "no job of this spec on the cluster yet")
    status = value_of(info.status)
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
        return _after_capacity_wait(verdict, attempt, policy, now, ended_ms / 1000.0, done, capacity_waits)
    failed = f"attempt {attempt} failed, {verdict.cause.value} ({verdict.evidence})"
    if done >= policy.max_restarts:
        why = f"{failed}, after {done} automatic restart(s); the maximum is {policy.max_restarts}"
        return Decision(Action.GIVE_UP, why, verdict.cause)
    # Without an end time (older Ray), from its start: never "now", which would push it back on every look.
    due = ended_ms / 1000.0 + policy.backoff(done)
    restart = f"{failed}; restart {done + 1} of {policy.max_restarts}"
    if now < due:
        return Decision(Action.WAIT, f"{restart} in {due - now:.0f}s", verdict.cause, not_before=due)
    return Decision(Action.RESUBMIT, restart, verdict.cause, next_attempt=attempt + 1, restarts=done + 1)


def _after_capacity_wait(
    verdict: Verdict, attempt: int, policy: RecoveryPolicy, now: float, ended: float, done: int, capacity_waits: int
) -> Decision:
    """`decide` for a capacity wait: not counted as a restart, at most `CAPACITY_WAIT_LIMIT` in a row."""
    if capacity_waits >= CAPACITY_WAIT_LIMIT:
        return Decision(
            Action.GIVE_UP,
            f"attempt {attempt} failed waiting for GPUs ({verdict.evidence}) {capacity_waits + 1} times in a row "
            f"with the GPUs alive in Ray at each resubmission; something else holds them",
            verdict.cause,
        )
    due = ended + policy.backoff_seconds
    what = (
        f"attempt {attempt} failed waiting for GPUs ({verdict.evidence}); resubmitted when the GPUs are "
        "back, not counted as a restart"
    )
    if now < due:
        return Decision(Action.WAIT, f"{what}, in {due - now:.0f}s", verdict.cause, not_before=due)
    return Decision(
        Action.RESUBMIT, what, verdict.cause, next_attempt=attempt + 1, restarts=done, capacity_waits=capacity_waits + 1
    )
