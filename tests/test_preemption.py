"""Preemption recovery: the classifier and decision on synthetic JobInfo, the watch loop on the local
Ray head (a job that SIGKILLs itself stands in for a preempted one), and the PreemptionWatcher's
Kubernetes objects under mocks (the pod's command run from the ConfigMap's files: tests/test_watcher.py).
"""

from __future__ import annotations

import dataclasses
import io
import json
import os
import re
import signal
import time
from types import SimpleNamespace

import pytest
from conftest import ROOT
from conftest import spec_of as stack_job_spec
from gate_support import FakeClient, python_job
from k8s_support import k8s_doc, record, schema_problems
from ray.job_submission import JobDetails, JobStatus
from ray_head import JOB_TIMEOUT

from infra.gate_plan import gate_plan_for_stack
from infra.watcher_deployment import (
    COMPONENT_TYPE,
    HEARTBEAT,
    RUN_KEY,
    SPEC_KEY,
    WATCHER_MODULES,
    build_preemption_watcher,
    config_key,
)
from tools.mocks import SIG_KEY
from workloads import submit as jobs
from workloads.job_spec import META_ATTEMPT, SECRET_ENV_NAMES
from workloads.preemption import (
    CAPACITY_WAIT_LIMIT,
    META_AUTO_RESTARTS,
    META_CAPACITY_WAITS,
    NODE_DEATH_SLACK_MS,
    Action,
    Cause,
    Decision,
    RayNode,
    RecoveryPolicy,
    Seen,
    StateFile,
    Watcher,
    alive_gpus,
    classify,
    decide,
    error_type_of,
    gpu_nodes_lost_during,
    watch,
)

pytestmark = pytest.mark.filterwarnings("ignore:ssl=None is deprecated:DeprecationWarning")

FAST = RecoveryPolicy(check_interval_seconds=0.2, max_restarts=2, backoff_seconds=0, max_backoff_seconds=0)
TRACEBACK = 'Traceback (most recent call last):\n  File "run_grpo.py", line 3, in <module>\n'


def info(
    status="FAILED",
    *,
    message="",
    error_type="JOB_ENTRYPOINT_COMMAND_ERROR",
    exit_code=1,
    end_ms=1_000_000,
    sid="j",
    meta=None,
):
    return JobDetails(
        type="SUBMISSION",
        entrypoint="python run_grpo.py",
        status=status,
        message=message,
        error_type=error_type if status == "FAILED" else None,
        driver_exit_code=exit_code if status == "FAILED" else None,
        start_time=end_ms - 5000,
        end_time=end_ms if status in ("FAILED", "STOPPED", "SUCCEEDED") else None,
        submission_id=sid,
        metadata=meta or {},
    )


# ------------------------------------------------------------------------------ classifier


@pytest.mark.parametrize(
    "kwargs,cause",
    [
        # The driver runs on the head (on-demand CPU pool): SIGKILL there is its out-of-memory kill.
        (dict(exit_code=137, message="Killed\n"), Cause.APPLICATION),
        (dict(exit_code=-9), Cause.APPLICATION),
        (dict(exit_code=143), Cause.PREEMPTION),
        (dict(exit_code=-15), Cause.PREEMPTION),
        (
            dict(error_type="JOB_SUPERVISOR_ACTOR_DIED", exit_code=None, message="Job supervisor actor died: ..."),
            Cause.PREEMPTION,
        ),
        (dict(error_type="JOB_SUPERVISOR_ACTOR_UNSCHEDULABLE", exit_code=None), Cause.PREEMPTION),
        (
            dict(
                message=TRACEBACK
                + "ray.exceptions.ActorDiedError: The actor died because its node has died. Node Id: 3f2a"
            ),
            Cause.PREEMPTION,
        ),
        (dict(message=TRACEBACK + "ray.exceptions.NodeDiedError: node 10.0.0.5 is dead"), Cause.PREEMPTION),
        (
            dict(
                message="(raylet) The node with node id: 8a was marked dead because the detector missed too many "
                "heartbeats"
            ),
            Cause.PREEMPTION,
        ),
        (
            dict(
                message=TRACEBACK
                + "ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task."
            ),
            Cause.PREEMPTION,
        ),
        (
            dict(
                message=TRACEBACK
                + "torch.distributed.DistBackendError: NCCL error: remote process exited or there was a network error"
            ),
            Cause.PREEMPTION,
        ),
        (dict(message=TRACEBACK + "RuntimeError: bad override policy.foo"), Cause.APPLICATION),
        # "preempt" in a log is no evidence of a preemption (a config dump, a user's print).
        (
            dict(
                message="grpo: {'preemption_grace': 30}\n"
                + TRACEBACK
                + "ValueError: the spot VM was preempted? no: bad value"
            ),
            Cause.APPLICATION,
        ),
        # NeMo-RL's own capacity wait ran out (nemo_rl/distributed/virtual_cluster.py).
        (
            dict(
                message="Not enough GPUs available. Requested 16 GPUs, but only 8 are available in the cluster.\n"
                "Retrying placement group creation... 10/10. Next retry in 512 seconds.\n"
                + TRACEBACK
                + "nemo_rl.distributed.virtual_cluster.ResourceInsufficientError: Maximum number of retries "
                "reached (10)."
            ),
            Cause.CAPACITY,
        ),
        (
            dict(
                message=TRACEBACK
                + "TimeoutError: Timed out waiting for placement groups to be ready. The cluster may not "
                "have enough resources"
            ),
            Cause.CAPACITY,
        ),
        (
            dict(message=TRACEBACK + "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"),
            Cause.APPLICATION,
        ),
        (
            dict(
                message=TRACEBACK
                + "ray.exceptions.OutOfMemoryError: Task was killed due to the node running low on memory."
            ),
            Cause.APPLICATION,
        ),
        (
            dict(
                message=TRACEBACK
                + "ray.exceptions.ActorDiedError: The actor died because of an error raised in its creation task"
            ),
            Cause.APPLICATION,
        ),
        (
            dict(error_type="RUNTIME_ENV_SETUP_FAILURE", exit_code=None, message="runtime_env setup failed"),
            Cause.APPLICATION,
        ),
        (dict(error_type=None, exit_code=None, message="Job failed."), Cause.APPLICATION),
    ],
)
def test_the_classifier_tells_lost_infrastructure_from_the_jobs_own_errors(kwargs, cause):
    verdict = classify(info(**kwargs))
    assert verdict.cause is cause, verdict


RAY_246 = json.loads((ROOT / "tests" / "reference" / "ray-2.46.0" / "job_failure_messages.json").read_text())[
    "messages"
]


@pytest.mark.parametrize("recorded", RAY_246, ids=[f"{m['file']}:{m['line']}:{m['later_error_type']}" for m in RAY_246])
def test_messages_of_a_ray_246_server_without_error_type_are_classified_as_later_rays_error_types(recorded):
    # The v0.4.0 image's Ray writes the case into the message only (tests/reference/ray-2.46.0).
    failed = info(message=recorded["message"], error_type=None, exit_code=recorded["driver_exit_code"])
    verdict = classify(failed)
    assert verdict.cause.value == recorded["expect"], (recorded["template"], verdict)
    if recorded["driver_exit_code"] is None:
        assert verdict.evidence == f"Ray's message stands for {recorded['later_error_type']}", verdict


def test_a_ray_246_prefix_inside_a_drivers_log_tail_is_not_taken_for_rays_own_message():
    tail = (
        "Job entrypoint command failed with exit code 1, last available logs (truncated to 20,000 "
        "chars):\nUnexpected error occurred: x\n"
    )
    assert classify(info(message=tail, error_type=None, exit_code=1)).cause is Cause.APPLICATION


def gpu_node(state="DEAD", end_ms=999_000, gpus=8.0, message="health check failed due to missing too many heartbeats"):
    return RayNode(node_id="ab" * 28, ip="10.0.3.7", alive=state == "ALIVE", gpus=gpus, end_ms=end_ms, message=message)


def test_node_evidence_from_ray_makes_a_plain_failure_a_preemption_and_only_for_this_attempt():
    failed = info(message=TRACEBACK + "RuntimeError: collective timed out")  # ran from 995 s to 1000 s
    assert classify(failed).cause is Cause.APPLICATION
    verdict = classify(failed, [gpu_node()])
    assert verdict.cause is Cause.PREEMPTION, verdict
    assert (
        verdict.evidence
        == "Ray lost GPU node 10.0.3.7 during the attempt: health check failed due to missing too many heartbeats"
    )
    # A node that died before the attempt started, a CPU node, or one still alive is no evidence.
    for other in (gpu_node(end_ms=900_000), gpu_node(gpus=0), gpu_node(state="ALIVE", end_ms=None)):
        assert classify(failed, [other]).cause is Cause.APPLICATION, other


def test_a_capacity_wait_is_resubmitted_without_counting_a_restart_until_its_own_limit():
    policy = RecoveryPolicy(check_interval_seconds=60, max_restarts=2, backoff_seconds=10, max_backoff_seconds=40)
    waited = info(
        message=TRACEBACK
        + "nemo_rl.distributed.virtual_cluster.ResourceInsufficientError: Maximum number of retries reached (10)."
    )
    # Already at the restart cap: a capacity wait still goes on, and carries the count unchanged.
    early = decide(waited, 3, policy, 1005.0, restarts=2)
    assert (early.action, early.cause, early.not_before) == (Action.WAIT, Cause.CAPACITY, 1010.0)
    go = decide(waited, 3, policy, 1010.0, restarts=2, capacity_waits=1)
    assert (go.action, go.next_attempt, go.restarts, go.capacity_waits) == (Action.RESUBMIT, 4, 2, 2)
    assert "not counted as a restart" in go.reason
    stop = decide(waited, 9, policy, 2000.0, restarts=0, capacity_waits=CAPACITY_WAIT_LIMIT)
    assert (stop.action, stop.cause) == (Action.GIVE_UP, Cause.CAPACITY)
    # A preemption right after counts as usual (and the cap applies).
    assert decide(info(exit_code=143), 3, policy, 2000.0, restarts=2).action is Action.GIVE_UP


def test_decisions_for_each_status_backoff_and_the_cap():
    policy = RecoveryPolicy(check_interval_seconds=60, max_restarts=3, backoff_seconds=10, max_backoff_seconds=25)
    now = 2000.0  # seconds; the failures below ended at 1000 s
    assert decide(None, 0, policy, now).action is Action.WAIT
    assert decide(info("RUNNING"), 1, policy, now).action is Action.WAIT
    assert decide(info("PENDING"), 1, policy, now).action is Action.WAIT
    assert decide(info("SUCCEEDED"), 1, policy, now).action is Action.DONE
    stopped = decide(info("STOPPED"), 1, policy, now)
    assert stopped.action is Action.DONE and "not restarted" in stopped.reason
    app = decide(info(message=TRACEBACK + "ValueError: x"), 1, policy, now)
    assert (app.action, app.cause) == (Action.GIVE_UP, Cause.APPLICATION)

    killed = info(exit_code=143)
    waiting = decide(killed, 1, policy, 1005.0)
    assert (waiting.action, waiting.not_before) == (Action.WAIT, 1010.0)
    go = decide(killed, 1, policy, 1010.0)
    assert (go.action, go.next_attempt, go.cause) == (Action.RESUBMIT, 2, Cause.PREEMPTION)
    # The wait doubles per consecutive restart and stops at the maximum.
    assert policy.backoff(0) == 10 and policy.backoff(1) == 20 and policy.backoff(2) == 25
    assert decide(killed, 3, policy, 1019.0, restarts=1).action is Action.WAIT
    assert decide(killed, 3, policy, 1020.0, restarts=1).action is Action.RESUBMIT
    # The cap holds whatever the cause; counted from the attempt when the metadata has no count.
    capped = decide(killed, 4, policy, now)
    assert capped.action is Action.GIVE_UP and "maximum is 3" in capped.reason
    assert decide(killed, 9, policy, now, restarts=0).action is Action.RESUBMIT  # a hand submission resets it


SIGTERM = "the driver was killed by SIGTERM (exit code 143): its pod was stopped"
GAVE_UP_WAITING = "NeMo-RL gave up waiting for GPUs ('ResourceInsufficientError')"


@pytest.mark.parametrize(
    "kwargs,evidence",
    [
        (
            dict(exit_code=137),
            "the driver on the Ray head was killed by SIGKILL (exit code 137): an out-of-memory kill on the head, "
            "which no preemption takes; raise ray.headMemoryGib",
        ),
        (dict(exit_code=143), SIGTERM),
        (dict(error_type="JOB_SUPERVISOR_ACTOR_DIED", exit_code=None), "Ray reports JOB_SUPERVISOR_ACTOR_DIED"),
        (dict(error_type="RUNTIME_ENV_SETUP_FAILURE", exit_code=None), "Ray reports RUNTIME_ENV_SETUP_FAILURE"),
        (dict(message=TRACEBACK + "nemo_rl.distributed.virtual_cluster.ResourceInsufficientError: x"), GAVE_UP_WAITING),
        (
            dict(message=TRACEBACK + "ray.exceptions.NodeDiedError: node 10.0.0.5 is dead"),
            "the log says 'NodeDiedError'",
        ),
        (dict(message=TRACEBACK + "ValueError: x"), "exit code 1, no sign of a lost node"),
        (dict(error_type=None, exit_code=None, message="Job failed."), "no exit code, no sign of a lost node"),
    ],
)
def test_each_verdict_says_what_it_was_read_from(kwargs, evidence):
    # The evidence is what `jobctl status` and the watcher's log show for the decision.
    assert classify(info(**kwargs)).evidence == evidence


def test_a_job_info_of_an_older_ray_without_error_type_exit_code_message_or_times_is_still_classified():
    # Older Rays' JobInfo lacks error_type and driver_exit_code; a bare one may lack the rest too.
    nodes = [gpu_node()]
    bare = SimpleNamespace(status="FAILED", message=TRACEBACK + "ray.exceptions.NodeDiedError: node 10.0.0.5 is dead")
    assert error_type_of(bare) is None and gpu_nodes_lost_during(bare, nodes) == []
    assert (classify(bare, nodes).cause, classify(bare, nodes).evidence) == (
        Cause.PREEMPTION,
        "the log says 'NodeDiedError'",
    )
    assert classify(SimpleNamespace(status="FAILED", driver_exit_code=1), nodes).evidence == (
        "exit code 1, no sign of a lost node"
    )
    assert classify(SimpleNamespace(status="FAILED"), nodes).evidence == "no exit code, no sign of a lost node"
    # Started but with no end time: no window to place a node's death in.
    assert gpu_nodes_lost_during(SimpleNamespace(start_time=995_000, end_time=None), nodes) == []


def test_a_driver_exit_code_means_rays_message_is_the_drivers_log_and_names_no_error_type():
    # A driver that ran and exited: whatever its log starts with, it is not Ray's own message.
    logged = info(message="Unexpected error occurred: The actor died", error_type=None, exit_code=1)
    assert error_type_of(logged) is None
    assert error_type_of(info(message="Unexpected error occurred: x", error_type=None, exit_code=None)) == (
        "JOB_SUPERVISOR_ACTOR_UNKNOWN_FAILURE"
    )


def test_a_lost_node_is_named_by_its_ip_or_else_the_start_of_its_id_and_its_message_only_when_ray_gave_one():
    failed = info(message=TRACEBACK + "RuntimeError: collective timed out")
    nameless = RayNode(node_id="0123456789abcdef" * 4, ip="", alive=False, gpus=8.0, end_ms=999_000)
    assert classify(failed, [nameless]).evidence == "Ray lost GPU node 0123456789ab during the attempt"
    assert classify(failed, [gpu_node(message="")]).evidence == "Ray lost GPU node 10.0.3.7 during the attempt"


def test_a_gpu_node_counts_from_the_attempts_start_to_its_end_plus_the_slack_and_with_any_gpu():
    failed = info()  # ran from 995 000 ms to 1 000 000 ms
    last = 1_000_000 + NODE_DEATH_SLACK_MS
    counted = [gpu_node(end_ms=995_000), gpu_node(end_ms=last), gpu_node(gpus=1.0)]
    assert gpu_nodes_lost_during(failed, counted) == counted
    assert gpu_nodes_lost_during(failed, [gpu_node(end_ms=994_999), gpu_node(end_ms=last + 1)]) == []


def test_alive_gpus_counts_the_gpus_of_alive_nodes_only():
    nodes = [
        RayNode("a", "10.0.0.1", alive=True, gpus=8.0),
        RayNode("b", "10.0.0.2", alive=False, gpus=8.0),
        RayNode("c", "10.0.0.3", alive=True, gpus=0.0),
        RayNode("d", "10.0.0.4", alive=True, gpus=4.0),
    ]
    assert alive_gpus(nodes) == 12 and alive_gpus([]) == 0


def test_each_decision_says_what_was_seen_and_what_comes_next():
    policy = RecoveryPolicy(check_interval_seconds=60, max_restarts=3, backoff_seconds=10, max_backoff_seconds=25)
    killed = info(exit_code=143)  # ended at 1000 s
    assert decide(None, 0, policy, 2000.0) == Decision(Action.WAIT, "no job of this spec on the cluster yet")
    assert decide(None, 0, dataclasses.replace(policy, resubmit_missing=True), 2000.0) == Decision(
        Action.RESUBMIT,
        "the deploy submits this spec (job.submit) but the cluster has no job of it",
        next_attempt=1,
        restarts=0,
    )
    assert decide(info("RUNNING"), 2, policy, 2000.0) == Decision(Action.WAIT, "attempt 2 is running")
    assert decide(info("SUCCEEDED"), 2, policy, 2000.0) == Decision(Action.DONE, "attempt 2 succeeded")
    assert decide(info(message=TRACEBACK + "ValueError: x"), 2, policy, 2000.0) == Decision(
        Action.GIVE_UP,
        "attempt 2 failed on its own (exit code 1, no sign of a lost node); not restarted",
        Cause.APPLICATION,
    )
    # Attempt 2 carries one restart: the second waits backoff(1) = 20 s after the end.
    assert decide(killed, 2, policy, 1005.0) == Decision(
        Action.WAIT,
        f"attempt 2 failed, preemption-like ({SIGTERM}); restart 2 of 3 in 15s",
        Cause.PREEMPTION,
        not_before=1020.0,
    )
    assert decide(killed, 2, policy, 1020.0) == Decision(
        Action.RESUBMIT,
        f"attempt 2 failed, preemption-like ({SIGTERM}); restart 2 of 3",
        Cause.PREEMPTION,
        next_attempt=3,
        restarts=2,
    )
    assert decide(killed, 4, policy, 2000.0) == Decision(
        Action.GIVE_UP,
        f"attempt 4 failed, preemption-like ({SIGTERM}), after 3 automatic restart(s); the maximum is 3",
        Cause.PREEMPTION,
    )
    # Ray's node table reaches the classifier: a plain failure with a GPU node lost is a preemption.
    plain = info(message=TRACEBACK + "RuntimeError: collective timed out")
    assert decide(plain, 1, policy, 2000.0, nodes=[gpu_node()]).action is Action.RESUBMIT


def test_each_capacity_decision_says_what_was_seen_and_counts_the_waits_from_none():
    policy = RecoveryPolicy(check_interval_seconds=60, max_restarts=2, backoff_seconds=10, max_backoff_seconds=40)
    waited = info(message=TRACEBACK + "nemo_rl.distributed.virtual_cluster.ResourceInsufficientError: x")
    what = (
        f"attempt 3 failed waiting for GPUs ({GAVE_UP_WAITING}); resubmitted when the GPUs are back, not counted as "
        "a restart"
    )
    assert decide(waited, 3, policy, 1005.0, restarts=2) == Decision(
        Action.WAIT, f"{what}, in 5s", Cause.CAPACITY, not_before=1010.0
    )
    assert decide(waited, 3, policy, 1010.0, restarts=2) == Decision(
        Action.RESUBMIT, what, Cause.CAPACITY, next_attempt=4, restarts=2, capacity_waits=1
    )
    assert decide(waited, 9, policy, 2000.0, restarts=0, capacity_waits=CAPACITY_WAIT_LIMIT) == Decision(
        Action.GIVE_UP,
        f"attempt 9 failed waiting for GPUs ({GAVE_UP_WAITING}) {CAPACITY_WAIT_LIMIT + 1} times in a row with the "
        "GPUs alive in Ray at each resubmission; something else holds them",
        Cause.CAPACITY,
    )


def test_the_backoff_counts_from_the_start_without_an_end_time_and_from_zero_without_either():
    # Older Rays' JobInfo may carry no end time (or no times): never "now", which would push it back forever.
    policy = RecoveryPolicy(check_interval_seconds=60, max_restarts=3, backoff_seconds=10, max_backoff_seconds=25)
    started = SimpleNamespace(status="FAILED", driver_exit_code=143, start_time=995_000)
    assert decide(started, 1, policy, 1000.0).not_before == 1005.0
    assert decide(SimpleNamespace(status="FAILED", driver_exit_code=143), 1, policy, 5.0).not_before == 10.0


def test_the_recovery_policy_rejects_each_bad_value_naming_it():
    def rejects(message: str, **values) -> None:
        with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
            RecoveryPolicy(**values)

    counts = "check interval must be > 0, max restarts and backoff >= 0"
    rejects(counts, check_interval_seconds=0)
    rejects(counts, max_restarts=-1)
    rejects(counts, backoff_seconds=-1)
    rejects("max backoff must be at least the backoff", backoff_seconds=100, max_backoff_seconds=99)
    rejects("pool GPUs must be >= 0", pool_gpus=-1)
    # The edges are allowed: no restarts at all, no backoff, a maximum equal to the backoff.
    never = RecoveryPolicy(max_restarts=0, backoff_seconds=0, max_backoff_seconds=0)
    assert decide(info(exit_code=143), 1, never, 2000.0).action is Action.GIVE_UP
    assert RecoveryPolicy(backoff_seconds=100, max_backoff_seconds=100).backoff(3) == 100


def test_the_backoff_doubling_stops_at_two_to_the_62nd_so_a_long_run_never_overflows():
    # A float times 2**1024 overflows; the cap on the exponent keeps any restart count computable.
    assert RecoveryPolicy(backoff_seconds=1, max_backoff_seconds=1e30).backoff(10_000) == 2.0**62


def test_the_policy_comes_from_the_recovery_section_and_goes_to_the_watchers_flags():
    recovery = SimpleNamespace(check_interval_seconds=30, max_restarts=4, backoff_seconds=45.5, max_backoff_seconds=900)
    policy = RecoveryPolicy.from_config(recovery)
    assert policy == RecoveryPolicy(30.0, 4, 45.5, 900.0, pool_gpus=0, resubmit_missing=False)
    flags = ["--check-interval", "30", "--max-restarts", "4", "--backoff", "45.5", "--max-backoff", "900"]
    assert policy.cli_args() == [*flags, "--pool-gpus", "0"]
    submitted = RecoveryPolicy.from_config(recovery, pool_gpus=16, resubmit_missing=True)
    assert submitted.cli_args() == [*flags, "--pool-gpus", "16", "--resubmit-missing"]


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
    jobs.submit(client, spec)
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
    jobs.submit(client, spec)
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
    jobs.submit(client, spec)
    final, log = run_watch(client, spec)
    assert (final.action, final.cause) == (Action.GIVE_UP, Cause.APPLICATION), log
    assert "exit code 1" in final.reason
    assert "preempted" in jobs.info(client, spec.submission_id).message
    assert [j.submission_id for j in jobs.list_jobs(client, "t-apperr")] == [spec.submission_id]


def test_a_driver_sigkilled_on_the_head_is_an_out_of_memory_kill_and_not_restarted(client):
    spec = python_job("t-headoom", "import os, signal; os.kill(os.getpid(), signal.SIGKILL)")
    jobs.submit(client, spec)
    final, log = run_watch(client, spec)
    assert (final.action, final.cause) == (Action.GIVE_UP, Cause.APPLICATION), log
    assert "killed by SIGKILL (exit code 137): an out-of-memory kill on the head" in final.reason
    assert "raise ray.headMemoryGib" in final.reason
    assert [j.submission_id for j in jobs.list_jobs(client, "t-headoom")] == [spec.submission_id]


def test_restarts_stop_at_the_maximum(client):
    spec = python_job("t-cap", "import os, signal; os.kill(os.getpid(), signal.SIGTERM)")
    jobs.submit(client, spec)
    # A cap of 1, not FAST's 2: one Ray job less (each is a fresh Ray worker), and an off-by-one still shows.
    final, log = run_watch(client, spec, policy=dataclasses.replace(FAST, max_restarts=1))
    assert final.action is Action.GIVE_UP and "maximum is 1" in final.reason, log
    listed = jobs.list_jobs(client, "t-cap")
    assert [j.submission_id for j in listed] == [spec.submission_id, f"{spec.submission_id}-r2"]
    assert all(j.status == JobStatus.FAILED and j.driver_exit_code == 143 for j in listed)


def test_a_job_stopped_by_a_user_is_not_restarted(client):
    spec = python_job("t-userstop", "import time; time.sleep(60)")
    jobs.submit(client, spec)
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
    jobs.submit(client, spec)
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


def test_what_the_state_file_says_decides_after_a_restart_with_an_empty_job_table(tmp_path):
    spec = python_job("t-state", "pass")
    state = StateFile(tmp_path / "t-state.json")
    policy = dataclasses.replace(FAST, resubmit_missing=True)
    # Stopped on purpose before the head restarted: not brought back.
    state.save(Seen(spec.spec_hash, spec.submission_id, 1, 0, status="STOPPED", final=True))
    client = FakeClient([])
    assert Watcher(client, spec, policy, state=state).step().action is Action.DONE and not client.submitted
    # Another spec's record is ignored; with job.submit on, the missing job is submitted as attempt 1.
    state.save(Seen("0" * 64, "other", 5, 3))
    decision = Watcher(client, spec, policy, state=state).step()
    assert decision.action is Action.RESUBMIT and client.submitted[0]["submission_id"] == spec.submission_id
    assert StateFile(state.path).load(spec.spec_hash).attempt == 1
    # Another spec's job running on the stack (a submission by hand): ours is not added beside it.
    other = python_job("t-state", "pass  # v2")
    busy = FakeClient([info("RUNNING", sid=other.submission_id, meta=dict(other.metadata))])
    decision = Watcher(busy, spec, policy).step()
    assert decision.action is Action.WAIT and other.submission_id in decision.reason and not busy.submitted
    # A torn or foreign file is no record (and no crash).
    state.path.write_text("{not json")
    assert state.load(spec.spec_hash) is None


# ------------------------------------------------------------------------------ the component under mocks


def watcher_of(stack: str = "dev", **recovery):
    from jobctl.stack import load_stack

    cfg = load_stack(stack).config
    if recovery:
        cfg = cfg.model_copy(update={"recovery": cfg.recovery.model_copy(update=recovery)})
    ray = SimpleNamespace(namespace=cfg.ray.namespace, cluster_name="nemo-rl", head_service="nemo-rl-head-svc")

    def build():
        return build_preemption_watcher(
            stack_job_spec(stack, cfg, wandb_key_set=False),
            cfg,
            ray=ray,
            system_pool_name=f"{stack}-system",
            gpu_pool=SimpleNamespace(node_count=cfg.gpu_pool.node_count, gpus_per_node=8),
            lustre_claim="lustre",
            gate_plan=gate_plan_for_stack(cfg, SimpleNamespace(node_count=cfg.gpu_pool.node_count, gpus_per_node=8)),
        )

    return cfg, record(build)


def test_the_watcher_objects_are_valid_kubernetes_objects_holding_no_secret():
    cfg, rec = watcher_of()
    (component,) = rec.by_type(COMPONENT_TYPE)
    cm, dep = rec.one("kubernetes:core/v1:ConfigMap"), rec.one("kubernetes:apps/v1:Deployment")
    sa = rec.one("kubernetes:core/v1:ServiceAccount")
    for reg in (cm, dep, sa):
        assert not schema_problems(k8s_doc(reg), reg.name)
        assert reg.parent == component.urn
        assert SIG_KEY not in json.dumps(reg.raw_inputs), f"{reg.name} carries a secret"
    # No secret reaches the pod: no Secret volume or env reference, and a spec without secret variables.
    deployment_text = json.dumps(k8s_doc(dep))
    for word in ("secretRef", "secretKeyRef", '"secret"', "envFrom", *SECRET_ENV_NAMES):
        assert word not in deployment_text, word
    spec_env = json.loads(k8s_doc(cm)["data"][SPEC_KEY])["runtime_env"].get("env_vars", {})
    assert not SECRET_ENV_NAMES & set(spec_env)

    spec = stack_job_spec("dev", cfg, wandb_key_set=False)
    data = k8s_doc(cm)["data"]
    assert json.loads(data[SPEC_KEY]) == spec.to_dict()  # the same job the deploy submits
    assert set(data) == {*map(config_key, WATCHER_MODULES), SPEC_KEY, RUN_KEY}
    # The run's plain plan-time values: the checkpoints as the pod sees them, the pool and its price.
    run = json.loads(data[RUN_KEY])
    assert (
        run["checkpoint_dir"] == "/checkpoints/dev/qwen2.5-1.5b-gsm8k/Qwen_Qwen2.5-1.5B-Instruct-seq512-dtensor-tp1-pp1"
    )
    assert spec.entrypoint.count("checkpointing.checkpoint_dir=/lustre" + run["checkpoint_dir"]) == 1  # the job's own
    assert run["node_count"] == 1
    assert run["gate_policy"] == cfg.gate_policy == "warn" and run["gate_plan"]["node_count"] == 1
    assert run["node_hour_usd"] > 0 and run["budget_usd"] is None and run["save_period"] == 1
    assert c_cmd(dep)[c_cmd(dep).index("--run-file") + 1] == f"/config/{RUN_KEY}"
    assert data["preemption.py"] == (ROOT / "workloads" / "preemption.py").read_text()

    pod = k8s_doc(dep)["spec"]["template"]["spec"]
    assert k8s_doc(dep)["spec"]["replicas"] == 1
    assert pod["nodeSelector"] == {"cloud.google.com/gke-nodepool": "dev-system"}
    # Its own KSA, not the workload's (which Workload Identity lets write the bucket).
    assert pod["serviceAccountName"] == k8s_doc(sa)["metadata"]["name"] != cfg.ray.service_account, dep.name
    assert pod["automountServiceAccountToken"] is False and k8s_doc(sa)["automountServiceAccountToken"] is False, (
        sa.name
    )
    assert k8s_doc(sa)["metadata"]["namespace"] == cfg.ray.namespace, sa.name
    assert sa.urn in dep.dependencies, f"{dep.name} does not wait for {sa.name}"
    (c,) = pod["containers"]
    assert c["image"] == cfg.recipe.image.ref
    assert c["command"][:3] == ["python", "-m", "workloads.watcher"]
    assert c["command"][c["command"].index("--address") + 1] == "http://nemo-rl-head-svc.nemo-rl.svc:8265"
    assert c["command"][c["command"].index("--spec-file") + 1] == f"/config/{SPEC_KEY}"
    assert c["command"][c["command"].index("--max-restarts") + 1] == str(cfg.recovery.max_restarts)
    assert (
        c["securityContext"]["allowPrivilegeEscalation"] is False
        and c["securityContext"]["readOnlyRootFilesystem"] is True
    )
    assert c["resources"]["requests"] == {"cpu": "50m", "memory": "256Mi"}
    assert HEARTBEAT in json.dumps(c["livenessProbe"])
    # It resubmits only once the pool's GPUs are alive in Ray, and (job.submit) brings back a missing job.
    assert c["command"][c["command"].index("--pool-gpus") + 1] == str(cfg.gpu_pool.node_count * 8)
    assert ("--resubmit-missing" in c["command"]) is cfg.job.submit
    # What it saw lives on Lustre (it outlives a head restart), and only its own directory is mounted.
    assert c["command"][c["command"].index("--state-file") + 1] == "/state/dev.json"
    (state,) = [v for v in pod["volumes"] if v["name"] == "state"]
    assert state == {"name": "state", "persistentVolumeClaim": {"claimName": "lustre"}}
    # Of Lustre it sees its own directory and the checkpoints (to read steps and remove dead partial saves).
    mounts = [m for m in c["volumeMounts"] if m["name"] == "state"]
    assert mounts == [
        {"name": "state", "mountPath": "/state", "subPath": ".nemo-rl-gke/watcher"},
        {"name": "state", "mountPath": "/checkpoints", "subPath": "checkpoints"},
    ]
    (code,) = [v for v in pod["volumes"] if v["name"] == "code"]
    assert code["configMap"]["name"] == cm.inputs["metadata"].get("name", cm.name)
    assert {i["path"] for i in code["configMap"]["items"]} == {
        *(f"workloads/{m}" for m in WATCHER_MODULES),
        SPEC_KEY,
        RUN_KEY,
    }


def c_cmd(dep) -> list[str]:
    return k8s_doc(dep)["spec"]["template"]["spec"]["containers"][0]["command"]


def test_recovery_can_be_switched_off_and_changes_reach_the_command():
    _, rec = watcher_of(enabled=False)
    assert rec.result is None and not rec.resources
    _, rec = watcher_of(max_restarts=3, check_interval_seconds=30)
    (c,) = k8s_doc(rec.one("kubernetes:apps/v1:Deployment"))["spec"]["template"]["spec"]["containers"]
    cmd = c["command"]
    assert cmd[cmd.index("--max-restarts") + 1] == "3" and cmd[cmd.index("--check-interval") + 1] == "30"


def test_the_recovery_config_is_validated():
    from infra.config import ConfigError, parse

    base = {"project": "my-gcp-project"}
    cfg = parse(dict(base), "dev").recovery
    assert (cfg.enabled, cfg.check_interval_seconds, cfg.max_restarts) == (True, 60, 10)
    with pytest.raises(
        ConfigError, match=r"nemo-rl-gke:recovery\.maxBackoffSeconds: 60 is below recovery\.backoffSeconds"
    ):
        parse({**base, "recovery": {"backoffSeconds": 600, "maxBackoffSeconds": 60}}, "dev")
    with pytest.raises(ConfigError, match=r"nemo-rl-gke:recovery\.checkIntervalSeconds"):
        parse({**base, "recovery": {"checkIntervalSeconds": 1}}, "dev")
