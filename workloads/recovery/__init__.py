"""Spot-preemption recovery (docs/preemption-recovery.md); the in-cluster command is `workloads/watcher.py`."""

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
