"""The run's one owner (workloads/run_owner.py): no training submission while a gate runs or after a
failed one, by anyone (the watcher, the post-deploy hook, `python -m workloads submit`), and a new gate
before each attempt after a preemption. Fake job tables for the rules, the local Ray head for the rest."""

from __future__ import annotations

import dataclasses
import io
import json
import shlex
import sys
import time
import uuid
from pathlib import Path

import pytest
from ray.job_submission import JobDetails, JobStatus

from workloads import __main__ as cli
from workloads import acceptance_gate as gate
from workloads import run_owner
from workloads import submit as jobs
from workloads.hook import JobSubmissionProvider
from workloads.job_spec import JobSpec
from workloads.preemption import Action, RecoveryPolicy, Watcher

pytestmark = pytest.mark.filterwarnings("ignore:ssl=None is deprecated:DeprecationWarning")

FAST = RecoveryPolicy(check_interval_seconds=0.2, max_restarts=2, backoff_seconds=0, max_backoff_seconds=0)


def spec_of(stack: str, code: str) -> JobSpec:
    return JobSpec.create(
        stack=stack, recipe="t",
        entrypoint=f"{shlex.quote(sys.executable)} -c {shlex.quote(code)}",
        runtime_env={"env_vars": {"RAY_OVERRIDE_JOB_RUNTIME_ENV": "1", "RUN": uuid.uuid4().hex[:8]}},
    )


class FakeClient:
    """Just enough of JobSubmissionClient: list, submit, address."""

    def __init__(self, jobs_: list[JobDetails]):
        self.jobs = jobs_
        self.submitted: list[dict] = []

    def get_address(self) -> str:
        return "http://fake"

    def list_jobs(self) -> list[JobDetails]:
        return list(self.jobs)

    def submit_job(self, **kwargs) -> str:
        self.submitted.append(kwargs)
        return kwargs["submission_id"]


def gate_job(stack: str, status: str = "RUNNING", sid: str = "g", meta=None) -> JobDetails:
    return JobDetails(
        type="SUBMISSION", entrypoint="python -m workloads.acceptance_gate run x", status=status, submission_id=sid,
        start_time=1_000, metadata={gate.META_GATE: stack, **(meta or {})},
    )


def test_a_running_gate_job_alone_keeps_the_watcher_from_submitting_although_every_gpu_is_alive():
    # The deploy's gate runs; no training job exists yet and job.submit is on (resubmit_missing).
    spec = spec_of("t-owner-fake", "pass")
    client = FakeClient([gate_job("t-owner-fake", sid="t-owner-fake-gate-20260101-000000-1")])
    decision = Watcher(client, spec, dataclasses.replace(FAST, resubmit_missing=True)).step()
    assert decision.action is Action.WAIT, decision
    assert "acceptance gate t-owner-fake-gate-20260101-000000-1 is running; nothing is submitted while a gate runs" in decision.reason
    assert client.submitted == []
    # Another stack's gate is none of this stack's business.
    other = FakeClient([gate_job("another-stack")])
    assert Watcher(other, spec, dataclasses.replace(FAST, resubmit_missing=True)).step().action is Action.RESUBMIT


# ------------------------------------------------------------------------------ on the local Ray head


def cpu_plan(mount: Path, **changes) -> gate.GatePlan:
    """The gate's CPU stand-in on the local head (as tests/test_acceptance_gate.py runs it)."""
    base = gate.GatePlan(
        node_count=1, gpus_per_node=2, gpu_name="cpu", busbw_floor_gbps=0.0, busbw_source="test",
        mount_path=str(mount), storage_expected_gbps=0.002, storage_floor_gbps=0.001, storage_source="test",
        storage_bytes_per_node=8 << 20, storage_streams=2, backend="gloo", device="cpu", expect_net=None,
        message_bytes=1 << 16, warmup_iters=1, iters=2, worker_resource="CPU", timeout_s=120, python=sys.executable,
    )
    return dataclasses.replace(base, **changes)


def failed_report(host: str) -> gate.GateReport:
    check = gate.Check("gpus", False, f"{host}: 6 of 8 healthy B200 GPUs (saw CUDA error: uncorrectable ECC error)")
    return gate.GateReport((check,), 30.0, 1)


def start_fake_gate(client, stack: str, target: str, nodes: tuple[str, ...], report: gate.GateReport, seconds: float, k: int = 1) -> str:
    """A gate run as the owner starts one (same id and metadata) whose driver sleeps, then prints `report`."""
    job_id = run_owner.gate_job_id(target, k)
    code = f"import time; time.sleep({seconds}); print({gate.RESULT_MARKER + json.dumps(report.to_dict())!r}, flush=True)"
    client.submit_job(
        entrypoint=f"{shlex.quote(sys.executable)} -c {shlex.quote(code)}", submission_id=job_id,
        metadata={gate.META_GATE: stack, run_owner.META_GATE_FOR: target, run_owner.META_GATE_NODES: ",".join(nodes)},
    )
    assert jobs.wait(client, job_id, until={JobStatus.RUNNING}, timeout=60, poll_interval=0.2) == JobStatus.RUNNING
    return job_id


def hook_props(head, spec: JobSpec, plan: gate.GatePlan, policy: str = "enforce") -> dict:
    return {**spec.to_dict(), "address": head.address, "ray_cluster_name": "", "gate_policy": policy, "gate_plan": plan.to_dict()}


def test_a_running_then_failed_gate_prevents_every_training_submission_by_the_watcher_and_the_hook(head, client, tmp_path):
    stack = "t-own-held"
    spec = spec_of(stack, "print('trained')")
    plan = cpu_plan(tmp_path)
    setup = run_owner.GateSetup("enforce", plan)
    nodes = run_owner.worker_node_ids(jobs.ray_nodes(client), "CPU")
    assert len(nodes) == 1  # the local head
    gate_id = start_fake_gate(client, stack, spec.submission_id, nodes, failed_report("gke-b200-gpu-7f3a"), seconds=4)
    watcher = Watcher(client, spec, dataclasses.replace(FAST, resubmit_missing=True), gate=setup)
    running = watcher.step()
    assert running.action is Action.WAIT and f"acceptance gate {gate_id} is running" in running.reason, running
    # The hook (pulumi up) waits for that gate instead of starting its own, and takes its verdict.
    with pytest.raises(gate.GateFailed, match=r"^acceptance gate FAILED: gpus: gke-b200-gpu-7f3a: 6 of 8 healthy"):
        JobSubmissionProvider().create(hook_props(head, spec, plan))
    assert [j.submission_id for j in jobs.list_jobs(client, stack)] == []
    # Failed on the nodes alive now: the watcher holds the attempt and names the node, look after look.
    for _ in range(2):
        held = watcher.step()
        assert held.action is Action.WAIT and "gke-b200-gpu-7f3a" in held.reason, held
        assert "is not submitted (job.gate enforce); the gate runs again once the worker nodes change" in held.reason
    assert [j.submission_id for j in jobs.list_jobs(client, stack)] == []
    assert [r.submission_id for r in run_owner.gate_runs(client.list_jobs(), stack)] == [gate_id]


def test_submit_by_hand_waits_for_a_running_gate_and_submits_nothing_after_its_failure(head, client):
    # `python -m workloads submit`: the dev stack's real spec; a gate for its first attempt is running.
    spec = cli.build_spec(cli.load_stack("dev"))
    start_fake_gate(client, "dev", spec.submission_id, (), failed_report("gke-dev-gpu-1"), seconds=3)
    out, err = io.StringIO(), io.StringIO()
    code = cli.main(["submit", "--stack", "dev", "--gate", "enforce", "--address", head.address], out=out, err=err)
    assert code == cli.EXIT_GATE_FAILED, (out.getvalue(), err.getvalue())
    assert f"acceptance gate {spec.submission_id}-gate-1 is running; nothing is submitted while a gate runs" in out.getvalue()
    assert err.getvalue().startswith("error: acceptance gate FAILED: gpus: gke-dev-gpu-1: 6 of 8")
    assert jobs.list_jobs(client, "dev") == []
