"""The acceptance gate as a Ray job, from the client's side (the run's owner, the hook, `jobctl gate`).

The client submits a Ray job whose entrypoint is `python -m workloads.gate run <plan>` (`job_entrypoint`),
shipping the whole `workloads` package with `runtime_env.py_modules`, and reads the report back from the
job's log (`verdict.parse_result`). The job goes through the same Job API (and API-server proxy) as the
training job, so nothing else has to be reachable. Entrypoint and package are those of the submitting
party's own code, so a gate job started by an older release runs that release's gate whatever the
client that reads its verdict is: the only contract between them is `RESULT_MARKER`'s JSON and the
job metadata (`META_GATE`, and `workloads.run_owner`'s keys).

Imports: the standard library and the gate's plan and verdict; `workloads.submit` (Ray's job SDK) lazily.
"""

from __future__ import annotations

import os
import shlex
import time
from pathlib import Path
from typing import Any, Callable, Mapping, Optional

from workloads.gate.checklist import GatePlan, estimated_seconds
from workloads.gate.verdict import GateReport, parse_result

META_GATE = "nemo-rl-gke/gate"
"""Ray job metadata key of gate runs. Not `nemo-rl-gke/stack`: a gate run is not one of the stack's jobs."""
WORKLOADS_DIR = str(Path(__file__).resolve().parent.parent)
"""The `workloads` package directory, shipped whole as the gate job's `py_modules` (the checkout here, the
ConfigMap's files in the watcher's pod)."""


def job_entrypoint(plan: GatePlan) -> str:
    """The gate job's command: the driver (`workloads.gate.driver.main`) with the plan as one shell word."""
    return f"{shlex.quote(plan.python)} -m workloads.gate run {plan.encode()}"


def start_on_cluster(
    client: Any, plan: GatePlan, *, job_id: str, label: str, metadata: Optional[Mapping[str, str]] = None
) -> bool:
    """Submit the gate as the Ray job `job_id` (metadata `META_GATE: label` plus `metadata`) and return at
    once; False when a job of that id already exists (someone started this very gate first: that is it).
    Raises `submit.JobError`s when the job cannot be submitted."""
    from workloads import submit

    try:
        submit.guard(
            client.get_address(),
            lambda: client.submit_job(
                entrypoint=job_entrypoint(plan),
                submission_id=job_id,
                runtime_env={"py_modules": [WORKLOADS_DIR]},
                metadata={META_GATE: label, **dict(metadata or {})},
            ),
            job_id,  # a duplicate id then raises `submit.DuplicateSubmission` ("already exists")
        )
    except submit.DashboardError as err:
        if "already exists" not in str(err):
            raise
        return False
    return True


def result_on_cluster(client: Any, plan: GatePlan, job_id: str, final: Any) -> GateReport:
    """The report of the ended gate job `job_id` (from its log); a job that ended without one gives a
    report with `error` set: a gate that could not run does not pass."""
    from workloads import submit

    text = "".join(submit.logs(client, job_id))
    report = parse_result(text)
    if report is None:
        tail = [line for line in text.splitlines() if line.strip()][-1:] or ["no log"]
        return GateReport(
            (), 0.0, plan.node_count, error=f"gate job {job_id} ended {final} without a report: {tail[0][:300]}"
        )
    return report


def run_on_cluster(
    client: Any,
    plan: GatePlan,
    *,
    label: str,
    on_line: Callable[[str], None] = lambda _l: None,
    poll_interval: float = 2.0,
) -> GateReport:
    """Submit the gate as a Ray job through `client`, wait for it and return its report (the on-demand
    `python -m jobctl gate`; submissions go through `workloads.run_owner`, which starts the same job).

    Raises `submit.JobError`s when the job cannot be submitted; a job that ends without a report gives a
    report with `error` set (a gate that cannot run does not pass)."""
    from workloads import submit

    job_id = f"{label}-gate-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"
    on_line(
        f"acceptance gate: {plan.node_count} node(s) x {plan.gpus_per_node} GPUs, "
        f"~{estimated_seconds(plan) / 60:.1f} min expected (job {job_id})"
    )
    start_on_cluster(client, plan, job_id=job_id, label=label)
    try:
        final = submit.wait(client, job_id, timeout=plan.timeout_s + 120, poll_interval=poll_interval)
    except submit.WaitTimeout:
        submit.stop(client, job_id)
        return GateReport(
            (),
            plan.timeout_s,
            plan.node_count,
            error=f"gate job {job_id} did not finish in {plan.timeout_s + 120:.0f} s",
        )
    return result_on_cluster(client, plan, job_id, final)
