"""The run owner's loop (workloads/recovery/owner_loop.py): `Watcher` on a fake job table, and `watch` on the
local Ray head (a job that SIGKILLs itself stands in for a preempted one). The pod's command run from the
ConfigMap's files is tests/test_watcher.py."""

from __future__ import annotations

import dataclasses
import io
import json
import os
import signal
import time

import pytest
from gate_support import FakeClient, python_job
from ray.job_submission import JobStatus
from ray_head import JOB_TIMEOUT
from recovery_support import FAST, info

from workloads import submit as jobs
from workloads.job_spec import META_ATTEMPT
from workloads.recovery import Action, Cause, RecoveryPolicy, StateFile, Watcher, watch
from workloads.recovery.owner_loop import META_AUTO_RESTARTS, META_CAPACITY_WAITS

pytestmark = pytest.mark.filterwarnings("ignore:ssl=None is deprecated:DeprecationWarning")


def test_a_job_the_cluster_forgot_is_resubmitted_after_the_backoff_with_its_attempt_counted_on():
    spec = python_job("t-lost", "pass")
    running = info(
        "RUNNING", sid=f"{spec.submission_id}-r3", meta={**spec.metadata, META_ATTEMPT: "3", META_AUTO_RESTARTS: "2"}
    )
    client = FakeClient([running])
    now = [100.0]
    watcher = Watcher(client, spec, RecoveryPolicy(60, 5, 30, 30), clock=lambda: now[0])
    assert watcher.step().action is Action.WAIT
    client.jobs = []  # the head restarted without its job table
    lost = watcher.step()
    assert lost.action is Action.WAIT and lost.cause is Cause.PREEMPTION and lost.not_before == 130.0
    now[0] = 131.0
    assert watcher.step().action is Action.RESUBMIT
    (sub,) = client.submitted
    assert sub["submission_id"] == f"{spec.submission_id}-r4"
    assert sub["metadata"][META_ATTEMPT] == "4" and sub["metadata"][META_AUTO_RESTARTS] == "3"
    assert (sub["entrypoint"], sub["runtime_env"]) == (spec.entrypoint, spec.runtime_env)


def test_a_newer_job_of_another_spec_supersedes_the_watched_one():
    spec = python_job("t-super", "pass")
    old = info(exit_code=137, sid=spec.submission_id, meta=dict(spec.metadata), end_ms=1_000_000)
    other = python_job("t-super", "pass  # v2")
    new = info("RUNNING", sid=other.submission_id, meta=dict(other.metadata), end_ms=2_000_000)
    client = FakeClient([old, new])
    decision = Watcher(client, spec, FAST).step()
    assert decision.action is Action.DONE and other.submission_id in decision.reason and not client.submitted


# ------------------------------------------------------------------------------ on the local Ray head


def run_watch(client, spec, policy=FAST, timeout=3 * JOB_TIMEOUT):
    """Watch until done or given up; up to three attempts (the restart cap), each a job start."""
    out = io.StringIO()
    deadline = time.monotonic() + timeout

    def sleep(seconds: float) -> None:
        assert time.monotonic() < deadline, f"watch did not settle:\n{out.getvalue()}"
        time.sleep(seconds)

    final = watch(client, spec, policy, sleep=sleep, out=out, until=lambda d: d.action in (Action.DONE, Action.GIVE_UP))
    return final, out.getvalue()


def preempted_once(ckpt_dir: str) -> str:
    """First run: writes step_1 then dies of SIGTERM (its pod stopped); a rerun finds step_1 and finishes."""
    return (
        "import os, signal, sys\n"
        f"d = {ckpt_dir!r}\n"
        "steps = sorted(os.listdir(d))\n"
        "if steps:\n"
        "    print('resuming from', steps[-1], flush=True); sys.exit(0)\n"
        "os.makedirs(os.path.join(d, 'step_1'))\n"
        "print('saved step_1, now the node goes away', flush=True)\n"
        "os.kill(os.getpid(), signal.SIGTERM)\n"
    )


def test_a_preempted_job_is_resubmitted_with_the_same_checkpoint_dir_and_resumes(client, tmp_path):
    spec = python_job("t-preempt", preempted_once(str(tmp_path)))
    jobs.submit_attempt(client, spec, 1)
    final, log = run_watch(client, spec)
    assert final.action is Action.DONE and "succeeded" in final.reason, log
    listed = jobs.list_jobs(client, "t-preempt")
    assert [j.submission_id for j in listed] == [spec.submission_id, f"{spec.submission_id}-r2"]
    first, second = listed
    assert (first.status, first.driver_exit_code) == (JobStatus.FAILED, 143)
    assert second.status == JobStatus.SUCCEEDED
    assert second.entrypoint == first.entrypoint and second.runtime_env == first.runtime_env
    assert (second.metadata[META_ATTEMPT], second.metadata[META_AUTO_RESTARTS]) == ("2", "1")
    assert "resuming from step_1" in "".join(jobs.logs(client, second.submission_id))
    assert (
        "attempt 1 failed, preemption-like (the driver was killed by SIGTERM (exit code 143): its pod was stopped); "
        "restart 1 of 2: "
        f"resubmitted as {spec.submission_id}-r2"
    ) in log


def test_a_running_job_killed_from_outside_is_resubmitted_and_resumes(client, tmp_path):
    # As a spot preemption does it: the job is RUNNING, mid-step, and something else kills its process.
    ckpt, pid_file = tmp_path / "ckpt", tmp_path / "driver.pid"
    code = (
        "import os, sys, time\n"
        f"d, p = {str(ckpt)!r}, {str(pid_file)!r}\n"
        "os.makedirs(d, exist_ok=True)\n"
        "if os.listdir(d):\n"
        "    print('resuming from', sorted(os.listdir(d))[-1], flush=True); sys.exit(0)\n"
        "os.makedirs(os.path.join(d, 'step_1'))\n"
        "open(p + '.tmp', 'w').write(str(os.getpid())); os.rename(p + '.tmp', p)\n"
        "time.sleep(120)\n"
    )
    spec = python_job("t-outside", code)
    jobs.submit_attempt(client, spec, 1)
    assert (
        jobs.wait(client, spec.submission_id, until={JobStatus.RUNNING}, timeout=JOB_TIMEOUT, poll_interval=0.2)
        == JobStatus.RUNNING
    )
    deadline = time.monotonic() + JOB_TIMEOUT
    while not pid_file.exists():
        assert time.monotonic() < deadline, "the job never wrote its pid"
        time.sleep(0.1)
    os.kill(int(pid_file.read_text()), signal.SIGTERM)
    final, log = run_watch(client, spec)
    assert final.action is Action.DONE and "succeeded" in final.reason, log
    first, second = jobs.list_jobs(client, "t-outside")
    assert (first.status, second.status) == (JobStatus.FAILED, JobStatus.SUCCEEDED), log
    assert second.submission_id == f"{spec.submission_id}-r2" and second.entrypoint == first.entrypoint
    assert second.metadata[META_ATTEMPT] == "2"
    assert "resuming from step_1" in "".join(jobs.logs(client, second.submission_id))


def test_an_application_error_is_not_restarted_even_with_preempt_in_its_log(client):
    # "preempt" anywhere in a log (a config dump, a user's print) is no preemption: Ray's node table
    # (real, on this head) shows no GPU node lost, so the watcher gives up instead of restarting.
    spec = python_job(
        "t-apperr",
        "print('policy: {preemption_grace_s: 30}, the last run was preempted', flush=True)\n"
        "raise RuntimeError('bad config value')",
    )
    jobs.submit_attempt(client, spec, 1)
    final, log = run_watch(client, spec)
    assert (final.action, final.cause) == (Action.GIVE_UP, Cause.APPLICATION), log
    assert "exit code 1" in final.reason
    assert "preempted" in jobs.info(client, spec.submission_id).message
    assert [j.submission_id for j in jobs.list_jobs(client, "t-apperr")] == [spec.submission_id]


def test_a_driver_sigkilled_on_the_head_is_an_out_of_memory_kill_and_not_restarted(client):
    spec = python_job("t-headoom", "import os, signal; os.kill(os.getpid(), signal.SIGKILL)")
    jobs.submit_attempt(client, spec, 1)
    final, log = run_watch(client, spec)
    assert (final.action, final.cause) == (Action.GIVE_UP, Cause.APPLICATION), log
    assert "killed by SIGKILL (exit code 137): an out-of-memory kill on the head" in final.reason
    assert "raise ray.headMemoryGib" in final.reason
    assert [j.submission_id for j in jobs.list_jobs(client, "t-headoom")] == [spec.submission_id]


def test_restarts_stop_at_the_maximum(client):
    spec = python_job("t-cap", "import os, signal; os.kill(os.getpid(), signal.SIGTERM)")
    jobs.submit_attempt(client, spec, 1)
    # A cap of 1, not FAST's 2: one Ray job less (each is a fresh Ray worker), and an off-by-one still shows.
    final, log = run_watch(client, spec, policy=dataclasses.replace(FAST, max_restarts=1))
    assert final.action is Action.GIVE_UP and "maximum is 1" in final.reason, log
    listed = jobs.list_jobs(client, "t-cap")
    assert [j.submission_id for j in listed] == [spec.submission_id, f"{spec.submission_id}-r2"]
    assert all(j.status == JobStatus.FAILED and j.driver_exit_code == 143 for j in listed)


def test_a_job_stopped_by_a_user_is_not_restarted(client):
    spec = python_job("t-userstop", "import time; time.sleep(60)")
    jobs.submit_attempt(client, spec, 1)
    jobs.wait(client, spec.submission_id, until={JobStatus.RUNNING}, timeout=JOB_TIMEOUT, poll_interval=0.2)
    jobs.stop(client, spec.submission_id)
    final, log = run_watch(client, spec)
    assert final.action is Action.DONE and "stopped on purpose" in final.reason, log
    assert [j.submission_id for j in jobs.list_jobs(client, "t-userstop")] == [spec.submission_id]


# NeMo-RL's placement wait running out (nemo_rl/distributed/virtual_cluster.py at v0.4.0 ... v0.7.0): what
# a job resubmitted before the replacement spot node is back ends with.
CAPACITY_FAILURE = (
    "class ResourceInsufficientError(Exception): pass\n"
    "print('Not enough GPUs available. Requested 8 GPUs, but only 0 are available in the cluster.')\n"
    "print('Retrying placement group creation... 10/10. Next retry in 512 seconds.', flush=True)\n"
    "raise ResourceInsufficientError('Maximum number of retries reached (10). Cluster resources may be insufficient')\n"
)


def test_a_capacity_wait_on_the_head_waits_for_the_gpus_then_resubmits_without_counting_a_restart(client):
    spec = python_job("t-capacity", CAPACITY_FAILURE)
    # The third attempt, after two restarts: the cap (FAST: 2) would end a preemption-like failure here.
    job_id, _ = jobs.submit_attempt(client, spec, 3, {META_AUTO_RESTARTS: "2"})
    assert jobs.wait(client, job_id, timeout=JOB_TIMEOUT, poll_interval=0.2) == JobStatus.FAILED
    # The local head has no GPUs: with the pool's GPUs not alive in Ray, nothing is submitted.
    waiting = Watcher(client, spec, dataclasses.replace(FAST, pool_gpus=8)).step()
    assert (waiting.action, waiting.cause) == (Action.WAIT, Cause.CAPACITY), waiting
    assert waiting.reason.endswith("waiting for the GPU pool, 0 of 8 GPUs alive in Ray"), waiting.reason
    assert [j.submission_id for j in jobs.list_jobs(client, "t-capacity")] == [job_id]
    # Once they are (a pool of 0 GPUs stands in), the same spec is resubmitted, the restart count unchanged.
    go = Watcher(client, spec, FAST).step()
    assert (go.action, go.cause) == (Action.RESUBMIT, Cause.CAPACITY), go
    newest = jobs.list_jobs(client, "t-capacity")[-1]
    assert newest.submission_id == f"{spec.submission_id}-r4"
    assert (newest.metadata[META_AUTO_RESTARTS], newest.metadata[META_CAPACITY_WAITS]) == ("2", "1")


def test_a_watcher_restarted_with_the_head_finds_the_job_lost_from_its_state_file_and_resubmits(client, tmp_path):
    policy = dataclasses.replace(FAST, resubmit_missing=True)
    state = StateFile(tmp_path / "lustre" / ".nemo-rl-gke" / "watcher" / "t-restart.json")
    spec = python_job("t-restart", "import time; time.sleep(60)")
    jobs.submit_attempt(client, spec, 1)
    assert (
        jobs.wait(client, spec.submission_id, until={JobStatus.RUNNING}, timeout=JOB_TIMEOUT, poll_interval=0.2)
        == JobStatus.RUNNING
    )
    assert Watcher(client, spec, policy, state=state).step().action is Action.WAIT  # sees it running, records it
    assert json.loads(state.path.read_text())["submission_id"] == spec.submission_id
    # The head restarts without GCS fault tolerance: its job table is empty (stop + delete stand in for it).
    jobs.stop(client, spec.submission_id)
    jobs.wait(client, spec.submission_id, timeout=JOB_TIMEOUT, poll_interval=0.2)
    client.delete_job(spec.submission_id)
    assert jobs.list_jobs(client, "t-restart") == []
    # A watcher with nothing recorded and job.submit off has nothing to go on.
    assert Watcher(client, spec, FAST).step().action is Action.WAIT
    # The restarted watcher reads what it saw: the running attempt 1 is lost, attempt 2 is submitted.
    decision = Watcher(client, spec, policy, state=state).step()
    assert (decision.action, decision.cause) == (Action.RESUBMIT, Cause.PREEMPTION), decision
    (again,) = jobs.list_jobs(client, "t-restart")
    try:
        assert again.submission_id == f"{spec.submission_id}-r2" and again.entrypoint == spec.entrypoint
        assert (again.metadata[META_ATTEMPT], again.metadata[META_AUTO_RESTARTS]) == ("2", "1")
        assert json.loads(state.path.read_text())["submission_id"] == again.submission_id
    finally:
        jobs.stop(client, again.submission_id)


def test_a_run_that_ends_releases_its_workers_in_one_line_and_its_goodput_adds_up_to_its_paid_node_time(
    client, tmp_path
):
    """On the local Ray head: a job writes two checkpoints and succeeds; the owner scales the worker group to 0
    through a loopback Kubernetes API (the PATCH recorded) and the ledger's buckets add up to the paid time."""
    from test_gang_wait import FakeApi

    from workloads import goodput
    from workloads.gang_wait import KubeGangView
    from workloads.ledger import LedgerFile, ledger_path
    from workloads.run_owner import RunPlan

    ckpt = tmp_path / "ckpt"
    code = (
        "import os\n"
        f"d = {str(ckpt)!r}\n"
        "for s in (1, 2):\n"
        "    print('=' * 10, f'Step {s}/2', '=' * 10, flush=True)\n"
        "    w = os.path.join(d, f'step_{s}', 'policy', 'weights')\n"
        "    os.makedirs(w)\n"
        "    open(os.path.join(w, '.metadata'), 'w').close()  # a whole save (workloads/checkpoints.py is_whole)\n"
    )
    spec = python_job("t-release", code)
    run = RunPlan(
        checkpoint_dir=str(ckpt),
        node_count=2,
        node_hour_usd=36.0,
        save_period=1,
        step_seconds=0.01,
        checkpoint_write_seconds=0.01,
    )
    api = FakeApi([], {}, [{"groupName": "gpu", "replicas": 2, "minReplicas": 2}])
    state = tmp_path / "t-release.json"
    out = io.StringIO()
    try:
        jobs.submit_attempt(client, spec, 1)
        final = watch(
            client,
            spec,
            FAST,
            out=out,
            state=state,
            run=run,
            release=KubeGangView(api.base, "tok", None, "nemo-rl", "nemo-rl", "gpu"),
            until=lambda d: d.action in (Action.DONE, Action.GIVE_UP),
        )
        done_at = time.time()
    finally:
        api.close()
    log = out.getvalue()
    assert final.action is Action.DONE and "succeeded" in final.reason, log
    patches = [r for r in api.requests if r[0] == "PATCH"]
    assert patches == [
        (
            "PATCH",
            "/apis/ray.io/v1/namespaces/nemo-rl/rayclusters/nemo-rl",
            "application/json-patch+json",
            [
                {"op": "test", "path": "/spec/workerGroupSpecs/0/groupName", "value": "gpu"},
                {"op": "replace", "path": "/spec/workerGroupSpecs/0/replicas", "value": 0},
                {"op": "replace", "path": "/spec/workerGroupSpecs/0/minReplicas", "value": 0},
            ],
        )
    ], log
    said = [line for line in log.splitlines() if "workers released" in line]
    assert len(said) == 1 and "run ended (succeeded)" in said[0], log
    ledger = LedgerFile(ledger_path(state)).load("t-release", spec.submission_id)
    (attempt,) = ledger.attempts
    assert attempt.released is not None and attempt.end <= attempt.released <= done_at
    assert (attempt.resume_step, attempt.last_step, attempt.saved_step, attempt.steps_lost) == (0, 2, 2, 0)
    rows = goodput.run_buckets(ledger, done_at + 3600, step_seconds=0.01, write_seconds=0.01, save_period=1)
    (_, hours, price), paid = rows[0], 2 * (attempt.released + goodput.SCALE_DOWN_S - attempt.start) / 3600
    # Released: an hour later nothing more is paid for than GKE's scale-down delay after the release; every
    # second of it is in a named bucket.
    assert sum(hours.values()) == pytest.approx(paid, rel=1e-9, abs=1e-12) and set(hours) == set(goodput.BUCKETS)
    assert hours["scaleDown"] == pytest.approx(2 * goodput.SCALE_DOWN_S / 3600)
    assert hours["stepsKept"] == pytest.approx(2 * 2 * 0.01 / 3600) and hours["stepsLost"] == 0
    assert hours["checkpointSave"] == pytest.approx(2 * 2 * 0.01 / 3600) and price == 36.0
    ended = [json.loads(line) for line in log.splitlines() if line.startswith("{")]
    assert ended[0]["nemoRlGke"] == "attempt-ended" and 0 < ended[0]["goodputFraction"] < 1
    assert set(ended[0]["badputUsd"]) == set(goodput.BUCKETS) - set(goodput.GOODPUT)


def test_pod_marks_missed_at_the_first_look_are_filled_at_a_later_one_and_then_never_read_again(tmp_path):
    """The worker pods' times (workloads/gang_wait.py `pod_marks`) split the wait into the nodes coming
    (`gangWait`) and the image pull (`imagePull`). A job submitted before its nodes came finds its pods still
    pulling at the owner's first look: a later look fills the marks, and once set they cost no API call."""
    from test_gang_wait import TimedView

    from workloads import goodput
    from workloads.ledger import LedgerFile, ledger_path
    from workloads.run_owner import RunPlan

    class Counted(TimedView):
        reads = 0

        def worker_pods(self):
            self.reads += 1
            return super().worker_pods()

    spec = python_job("t-marks", "pass")
    job = info("RUNNING", sid=spec.submission_id, meta=dict(spec.metadata), end_ms=2_000_000_005_000)
    start = job.start_time / 1000
    # Two nodes registered 60 and 90 s after the job, its pods bound at 300 and 320 s, started at 900 and 960 s.
    view = Counted([(start + 300, None, start + 60), (start + 320, None, start + 90)])
    now = [start + 100]
    state = tmp_path / "t-marks.json"
    watcher = Watcher(
        FakeClient([job]),
        spec,
        FAST,
        run=RunPlan(node_count=2, node_hour_usd=36.0),
        ledger=LedgerFile(ledger_path(state)),
        release=view,
        clock=lambda: now[0],
    )
    watcher.step()
    assert watcher.ledger.attempts[0].marks == {} and view.reads == 1
    view.pods = [(start + 300, start + 900, start + 60), (start + 320, start + 960, start + 90)]
    now[0] = start + 1000
    watcher.step()
    (attempt,) = LedgerFile(ledger_path(state)).load("t-marks", spec.submission_id).attempts
    assert attempt.marks == {"paidFrom": start + 60, "nodesReady": start + 320, "podsRunning": start + 960}
    now[0] = start + 1100
    watcher.step()
    assert view.reads == 2
    (_, hours, _), *_ = goodput.run_buckets(
        watcher.ledger, start + 1100, step_seconds=None, write_seconds=None, save_period=None
    )
    # Paid from the first node, not the job's submission: the GPU nodes cost nothing before they exist.
    assert hours["gangWait"] == pytest.approx(2 * 260 / 3600) and hours["imagePull"] == pytest.approx(2 * 640 / 3600)
    assert hours["gate"] == 0 and hours["startup"] == pytest.approx(2 * 140 / 3600)
    assert sum(hours.values()) == pytest.approx(2 * 1040 / 3600)


def test_a_run_that_ended_after_the_look_read_its_clock_is_released_no_earlier_than_its_end(tmp_path):
    """The look reads its clock, then lists the jobs; Ray stamps a job's end on its own clock. A run that ended in
    between is released at its end, never before it (a release before the end would pay a negative tail)."""
    from workloads.gang_wait import WorkerGroup
    from workloads.ledger import LedgerFile, ledger_path
    from workloads.run_owner import RunPlan

    class Workers:
        released = 0

        def worker_pods(self):
            return []

        def group(self):
            return WorkerGroup(0, 2, 2, 2)

        def release(self):
            self.released += 1
            return "replicas 2 -> 0"

    spec = python_job("t-release-clock", "pass")
    done = info("SUCCEEDED", sid=spec.submission_id, meta=dict(spec.metadata), end_ms=2_000_000_005_000)
    end = done.end_time / 1000
    state, workers = tmp_path / "t-release-clock.json", Workers()
    watcher = Watcher(
        FakeClient([done]),
        spec,
        FAST,
        run=RunPlan(node_count=2, node_hour_usd=36.0),
        ledger=LedgerFile(ledger_path(state)),
        release=workers,
        clock=lambda: end - 30,  # the look began 30 s before the job's end
    )
    assert watcher.step().action is Action.DONE and workers.released == 1
    (attempt,) = LedgerFile(ledger_path(state)).load("t-release-clock", spec.submission_id).attempts
    assert attempt.end == end and attempt.released == end


def test_a_resubmission_logs_the_step_nemo_rl_will_load_after_setting_an_incomplete_one_aside(tmp_path):
    """NeMo-RL resumes from the highest `step_N`, unchecked, and 1.0.0 saved asynchronously: the owner sets a step
    cut short aside first, as the job's entrypoint does, so the step it logs is the one NeMo-RL loads."""
    from test_checkpoints import make, nemo_rl_latest

    from workloads.run_owner import RunPlan

    ckpt = make(tmp_path / "ckpt", "step_10", "step_20")
    (ckpt / "step_20" / "policy" / "optimizer" / ".metadata").unlink()  # its optimizer's write never finished
    spec = python_job("t-aside", "pass")
    watcher = Watcher(FakeClient([]), spec, FAST, run=RunPlan(checkpoint_dir=str(ckpt)))
    job_id = watcher.resubmit(2, 1)
    assert f"attempt 2 ({job_id}) resumes from step_10" in watcher.notes
    assert nemo_rl_latest(ckpt) == ckpt / "step_10"
    assert watcher.notes[0] == (
        f"nemo-rl-gke: step_20 in {ckpt} is not a whole save (no finish marker): renamed incomplete_step_20, kept"
    )
    assert watcher.ledger.find(job_id).resume_step == 10


def test_workers_that_come_back_after_the_release_with_no_run_are_released_again_within_one_look_unless_claimed(
    tmp_path,
):
    # A Helm reinstall or a hand edit brings the workers back after the run's release: billed GPUs that no attempt
    # needs. The owner sees them at its next look and releases them again, recording the idle time; a live claim (a
    # submitter waiting for the workers it asked for, workloads/worker_group.py) holds them until it lapses.
    from test_gang_wait import FakeApi

    from workloads.gang_wait import CLAIM_ANNOTATION, KubeGangView
    from workloads.ledger import LedgerFile, ledger_path
    from workloads.run_owner import RunPlan

    spec = python_job("t-again", "pass")
    ended = info("SUCCEEDED", sid=spec.submission_id, meta=dict(spec.metadata), end_ms=1_800_000_000_000)
    api = FakeApi([], {}, [{"groupName": "gpu", "replicas": 2, "minReplicas": 0, "maxReplicas": 2}], annotations={})
    now = [1_800_000_100.0]
    state = tmp_path / "t-again.json"
    watcher = Watcher(
        FakeClient([ended]),
        spec,
        FAST,
        run=RunPlan(node_count=2, node_hour_usd=36.0),
        ledger=LedgerFile(ledger_path(state)),
        release=KubeGangView(api.base, "tok", None, "nemo-rl", "nemo-rl", "gpu"),
        clock=lambda: now[0],
    )

    def look(at):
        now[0] = at
        watcher.notes.clear()
        decision = watcher.step()
        return decision, [n for n in watcher.notes if not n.startswith("{")]

    try:
        _, said = look(1_800_000_100.0)
        assert api.groups()[0]["replicas"] == 0 and any("workers released" in n for n in said), said
        patches = len([r for r in api.requests if r[0] == "PATCH"])
        _, said = look(1_800_000_160.0)  # released stays released: one read, no patch
        assert len([r for r in api.requests if r[0] == "PATCH"]) == patches and said == []
        api.groups()[0]["replicas"] = 2  # a Helm reinstall sets `replicas` again
        _, said = look(1_800_000_220.0)
        assert api.groups()[0]["replicas"] == 0, "the restored workers were not released again"
        assert len(said) == 1 and "came back after the run's release" in said[0], said
        api.groups()[0]["replicas"] = 2  # now a submitter asks for them, claimed for 10 minutes
        api.cluster["metadata"]["annotations"][CLAIM_ANNOTATION] = "1800000880"
        look(1_800_000_280.0)
        look(1_800_000_340.0)
        assert api.groups()[0]["replicas"] == 2, "released while a live claim held the workers"
        look(1_800_000_900.0)  # the claim lapsed (the submitter died): released at the next look
        assert api.groups()[0]["replicas"] == 0
    finally:
        api.close()
    (attempt,) = LedgerFile(ledger_path(state)).load("t-again", spec.submission_id).attempts
    assert attempt.released == 1_800_000_100.0
    # Each idle spell from the look that last saw none (the previous look) to the release again.
    assert attempt.restored == [[1_800_000_160.0, 1_800_000_220.0], [1_800_000_220.0, 1_800_000_900.0]]


def test_the_pods_marks_carry_the_ask_that_raised_the_workers_so_a_fresh_runs_scale_up_is_paid(tmp_path):
    from test_gang_wait import TimedView

    from workloads import goodput
    from workloads.run_owner import RunPlan

    spec = python_job("t-asked", "pass")
    job = info("RUNNING", sid=spec.submission_id, meta=dict(spec.metadata), end_ms=2_000_000_005_000)
    start = job.start_time / 1000
    # Asked for 25 min before the job; nodes registered 24 and 23 min before it, pods ran 10 min before it.
    view = TimedView(
        [(start - 1200, start - 600, start - 1440), (start - 1230, start - 620, start - 1380)], start - 1500
    )
    watcher = Watcher(FakeClient([job]), spec, FAST, run=RunPlan(node_count=2), release=view, clock=lambda: start + 60)
    watcher.step()
    (attempt,) = watcher.ledger.attempts
    assert attempt.marks["askedAt"] == start - 1500 and attempt.marks["paidFrom"] == start - 1440
    assert goodput.run_start(watcher.ledger) == start - 1440


def test_an_attempt_first_seen_running_is_booked_at_the_size_it_was_submitted_at():
    # A shrunk attempt (`recovery.shrink`) submitted before this watcher's ledger knew it (a restarted pod with its
    # ledger lost, another submitter): its node-hours are its own 4 nodes', not the full gang's 8.
    from workloads.run_owner import RunPlan
    from workloads.size_ladder import META_NODES

    spec = python_job("t-size", "pass")
    job = info("RUNNING", sid=f"{spec.submission_id}-r2", meta={**spec.metadata, META_ATTEMPT: "2", META_NODES: "4"})
    watcher = Watcher(FakeClient([job]), spec, FAST, run=RunPlan(node_count=8), clock=lambda: 2_000.0)
    watcher.step()
    (attempt,) = watcher.ledger.attempts
    assert (attempt.attempt, attempt.nodes) == (2, 4)
