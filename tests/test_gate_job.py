"""The acceptance gate as a Ray job, from the client (workloads/gate/gate_job.py): its entrypoint, the report
read back from an ended job's log, and `jobctl gate` / `submit` running the stacks' real plans on the
session's local Ray head."""

from __future__ import annotations

import dataclasses
import io
import json
import shlex
import sys
from types import SimpleNamespace

from gate_support import cluster_plan, failed_report

from jobctl import cli
from jobctl import commands as cli_commands
from jobctl import stack as jobctl_stack
from workloads import exit_codes, gate
from workloads import submit as jobs
from workloads.gate import gate_job


def test_the_plan_travels_as_one_shell_word_and_comes_back_equal():
    plan = cluster_plan(busbw_source="0.5 x 324.13 GB/s: it's a quote; $(not run)")
    words = shlex.split(gate_job.job_entrypoint(plan))
    assert words[:4] == ["python", "-m", "workloads.gate", "run"] and len(words) == 5
    assert gate.GatePlan.decode(words[4]) == plan


class FakeJobClient:
    """Just enough of JobSubmissionClient for `result_on_cluster`: the job's info and its log."""

    def __init__(self, log: str):
        self.log = log

    def get_address(self) -> str:
        return "http://fake"

    def get_job_info(self, job_id: str):
        assert job_id == "gate-1", job_id
        return SimpleNamespace(status="FAILED")

    def get_job_logs(self, job_id: str) -> str:
        assert job_id == "gate-1", job_id
        return self.log


def test_the_result_of_an_ended_gate_job_is_its_report_or_an_error_quoting_its_last_line():
    report = failed_report()
    logged = FakeJobClient("driver output\n" + gate.RESULT_MARKER + json.dumps(report.to_dict()) + "\n")
    assert gate_job.result_on_cluster(logged, cluster_plan(), "gate-1", "SUCCEEDED") == report
    crashed = FakeJobClient("starting\nimporting torch\nImportError: no torch" + "!" * 400 + "\n\n")
    assert gate_job.result_on_cluster(crashed, cluster_plan(), "gate-1", "FAILED") == gate.GateReport(
        (),
        0.0,
        2,
        error="gate job gate-1 ended FAILED without a report: " + ("ImportError: no torch" + "!" * 400)[:300],
    )
    silent = gate_job.result_on_cluster(FakeJobClient(""), cluster_plan(), "gate-1", "FAILED")
    assert silent.error == "gate job gate-1 ended FAILED without a report: no log" and not silent.ok


def test_gate_on_demand_and_submit_under_enforce_report_the_stacks_gate_in_one_line(head, client, monkeypatch):
    """The CLI builds the stacks' real plans; the local head has no GPU node, so the gate fails at
    once, and `submit` under the stack's default policy (enforce) submits nothing."""
    real = cli_commands.gate_plan

    # The head's `python` is not this venv's; everything else is the stack's own plan (`jobctl gate` reads the
    # gate plan, `jobctl submit` the run plan built over it).
    def local(stack):
        return dataclasses.replace(real(stack), python=sys.executable, timeout_s=60)

    monkeypatch.setattr(cli_commands, "gate_plan", local)
    monkeypatch.setattr(jobctl_stack, "gate_plan", local)
    out, err = io.StringIO(), io.StringIO()
    assert cli.main(["gate", "--stack", "h200", "--address", head.address], out=out, err=err) == exit_codes.GATE_FAILED
    text = out.getvalue()
    assert "acceptance gate: 2 node(s) x 8 GPUs" in text
    assert "acceptance gate FAILED: gpus: 0 of 2 worker nodes in the Ray cluster" in text and err.getvalue() == ""

    # b200: eight nodes, enforce by default, and a recipe that needs no Hugging Face token to build. Ray is made to
    # count its eight GPU workers alive, so the submission gets as far as the gate, which finds none on the head.
    from workloads import worker_group

    monkeypatch.setattr(worker_group, "alive_gpu_nodes", lambda _client: 8)
    out, err = io.StringIO(), io.StringIO()
    assert (
        cli.main(["submit", "--stack", "b200", "--address", head.address], out=out, err=err) == exit_codes.GATE_FAILED
    )
    assert (
        err.getvalue().startswith("error: acceptance gate FAILED: gpus: 0 of 8 worker nodes")
        and err.getvalue().count("\n") == 1
    )
    assert jobs.list_jobs(client, "b200") == []
