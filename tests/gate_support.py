"""What the gate, run-owner, watcher and dashboard tests share: gate plans (a two-node B200 stack's, the
CPU stand-in on the local Ray head), gate reports, the recorded NCCL logs, a job spec that runs Python
with this interpreter, and a fake job table for the `Watcher` (workloads/recovery/owner_loop.py)."""

from __future__ import annotations

import dataclasses
import shlex
import sys
import uuid
from pathlib import Path

from ray.job_submission import JobDetails

from workloads import gate
from workloads.gate import verdict
from workloads.job_spec import JobSpec

NCCL_LOGS = Path(__file__).resolve().parent / "nccl_logs"
"""Recorded and composed NCCL logs (tests/nccl_logs/README.md says which is which)."""


def nccl_log(name: str) -> str:
    return (NCCL_LOGS / name).read_text()


def cluster_plan(**changes) -> gate.GatePlan:
    """A plan as a two-node B200 stack gets it (floors as in data/acceptance_gate.yaml)."""
    base = gate.GatePlan(
        node_count=2,
        gpus_per_node=8,
        gpu_name="B200",
        busbw_floor_gbps=162.06,
        busbw_source="test",
        mount_path="/lustre",
        storage_expected_gbps=8.789,
        storage_floor_gbps=4.395,
        storage_source="test",
        storage_bytes_per_node=1 << 30,
    )
    return dataclasses.replace(base, **changes)


def cpu_plan(mount: Path, **changes) -> gate.GatePlan:
    """The CPU stand-in: the same orchestration on the local head, gloo instead of NCCL.

    `timeout_s` is the gate's own deadline, and the probe actors get 30% of it to start (each a fresh
    Ray worker): 300 s leaves a busy machine room; a passing gate takes seconds and never waits for it."""
    base = gate.GatePlan(
        node_count=1,
        gpus_per_node=2,
        gpu_name="cpu",
        busbw_floor_gbps=0.0,
        busbw_source="test",
        mount_path=str(mount),
        storage_expected_gbps=0.002,
        storage_floor_gbps=0.001,
        storage_source="test",
        storage_bytes_per_node=16 << 20,
        storage_streams=2,
        backend="gloo",
        device="cpu",
        expect_net=None,
        message_bytes=1 << 20,
        warmup_iters=1,
        iters=3,
        worker_resource="CPU",
        timeout_s=300,
        python=sys.executable,
    )
    return dataclasses.replace(base, **changes)


def two_node_report(fabric: gate.Check, seconds: float = 131.0) -> gate.GateReport:
    """The report of a gate on `cluster_plan()`: 16 healthy GPUs, `fabric`, Lustre above its floor."""
    return gate.GateReport(
        (
            gate.Check("gpus", True, "16 healthy B200 GPUs on 2 nodes", {"healthyGpus": 16, "expectedGpus": 16}),
            fabric,
            verdict.check_storage(cluster_plan(), 6.2, 5.0),
        ),
        seconds=seconds,
        node_count=2,
    )


def failed_report() -> gate.GateReport:
    """`two_node_report` with a fabric that fell back to sockets (a recorded log) at 23.5 GB/s."""
    return two_node_report(verdict.check_fabric(cluster_plan(), 23.5, nccl_log("socket_fallback_a3u_2x8.log")))


def gpus_failed_report(host: str) -> gate.GateReport:
    """A one-node gate that found two of `host`'s GPUs broken."""
    check = gate.Check("gpus", False, f"{host}: 6 of 8 healthy B200 GPUs (saw CUDA error: uncorrectable ECC error)")
    return gate.GateReport((check,), 30.0, 1)


def python_job(stack: str, code: str) -> JobSpec:
    """A spec running `code` with this interpreter (the raylet's PATH may not have the venv); each call
    a new spec (a fresh `RUN`), so tests sharing the head never see each other's attempts."""
    return JobSpec.create(
        stack=stack,
        recipe="t",
        entrypoint=f"{shlex.quote(sys.executable)} -c {shlex.quote(code)}",
        runtime_env={"env_vars": {"RAY_OVERRIDE_JOB_RUNTIME_ENV": "1", "RUN": uuid.uuid4().hex[:8]}},
    )


class FakeClient:
    """Just enough of JobSubmissionClient for `Watcher`: list, submit, address; each job's info, and
    `log` as every job's log."""

    def __init__(self, jobs_: list[JobDetails], log: str = ""):
        self.jobs = jobs_
        self.log = log
        self.submitted: list[dict] = []

    def get_address(self) -> str:
        return "http://fake"

    def list_jobs(self) -> list[JobDetails]:
        return list(self.jobs)

    def get_job_info(self, job_id: str) -> JobDetails:
        return next(j for j in self.jobs if j.submission_id == job_id)

    def get_job_logs(self, job_id: str) -> str:
        return self.log

    def _do_request(self, method: str, path: str, **_: object) -> object:
        raise ConnectionError("no Ray state API here")  # the owner goes without the node table, as when it is down

    def submit_job(self, **kwargs) -> str:
        self.submitted.append(kwargs)
        return kwargs["submission_id"]
