"""Why a FAILED attempt failed and what the watcher does about it (workloads/recovery/classify.py), on
synthetic JobInfo and Ray node tables."""

from __future__ import annotations

import dataclasses
import json
from types import SimpleNamespace

import pytest
from conftest import ROOT
from recovery_support import TRACEBACK, info

from workloads.recovery import RecoveryPolicy
from workloads.recovery.classify import (
    CAPACITY_WAIT_LIMIT,
    NODE_DEATH_SLACK_MS,
    Action,
    Cause,
    Decision,
    RayNode,
    alive_gpus,
    classify,
    decide,
    error_type_of,
    gpu_nodes_lost_during,
)

pytestmark = pytest.mark.filterwarnings("ignore:ssl=None is deprecated:DeprecationWarning")


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
