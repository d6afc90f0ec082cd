"""Spot-preemption recovery (docs/preemption-recovery.md); the in-cluster command is `workloads/watcher.py`."""

from workloads.recovery.classify import Action, Cause, Decision
from workloads.recovery.owner_loop import Watcher, touch, watch
from workloads.recovery.policy import RecoveryPolicy
from workloads.recovery.state_file import StateFile

__all__ = ["Action", "Cause", "Decision", "RecoveryPolicy", "StateFile", "Watcher", "touch", "watch"]
