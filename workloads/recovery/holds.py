"""What holds a due resubmission back: one function per hold, looked at in order (`HOLDS`); the first that
returns another action than RESUBMIT wins. The order and each hold's reason: docs/preemption-recovery.md.
The watcher is typed `Any`: import-linter refuses a cycle with `owner_loop`.
"""

from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from workloads.recovery.classify import Action, Decision, RayNode, alive_gpus


@dataclass
class Look:
    """The cluster's job list and node table, each read at most once per resubmission."""

    watcher: Any
    _jobs: Optional[list[Any]] = field(default=None, repr=False)
    rows: Optional[list[dict[str, Any]]] = None

    def jobs(self) -> list[Any]:
        from workloads import submit

        if self._jobs is None:
            client = self.watcher.client
            self._jobs = submit.all_jobs(client)
        return self._jobs

    def node_rows(self) -> list[dict[str, Any]]:
        if self.rows is None:
            self.rows = self.watcher._node_rows()
        return self.rows


def _held(decision: Decision, action: Action, why: str) -> Decision:
    return dataclasses.replace(decision, action=action, reason=f"{decision.reason}: {why}")


def budget_left(w: Any, decision: Decision, look: Look) -> Decision:
    budget = w.ledger.budget_usd
    if budget is not None and (w.ledger.spend(w.clock()) or 0) >= budget:
        return _held(decision, Action.GIVE_UP, f"not resubmitted, job.budgetUsd ${budget:,.2f} is spent")
    return decision


def not_destroying(w: Any, decision: Decision, look: Look) -> Decision:
    from workloads import destroy_mark

    if destroy_mark.marked(look.jobs(), w.spec.submission_id):
        mark = destroy_mark.mark_id(w.spec.submission_id)
        return _held(decision, Action.WAIT, f"not resubmitted, pulumi destroy has begun (Ray job {mark})")
    return decision


def no_gate_running(w: Any, decision: Decision, look: Look) -> Decision:
    from workloads import run_owner

    busy = run_owner.running_gate(look.jobs(), w.spec.stack)
    if busy is None:
        return decision
    why = f"acceptance gate {busy.submission_id} is running; nothing is submitted while a gate runs"
    return _held(decision, Action.WAIT, why)


def workers_asked(w: Any, decision: Decision, look: Look) -> Decision:
    """Ask for the GPU workers (with a claim) before the gang is looked at: the Helm values install none, and a run
    the owner released has none (workloads/worker_group.py). Not for an attempt whose gang wait released them on
    its timeout: `gang_whole` gives that one up."""
    from workloads import submit, worker_group
    from workloads.gang_wait import VIEW_ERRORS
    from workloads.ledger import GANG_RELEASED

    view = w.gang or w.release
    if view is None or w.run.node_count <= 0:
        return decision
    target = submit.attempt_id(w.spec.submission_id, decision.next_attempt or 1)
    wait = w.ledger.gang
    if wait is not None and wait.submission_id == target and wait.outcome == GANG_RELEASED:
        return decision
    try:
        had = worker_group.ask(view, w.run.node_count, w.clock())
    except VIEW_ERRORS as err:
        return _held(decision, Action.WAIT, f"cannot ask for the Ray workers: {err}")
    if had is not None:
        w._note(f"Ray workers asked for {target}: {had} -> {w.run.node_count}", True)
    return decision


def shrink_when_short(w: Any, decision: Decision, look: Look) -> Decision:
    """`recovery.shrink`: once the whole gang has been short for `shrink_wait_minutes` since the last attempt ended
    (at once after a lease ended on fewer nodes: a renewal), choose the largest size of the plan's ladder that the
    GPU nodes alive in Ray hold; the resubmission then runs at that size (`Watcher.resubmit`) and the gang holds
    below, which wait for the whole gang, are passed. The whole gang alive: the full size (grow back)."""
    from workloads import size_ladder

    w.shrink_to = None
    run = w.run
    if not run.shrink_sizes or run.node_count <= 0:
        return decision
    alive = sum(1 for n in map(RayNode.from_row, look.node_rows()) if n.alive and n.gpus > 0)
    if alive >= run.node_count:
        return decision
    last = w._last_record()
    if last is None or last.end is None:
        return decision  # a first attempt, or one not known to have ended: the gang holds wait
    renew = last.cause == size_ladder.LEASE_CAUSE
    waited = w.clock() - last.end
    if not renew and waited < 60.0 * (run.shrink_wait_minutes or 0):
        return decision
    size = size_ladder.choose(run.shrink_sizes, alive)
    if size is None:
        return decision
    ladder = ", ".join(str(s["nodes"]) for s in run.shrink_sizes)
    why = (
        f"{alive} of {run.node_count} GPU nodes alive in Ray "
        + ("when its lease ended" if renew else f"{waited / 60:.0f} min after attempt {last.attempt} ended")
        + f": on {size['nodes']} nodes, the largest of the size ladder below {run.node_count} ({ladder}) they hold "
        f"(recovery.shrink), the global batch unchanged, on a {run.shrink_lease_minutes}-min lease"
    )
    w.shrink_to = dict(size, why=why)  # said once, with the attempt it sizes (`Watcher._attempt_spec`)
    return decision


def gang_whole(w: Any, decision: Decision, look: Look) -> Decision:
    """One look at the gang before the attempt (workloads/gang_wait.py). The wait is the watcher's own steps,
    its start kept in the ledger (`GangWait`) so the bound holds across restarts; on the timeout the workers
    are released (give up) or kept (wait on)."""
    from workloads import gang_wait, submit
    from workloads.ledger import GANG_COMPLETE, GANG_KEPT, GANG_RELEASED, GANG_WAITING, GangWait

    run = w.run
    if w.gang is None or not run.gang_wait or run.node_count <= 0 or w.shrink_to is not None:
        return decision
    assert run.gang_max_wait_minutes is not None  # `gang_wait` says so
    now = w.clock()
    attempt = decision.next_attempt or 1
    target = submit.attempt_id(w.spec.submission_id, attempt)
    wait = w.ledger.gang
    if wait is None or wait.submission_id != target:
        wait = w.ledger.gang = GangWait(attempt, target, now, run.node_count)
        w._save_ledger()
    if wait.outcome == GANG_RELEASED:
        return _held(decision, Action.GIVE_UP, f"{wait.line}; nothing is submitted")
    try:
        seen = gang_wait.look_at_gang(
            w.gang,
            want=run.node_count,
            rungs=dict(run.gang_rungs),
            waited_s=now - wait.since,
            max_wait_s=math.inf if wait.outcome == GANG_KEPT else 60.0 * run.gang_max_wait_minutes,
            release=run.gang_on_timeout == "releaseWorkers",
            default_rung=run.gang_default_rung,
            kept_why=run.gang_kept_why,
        )
    except (OSError, ValueError, LookupError, StopIteration) as err:  # the API's errors (urllib's are OSErrors)
        return _held(decision, Action.WAIT, f"cannot look at the gang: {err}")
    changed = (seen.ready, seen.mix) != (wait.ready, wait.mix)
    wait.ready, wait.mix = seen.ready, seen.mix
    if seen.complete:
        if wait.outcome != GANG_COMPLETE:
            wait.outcome, wait.line, changed = GANG_COMPLETE, seen.line, True
            w.notes.append(seen.line)
        if changed:
            w._save_ledger()
        return decision
    if wait.outcome == GANG_COMPLETE:  # a node went away before the attempt was submitted: a new wait
        wait.outcome, wait.since, wait.line = GANG_WAITING, now, ""
    if seen.timed_out:
        wait.outcome, wait.line = (GANG_RELEASED if seen.released else GANG_KEPT), seen.line
        w._event(seen.line)
        w._save_ledger()
        if seen.released:
            return _held(decision, Action.GIVE_UP, f"{seen.line}; nothing is submitted")
        return _held(decision, Action.WAIT, seen.line)
    if changed:
        w._save_ledger()
    since = time.strftime("%H:%M UTC", time.gmtime(wait.since))
    bounded = (
        f"past its bound of {run.gang_max_wait_minutes} min, kept ({run.gang_kept_why})"
        if wait.outcome == GANG_KEPT
        else f"for at most {run.gang_max_wait_minutes} min (gpuPool.capacity.maxWaitMinutes)"
    )
    return _held(decision, Action.WAIT, f"{seen.line}, waiting since {since} {bounded}")


def pool_gpus_alive(w: Any, decision: Decision, look: Look) -> Decision:
    want = w.policy.pool_gpus
    if not want or w.shrink_to is not None:  # `shrink_when_short` counted the nodes of a smaller size
        return decision
    have = alive_gpus(RayNode.from_row(r) for r in look.node_rows())
    if have < want:
        return _held(decision, Action.WAIT, f"waiting for the GPU pool, {have} of {want} GPUs alive in Ray")
    return decision


def gate_cleared(w: Any, decision: Decision, look: Look) -> Decision:
    """Every attempt gets its own gate; enforce holds it after a failed one (workloads/run_owner.py)."""
    from workloads import run_owner, submit

    if not w.gate.on:
        return decision
    target = submit.attempt_id(w.spec.submission_id, decision.next_attempt or 1)
    gate = w.gate
    if w.shrink_to is not None and gate.plan is not None:  # the gate over the nodes the attempt will use
        gate = dataclasses.replace(gate, plan=dataclasses.replace(gate.plan, node_count=int(w.shrink_to["nodes"])))
    outcome = run_owner.clear_attempt(
        w.client, w.spec.stack, target, gate, jobs=look.jobs(), node_rows=look.node_rows()
    )
    if outcome.clearance is not run_owner.Clearance.CLEARED:
        return _held(decision, Action.WAIT, outcome.reason)
    return dataclasses.replace(decision, reason=f"{decision.reason}: {outcome.reason}")


Hold = Callable[[Any, Decision, Look], Decision]
HOLDS: tuple[Hold, ...] = (
    not_destroying,
    budget_left,
    no_gate_running,
    workers_asked,
    shrink_when_short,
    gang_whole,
    pool_gpus_alive,
    gate_cleared,
)


def first_hold(w: Any, decision: Decision, holds: tuple[Hold, ...] = HOLDS) -> Decision:
    look = Look(w)
    for hold in holds:
        decision = hold(w, decision, look)
        if decision.action is not Action.RESUBMIT:
            return decision
    return decision
