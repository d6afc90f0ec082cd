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


def test_the_buckets_of_each_attempt_add_up_to_its_paid_node_time_from_the_gang_wait_to_the_release():
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
    # Attempt 2: its replacement nodes are waited for from attempt 1's end; released 60 s after it ended.
    assert sum(h2.values()) == pytest.approx(2 * (6960 - 3600) / 3600)
    assert h2["gangWait"] == pytest.approx(2 * 600 / 3600) and h2["idleAfterRun"] == pytest.approx(2 * 60 / 3600)
    assert p1 == p2 == 10.0


def test_step_estimates_that_do_not_fit_the_jobs_time_are_scaled_down_and_startup_takes_the_rest():
    a = Attempt(1, "t-run", T, 1, end=T + 100, cause="succeeded", last_step=10, saved_step=10)
    a.steps_lost = 0
    h = goodput.attempt_buckets(a, T, T + 100, step_seconds=60.0, write_seconds=0.0, save_period=10, now=T + 100)
    assert h["stepsKept"] == pytest.approx(100 / 3600) and h["startup"] == pytest.approx(0, abs=1e-12)
    assert sum(h.values()) == pytest.approx(100 / 3600)


def test_status_shows_the_runs_goodput_and_the_dollars_of_each_badput():
    lines = goodput.lines(preempted_then_succeeded(), T + 99_999, step_seconds=240.0, write_seconds=60.0, save_period=5)
    # Kept: (10 + 10) steps x 240 s x 2 nodes = 2.67 node-h of 2 x (4800 + 3360) s = 4.53 node-h.
    assert lines[0] == "goodput: 59 % of 4.53 paid GPU node-hours in kept steps ($26.67 of $45.33)"
    assert lines[1].startswith("badput: gangWait 0.83 node-h $8.33, gate 0.17 node-h $1.67, startup ")
    assert "stepsLost 0.27 node-h $2.67" in lines[1] and "idleAfterRun 0.03 node-h $0.33" in lines[1]
