"""What holds a due resubmission back: one small function per hold, looked at in order (`HOLDS`).

Each hold takes the watcher (`workloads.recovery.owner_loop.Watcher`), the RESUBMIT decision and the
`Look` of this resubmission (the cluster's job list and node table, each read at most once), and returns
the decision: unchanged (or with a note added to its reason) to let it through, or one that holds it
(WAIT: look again later; GIVE_UP: never). The first hold that holds wins; the next hold is one function
more in `HOLDS`.

0. `not_destroying`: `pulumi destroy` has begun (its mark is in the job list, workloads/destroy_mark.py):
   nothing starts, and `checkpoints/` is left to the Lustre export -> wait.
1. `budget_left`: `job.budgetUsd` spent -> give up (workloads/ledger.py).
2. `no_gate_running`: a gate run of the stack is pending or running, whoever started it (the deploy, a
   user, this watcher): it holds every GPU -> wait (workloads/run_owner.py rule 1).
3. `gang_whole`: with `gpuPool.capacity`, the whole gang of Ray worker pods, waited for at most
   `capacity.maxWaitMinutes`; then one line, and the workers released (give up) or kept (wait on)
   (workloads/gang_wait.py).
4. `pool_gpus_alive`: at least `policy.pool_gpus` GPUs on ALIVE nodes in Ray: GKE may take many minutes
   to bring a replacement spot node, and a job submitted before fails in NeMo-RL's placement wait.
5. `gate_cleared`: under `job.gate` enforce or warn, a gate run for this attempt on the nodes alive now
   (started here when due; workloads/run_owner.py `clear_attempt`).

The watcher is typed `Any` here: `owner_loop` imports this module, and import-linter refuses a cycle
between the package's modules, TYPE_CHECKING imports included.
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
    """What this resubmission's holds read from the cluster, each read at most once and shared."""

    watcher: Any
    _jobs: Optional[list[Any]] = field(default=None, repr=False)
    rows: Optional[list[dict[str, Any]]] = None
    """Ray's node table once a hold has read it (`node_rows`)."""

    def jobs(self) -> list[Any]:
        """Ray's job list, every job of every stack (a gate run is told by its metadata)."""
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
    if busy is not None:
        return _held(
            decision,
            Action.WAIT,
            f"acceptance gate {busy.submission_id} is running; nothing is submitted while a gate runs",
        )
    return decision


def gang_whole(w: Any, decision: Decision, look: Look) -> Decision:
    """One look at the gang before attempt `decision.next_attempt` (workloads/gang_wait.py); its mix goes on
    the attempt's ledger record once it is whole.

    The wait is the watcher's own steps, never a sleep: its start is kept in the ledger (`GangWait`), so
    the bound (`gpuPool.capacity.maxWaitMinutes`) holds across the watcher's restarts. On the timeout the
    gang wait's one line is the decision's reason (printed once, as every unchanged decision) and a
    ledger event; with `releaseWorkers` the worker group is scaled to 0 and nothing is submitted for
    this attempt (a submission by hand, after the workers are back, starts it); with `keep` the watcher
    goes on looking without a bound and submits once the gang is whole.
    """
    from workloads import gang_wait, submit
    from workloads.ledger import GANG_COMPLETE, GANG_KEPT, GANG_RELEASED, GANG_WAITING, GangWait

    run = w.run
    if w.gang is None or not run.gang_wait or run.node_count <= 0:
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
    if not want:
        return decision
    have = alive_gpus(RayNode.from_row(r) for r in look.node_rows())
    if have < want:
        return _held(decision, Action.WAIT, f"waiting for the GPU pool, {have} of {want} GPUs alive in Ray")
    return decision


def gate_cleared(w: Any, decision: Decision, look: Look) -> Decision:
    """Every attempt, the first and each after a preemption (onto the nodes that replaced the lost ones),
    gets its own gate; enforce holds it after a failed one (workloads/run_owner.py)."""
    from workloads import run_owner, submit

    if not w.gate.on:
        return decision
    target = submit.attempt_id(w.spec.submission_id, decision.next_attempt or 1)
    outcome = run_owner.clear_attempt(
        w.client, w.spec.stack, target, w.gate, jobs=look.jobs(), node_rows=look.node_rows()
    )
    if outcome.clearance is not run_owner.Clearance.CLEARED:
        return _held(decision, Action.WAIT, outcome.reason)
    return dataclasses.replace(decision, reason=f"{decision.reason}: {outcome.reason}")


Hold = Callable[[Any, Decision, Look], Decision]
HOLDS: tuple[Hold, ...] = (not_destroying, budget_left, no_gate_running, gang_whole, pool_gpus_alive, gate_cleared)
"""In order: the first that holds the resubmission decides."""


def first_hold(w: Any, decision: Decision, holds: tuple[Hold, ...] = HOLDS) -> Decision:
    """`decision` (RESUBMIT) once every hold let it through (with their notes), else the first hold's."""
    look = Look(w)
    for hold in holds:
        decision = hold(w, decision, look)
        if decision.action is not Action.RESUBMIT:
            return decision
    return decision
