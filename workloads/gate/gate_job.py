"""The acceptance gate as a Ray job, from the client's side: `python -m workloads.gate run <plan>` with the
`workloads` package as its `py_modules`, its report read back from the log. A gate started by an older
release runs that release's gate: the contract is `RESULT_MARKER`'s JSON and the job metadata.
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
"""Metadata of gate runs; not `nemo-rl-gke/stack`: a gate run is not one of the stack's jobs."""
WORKLOADS_DIR = str(Path(__file__).resolve().parent.parent)


def job_entrypoint(plan: GatePlan) -> str:
    return f"{shlex.quote(plan.python)} -m workloads.gate run {plan.encode()}"


def start_on_cluster(
    client: Any, plan: GatePlan, *, job_id: str, label: str, metadata: Optional[Mapping[str, str]] = None
) -> bool:
    """Submit the gate as Ray job `job_id` and return at once; False when it exists already (that is it)."""
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
    """The ended gate job's report; one ended without a report has `error` set (it does not pass)."""
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
    """Submit the gate, wait for it and return its report (`python -m jobctl gate`)."""
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
        why = f"gate job {job_id} did not finish in {plan.timeout_s + 120:.0f} s"
        return GateReport((), plan.timeout_s, plan.node_count, error=why)
    return result_on_cluster(client, plan, job_id, final)
