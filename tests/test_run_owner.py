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
