"""The GPU worker group's one writer (workloads/worker_group.py): asked for before every attempt, counted in Ray,
claimed against the owner's release. The deploy hook's use is in tests/test_readiness.py, the CLI's in
tests/test_jobctl.py, the owner's release in tests/test_owner_loop.py."""

from __future__ import annotations

import pytest
from gate_support import FakeClient, python_job
from recovery_support import FAST, info
from test_gang_wait import FakeApi

from workloads import worker_group
from workloads.gang_wait import CLAIM_ANNOTATION, KubeGangView
from workloads.job_spec import META_ATTEMPT
from workloads.recovery import Action, Watcher
from workloads.run_owner import RunPlan

GROUPS = [{"groupName": "head-ish"}, {"groupName": "gpu", "replicas": 0, "minReplicas": 0, "maxReplicas": 4}]


class Clock:
    def __init__(self):
        self.now = 1_800_000_000.0

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        self.now += seconds


def view_of(api):
    return KubeGangView(api.base, "tok", None, "nemo-rl", "nemo-rl", "gpu")


def test_a_release_that_races_the_wait_is_undone_at_the_next_poll_and_the_claim_renewed():
    api, clock, lines = FakeApi([], {}, [dict(g) for g in GROUPS]), Clock(), []
    counts, raced = iter([0, 2, 4]), []

    def alive():
        if clock.now > 1_800_000_000.0 and not raced:
            raced.append(True)
            api.groups()[1]["replicas"] = 0  # the owner's release of the last run lands after the ask
        return next(counts)

    try:
        seen = worker_group.ensure_workers(
            view_of(api),
            4,
            alive,
            timeout_s=600,
            poll_s=10,
            on_line=lines.append,
            clock=clock,
            monotonic=clock,
            sleep=clock.sleep,
        )
    finally:
        api.close()
    assert seen == 4 and api.groups()[1]["replicas"] == 4
    asks = [r[3] for r in api.requests if r[0] == "PATCH"]
    # Asked at every poll: the group scaled at the first and again after the racing release, the claim at each.
    assert len(asks) == 3 and [op["value"] for ops in asks for op in ops if op["path"].endswith("/replicas")] == [4, 4]
    assert all(ops[0] == {"op": "test", "path": "/spec/workerGroupSpecs/1/groupName", "value": "gpu"} for ops in asks)
    assert float(api.cluster["metadata"]["annotations"][CLAIM_ANNOTATION]) == clock.now + worker_group.CLAIM_TTL_S
    assert lines == [
        "Ray workers asked for: 0 -> 4 (GKE adds the GPU nodes for them)",
        "waiting for the Ray GPU workers: 0 of 4 alive",
        "waiting for the Ray GPU workers: 2 of 4 alive",
        "Ray workers asked for: 0 -> 4 (GKE adds the GPU nodes for them)",
    ]


def test_workers_that_never_come_end_the_wait_at_its_bound_saying_how_many_came():
    api, clock = FakeApi([], {}, [dict(g) for g in GROUPS]), Clock()
    try:
        with pytest.raises(worker_group.WorkersNotReady, match=r"^3 of 4 Ray GPU workers alive after 30 min"):
            worker_group.ensure_workers(
                view_of(api), 4, lambda: 3, timeout_s=1800, poll_s=10, clock=clock, monotonic=clock, sleep=clock.sleep
            )
    finally:
        api.close()
    assert clock.now - 1_800_000_000.0 == 1800


def test_without_a_kubernetes_api_missing_workers_are_refused_at_once_with_the_command_and_enough_pass():
    with pytest.raises(worker_group.WorkersNotReady, match=r"0 of 2 .*: run `kubectl patch x`, then submit again$"):
        worker_group.ensure_workers(None, 2, lambda: 0, timeout_s=600, fallback="kubectl patch x")
    assert worker_group.ensure_workers(None, 2, lambda: 2, timeout_s=600) == 2


def test_a_claim_holds_the_workers_until_it_lapses():
    api = FakeApi([], {}, [dict(g) for g in GROUPS], annotations={"other": "x"})
    try:
        view = view_of(api)
        assert not worker_group.claimed(view, 1_800_000_000.0)
        assert worker_group.ask(view, 4, 1_800_000_000.0) == 0
        assert worker_group.ask(view, 4, 1_800_000_005.0) is None  # had 4 already: only the claim renewed
        assert worker_group.claimed(view, 1_800_000_005.0 + worker_group.CLAIM_TTL_S - 1)
        assert not worker_group.claimed(view, 1_800_000_005.0 + worker_group.CLAIM_TTL_S)
    finally:
        api.close()
    assert api.cluster["metadata"]["annotations"]["other"] == "x", "another annotation was overwritten"


class NoNodeTable(Watcher):
    def _node_rows(self):
        return []  # the fake job table has no node table: the exit code alone says preemption


def test_the_owners_resubmission_asks_for_released_workers_before_it_submits():
    # A preempted attempt, its workers released meanwhile (by hand, or a gang wait of another attempt): the owner's
    # resubmission asks for them first, or the attempt would wait on no GPU.
    spec = python_job("t-ask", "pass")
    preempted = info(
        error_type="JOB_LOST", sid=spec.submission_id, meta={**spec.metadata, META_ATTEMPT: "1"}, end_ms=1_000
    )
    api = FakeApi([], {}, [dict(g) for g in GROUPS])
    client = FakeClient([preempted])
    try:
        watcher = NoNodeTable(client, spec, FAST, run=RunPlan(node_count=4), release=view_of(api), clock=lambda: 500.0)
        decision = watcher.step()
    finally:
        api.close()
    assert decision.action is Action.RESUBMIT, decision
    assert api.groups()[1]["replicas"] == 4 and len(client.submitted) == 1
    assert float(api.cluster["metadata"]["annotations"][CLAIM_ANNOTATION]) == 500.0 + worker_group.CLAIM_TTL_S


def test_only_a_claim_made_after_the_run_ended_holds_its_workers():
    from workloads.gang_wait import WorkerGroup

    ended, ttl = 1_800_000_000.0, worker_group.CLAIM_TTL_S

    def group(asked_at):
        return WorkerGroup(1, 4, 0, 4, asked_at + ttl)

    # The run's own submitter asked 100 s before the run ended: its claim is still live, but it is the ended run's.
    assert not worker_group.claim_after(group(ended - 100), ended, ended + 30)
    # A `jobctl submit` that asked 20 s after the end, and is waiting for the workers, holds them...
    assert worker_group.claim_after(group(ended + 20), ended, ended + 30)
    # ... until its claim lapses.
    assert not worker_group.claim_after(group(ended + 20), ended, ended + 20 + ttl)


def test_a_runs_own_claim_does_not_hold_its_workers_past_its_end():
    # The owner asked for the workers (a claim) before its resubmission; the attempt ran five minutes and succeeded:
    # the release follows at the next look, not a claim's lifetime later.
    spec = python_job("t-own", "pass")
    ended = info("SUCCEEDED", sid=spec.submission_id, meta=dict(spec.metadata), end_ms=1_800_000_000_000)
    annotations = {CLAIM_ANNOTATION: f"{1_800_000_000 - 300 + worker_group.CLAIM_TTL_S:.0f}"}
    api = FakeApi([], {}, [dict(g) for g in GROUPS], annotations=annotations)
    api.groups()[1]["replicas"] = 4
    try:
        watcher = Watcher(
            FakeClient([ended]),
            spec,
            FAST,
            run=RunPlan(node_count=4),
            release=view_of(api),
            clock=lambda: 1_800_000_030.0,
        )
        watcher.step()
    finally:
        api.close()
    assert api.groups()[1]["replicas"] == 0 and watcher.ledger.attempts[0].released == 1_800_000_030.0
