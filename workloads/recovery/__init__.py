"""Spot-preemption recovery: resubmit the stack's job when infrastructure, not the job, killed it.

One module per job: the policy (`policy.py`), why an attempt failed and what to do about it
(`classify.py`), what the watcher saw across restarts (`state_file.py`) and the run owner's loop
(`owner_loop.py`: `Watcher`, `watch`). The in-cluster command is `workloads/watcher.py`.
"""

from workloads.recovery.classify import (
    CAPACITY_WAIT_LIMIT,
    LOST,
    NODE_DEATH_SLACK_MS,
    Action,
    Cause,
    Decision,
    RayNode,
    Verdict,
    alive_gpus,
    classify,
    decide,
    error_type_of,
    gpu_nodes_lost_during,
)
from workloads.recovery.owner_loop import META_AUTO_RESTARTS, META_CAPACITY_WAITS, Watcher, touch, watch
from workloads.recovery.policy import RecoveryPolicy
from workloads.recovery.state_file import LostJob, Seen, StateFile

__all__ = [
    "CAPACITY_WAIT_LIMIT",
    "LOST",
    "META_AUTO_RESTARTS",
    "META_CAPACITY_WAITS",
    "NODE_DEATH_SLACK_MS",
    "Action",
    "Cause",
    "Decision",
    "LostJob",
    "RayNode",
    "RecoveryPolicy",
    "Seen",
    "StateFile",
    "Verdict",
    "Watcher",
    "alive_gpus",
    "classify",
    "decide",
    "error_type_of",
    "gpu_nodes_lost_during",
    "touch",
    "watch",
]
