"""Goodput buckets (workloads/goodput.py): each attempt's paid GPU node-time split into named buckets that add
up to it exactly; the run's fraction and badput dollars as `python -m jobctl status` shows them."""

from __future__ import annotations

import pytest

from workloads import goodput
from workloads.ledger import Attempt, GangWait, Ledger

T = 1_800_000_000.0


def preempted_then_succeeded() -> Ledger:
    ledger = Ledger("t", "t-run", node_hour_usd=10.0)
    ledger.gang = GangWait(1, "t-run", since=T - 1200, want=2, outcome="complete")
    first = Attempt(1, "t-run", T, 2, end=T + 3600, cause="preemption-like", last_step=12, saved_step=10)
    first.steps_lost = 2
    first.marks = {"gateStart": T - 300, "gateEnd": T - 60}
    second = Attempt(2, "t-run-r2", T + 4200, 2, resume_step=10, end=T + 6900, cause="succeeded", last_step=20)
    second.saved_step, second.steps_lost, second.released = 20, 0, T + 6960
    ledger.attempts = [first, second]
    return ledger


def test_the_buckets_of_each_attempt_add_up_to_its_paid_node_time_from_the_gang_wait_to_the_nodes_removal():
    ledger = preempted_then_succeeded()
    rows = goodput.run_buckets(ledger, T + 99_999, step_seconds=240.0, write_seconds=60.0, save_period=5)
    (a1, h1, p1), (a2, h2, p2) = rows
    # Attempt 1: paid from its gang wait's start to its end (attempt 2 pays from there on).
    assert sum(h1.values()) == pytest.approx(2 * (3600 + 1200) / 3600)
    assert h1["gangWait"] == pytest.approx(2 * 900 / 3600) and h1["gate"] == pytest.approx(2 * 300 / 3600)
    assert h1["stepsKept"] == pytest.approx(2 * 10 * 240 / 3600) and h1["stepsLost"] == pytest.approx(
        2 * 2 * 240 / 3600
    )
    assert h1["checkpointSave"] == pytest.approx(2 * 2 * 60 / 3600) and h1["idleAfterRun"] == 0
    assert h1["startup"] == pytest.approx(2 * (3600 - 12 * 240 - 120) / 3600)
    # Attempt 2: its replacement nodes are waited for from attempt 1's end; released 60 s after it ended, its
    # nodes removed after GKE's scale-down delay.
    assert sum(h2.values()) == pytest.approx(2 * (6960 - 3600 + 600) / 3600)
    assert h2["gangWait"] == pytest.approx(2 * 600 / 3600) and h2["idleAfterRun"] == pytest.approx(2 * 60 / 3600)
    assert h2["scaleDown"] == pytest.approx(2 * 600 / 3600) and h1["scaleDown"] == 0
    assert p1 == p2 == 10.0


def test_step_estimates_that_do_not_fit_the_jobs_time_are_scaled_down_and_startup_takes_the_rest():
    a = Attempt(1, "t-run", T, 1, end=T + 100, cause="succeeded", last_step=10, saved_step=10)
    a.steps_lost = 0
    h = goodput.attempt_buckets(a, T, T + 100, step_seconds=60.0, write_seconds=0.0, save_period=10, now=T + 100)
    assert h["stepsKept"] == pytest.approx(100 / 3600) and h["startup"] == pytest.approx(0, abs=1e-12)
    assert sum(h.values()) == pytest.approx(100 / 3600)


def test_status_shows_the_runs_goodput_and_the_dollars_of_each_badput():
    lines = goodput.lines(preempted_then_succeeded(), T + 99_999, step_seconds=240.0, write_seconds=60.0, save_period=5)
    # Kept: (10 + 10) steps x 240 s x 2 nodes = 2.67 node-h of 2 x (4800 + 3360 + 600) s = 4.87 node-h.
    assert lines[0] == "goodput: 55 % of 4.87 paid GPU node-hours in kept steps ($26.67 of $48.67)"
    assert lines[1].startswith("badput: gangWait 0.83 node-h $8.33, gate 0.17 node-h $1.67, startup ")
    assert "stepsLost 0.27 node-h $2.67" in lines[1] and "idleAfterRun 0.03 node-h $0.33" in lines[1]
    assert lines[1].endswith("scaleDown 0.33 node-h $3.33")


# ------------------------------------------------------------------------------ across a run's life (issue 42)

DAY = 86_400.0


def kept_over_paid(kept_s: float, paid: list[tuple[float, float]]) -> float:
    """The truth a billing export gives: kept step time over the paid node-time (same nodes throughout)."""
    return kept_s / sum(b - a for a, b in paid)


def fraction(ledger: Ledger, now: float, **plan) -> float:
    return goodput.summary(goodput.run_buckets(ledger, now, **plan))["fraction"]


PLAN = {"step_seconds": 240.0, "write_seconds": 60.0, "save_period": 5}


def released_run_then_a_submission_two_days_later() -> Ledger:
    """Attempt 1 (gate 10 min, its nodes there before it) trains 8 h, steps 0 -> 100, fails on its own; the owner
    releases its workers a minute later. Two days on `jobctl submit` scales them back: the nodes come 15 min before
    attempt 2, which trains 8 h, steps 100 -> 200, and succeeds; released a minute later."""
    ledger = Ledger("t", "t-run", node_hour_usd=10.0)
    first = Attempt(1, "t-run", T, 4, end=T + 28_800, cause="failed", last_step=100, saved_step=100)
    first.steps_lost, first.released = 0, T + 28_860
    first.marks = {"gateStart": T - 600, "gateEnd": T - 60, "paidFrom": T - 1500, "nodesReady": T - 1300}
    first.marks["podsRunning"] = T - 700
    t2 = T + 28_860 + 2 * DAY
    second = Attempt(2, "t-run-r2", t2, 4, resume_step=100, end=t2 + 28_800, cause="succeeded", last_step=200)
    second.saved_step, second.steps_lost, second.released = 200, 0, t2 + 28_860
    second.marks = {"paidFrom": t2 - 900, "nodesReady": t2 - 700, "podsRunning": t2 - 200}
    ledger.attempts = [first, second]
    return ledger


def test_a_submission_two_days_after_a_release_is_paid_from_its_own_nodes_and_goodput_is_the_billed_truth():
    ledger = released_run_then_a_submission_two_days_later()
    t2, now = ledger.attempts[1].start, ledger.attempts[1].released + DAY
    # Paid: from the run's first Ray job (the gate) to the release plus GKE's scale-down delay, then from
    # attempt 2's first node to its release plus the delay. Kept: 200 steps x 240 s.
    truth = kept_over_paid(200 * 240, [(T - 600, T + 28_860 + 600), (t2 - 900, t2 + 28_860 + 600)])
    assert fraction(ledger, now, **PLAN) == pytest.approx(truth, abs=0.01)
    (_, h1, _), (_, h2, _) = goodput.run_buckets(ledger, now, **PLAN)
    assert h2["gangWait"] == pytest.approx(4 * 200 / 3600) and h2["imagePull"] == pytest.approx(4 * 500 / 3600)
    assert h1["scaleDown"] == pytest.approx(4 * 600 / 3600) and h1["gate"] == pytest.approx(4 * 600 / 3600)


def test_a_fresh_ledger_on_week_old_nodes_is_paid_from_the_runs_first_submission_not_the_nodes_creation():
    ledger = Ledger("t", "t-run2", node_hour_usd=10.0)
    a = Attempt(1, "t-run2", T, 4, end=T + 28_800, cause="succeeded", last_step=100, saved_step=100)
    a.steps_lost, a.released = 0, T + 28_860
    # The nodes and their pods are a week old (an upgrade that starts a new run on another run's live nodes).
    a.marks = {"paidFrom": T - 7 * DAY, "nodesReady": T - 7 * DAY + 300, "podsRunning": T - 7 * DAY + 900}
    ledger.attempts = [a]
    now = T + 2 * DAY
    assert fraction(ledger, now, **PLAN) == pytest.approx(kept_over_paid(100 * 240, [(T, T + 28_860 + 600)]), abs=0.01)
    (_, hours, _), *_ = goodput.run_buckets(ledger, now, **PLAN)
    assert hours["gangWait"] == hours["imagePull"] == hours["gate"] == 0


def test_a_fresh_stacks_first_attempt_is_paid_from_the_nodes_its_ask_brought_not_from_the_job():
    # The deploy asked for the workers (workloads/worker_group.py) at T - 1800; the nodes it brought registered at
    # T - 1700 and ran their pods at T - 600: the run's own scale-up and pull, billed, so paid.
    ledger = Ledger("t", "t-run", node_hour_usd=10.0)
    a = Attempt(1, "t-run", T, 2, end=T + 3600, cause="succeeded", last_step=10, saved_step=10)
    a.steps_lost = 0
    a.marks = {"askedAt": T - 1800, "paidFrom": T - 1700, "nodesReady": T - 1200, "podsRunning": T - 600}
    ledger.attempts = [a]
    (_, h, _), *_ = goodput.run_buckets(ledger, T + 3600, step_seconds=240.0, write_seconds=0.0, save_period=5)
    assert h["gangWait"] == pytest.approx(2 * 500 / 3600) and h["imagePull"] == pytest.approx(2 * 600 / 3600)
    assert goodput.run_start(ledger) == T - 1700
    # An ask older than its window, or one after the nodes were there, brought none of them: they are not the run's.
    a.marks["askedAt"] = T - goodput.ASK_WINDOW_S - 1
    assert goodput.run_start(ledger) == T
    a.marks["askedAt"] = T - 1600
    assert goodput.run_start(ledger) == T


def test_the_gate_bucket_is_empty_when_no_gate_ran_and_the_time_before_the_job_is_gang_wait_pull_and_start_up():
    ledger = Ledger("t", "t-run", node_hour_usd=10.0)
    ledger.gang = GangWait(1, "t-run", since=T - 1800, want=2, outcome="complete")
    a = Attempt(1, "t-run", T, 2, end=T + 3600, cause="succeeded", last_step=10, saved_step=10)
    a.steps_lost = 0
    a.marks = {"paidFrom": T - 1500, "nodesReady": T - 1200, "podsRunning": T - 600}
    ledger.attempts = [a]
    (_, h, _), *_ = goodput.run_buckets(ledger, T + 3600, step_seconds=240.0, write_seconds=0.0, save_period=5)
    assert h["gate"] == 0
    assert h["gangWait"] == pytest.approx(2 * 300 / 3600) and h["imagePull"] == pytest.approx(2 * 600 / 3600)
    # The workers ran 600 s before the job: start-up (the submission), with the job's time the steps leave.
    assert h["startup"] == pytest.approx(2 * (600 + 3600 - 10 * 240) / 3600)
    assert sum(h.values()) == pytest.approx(2 * 5100 / 3600)


def measure(intervals: list[tuple[float, float]]) -> float:
    """The length of a union of intervals."""
    total, reach = 0.0, float("-inf")
    for a, b in sorted(intervals):
        if b > reach:
            total += b - max(a, reach)
            reach = b
    return total


def test_a_runs_buckets_sum_to_the_union_of_its_paid_intervals_with_no_overlap_and_the_scale_down_tails_in():
    ledger = released_run_then_a_submission_two_days_later()
    first, second = ledger.attempts
    # A Helm upgrade brought the released workers back a day later; the owner released them again 5 min on.
    first.restored = [[first.released + DAY, first.released + DAY + 300]]
    now = second.released + 300  # attempt 2's nodes are still in their scale-down delay
    paid = [
        (T - 600, first.released + 600),
        (first.released + DAY, first.released + DAY + 300 + 600),
        (second.start - 900, now),
    ]
    rows = goodput.run_buckets(ledger, now, **PLAN)
    total = sum(sum(h.values()) for _, h, _ in rows)
    assert total == pytest.approx(4 * measure(paid) / 3600)
    # The intervals a soak checks against (`paid_intervals`): the same union, no attempt's overlapping another's.
    per_attempt = goodput.paid_intervals(ledger, now)
    assert sum(measure(i) for i in per_attempt) == pytest.approx(measure(paid)) == measure(sum(per_attempt, []))
    (_, h1, _), (_, h2, _) = rows
    assert h1["idleAfterRun"] == pytest.approx(4 * (60 + 300) / 3600)  # after the job, and the restored workers
    assert h1["scaleDown"] == pytest.approx(4 * 1200 / 3600) and h2["scaleDown"] == pytest.approx(4 * 300 / 3600)


def test_a_resubmission_inside_the_scale_down_delay_is_paid_from_the_release_without_gap_or_overlap():
    ledger = released_run_then_a_submission_two_days_later()
    first, second = ledger.attempts
    # `jobctl submit` 4 min after the release: the released nodes were still there and took the new pods.
    second.start = first.released + 240
    second.end, second.released = second.start + 28_800, second.start + 28_860
    second.marks = {"paidFrom": T - 1500, "nodesReady": second.start - 60, "podsRunning": second.start - 30}
    now = second.released + DAY
    rows = goodput.run_buckets(ledger, now, **PLAN)
    (_, h1, _), (_, h2, _) = rows
    assert h1["scaleDown"] == 0 and h2["gangWait"] == pytest.approx(4 * 180 / 3600)
    total = sum(sum(h.values()) for _, h, _ in rows)
    assert total == pytest.approx(4 * (second.released + 600 - (T - 600)) / 3600)


def test_a_gang_wait_is_never_carried_from_one_attempt_into_the_next():
    """The ledger keeps one `GangWait`, the newest, of one submission id: attempt 2 is paid from its own first
    node, neither from attempt 1's gang wait nor from a wait for its own id that timed out and released."""
    ledger = released_run_then_a_submission_two_days_later()
    first, second = ledger.attempts
    ledger.gang = GangWait(1, "t-run", since=T - 3000, want=4, outcome="complete")
    second.marks = {}
    now = second.released + DAY
    assert goodput.paid_from(ledger, second) == second.start
    # The owner waited for attempt 2's gang after a preemption of attempt 1 (not released), timed out and
    # released the partial nodes; two days later `jobctl submit` sent attempt 2 with that id.
    first.released = None
    ledger.gang = GangWait(2, "t-run-r2", since=first.end + 120, want=4, outcome="released")
    second.marks = {"paidFrom": second.start - 900}
    assert goodput.paid_from(ledger, second) == second.start - 900
    (_, h2, _) = goodput.run_buckets(ledger, now, **PLAN)[1]
    assert h2["gangWait"] == pytest.approx(4 * 900 / 3600)


def test_checkpoint_saves_of_a_resumed_attempt_count_from_its_resume_step_not_from_step_0():
    """NeMo-RL saves `step_N` when N is a multiple of `save_period`, at the last step, or when its save timeout
    comes (NVIDIA-NeMo/RL v0.7.0 nemo_rl/algorithms/grpo.py `should_save_by_step`, `should_save_by_timeout`)."""

    def saves(resume: int, saved: int) -> float:
        a = Attempt(2, "t-run-r2", T, 1, resume_step=resume, end=T + 99_999, cause="succeeded", last_step=saved)
        a.saved_step, a.steps_lost = saved, 0
        h = goodput.attempt_buckets(a, T, T + 99_999, step_seconds=1.0, write_seconds=3600.0, save_period=5, now=T)
        return h["checkpointSave"]

    assert saves(10, 20) == pytest.approx(2)  # step_15, step_20: not the 4 saves from step 0
    assert saves(12, 20) == pytest.approx(2)  # resumed from a timed save: step_15, step_20
    assert saves(10, 23) == pytest.approx(3)  # step_15, step_20 and the last step's step_23
    assert saves(20, 20) == 0


def test_an_attempt_with_no_price_makes_the_runs_dollars_unknown_not_summed_as_zero():
    """Attempt 1's gang came from a priced rung, attempt 2's from a rung with no price and no single rate to fall
    back on: the run's dollars are unknown (at $0 for attempt 2 they would read as half the truth)."""
    ledger = Ledger("t", "t-run", rung_node_hour_usd={"spot": 13.2})
    first = Attempt(1, "t-run", T, 2, end=T + 3600, cause="preemption-like", last_step=10, rungs="spot 2")
    first.saved_step, first.steps_lost = 10, 0
    second = Attempt(2, "t-run-r2", T + 3600, 2, resume_step=10, end=T + 7200, cause="succeeded", last_step=20)
    second.saved_step, second.steps_lost, second.rungs = 20, 0, "reservation 2"
    ledger.attempts = [first, second]
    rows = goodput.run_buckets(ledger, T + 99_999, **PLAN)
    assert [price for _, _, price in rows] == [pytest.approx(13.2), None]
    run = goodput.summary(rows)
    assert run["usd"] is None and run["fraction"] is not None
    assert sum(run["nodeHours"].values()) == pytest.approx(sum(sum(h.values()) for _, h, _ in rows))
    head, bad = goodput.lines(ledger, T + 99_999, **PLAN)
    assert "$" not in head and "$" not in bad, (head, bad)
    # Priced alone, attempt 1 has dollars: it is attempt 2's missing price that makes them unknown.
    ledger.attempts = [first]
    assert goodput.summary(goodput.run_buckets(ledger, T + 99_999, **PLAN))["usd"] is not None


def test_steps_on_fewer_nodes_are_their_own_bucket_at_their_share_of_the_step_rate_and_count_as_goodput():
    """`recovery.shrink`: attempt 2 trains on 4 of 8 nodes; the same global batch on half the GPUs takes twice the
    plan's full-size step, so its 5 kept steps take 2 x 5 x 240 s on 4 nodes, in `stepsReduced`, not `stepsKept`."""
    ledger = Ledger("t", "t-run", node_hour_usd=10.0)
    full = Attempt(1, "t-run", T, 8, end=T + 3600, cause="preemption-like", last_step=10, saved_step=10)
    full.steps_lost = 0
    half = Attempt(2, "t-run-r2", T + 3600, 4, resume_step=10, end=T + 7200, cause="leaseEnded", last_step=15)
    half.saved_step, half.steps_lost = 15, 0
    ledger.attempts = [full, half]
    rows = goodput.run_buckets(ledger, T + 7200, step_seconds=240.0, write_seconds=0.0, save_period=5, full_nodes=8)
    (_, h1, _), (_, h2, _) = rows
    assert h1["stepsKept"] == pytest.approx(8 * 10 * 240 / 3600) and h1["stepsReduced"] == 0
    assert h2["stepsReduced"] == pytest.approx(4 * 5 * 2 * 240 / 3600) and h2["stepsKept"] == 0
    assert sum(h2.values()) == pytest.approx(4 * 3600 / 3600), "the buckets still add up to its paid node-time"
    run = goodput.summary(rows)
    good = h1["stepsKept"] + h2["stepsReduced"]
    assert run["fraction"] == pytest.approx(good / (sum(h1.values()) + sum(h2.values())))
    # Without the run's gang size (an older run.json) the attempt's steps are plain kept steps, as before.
    (_, _, _), (_, old, _) = goodput.run_buckets(ledger, T + 7200, step_seconds=240.0, write_seconds=0.0, save_period=5)
    assert old["stepsKept"] == pytest.approx(4 * 5 * 240 / 3600) and old["stepsReduced"] == 0
    lines = goodput.lines(ledger, T + 7200, step_seconds=240.0, write_seconds=0.0, save_period=5, full_nodes=8)
    assert "; of them 2.67 node-h at reduced size (4 nodes at 50 % of the full step rate)" in lines[0]
    assert "stepsReduced" not in lines[1], "reduced steps trained: not badput"
