"""The budget's stop (`job.budgetUsd`): a warning at 80 %, and at 100 % a stop after the next complete checkpoint,
never into a save being written. Functions of the run's owner (`owner_loop.Watcher`, typed `Any`: import-linter
refuses a cycle with `owner_loop`); docs/preemption-recovery.md.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any, Optional

from workloads.recovery.classify import Action, Decision

if TYPE_CHECKING:
    from workloads.ledger import Attempt

SAVE_WAIT_CAP_S = 1800.0
"""How long past its save cycle a budget stop waits for a save still being written."""


def budget_decision(w: Any, job: Any, record: "Attempt", now: float) -> Optional[Decision]:
    """At 80 % of `job.budgetUsd` warn once; at 100 % stop after the next complete checkpoint, or at once when
    none comes within one save period."""
    from workloads import submit
    from workloads.ledger import WARN_FRACTION

    budget, spent = w.ledger.budget_usd, w.ledger.spend(now)
    if budget is None or spent is None:
        return None
    if spent >= WARN_FRACTION * budget and not w.ledger.budget_warned:
        w.ledger.budget_warned = True
        w._note(
            f"budget warning: ${spent:,.2f} spent, {100 * spent / budget:.0f} % of job.budgetUsd ${budget:,.2f}",
            event=True,
        )
        w._save_ledger()
    if spent < budget:
        budget_raised(w)
        return None
    latest = w._latest_checkpoint()
    if w.ledger.stop_requested_at is None:
        w.ledger.stop_requested_at, w.ledger.stop_requested_step = now, latest
        window = w.run.save_window_seconds
        when = f"in {window:.0f} s, one save period, if none comes" if window else "no save period known: now"
        w._note(
            f"budget reached: ${spent:,.2f} of job.budgetUsd ${budget:,.2f}; {job.submission_id} is stopped "
            f"after its next complete checkpoint ({when})",
            event=True,
        )
        w._save_ledger()
    window = w.run.save_window_seconds or 0.0
    since = w.ledger.stop_requested_step
    saved = latest is not None and since is not None and latest > since  # 0: no checkpoint yet
    waited = now - w.ledger.stop_requested_at
    # Never into a save being written, the one it waits for or a newer one begun since (the run's last).
    writing = waited < window + SAVE_WAIT_CAP_S and save_in_flight(w, max(latest or 0, since or 0))
    if (not saved and waited < window) or writing:
        return Decision(
            Action.WAIT,
            f"budget reached; {job.submission_id} stops after its next complete checkpoint (newer than "
            f"step_{since or 0})",
        )
    with contextlib.suppress(submit.UnknownJob):
        submit.stop(w.client, job.submission_id)
    why = f"after its checkpoint step_{latest}" if saved else "at once: no complete checkpoint within one save period"
    record.note = f"stopped by the budget {why}"
    w._note(f"budget: stopped {job.submission_id} {why} (${spent:,.2f} of ${budget:,.2f})", event=True)
    w._save_ledger()
    return Decision(Action.DONE, f"job.budgetUsd ${budget:,.2f} spent: stopped {job.submission_id} {why}")


def budget_raised(w: Any) -> None:
    """Spend is under the budget again: forget the earlier trip."""
    if w.ledger.stop_requested_at is None:
        return
    w.ledger.stop_requested_at = w.ledger.stop_requested_step = None
    w._note("budget raised above the spend: the earlier budget stop is withdrawn", event=True)
    w._save_ledger()


def save_in_flight(w: Any, since: Optional[int]) -> bool:
    """Whether a save newer than `since` is being written: Ray's stop gives the driver 3 s before SIGKILL and
    NeMo-RL has no SIGTERM handler, so a stop now would lose it."""
    from workloads import checkpoints

    if not w.run.checkpoint_dir:
        return False
    found = checkpoints.scan(w.run.checkpoint_dir)
    return any(step > (since or 0) for step in (*found.partial, *found.incomplete))
