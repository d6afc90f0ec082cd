"""The resubmission holds (workloads/recovery/holds.py) as the owner loop runs them; here `recovery.shrink`
(`shrink_when_short`): a run that lost half its gang trains on fewer nodes after the wait, on leases, and grows back
to its full size when the nodes return: on a simulated cluster and clock, and with real jobs on the local Ray head."""

from __future__ import annotations

import dataclasses
import io
import shlex
from pathlib import Path
from types import SimpleNamespace
from typing import Optional

from workloads import size_ladder
from workloads.job_types import JobSpec
from workloads.ledger import LedgerFile, ledger_path
from workloads.recovery import Action, RecoveryPolicy, watch
from workloads.run_owner import RunPlan

FULL, HALF = 8, 4
LOSS_MIN, RETURN_MIN = 10, 130  # four of the eight nodes go at minute 10 and come back two hours later
LEASE_MIN, WAIT_MIN = 60, 15
T0 = 1_800_000_000.0


def b200_like_plan() -> RunPlan:
    """run.json as infra/run_plan.py writes it for b200 (tests/test_size_ladder.py checks the real one)."""
    return RunPlan(
        node_count=FULL,
        shrink_sizes=[{"nodes": n, "overrides": list(size_ladder.size_overrides(n, LEASE_MIN))} for n in (HALF, 2)],
        shrink_wait_minutes=WAIT_MIN,
        shrink_lease_minutes=LEASE_MIN,
    )


def spec() -> JobSpec:
    argv = ["python", "examples/run_grpo_math.py", "--config", "c.yaml", f"cluster.num_nodes={FULL}", "a.b=1"]
    return JobSpec.create(
        stack="t", recipe="t", entrypoint=f"true; cd /opt/nemo-rl && {shlex.join(argv)}", runtime_env={}
    )


class Cluster:
    """Ray as the owner sees it on a simulated clock: `alive(minute)` GPU nodes; an attempt runs while its nodes
    are alive (else it fails as a lost node does), and one with a lease saves and SUCCEEDS when it ends."""

    def __init__(self, now: list[float], alive):
        self.now, self.alive = now, alive
        self.jobs: list[SimpleNamespace] = []
        self.logs: dict[str, str] = {}

    def minute(self) -> float:
        return (self.now[0] - T0) / 60

    def get_address(self) -> str:
        return "http://sim"

    def list_jobs(self):
        self._advance()
        return list(self.jobs)

    def get_job_info(self, job_id):
        return next(j for j in self.jobs if j.submission_id == job_id)

    def get_job_logs(self, job_id):
        return self.logs.get(job_id, "")

    def _do_request(self, method, path, **_):
        rows = [
            {"node_id": f"n{i}", "state": "ALIVE", "resources_total": {"GPU": 8}}
            for i in range(self.alive(self.minute()))
        ]
        return SimpleNamespace(status_code=200, json=lambda: {"data": {"result": {"result": rows}}})

    def submit_job(self, **kw):
        self.jobs.append(
            SimpleNamespace(
                submission_id=kw["submission_id"],
                entrypoint=kw["entrypoint"],
                metadata=kw["metadata"],
                status="RUNNING",
                start_time=int(self.now[0] * 1000),
                end_time=None,
                message="",
                driver_exit_code=None,
            )
        )
        return kw["submission_id"]

    def _advance(self) -> None:
        for job in self.jobs:
            if job.status != "RUNNING":
                continue
            nodes = size_ladder.attempt_nodes(job, FULL)
            lease: Optional[str] = next(
                (t.split("=", 1)[1] for t in shlex.split(job.entrypoint) if t.startswith(size_ladder.LEASE_KEY)), None
            )
            if self.alive(self.minute()) < nodes:
                job.status, job.message = "FAILED", "ray.exceptions.NodeDiedError: node died"
                job.end_time = int(self.now[0] * 1000)
            elif lease and (self.now[0] - job.start_time / 1000) >= LEASE_MIN * 60:
                job.status, job.end_time = "SUCCEEDED", int(self.now[0] * 1000)
                self.logs[job.submission_id] = f"Saving checkpoint for step 12...\n{size_ladder.LEASE_ENDED_LINE}\n"


def run_owner(tmp_path, minutes: int, return_min: float = RETURN_MIN):
    now = [T0]
    cluster = Cluster(now, lambda minute: HALF if LOSS_MIN <= minute < return_min else FULL)
    s = spec()
    cluster.submit_job(submission_id=s.submission_id, entrypoint=s.entrypoint, metadata=dict(s.metadata))
    out = io.StringIO()
    # As infra/run_plan.py `recovery_values` sets it: the owner waits for the pool's GPUs before a full-size attempt.
    policy = RecoveryPolicy(
        check_interval_seconds=60, max_restarts=5, backoff_seconds=120, max_backoff_seconds=600, pool_gpus=FULL * 8
    )

    def sleep(_):
        now[0] += 60

    looks: list = []
    watch(
        cluster,
        s,
        policy,
        clock=lambda: now[0],
        sleep=sleep,
        out=out,
        state=tmp_path / "t.json",
        until=lambda d: looks.append(d) or len(looks) >= minutes,
        run=b200_like_plan(),
    )
    ledger = LedgerFile(ledger_path(tmp_path / "t.json")).load("t", s.run_id)
    return cluster, ledger, out.getvalue().splitlines()


def test_half_the_gang_gone_for_two_hours_shrinks_after_the_wait_renews_its_lease_and_grows_back(tmp_path):
    cluster, ledger, lines = run_owner(tmp_path, minutes=260)
    started = [((j.start_time / 1000 - T0) / 60, size_ladder.attempt_nodes(j, FULL)) for j in cluster.jobs]
    # Preempted at minute 10; at reduced size within 20 minutes of the loss (the wait, then the next look).
    assert started[0] == (0, FULL) and started[1][1] == HALF and started[1][0] - LOSS_MIN <= 20, started
    # Leases renewed on four nodes while only four are alive, then back to eight within one lease of their return.
    back = next(t for t, n in started if n == FULL and t > 0)
    assert RETURN_MIN <= back <= RETURN_MIN + LEASE_MIN + 1, started
    assert all(n == HALF for t, n in started[1:] if t < back), started
    assert cluster.jobs[-1].status == "RUNNING" and size_ladder.attempt_nodes(cluster.jobs[-1], FULL) == FULL
    # The same run: every attempt is `<id>-r<N>` of the one spec, the global batch untouched, the size its only change.
    spec_id = cluster.jobs[0].submission_id
    assert [j.submission_id for j in cluster.jobs[1:]] == [f"{spec_id}-r{i}" for i in range(2, len(cluster.jobs) + 1)]
    assert "cluster.num_nodes=4" in cluster.jobs[1].entrypoint and "a.b=1" in cluster.jobs[1].entrypoint
    assert size_ladder.LEASE_KEY not in cluster.jobs[-1].entrypoint, "a full-size attempt runs without a lease"
    # The ledger: each attempt's size, the lease ends as such (not the run's end), one event per change of size.
    causes = [(a.nodes, a.cause) for a in ledger.attempts]
    assert causes[0] == (FULL, "preemption-like") and causes[-1] == (FULL, "running"), causes
    assert {c for n, c in causes[1:-1]} == {size_ladder.LEASE_CAUSE}, causes
    shrinks = [e for e in ledger.events if "runs on 4 of 8 nodes" in e]
    assert len(shrinks) == len(started) - 2 and "recovery.shrink" in shrinks[0], ledger.events
    assert "15 min after attempt 1 ended" in shrinks[0] and "when its lease ended" in shrinks[1]
    said = [x for x in lines if "runs on 4 of 8 nodes" in x]
    assert len(said) == len(shrinks), "one log line per resized attempt"


def test_a_gang_back_within_the_wait_is_resubmitted_whole(tmp_path):
    cluster, ledger, _ = run_owner(tmp_path, minutes=40, return_min=LOSS_MIN + 5)
    assert [size_ladder.attempt_nodes(j, FULL) for j in cluster.jobs] == [FULL, FULL]
    assert not [e for e in ledger.events if "runs on" in e]


# ------------------------------------------------------------------------------ on the local Ray head

TRAINER = """
import os, sys, time

args = dict(a.split("=", 1) for a in sys.argv[1:])
ckpt, nodes = args["checkpointing.checkpoint_dir"], int(args["cluster.num_nodes"])
last = int(args["grpo.max_num_steps"])
lease = args.get({lease_key!r})
ctl = {ctl!r}


def wait_for(name):
    t = time.monotonic()
    while not os.path.exists(os.path.join(ctl, name)) and time.monotonic() - t < 120:
        time.sleep(0.05)


def save(step):  # whole: `workloads.checkpoints.is_whole`
    w = os.path.join(ckpt, f"step_{{step}}", "policy", "weights")
    os.makedirs(w)
    open(os.path.join(w, ".metadata"), "w").close()


# As NeMo-RL picks its resume step: the highest `step_N`, whole or not (nemo_rl/utils/checkpoint.py).
found = sorted(int(n[5:]) for n in os.listdir(ckpt) if n.startswith("step_") and n[5:].isdigit())
resume = found[-1] if found else 0
whole = resume == 0 or os.path.exists(os.path.join(ckpt, f"step_{{resume}}", "policy", "weights", ".metadata"))
with open(os.path.join(ctl, "resumes"), "a") as f:
    f.write(f"{{nodes}} {{resume}} {{whole}}\\n")
step = resume
while step < last:
    step += 1
    print("=" * 10, f"Step {{step}}/{{last}}", "=" * 10, flush=True)
    if resume == 0 and step == 3:  # the first attempt: preempted while it saves step 3 (a shard, no marker)
        os.makedirs(os.path.join(ckpt, "step_3", "policy", "weights"))
        open(os.path.join(ckpt, "step_3", "policy", "weights", "__0_0.distcp"), "w").close()
        open(os.path.join(ctl, "at-risk"), "w").close()
        wait_for("preempt")
        print("ray.exceptions.NodeDiedError: the node running a policy worker died", file=sys.stderr, flush=True)
        sys.exit(1)
    save(step)
    if lease and step == resume + 2:  # its lease ends here: grpo.py saves, says so and returns
        wait_for("lease-over")
        print({lease_line!r}, flush=True)
        sys.exit(0)
"""


class HeadGang:
    """The GPU worker pods and Ray's GPU node rows of one gang of `FULL` nodes, changed by the test's world."""

    def __init__(self, clock):
        self.clock, self.up = clock, [True] * FULL
        self.rows = [self._row(i) for i in range(FULL)]
        self.since = [clock() - 600.0] * FULL
        """When each worker's pod was bound to its node (its container started a minute later)."""

    @staticmethod
    def _row(i: int, state: str = "ALIVE", end_ms: Optional[int] = None) -> dict:
        return {
            "node_id": f"gpu-{i:02d}-{'0' * 36}",
            "node_ip": f"10.0.4.{i}",
            "state": state,
            "end_time_ms": end_ms,
            "resources_total": {"GPU": 8.0, "CPU": 1.0},
            "state_message": "health check failed due to missing too many heartbeats" if end_ms else "",
        }

    def preempt(self, which: range, at_ms: int) -> None:
        for i in which:
            self.up[i] = False
            self.rows[i] = self._row(i, "DEAD", at_ms)

    def come_back(self, which: range) -> None:
        for i in which:  # new nodes with new ids; Ray keeps the dead ones in its table
            self.up[i], self.since[i] = True, self.clock()
            self.rows.append(self._row(FULL + i))

    # GangView (workloads/gang_wait.py)
    def worker_pods(self):
        from workloads.gang_wait import WorkerPod

        return [
            WorkerPod(f"w{i}", "Running", f"t-gpu-spot-node-{i}", self.since[i], self.since[i] + 60)
            if up
            else WorkerPod(f"w{i}", "Pending", None)
            for i, up in enumerate(self.up)
        ]

    def node_pool(self, node):
        return node.rsplit("-node-", 1)[0]

    def node_created(self, node):
        return None

    def release(self):
        raise AssertionError("the owner released the workers of a run that goes on")

    def group(self):
        from workloads.gang_wait import WorkerGroup

        return WorkerGroup(0, FULL, FULL, FULL)

    def scale(self, replicas, claim_until=None, asked_at=None):
        return None


def test_on_the_ray_head_a_run_that_loses_half_its_gang_trains_on_four_nodes_and_grows_back_to_eight(
    client, tmp_path, monkeypatch
):
    """The owner on the local Ray head: each attempt a real Ray job that prints GRPO's step banners and writes
    `step_N` saves, the gang (the worker pods and Ray's GPU node rows) faked, the clock simulated: it runs
    in real time while a job is active and a minute a look while none is."""
    import sys
    import time
    import uuid

    from workloads import submit
    from workloads.recovery import owner_loop
    from workloads.recovery.classify import value_of

    ctl, ckpt = tmp_path / "ctl", tmp_path / "lustre" / "run"
    ctl.mkdir()
    ckpt.mkdir(parents=True)
    trainer = ctl / "trainer.py"
    trainer.write_text(
        TRAINER.format(lease_key=size_ladder.LEASE_KEY, ctl=str(ctl), lease_line=size_ladder.LEASE_ENDED_LINE)
    )
    # `build_job`'s shape (`<prepare>; cd <workdir> && python <script> ...`), the venv's python first on PATH.
    argv = ["python", str(trainer), f"checkpointing.checkpoint_dir={ckpt}", f"cluster.num_nodes={FULL}"]
    argv.append("grpo.max_num_steps=6")
    bindir = shlex.quote(str(Path(sys.executable).parent))
    s = JobSpec.create(
        stack="t-shrink-head",
        recipe="t",
        entrypoint=f"export PATH={bindir}:$PATH; cd {shlex.quote(str(ctl))} && {shlex.join(argv)}",
        runtime_env={"env_vars": {"RAY_OVERRIDE_JOB_RUNTIME_ENV": "1", "RUN": uuid.uuid4().hex[:8]}},
    )
    plan = dataclasses.replace(
        b200_like_plan(),
        checkpoint_dir=str(ckpt),
        gang_max_wait_minutes=30,
        gang_on_timeout="keep",
        gang_rungs=(("t-gpu-spot", "spot"),),
        ray_namespace="nemo-rl",
        ray_cluster="nemo-rl",
        ray_worker_group="gpu",
    )

    class FakedGpuNodes(owner_loop.Watcher):
        def _node_rows(self):  # the local head has no GPU: its real row, and the gang's
            return [*super()._node_rows(), *gang.rows]

    monkeypatch.setattr(owner_loop, "Watcher", FakedGpuNodes)
    offset, started, readings, seen_ended = [0.0], time.monotonic(), [], set()

    def clock() -> float:
        readings.append((time.time() + offset[0], offset[0]))  # what each reading added of simulated time
        return readings[-1][0]

    gang = HeadGang(clock)

    def sleep(_):
        """The world between two looks: the preemption once attempt 1 saves step 3, the nodes back (and the lease's
        end) once attempt 2 is submitted; then real time while a job is active, else a simulated minute."""
        ours = submit.list_jobs(client, s.stack)
        if (ctl / "at-risk").exists() and not (ctl / "preempt").exists():
            gang.preempt(range(HALF, FULL), int(clock() * 1000))
            (ctl / "preempt").touch()
        if any(j.submission_id == f"{s.submission_id}-r2" for j in ours) and not (ctl / "lease-over").exists():
            gang.come_back(range(HALF, FULL))
            (ctl / "lease-over").touch()
        # A job that ended since the last look gets the owner's next look in real time too: else the world's minute
        # would race the owner to it (lost under load: the look found it running, this call found it ended).
        ended = {j.submission_id for j in ours if value_of(j.status) not in ("PENDING", "RUNNING")}
        if len(ended) < len(ours) or ended - seen_ended:
            seen_ended.update(ended)
            time.sleep(0.2)
        else:
            offset[0] += 60

    policy = RecoveryPolicy(
        check_interval_seconds=60, max_restarts=2, backoff_seconds=0, max_backoff_seconds=0, pool_gpus=FULL * 8
    )
    out, state = io.StringIO(), tmp_path / "t.json"
    submit.submit_attempt(client, s, 1)
    final = watch(
        client,
        s,
        policy,
        clock=clock,
        sleep=sleep,
        out=out,
        state=state,
        until=lambda d: d.action in (Action.DONE, Action.GIVE_UP) or time.monotonic() - started > 200,
        run=plan,
        gang=gang,
    )
    log = out.getvalue()
    assert final.action is Action.DONE and final.reason == "attempt 3 succeeded", log
    jobs = sorted(submit.list_jobs(client, s.stack), key=submit.attempt_of)
    sid = s.submission_id
    assert [(j.submission_id, str(j.status)) for j in jobs] == [
        (sid, "FAILED"),
        (f"{sid}-r2", "SUCCEEDED"),
        (f"{sid}-r3", "SUCCEEDED"),
    ], log
    # Shrunk: the same run at 4 nodes on a lease, nothing else changed; grown back: the run's own entrypoint.
    lease = f"{size_ladder.LEASE_KEY}={size_ladder.lease_text(LEASE_MIN)}"
    assert jobs[1].entrypoint == s.entrypoint.replace(f"cluster.num_nodes={FULL}", f"cluster.num_nodes={HALF}") + (
        f" {lease}"
    )
    assert jobs[1].metadata[size_ladder.META_NODES] == str(HALF)
    assert jobs[2].entrypoint == s.entrypoint and size_ladder.META_NODES not in jobs[2].metadata
    ledger = LedgerFile(ledger_path(state)).load(s.stack, s.run_id)
    rows = [(a.submission_id, a.nodes, a.cause, a.resume_step, a.last_step, a.saved_step) for a in ledger.attempts]
    assert rows == [
        (sid, FULL, "preemption-like", 0, 3, 2),
        (f"{sid}-r2", HALF, size_ladder.LEASE_CAUSE, 2, 4, 4),
        (f"{sid}-r3", FULL, "succeeded", 4, 6, 6),
    ], log
    first, shrunk, back = ledger.attempts
    # The owner waited `waitMinutes` for the whole gang, then trained at 4 within 20 minutes of the loss ...
    assert WAIT_MIN * 60 <= shrunk.start - first.end <= 20 * 60, (shrunk.start - first.end) / 60
    assert "waiting for the gang: 4 of 8 GPU nodes" in log and "Ray lost GPU node 10.0.4.4" in log, log
    why = (
        f"attempt 2 ({sid}-r2) runs on 4 of 8 nodes: 4 of 8 GPU nodes alive in Ray {WAIT_MIN} min after attempt 1 "
        "ended: on 4 nodes, the largest of the size ladder below 8 (4, 2) they hold (recovery.shrink)"
    )
    assert [e.split(" ", 2)[2] for e in ledger.events if "runs on" in e] == [
        f"{why}, the global batch unchanged, on a {LEASE_MIN}-min lease"
    ], ledger.events
    assert len([x for x in log.splitlines() if why in x]) == 1, log
    # The shrunk attempt's pod marks (goodput's `gangWait`/`imagePull` split) are its four nodes', read when it was
    # submitted: not the returning nodes', which would count its training on four nodes as waiting for the gang.
    assert shrunk.marks["podsRunning"] <= shrunk.start, (shrunk.marks, shrunk.start)

    # ... and at full size again at the look that saw its lease end with the nodes back: no simulated minute passed
    # between the two starts (Ray stamps a job's end on the real clock, the ledger's starts are the owner's: compare
    # the simulated part of the two starts, not their distance, which holds the real seconds of attempt 2's steps).
    def simulated(at: float) -> float:
        return min(readings, key=lambda r: abs(r[0] - at))[1]

    assert simulated(back.start) == simulated(shrunk.start), (back.start - shrunk.start, log)
    assert f"{sid}-r2 on 4 of 8 nodes ended its {LEASE_MIN}-min lease on a whole checkpoint" in log, log
    # Every attempt resumed from a whole save: attempt 1's unfinished step_3 was set aside, not loaded.
    resumes = (ctl / "resumes").read_text().split("\n")[:-1]
    assert resumes == [f"{FULL} 0 True", f"{HALF} 2 True", f"{FULL} 4 True"], resumes
    assert sorted(p.name for p in ckpt.iterdir() if p.name.startswith("step_")) == [f"step_{i}" for i in range(1, 7)]
    assert [p.name for p in ckpt.iterdir() if not p.name.startswith("step_")] == ["incomplete_step_3"], log
