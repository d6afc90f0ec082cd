"""The release of the GPU workers when a run has ended, and again whenever they come back with no attempt to need
them: the run owner's half of the worker group's one writer (workloads/worker_group.py asks, this gives back).
A function of the owner (`owner_loop.Watcher`, typed `Any`: import-linter refuses a cycle with `owner_loop`).
"""

from __future__ import annotations

from typing import Any

from workloads import worker_group
from workloads.recovery.classify import FINAL, Decision, value_of


def release_after_run(w: Any, jobs: list[Any], newest: Any, decision: Decision, now: float) -> None:
    """Once the run has ended for good and no job of the stack is active, scale the workers to 0; on every later
    look, release them again when they came back with no attempt to need them (a hand edit, a submitter that
    asked and died), unless a live claim holds them (workloads/worker_group.py). One read of the RayCluster a
    look; a failed release is tried again next look."""
    record = w.ledger.find(newest.submission_id)
    if w.release is None or decision.action not in FINAL or record is None or record.end is None:
        w._workers_back_since = None
        return
    if any(value_of(j.status) in ("PENDING", "RUNNING") for j in jobs):
        w._workers_back_since = None
        return
    from workloads.gang_wait import VIEW_ERRORS

    try:
        group = w.release.group()
        if record.released is not None and group.replicas == 0:
            w._workers_back_since = None  # released stays released
            return
        if record.released is not None and w._workers_back_since is None:
            # They came back after the previous look (which saw none), or at this one.
            w._workers_back_since = w._previous_look if w._previous_look is not None else now
        if worker_group.claim_after(group, record.end, now):
            return  # someone asked for them since the run ended and waits for them: theirs until it lapses
        done = w.release.release()
    except VIEW_ERRORS as err:
        w._note(f"run ended ({record.cause}); releasing its workers failed ({err}): trying again next look")
        return
    if record.released is None:
        # `now` was read before this look listed the jobs, and Ray stamps `end` on its own clock: a run that
        # ended during the look would otherwise be released before it ended.
        record.released = max(now, record.end)
        w._note(
            f"run ended ({record.cause}): workers released ({done}); GKE removes the GPU nodes after its "
            "scale-down delay, and the next attempt (`pulumi up` with a changed job, `python -m jobctl submit`) "
            "asks for them again",
            event=True,
        )
    else:
        since = min(w._workers_back_since or now, now)
        record.restored.append([since, now])
        w._note(
            f"{group.replicas} Ray worker(s) came back after the run's release with no attempt to run (a hand edit "
            f"or a submitter that asked for them and stopped): released again ({done})",
            event=True,
        )
    w._workers_back_since = None
    w._save_ledger()
