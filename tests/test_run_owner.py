"""The run's one owner (workloads/run_owner.py): no training submission while a gate runs or after a
failed one, by anyone (the watcher, the post-deploy hook, `python -m jobctl submit`), and a new gate
before each attempt after a preemption, and with `gpuPool.capacity` the bounded wait for the whole gang
before each attempt (a fake cluster view). Fake job tables for the rules, the local Ray head for the rest."""

from __future__ import annotations

import dataclasses
import io
import json
import re
import shlex
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Callable

import pytest
from gate_support import FakeClient, cpu_plan, gpus_failed_report, python_job
from ray.job_submission import JobDetails, JobStatus
from ray_head import JOB_TIMEOUT

from jobctl import cli
from jobctl.stack import build_spec, load_stack
from workloads import exit_codes, gate, run_owner
from workloads import submit as jobs
from workloads.gang_wait import WorkerGroup, WorkerPod
from workloads.gate import gate_job as gate_client
from workloads.hook import JobSubmissionProvider
from workloads.job_spec import JobSpec
from workloads.recovery import Action, RecoveryPolicy, Watcher

pytestmark = pytest.mark.filterwarnings("ignore:ssl=None is deprecated:DeprecationWarning")

FAST = RecoveryPolicy(check_interval_seconds=0.2, max_restarts=2, backoff_seconds=0, max_backoff_seconds=0)


def gate_job(stack: str, status: str = "RUNNING", sid: str = "g", meta=None) -> JobDetails:
    return JobDetails(
        type="SUBMISSION",
        entrypoint="python -m workloads.gate run x",
        status=status,
        submission_id=sid,
        start_time=1_000,
        metadata={gate.META_GATE: stack, **(meta or {})},
    )


def test_a_running_gate_job_alone_keeps_the_watcher_from_submitting_although_every_gpu_is_alive():
    # The deploy's gate runs; no training job exists yet and job.submit is on (resubmit_missing).
    spec = python_job("t-owner-fake", "pass")
    client = FakeClient([gate_job("t-owner-fake", sid="t-owner-fake-gate-20260101-000000-1")])
    decision = Watcher(client, spec, dataclasses.replace(FAST, resubmit_missing=True)).step()
    assert decision.action is Action.WAIT, decision
    assert (
        "acceptance gate t-owner-fake-gate-20260101-000000-1 is running; nothing is submitted while a gate runs"
        in decision.reason
    )
    assert client.submitted == []
    # Another stack's gate is none of this stack's business.
    other = FakeClient([gate_job("another-stack")])
    assert Watcher(other, spec, dataclasses.replace(FAST, resubmit_missing=True)).step().action is Action.RESUBMIT


def test_a_gate_verdict_from_nodes_that_are_gone_neither_clears_nor_holds_the_same_attempt_on_its_new_nodes():
    # Attempt r2's gate passed on nodes a and b; within the same attempt id node b was replaced by c (the
    # attempt had not been submitted yet). That verdict says nothing of c: a new gate runs on a and c.
    stack, attempt = "t-owner-moved", "t-owner-moved-r2"
    plan = cpu_plan(Path("/lustre"), node_count=2, gpus_per_node=1)
    passed = gate.GateReport((gate.Check("gpus", True, "2 healthy cpu GPUs on 2 nodes"),), 1.0, 2)
    old = gate_job(
        stack,
        "SUCCEEDED",
        sid=run_owner.gate_job_id(attempt, 1),
        meta={run_owner.META_GATE_FOR: attempt, run_owner.META_GATE_NODES: "node-a,node-b"},
    )
    client = FakeClient([old], log=gate.RESULT_MARKER + json.dumps(passed.to_dict()))
    setup = run_owner.GateSetup("enforce", plan)

    def rows(*names: str) -> list[dict]:
        return [{"node_id": n, "state": "ALIVE", "resources_total": {"CPU": 4.0}} for n in names]

    # The nodes the verdict was measured on: it clears the attempt (and the fake's log is read as the report).
    same = run_owner.clear_attempt(client, stack, attempt, setup, node_rows=rows("node-b", "node-a"))
    assert (same.clearance, same.gate_id) == (run_owner.Clearance.CLEARED, old.submission_id), same
    said: list[str] = []
    moved = run_owner.clear_attempt(
        client, stack, attempt, setup, node_rows=rows("node-a", "node-c"), on_line=said.append
    )
    assert (moved.clearance, moved.gate_id, moved.started) == (
        run_owner.Clearance.WAIT,
        run_owner.gate_job_id(attempt, 2),
        True,
    ), moved
    assert said and "(the worker nodes changed since its last gate)" in said[0], said
    (started,) = client.submitted
    assert started["metadata"][run_owner.META_GATE_NODES] == "node-a,node-c"
    assert started["metadata"][run_owner.META_GATE_FOR] == attempt
    # A failed verdict from the gone nodes does not hold the attempt either: it is gated again too.
    failed = gate_job(
        stack,
        "SUCCEEDED",
        sid=run_owner.gate_job_id("t-owner-moved-r3", 1),
        meta={run_owner.META_GATE_FOR: "t-owner-moved-r3", run_owner.META_GATE_NODES: "node-a,node-b"},
    )
    client = FakeClient([failed], log=gate.RESULT_MARKER + json.dumps(gpus_failed_report("node-b").to_dict()))
    held = run_owner.clear_attempt(client, stack, "t-owner-moved-r3", setup, node_rows=rows("node-a", "node-b"))
    assert held.clearance is run_owner.Clearance.HELD, held
    regated = run_owner.clear_attempt(client, stack, "t-owner-moved-r3", setup, node_rows=rows("node-a", "node-c"))
    assert (regated.clearance, regated.started) == (run_owner.Clearance.WAIT, True), regated


# ------------------------------------------------------------------------------ on the local Ray head


def start_fake_gate(
    client, stack: str, target: str, nodes: tuple[str, ...], report: gate.GateReport, release: Path, k: int = 1
) -> str:
    """A gate run as the owner starts one (same id and metadata) whose driver runs until the file `release`
    exists (the test makes it once the party under test is seen waiting), then prints `report`."""
    job_id = run_owner.gate_job_id(target, k)
    code = (
        f"import os, time\nt = time.monotonic()\n"
        f"while not os.path.exists({str(release)!r}) and time.monotonic() - t < 120:\n"
        f"    time.sleep(0.05)\nprint({gate.RESULT_MARKER + json.dumps(report.to_dict())!r}, flush=True)"
    )
    client.submit_job(
        entrypoint=f"{shlex.quote(sys.executable)} -c {shlex.quote(code)}",
        submission_id=job_id,
        metadata={gate.META_GATE: stack, run_owner.META_GATE_FOR: target, run_owner.META_GATE_NODES: ",".join(nodes)},
    )
    assert (
        jobs.wait(client, job_id, until={JobStatus.RUNNING}, timeout=JOB_TIMEOUT, poll_interval=0.2)
        == JobStatus.RUNNING
    )
    return job_id


def release_when(seen: Callable[[], bool], release: Path) -> threading.Thread:
    """Make `release` once `seen()` holds: the fake gate ends only after its waiter has seen it running."""

    def run() -> None:
        deadline = time.monotonic() + 120
        while not seen() and time.monotonic() < deadline:
            time.sleep(0.05)
        release.touch()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


WAITING = "is running; nothing is submitted while a gate runs"


@pytest.fixture(autouse=True)
def quick_gate_polls(monkeypatch):
    # The hook and the CLI look at a gate they wait for every 2 s; here the fake gates end in a blink.
    monkeypatch.setattr(run_owner, "GATE_POLL_SECONDS", 0.2)


def hook_props(head, spec: JobSpec, plan: gate.GatePlan, policy: str = "enforce") -> dict:
    return {
        **spec.to_dict(),
        "address": head.address,
        "ray_cluster_name": "",
        "gate_policy": policy,
        "gate_plan": plan.to_dict(),
    }


def test_a_running_then_failed_gate_prevents_every_training_submission_by_the_watcher_and_the_hook(
    head, client, tmp_path, monkeypatch
):
    stack = "t-own-held"
    spec = python_job(stack, "print('trained')")
    plan = cpu_plan(tmp_path)
    setup = run_owner.GateSetup("enforce", plan)
    nodes = run_owner.worker_node_ids(jobs.ray_nodes(client), "CPU")
    assert len(nodes) == 1  # the local head
    release = tmp_path / "release"
    gate_id = start_fake_gate(
        client, stack, spec.submission_id, nodes, gpus_failed_report("gke-b200-gpu-7f3a"), release
    )
    watcher = Watcher(client, spec, dataclasses.replace(FAST, resubmit_missing=True), gate=setup)
    running = watcher.step()
    assert running.action is Action.WAIT and f"acceptance gate {gate_id} is running" in running.reason, running
    # The hook (pulumi up) waits for that gate instead of starting its own, and takes its verdict.
    from workloads import hook

    hook_lines: list[str] = []
    monkeypatch.setattr(hook, "_log", hook_lines.append)
    released = release_when(lambda: any(WAITING in line for line in hook_lines), release)
    with pytest.raises(gate.GateFailed, match=r"^acceptance gate FAILED: gpus: gke-b200-gpu-7f3a: 6 of 8 healthy"):
        JobSubmissionProvider().create(hook_props(head, spec, plan))
    released.join()
    assert f"acceptance gate {gate_id} {WAITING}" in hook_lines, hook_lines
    assert [j.submission_id for j in jobs.list_jobs(client, stack)] == []
    # Failed on the nodes alive now: the watcher holds the attempt and names the node, look after look.
    for _ in range(2):
        held = watcher.step()
        assert held.action is Action.WAIT and "gke-b200-gpu-7f3a" in held.reason, held
        assert "is not submitted (job.gate enforce); the gate runs again once the worker nodes change" in held.reason
    assert [j.submission_id for j in jobs.list_jobs(client, stack)] == []
    assert [r.submission_id for r in run_owner.gate_runs(client.list_jobs(), stack)] == [gate_id]


def forget_the_stacks_jobs(client, stack: str) -> None:
    """Delete every ended job and gate run of `stack` from the head this test process shares: another
    test (tests/test_jobctl.py) may have run the same stack's real spec there, which would make the
    next attempt `-r2`, not the one whose gate this test runs."""
    for job in [*jobs.list_jobs(client, stack), *run_owner.gate_runs(client.list_jobs(), stack)]:
        if job.status in (JobStatus.PENDING, JobStatus.RUNNING):
            client.stop_job(job.submission_id)
            jobs.wait(client, job.submission_id, timeout=JOB_TIMEOUT, poll_interval=0.2)
        client.delete_job(job.submission_id)


def test_submit_by_hand_waits_for_a_running_gate_and_submits_nothing_after_its_failure(
    head, client, tmp_path, monkeypatch
):
    # `python -m jobctl submit`: the dev stack's real spec; a gate for its first attempt is running on its one GPU
    # worker (the local head has no GPU node: Ray's count of them is the cluster's).
    from workloads import worker_group

    monkeypatch.setattr(worker_group, "alive_gpu_nodes", lambda _client: 1)
    forget_the_stacks_jobs(client, "dev")
    spec = build_spec(load_stack("dev"))
    # The worker's head is shared: tests/test_jobctl.py may have left the dev stack's ended attempts on it,
    # and the CLI would then gate the next attempt, not the first. Start from a head without them.
    for ended in [*jobs.list_jobs(client, "dev"), *run_owner.gate_runs(client.list_jobs(), "dev")]:
        client.delete_job(ended.submission_id)
    release = tmp_path / "release"
    start_fake_gate(client, "dev", spec.submission_id, (), gpus_failed_report("gke-dev-gpu-1"), release)
    out, err = io.StringIO(), io.StringIO()
    released = release_when(lambda: WAITING in out.getvalue(), release)
    code = cli.main(["submit", "--stack", "dev", "--gate", "enforce", "--address", head.address], out=out, err=err)
    released.join()
    assert code == exit_codes.GATE_FAILED, (out.getvalue(), err.getvalue())
    assert (
        f"acceptance gate {spec.submission_id}-gate-1 is running; nothing is submitted while a gate runs"
        in out.getvalue()
    )
    assert err.getvalue().startswith("error: acceptance gate FAILED: gpus: gke-dev-gpu-1: 6 of 8")
    assert jobs.list_jobs(client, "dev") == []


TRAIN = """
import os, sys
d = {ckpt!r}
os.makedirs(d, exist_ok=True)
done = sorted(n for n in os.listdir(d) if n.startswith('step_'))
def step(k):
    print('========================= Step %d/3 =========================' % k, flush=True)
if done:
    partial = sorted(n for n in os.listdir(d) if n.startswith('tmp_'))
    print('resuming from', done[-1], 'partial saves left:', partial, flush=True)
    step(2); step(3)
    sys.exit(0)
step(1)
os.makedirs(os.path.join(d, 'tmp_step_1', 'policy', 'weights'))  # a whole save, as NeMo-RL writes it
open(os.path.join(d, 'tmp_step_1', 'policy', 'weights', '.metadata'), 'w').close()
os.rename(os.path.join(d, 'tmp_step_1'), os.path.join(d, 'step_1'))
step(2)
os.makedirs(os.path.join(d, 'tmp_step_2'))  # killed mid-save
raise RuntimeError('collective timed out')  # a plain failure: only Ray's node table shows the lost GPU node
"""


def fake_gpu_node(name: str, state: str = "ALIVE", end_ms=None) -> dict:
    return {
        "node_id": f"{name}-{'0' * 40}",
        "node_ip": f"10.0.3.{len(name)}",
        "state": state,
        "end_time_ms": end_ms,
        "resources_total": {"GPU": 8.0, "CPU": 1.0},
        "state_message": "health check failed due to missing too many heartbeats" if end_ms else "",
    }


class FakedNodes(Watcher):
    """The local head has one node and no GPU: Ray's node table is the real one plus `extra` GPU nodes."""

    extra: list[dict] = []

    def _node_rows(self):
        return [*super()._node_rows(), *self.extra]


def settle(watcher: Watcher, want: Action, log: list[str], timeout: float = 180.0):
    deadline = time.monotonic() + timeout
    while True:
        decision = watcher.step()
        log.append(f"{decision.action.value}: {decision.reason}")
        log.extend(watcher.notes)
        watcher.notes.clear()
        if decision.action is want:
            return decision
        assert decision.action is Action.WAIT and time.monotonic() < deadline, "\n".join(log)
        time.sleep(0.2)


def test_a_preemption_leads_to_a_new_gate_on_the_new_nodes_then_a_resubmission_that_resumes(
    head, client, tmp_path, monkeypatch
):
    stack, ckpt = "t-own-preempt", tmp_path / "ckpt"
    spec = python_job(stack, TRAIN.format(ckpt=str(ckpt)))
    (tmp_path / "lustre").mkdir()
    # Each gate is a real Ray job started by the owner (its id, metadata, node set, the runtime env that ships
    # workloads/, its verdict read back from its log); only its driver prints a passing report instead of
    # measuring: the measuring itself runs end to end in tests/test_driver.py, and two torch-importing
    # gate runs here made this the suite's longest test (27 s of 143 on two cores).
    passed = gate.GateReport((gate.Check("gpus", True, "1 of 1 worker nodes healthy"),), 1.0, 1)
    verdict = f"print({gate.RESULT_MARKER + json.dumps(passed.to_dict())!r})"
    monkeypatch.setattr(
        gate_client, "job_entrypoint", lambda _plan: f"{shlex.quote(sys.executable)} -c {shlex.quote(verdict)}"
    )
    run = run_owner.RunPlan(
        gate_policy="enforce",
        gate_plan=cpu_plan(
            tmp_path / "lustre",
            gpus_per_node=1,
            storage_bytes_per_node=8 << 20,
            message_bytes=1 << 16,
            iters=2,
            timeout_s=120,
        ).to_dict(),
        checkpoint_dir=str(ckpt),
        node_count=1,
        node_hour_usd=36.0,
    )
    from workloads.ledger import LedgerFile

    ledger = LedgerFile(tmp_path / "state" / f"{stack}.ledger.json")
    watcher = FakedNodes(client, spec, dataclasses.replace(FAST, resubmit_missing=True), run=run, ledger=ledger)
    watcher.extra = [fake_gpu_node("gpu-a")]
    log: list[str] = []
    # Attempt 1 (job.submit on, nothing on the cluster): gated first, then submitted.
    settle(watcher, Action.RESUBMIT, log)
    assert jobs.wait(client, spec.submission_id, timeout=120, poll_interval=0.2) == JobStatus.FAILED
    first = jobs.info(client, spec.submission_id)
    # The spot node under it was preempted while it ran (Ray's node end time between the job's start and end,
    # whatever the job's length: a fixed offset before its end fell before its start on a fast machine); GKE
    # brought a replacement.
    died = (first.start_time + first.end_time) // 2
    assert first.start_time <= died <= first.end_time, first
    watcher.extra = [fake_gpu_node("gpu-a", "DEAD", end_ms=died), fake_gpu_node("gpu-b")]
    resubmitted = settle(watcher, Action.RESUBMIT, log)
    assert "preemption-like (Ray lost GPU node 10.0.3.5 during the attempt" in resubmitted.reason, resubmitted
    assert jobs.wait(client, f"{spec.submission_id}-r2", timeout=120, poll_interval=0.2) == JobStatus.SUCCEEDED
    assert settle(watcher, Action.DONE, log).reason == "attempt 2 succeeded"
    text = "\n".join(log)

    # One gate per attempt; the second ran on the new node set, after the preempted attempt and before its resubmission.
    runs = run_owner.gate_runs(client.list_jobs(), stack)
    assert [(r.submission_id, r.metadata[run_owner.META_GATE_FOR]) for r in runs] == [
        (f"{spec.submission_id}-gate-1", spec.submission_id),
        (f"{spec.submission_id}-r2-gate-1", f"{spec.submission_id}-r2"),
    ]
    assert (
        "gpu-b" in runs[1].metadata[run_owner.META_GATE_NODES]
        and "gpu-a" not in runs[1].metadata[run_owner.META_GATE_NODES]
    )
    assert all(str(r.status) == "SUCCEEDED" for r in runs), text
    second = jobs.info(client, f"{spec.submission_id}-r2")
    assert first.end_time <= runs[1].start_time and runs[1].end_time <= second.start_time, text
    # It resumed from the last complete step_N, the dead partial save removed first, and the loss is reported.
    assert "resuming from step_1 partial saves left: []" in "".join(jobs.logs(client, second.submission_id))
    assert (
        f"attempt 1 ({spec.submission_id}) ended: preemption-like, was in step 2; resumed from step 0, "
        "last complete checkpoint step_1: 1 step(s) lost"
    ) in text
    assert f"attempt 2 ({spec.submission_id}-r2) resumes from step_1; removed the partial save(s) tmp_step_2" in text
    metric = [json.loads(line) for line in log if line.startswith("{")]
    assert [(m["attempt"], m["cause"], m["stepsLost"]) for m in metric] == [
        (1, "preemption-like", 1),
        (2, "succeeded", 0),
    ]
    saved = ledger.load(stack, spec.submission_id)
    assert [(a.attempt, a.cause, a.resume_step, a.steps_lost, a.cleaned) for a in saved.attempts] == [
        (1, "preemption-like", 0, 1, []),
        (2, "succeeded", 1, 0, ["tmp_step_2"]),
    ]
    assert all(a.node_hours(0) > 0 for a in saved.attempts) and saved.spend(0) > 0


# ------------------------------------------------------------------------------ the gang wait before an attempt

RUNGS = (("t-gpu-spot", "spot"), ("t-gpu-flex", "flexStart"), ("t-gpu-ondemand", "onDemand"))


def gang_plan(nodes: int, on_timeout: str = "releaseWorkers", minutes: int = 10) -> run_owner.RunPlan:
    """A ladder stack's run.json as infra.run_plan builds it (tests/test_run_plan.py checks that)."""
    return run_owner.RunPlan(
        node_count=nodes,
        gang_max_wait_minutes=minutes,
        gang_on_timeout=on_timeout,
        gang_rungs=RUNGS,
        ray_namespace="nemo-rl",
        ray_cluster="nemo-rl",
        ray_worker_group="gpu",
    )


class ListingClient(FakeClient):
    """A FakeClient whose job table shows what was submitted (pending), as Ray's does, with a log and Ray's
    node table (`dead`: rows of nodes Ray saw die)."""

    dead: list[dict] = []

    def get_job_info(self, job_id: str) -> JobDetails:
        return next(j for j in self.jobs if j.submission_id == job_id)

    def get_job_logs(self, job_id: str) -> str:
        return ""

    def _do_request(self, method, path, **kwargs):
        rows = self.dead
        return SimpleNamespace(status_code=200, json=lambda: {"data": {"result": {"result": rows}}})

    def submit_job(self, **kwargs) -> str:
        self.jobs.append(
            JobDetails(
                type="SUBMISSION",
                entrypoint=kwargs["entrypoint"],
                status="PENDING",
                submission_id=kwargs["submission_id"],
                metadata=kwargs["metadata"],
            )
        )
        return super().submit_job(**kwargs)


class FakeGang:
    """The worker pods as `KubeGangView` reads them: worker i gets a node of pool `arrivals[i][1]` at
    `arrivals[i][0]` seconds (None: never); `release` scales the group to 0 (no pods any more)."""

    def __init__(self, now: list[float], arrivals):
        self.now, self.arrivals, self.start = now, arrivals, now[0]
        self.released = 0

    def worker_pods(self):
        if self.released:
            return []
        t = self.now[0] - self.start
        return [
            WorkerPod(f"w{i}", "Running", f"{a[1]}-node-{i}")
            if a is not None and t >= a[0]
            else WorkerPod(f"w{i}", "Pending", None)
            for i, a in enumerate(self.arrivals)
        ]

    def node_pool(self, node):
        return node.rsplit("-node-", 1)[0]

    def release(self):
        self.released += 1
        return "worker group gpu of RayCluster nemo-rl scaled to 0"

    def group(self):
        return WorkerGroup(0, 0 if self.released else len(self.arrivals), 0, len(self.arrivals))

    def scale(self, replicas, claim_until=None, asked_at=None):
        """The owner's ask (workloads/worker_group.py): the group at `replicas` again, the pods as arranged."""
        had = self.group().replicas
        if replicas:
            self.released = 0
        return None if had == replicas else had


def watch_gang(tmp_path, client, spec, plan, gang, now, looks: int, policy=None):
    """`recovery.watch` as the pod runs it, for `looks` looks one minute apart on a fake clock; returns
    the last decision, what it wrote and the ledger on disk."""
    from workloads import recovery
    from workloads.ledger import LedgerFile, ledger_path

    out, seen = io.StringIO(), []

    def sleep(seconds):
        now[0] += 60

    decision = recovery.watch(
        client,
        spec,
        policy or dataclasses.replace(FAST, resubmit_missing=True),
        clock=lambda: now[0],
        sleep=sleep,
        out=out,
        state=tmp_path / f"{spec.stack}.json",
        until=lambda d: seen.append(d) or len(seen) >= looks,
        run=plan,
        gang=gang,
    )
    ledger = LedgerFile(ledger_path(tmp_path / f"{spec.stack}.json")).load(spec.stack, spec.submission_id)
    return decision, out.getvalue().splitlines(), ledger


def test_a_gang_that_never_completes_is_said_once_released_recorded_and_nothing_is_submitted(tmp_path):
    spec = python_job("t-gang-never", "pass")
    client, now = FakeClient([]), [1_800_000_000.0]
    gang = FakeGang(now, [(0, "t-gpu-spot"), (60, "t-gpu-spot"), (300, "t-gpu-ondemand"), None, None])
    decision, lines, ledger = watch_gang(tmp_path, client, spec, gang_plan(5), gang, now, looks=20)
    line = (
        "gang incomplete: 3 of 5 GPU nodes after 10 min (spot 2, onDemand 1; no rung gave the rest); "
        "released: worker group gpu of RayCluster nemo-rl scaled to 0"
    )
    assert [x for x in lines if "gang incomplete" in x] == [x for x in lines if line in x], lines
    assert len([x for x in lines if "gang incomplete" in x]) == 1, "said once, however often it looks after"
    assert gang.released == 1 and client.submitted == []
    assert decision.action is Action.GIVE_UP and decision.reason.endswith(f"{line}; nothing is submitted")
    # The ledger (on Lustre, for status): one event, and the wait with its mix and outcome.
    assert [e.split(" ", 2)[2] for e in ledger.events] == [line]
    assert (ledger.gang.outcome, ledger.gang.ready, ledger.gang.mix) == ("released", 3, "spot 2, onDemand 1")
    assert ledger.attempts == []
    from workloads.ledger import table

    assert table(ledger, now[0])[2] == (
        "gang for attempt 1: incomplete, 3 of 5 GPU nodes (spot 2, onDemand 1), and its workers released: nothing "
        "is submitted until they are back and the attempt is submitted again (docs/capacity.md)"
    )
    # While it waited, a line per change of the gang, not per look.
    waiting = [x for x in lines if "waiting for the gang" in x]
    assert [x.split("waiting for the gang: ", 1)[1].split(",")[0] for x in waiting] == [
        "1 of 5 GPU nodes (spot 1)",
        "2 of 5 GPU nodes (spot 2)",
        "3 of 5 GPU nodes (spot 2",
    ], waiting


def test_with_on_timeout_keep_the_workers_stay_and_the_attempt_goes_in_once_the_gang_is_whole(tmp_path):
    spec = python_job("t-gang-keep", "pass")
    client, now = ListingClient([]), [1_800_000_000.0]
    gang = FakeGang(now, [(0, "t-gpu-spot"), (15 * 60, "t-gpu-flex")])
    decision, lines, ledger = watch_gang(tmp_path, client, spec, gang_plan(2, "keep"), gang, now, looks=12)
    assert gang.released == 0 and client.submitted == [] and decision.action is Action.WAIT
    said = [x for x in lines if "gang incomplete" in x]
    assert len(said) == 1 and said[0].endswith(
        "gang incomplete: 1 of 2 GPU nodes after 10 min (spot 1; no rung gave the rest); kept waiting "
        "(gpuPool.capacity.onTimeout: keep)"
    )
    assert "past its bound of 10 min, kept" in lines[-1]
    assert ledger.gang.outcome == "kept" and len(ledger.events) == 1
    # The second worker's node comes at minute 15: the watcher, still looking, submits attempt 1.
    decision, lines, ledger = watch_gang(tmp_path, client, spec, gang_plan(2, "keep"), gang, now, looks=6)
    assert decision.action is Action.WAIT and decision.reason == "attempt 1 is pending"
    assert [s["submission_id"] for s in client.submitted] == [spec.submission_id]
    assert any("gang complete: 2 of 2 GPU nodes" in x and "(spot 1, flexStart 1)" in x for x in lines), lines
    assert gang.released == 0 and [a.rungs for a in ledger.attempts] == ["spot 1, flexStart 1"]


def test_after_a_preemption_a_gang_from_two_rungs_is_submitted_with_its_mix_in_the_ledger_and_status(tmp_path):
    from ray.job_submission import JobDetails

    from workloads.ledger import table
    from workloads.recovery.owner_loop import META_AUTO_RESTARTS

    spec = python_job("t-gang-mix", "pass")
    now = [1_800_000_000.0]
    lost = JobDetails(
        type="SUBMISSION",
        entrypoint=spec.entrypoint,
        status="FAILED",
        submission_id=spec.submission_id,
        message="collective timed out",
        driver_exit_code=1,
        start_time=int(now[0] * 1000) - 3_600_000,
        end_time=int(now[0] * 1000),
        metadata={**spec.metadata, jobs.META_ATTEMPT: "1", META_AUTO_RESTARTS: "0"},
    )
    client = ListingClient([lost])
    # Ray saw a GPU node die while attempt 1 ran: a spot preemption (classifier rule 3).
    client.dead = [fake_gpu_node("spot-a", "DEAD", end_ms=lost.end_time - 1000)]
    # Spot gives 3 nodes at once; on-demand the other 5 two minutes later.
    gang = FakeGang(now, [(0, "t-gpu-spot")] * 3 + [(120, "t-gpu-ondemand")] * 5)
    # The ladder's prices as run.json carries them (spot first: an attempt of unknown mix is priced at spot's).
    plan = dataclasses.replace(
        gang_plan(8, minutes=90), node_hour_usd=36.0, rung_node_hour_usd={"spot": 36.0, "onDemand": 90.0}
    )
    decision, lines, ledger = watch_gang(tmp_path, client, spec, plan, gang, now, looks=4)
    (sub,) = client.submitted
    assert sub["submission_id"] == f"{spec.submission_id}-r2" and decision.reason == "attempt 2 is pending"
    assert gang.released == 0
    assert any(x.endswith(" gang complete: 8 of 8 GPU nodes after 2 min (spot 3, onDemand 5)") for x in lines), lines
    assert any("waiting for the gang: 3 of 8 GPU nodes (spot 3)" in x for x in lines), lines
    (first, second) = ledger.attempts
    assert (first.rungs, second.rungs, second.submission_id) == ("", "spot 3, onDemand 5", sub["submission_id"])
    shown = table(ledger, now[0])
    assert shown[0].split()[6:8] == ["nodes", "rungs"]
    assert shown[1].split()[5:8] == ["preemption-like", "8", "-"], "attempt 1 was not looked at"
    assert re.search(r"\brunning +8 +spot 3, onDemand 5 +0\.13 ", shown[2]), shown
    # Attempt 1 (mix not seen): 8 node-h at spot's $36; attempt 2: its hours x (3 x $36 + 5 x $90).
    # Spend, then $/step: not known while no step of the attempt is known.
    assert re.search(r"\$288\.00 +-$", shown[1]), shown
    assert re.search(re.escape(f"${second.hours(now[0]) * 558:,.2f}") + " +-$", shown[2]), shown
    assert second.hours(now[0]) > 0


def test_a_restarted_watcher_keeps_the_deadline_of_the_wait_it_began(tmp_path):
    spec = python_job("t-gang-restart", "pass")
    client, now = FakeClient([]), [1_800_000_000.0]
    gang = FakeGang(now, [(0, "t-gpu-spot"), None])
    decision, _, ledger = watch_gang(tmp_path, client, spec, gang_plan(2), gang, now, looks=6)
    assert decision.action is Action.WAIT and ledger.gang.since == 1_800_000_000.0
    # A new pod (the same ledger on Lustre) 5 min later: the wait ends at minute 10, not 15.
    now[0] += 5 * 60
    decision, lines, _ = watch_gang(tmp_path, client, spec, gang_plan(2), gang, now, looks=1)
    assert decision.action is Action.GIVE_UP and gang.released == 1 and "after 10 min" in lines[-1]


def test_a_kubernetes_api_that_does_not_answer_holds_the_attempt_and_the_watcher_goes_on(tmp_path):
    class Down(FakeGang):
        def worker_pods(self):
            raise OSError("[Errno 111] Connection refused")

    spec = python_job("t-gang-down", "pass")
    client, now = FakeClient([]), [1_800_000_000.0]
    decision, lines, _ = watch_gang(tmp_path, client, spec, gang_plan(2), Down(now, [None, None]), now, looks=3)
    assert decision.action is Action.WAIT and client.submitted == []
    assert decision.reason.endswith("cannot look at the gang: [Errno 111] Connection refused")


def test_an_attempt_someone_else_submits_during_the_gang_wait_ends_the_wait_and_is_watched(tmp_path):
    from workloads.ledger import table

    spec = python_job("t-gang-race", "pass")
    client, now = ListingClient([]), [1_800_000_000.0]
    gang = FakeGang(now, [(0, "t-gpu-spot"), None])
    decision, _, ledger = watch_gang(tmp_path, client, spec, gang_plan(2), gang, now, looks=2)
    assert "waiting for the gang: 1 of 2" in decision.reason and ledger.gang.outcome == "waiting"
    # The deploy's own submission (job.submit) lands: that is attempt 1; the watcher submits nothing more.
    client.jobs.append(
        JobDetails(
            type="SUBMISSION",
            entrypoint=spec.entrypoint,
            status="RUNNING",
            submission_id=spec.submission_id,
            start_time=int(now[0] * 1000),
            metadata=dict(spec.metadata),
        )
    )
    decision, _, ledger = watch_gang(tmp_path, client, spec, gang_plan(2), gang, now, looks=20)
    assert decision.reason == "attempt 1 is running" and client.submitted == [] and gang.released == 0
    assert [a.submission_id for a in ledger.attempts] == [spec.submission_id]
    assert not [line for line in table(ledger, now[0]) if line.startswith("gang for")]


def test_after_a_head_restart_a_second_submitter_numbers_from_the_ledger_and_attempt_1_keeps_its_record(tmp_path):
    from workloads.ledger import LedgerFile, ledger_path
    from workloads.recovery import StateFile

    spec = JobSpec.create(stack="s", recipe="grpo", entrypoint="python train.py", runtime_env={})
    client, state = ListingClient([]), tmp_path / "s.json"
    ledger = LedgerFile(ledger_path(state))
    Watcher(client, spec, FAST, state=StateFile(state), ledger=ledger).resubmit(1, 0)
    client.jobs.clear()  # the head restarted without GCS fault tolerance: its job table is empty

    result, _ = run_owner.submit_gated(
        client, spec, run_owner.GateSetup("off", None), ledger=lambda: ledger.load(spec.stack, spec.run_id)
    )

    assert result.submission_id == f"{spec.submission_id}-r2", "the hook/jobctl restarted the attempt numbering"
    assert Watcher(client, spec, FAST, state=StateFile(state)).step().action is Action.WAIT  # the watcher adopts it
    watcher = Watcher(client, spec, FAST, state=StateFile(state), ledger=ledger)
    watcher.step()
    records = [(a.attempt, a.submission_id, a.cause) for a in watcher.ledger.attempts]
    assert records == [(1, spec.submission_id, "superseded"), (2, f"{spec.submission_id}-r2", "running")]


def test_a_watcher_without_its_state_file_numbers_a_missing_job_after_the_ledgers_last_attempt(tmp_path):
    from workloads.ledger import LedgerFile, ledger_path

    spec = JobSpec.create(stack="s", recipe="grpo", entrypoint="python train.py", runtime_env={})
    client, ledger = ListingClient([]), LedgerFile(ledger_path(tmp_path / "s.json"))
    Watcher(client, spec, FAST, ledger=ledger).resubmit(3, 2)
    client.jobs.clear()  # the head restarted, and the watcher's state file is gone (or unreadable)

    # Attempt 3 (restart 2) is lost: a third restart, under a cap of 3 (FAST's 2 would end the run, as with the state).
    policy = dataclasses.replace(FAST, resubmit_missing=True, max_restarts=3)
    decision = Watcher(client, spec, policy, ledger=ledger).step()

    assert decision.next_attempt == 4, decision.reason
