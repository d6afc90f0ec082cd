"""The day-2 CLI (`python -m jobctl`, jobctl/): its commands run in process (`jobctl.cli.main`) against
the private local Ray head, a stalled server or fakes; only 127.0.0.1 is contacted. How the Ray Job
API client itself behaves is tests/test_submit.py; the in-cluster watcher's command, tests/test_watcher.py.
"""

from __future__ import annotations

import io
import json
import socket
import subprocess
import sys
import time

import pytest
import yaml
from conftest import ROOT
from gate_support import python_job
from ray.job_submission import JobStatus
from ray_head import JOB_TIMEOUT, STALL_BOUND
from stalled_http import StalledServer

from jobctl import cli
from jobctl import stack as cli_stack
from jobctl.commands import StatusLine
from jobctl.stack import build_spec, load_stack
from workloads import dashboard, ray_connection
from workloads import submit as jobs
from workloads.job_spec import JobSpec
from workloads.recovery import RecoveryPolicy

pytestmark = pytest.mark.filterwarnings("ignore:ssl=None is deprecated:DeprecationWarning")


def run_cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = cli.main(list(argv), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def stack_spec(stack: str) -> JobSpec:
    return build_spec(load_stack(stack))


RUN_AS_PROGRAM = """
import runpy, sys
sys.argv = ["jobctl", *sys.argv[1:]]
try:
    runpy.run_module("jobctl", run_name="__main__", alter_sys=True)
finally:
    assert "ray" not in sys.modules, "dry run imported ray"
"""


def test_python_m_jobctl_dry_run_prints_the_exact_job_without_network_or_ray():
    proc = subprocess.run(
        [sys.executable, "-c", RUN_AS_PROGRAM, "submit", "--stack", "h200", "--dry-run"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    spec = stack_spec("h200")
    assert proc.stdout.splitlines() == [
        f"submission id: {spec.submission_id}",
        f"entrypoint: {spec.entrypoint}",
        f"runtime env: {json.dumps(spec.runtime_env, sort_keys=True)}",
    ]


def test_cli_configuration_errors_are_one_line_with_exit_code_2():
    out, err = io.StringIO(), io.StringIO()
    assert cli.main(["submit", "--stack", "nope", "--dry-run"], out=out, err=err) == 2
    assert (
        err.getvalue()
        == "error: stack file Pulumi.nope.yaml not found (stacks here: autopilot, b200, b200-ladder, dev, h200)\n"
    )
    err = io.StringIO()
    assert cli.main(["status", "--stack", "dev"], out=out, err=err) == 2  # no address, no pulumi CLI
    assert err.getvalue().startswith("error: no dashboard address: pass --address") and err.getvalue().count("\n") == 1


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_the_live_status_line_rewrites_itself_on_a_tty_and_prints_changes_otherwise():
    tty = _Tty()
    line = StatusLine("job-1", tty)
    for status, t in [("PENDING", 0.4), ("RUNNING", 1.2), ("RUNNING", 65.0), ("SUCCEEDED", 66.0)]:
        line(status, t)
    line.close()
    assert (
        tty.getvalue() == "\rjob-1  PENDING  0:00\rjob-1  RUNNING  0:01\rjob-1  RUNNING  1:05\rjob-1  SUCCEEDED  1:06\n"
    )
    plain = io.StringIO()
    line = StatusLine("job-1", plain)
    for status, t in [("PENDING", 0.4), ("RUNNING", 1.2), ("RUNNING", 65.0), ("FAILED", 66.0)]:
        line(status, t)
    line.close()
    assert plain.getvalue().splitlines() == ["job-1  PENDING  0:00", "job-1  RUNNING  0:01", "job-1  FAILED  1:06"]


def test_a_shorter_status_on_a_tty_is_padded_over_the_longer_one_it_rewrites():
    tty = _Tty()
    line = StatusLine("j", tty)
    line("SUCCEEDED", 0)
    line("RUN", 1)
    line.close()
    assert tty.getvalue() == "\rj  SUCCEEDED  0:00\rj  RUN  0:01      \n"


def test_the_cli_gives_up_on_a_stalled_dashboard_in_one_line(monkeypatch):
    # The in-cluster watcher connects the same way (`workloads.watcher.connect_address`).
    monkeypatch.setattr(ray_connection, "READ_TIMEOUT", 0.5)
    with StalledServer(answer_version=True) as address:
        out, err = io.StringIO(), io.StringIO()
        started = time.monotonic()
        code = cli.main(["status", "--address", address, "--job", "x"], out=out, err=err)
        assert time.monotonic() - started < STALL_BOUND
    assert code == 3 and err.getvalue().count("\n") == 1, err.getvalue()
    assert err.getvalue().startswith(f"error: Ray dashboard unreachable at {address}"), err.getvalue()


def test_the_cli_refuses_to_submit_onto_a_cluster_without_its_gpu_workers_and_gives_the_command(head, client):
    # The local head has no GPU node: as a cluster whose workers the run's owner released. With --address there is
    # no Kubernetes API to ask for them, so nothing is submitted; the line says how to ask by hand.
    spec = build_spec(load_stack("dev"))
    code, out, err = run_cli("submit", "--stack", "dev", "--address", head.address, "--gate", "off")
    assert code == 2 and out == "", out
    assert err == (
        "error: 0 of 1 Ray GPU workers alive and no Kubernetes API to ask for the rest: run `kubectl -n nemo-rl patch "
        'raycluster nemo-rl --type json -p \'[{"op": "test", "path": "/spec/workerGroupSpecs/0/groupName", "value": '
        '"gpu"}, {"op": "replace", "path": "/spec/workerGroupSpecs/0/replicas", "value": 1}]\'`, then submit again\n'
    )
    assert not [j for j in jobs.all_jobs(client) if j.submission_id.startswith(spec.submission_id)]


def test_the_cli_submits_the_stack_job_waits_and_retries_after_a_failure(head, monkeypatch):
    # The dev stack's real entrypoint: here it fails at once (no /opt/nemo-rl on this machine),
    # which is enough to see submit -> wait -> FAILED -> resubmit as attempt 2. Its one GPU worker is alive.
    from workloads import worker_group

    monkeypatch.setattr(worker_group, "alive_gpu_nodes", lambda _client: 1)
    spec = build_spec(load_stack("dev"))
    # No acceptance gate here (tests/test_driver.py covers it): this is about submit and wait.
    code, out, err = run_cli(
        "submit",
        "--stack",
        "dev",
        "--address",
        head.address,
        "--gate",
        "off",
        "--wait",
        "--timeout",
        f"{JOB_TIMEOUT:g}",
    )
    assert (code, err) == (1, ""), err
    lines = out.splitlines()
    assert lines[0] in (f"submitted {spec.submission_id} (PENDING)", f"submitted {spec.submission_id} (RUNNING)")
    assert lines[-1].startswith(f"{spec.submission_id}  FAILED  ")  # not a TTY: one line per status

    code, out, _ = run_cli("list", "--stack", "dev", "--address", head.address)
    assert code == 0 and spec.submission_id in out and "FAILED" in out
    code, out, _ = run_cli("logs", "--stack", "dev", "--address", head.address)  # newest job of the stack
    assert code == 0 and "Running entrypoint" in out and "/opt/nemo-rl" in out
    code, out, _ = run_cli("submit", "--stack", "dev", "--address", head.address, "--gate", "off")
    assert code == 0 and out.splitlines()[0].startswith(f"submitted {spec.submission_id}-r2 ")
    code, out, _ = run_cli(
        "status", "--stack", "dev", "--address", head.address, "--wait", "--timeout", f"{JOB_TIMEOUT:g}"
    )
    assert code == 1 and f"{spec.submission_id}-r2  FAILED" in out


def test_the_cli_stops_a_running_job(client, head):
    sleeper = python_job("dev", "import time; time.sleep(120)")
    jobs.submit_attempt(client, sleeper, 1)
    jobs.wait(client, sleeper.submission_id, until={JobStatus.RUNNING}, timeout=JOB_TIMEOUT, poll_interval=0.2)
    code, out, _ = run_cli("stop", "--stack", "dev", "--address", head.address, "--job", sleeper.submission_id)
    assert (code, out) == (0, f"{sleeper.submission_id}: stop requested\n")
    assert jobs.wait(client, sleeper.submission_id, timeout=JOB_TIMEOUT, poll_interval=0.2) == JobStatus.STOPPED


def test_the_cli_asks_for_the_cluster_ca_of_an_ip_endpoint_in_one_line():
    code, out, err = run_cli("list", "--endpoint", "203.0.113.10", "--head-service", "nemo-rl-head-svc")
    assert (code, out) == (2, "")
    assert (
        err == "error: the cluster CA of the IP endpoint 203.0.113.10 is unknown: pass --ca-file (stack output "
        "clusterCaCertificate)\n"
    )


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (
            ("--address", "http://127.0.0.1:notaport"),
            "--address http://127.0.0.1:notaport: port 'notaport' is not a number; allowed: 1-65535",
        ),
        (("--address", "http://[::1"), "--address http://[::1: not a valid URL (Invalid IPv6 URL)"),
        (("--address", "127.0.0.1:99999"), "--address 127.0.0.1:99999: port 99999 is out of range; allowed: 1-65535"),
        (
            ("--address", "ftp://127.0.0.1:8265"),
            "--address ftp://127.0.0.1:8265: scheme 'ftp' is not allowed; allowed: http, https",
        ),
        (
            ("--endpoint", "https://1.2.3.4:bad", "--head-service", "x", "--ca-file", "{ca}"),
            "--endpoint https://1.2.3.4:bad: port 'bad' is not a number; allowed: 1-65535",
        ),
        (
            ("--endpoint", "https://[::1", "--head-service", "x"),
            "--endpoint https://[::1: not a valid URL (Invalid IPv6 URL)",
        ),
    ],
)
def test_a_malformed_address_or_endpoint_is_refused_in_one_line_naming_the_flag(flags, message, tmp_path):
    ca = tmp_path / "ca.pem"
    ca.write_text("not used: the endpoint is refused first\n")
    code, out, err = run_cli("list", *(f.format(ca=ca) for f in flags))
    assert (code, out, err) == (2, "", f"error: {message}\n")


@pytest.mark.parametrize("value", ["0", "-2", "two"])
def test_logs_tail_takes_only_a_positive_line_count(value, capsys):
    assert cli.main(["logs", "--tail", value]) == 2
    assert capsys.readouterr().err == (
        f"error: argument --tail: {value!r} is not allowed; allowed: a positive whole number\n"
    )


@pytest.mark.parametrize("keys", [("hfToken",), ("wandbApiKey",), ("hfToken", "wandbApiKey")])
def test_the_cli_refuses_a_plaintext_secret_in_the_stack_file_as_pulumi_up_does(keys, tmp_path, monkeypatch):
    from infra.config import ConfigError
    from infra.stack_file import read_stack_file
    from tools.offline_plan import run_program

    doc = yaml.safe_load((ROOT / "Pulumi.dev.yaml").read_text())
    doc["config"].update({f"nemo-rl-gke:{k}": "plain-text-value" for k in keys})
    (tmp_path / "Pulumi.leaky.yaml").write_text(yaml.safe_dump(doc))
    monkeypatch.setattr(cli_stack, "ROOT", tmp_path)
    code, out, err = run_cli("submit", "--stack", "leaky", "--dry-run")
    assert (code, out) == (2, "")
    assert (
        err
        == "error: "
        + "; ".join(
            f"nemo-rl-gke:{k}: stored in plaintext; allowed: a secret (remove it from Pulumi.leaky.yaml and run "
            f"`pulumi config set --secret {k}`)"
            for k in keys
        )
        + "\n"
    )
    with pytest.raises(ConfigError) as program_refusal:  # the program refuses alike, naming every source it may be in
        run_program("leaky", *read_stack_file(tmp_path / "Pulumi.leaky.yaml"))
    assert str(program_refusal.value).splitlines() == [
        f"nemo-rl-gke:{k}: stored in plaintext; allowed: a secret (remove it from Pulumi.leaky.yaml, the "
        f"--config-file, Pulumi.yaml or PULUMI_CONFIG, wherever it is set, and run `pulumi config set --secret {k}`)"
        for k in keys
    ]

    doc["config"].update({f"nemo-rl-gke:{k}": {"secure": "v1:AAAA"} for k in keys})
    (tmp_path / "Pulumi.leaky.yaml").write_text(yaml.safe_dump(doc))
    code, out, err = run_cli("submit", "--stack", "leaky", "--dry-run")
    assert (code, err) == (0, "") and out.startswith("submission id: ")


def test_the_dashboard_command_serves_the_stacks_head_service_through_the_endpoint(monkeypatch):
    seen = {}

    def fake_serve_cluster(endpoint, namespace, service, **kwargs):
        seen.update(endpoint=endpoint, namespace=namespace, service=service, **kwargs)
        kwargs["on_ready"]("http://127.0.0.1:8265")

    monkeypatch.setattr(dashboard, "serve_cluster", fake_serve_cluster)
    host = "gke-0123456789abcdef-123456789012.us-east1.gke.goog"
    code, out, err = run_cli("dashboard", "--stack", "h200", "--endpoint", host, "--head-service", "nemo-rl-head-svc")
    assert (code, err) == (0, ""), err
    assert out == "Ray dashboard of stack h200: http://127.0.0.1:8265/  (Ctrl-C stops)\n"
    assert (seen["endpoint"], seen["namespace"], seen["service"], seen["port"]) == (
        host,
        "nemo-rl",
        "nemo-rl-head-svc",
        8265,
    )
    assert seen["ca_file"] is None and seen["ca_cert_b64"] is None, "the DNS endpoint needs no cluster CA"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ("--address", "http://127.0.0.1:8265"),
            "error: --address http://127.0.0.1:8265 is a dashboard already: open it in a browser\n",
        ),
        (
            ("--endpoint", "203.0.113.10", "--head-service", "h"),
            "error: the cluster CA of the IP endpoint 203.0.113.10 is unknown: pass --ca-file (stack output "
            "clusterCaCertificate)\n",
        ),
    ],
)
def test_the_dashboard_command_refuses_what_it_cannot_serve_in_one_line(argv, message):
    assert run_cli("dashboard", "--stack", "dev", *argv) == (2, "", message)


@pytest.mark.parametrize("port", ["70000", "-1", "x"])
def test_the_dashboard_command_takes_only_a_port_number(port, capsys):
    assert cli.main(["dashboard", "--stack", "dev", "--port", port]) == 2
    assert (
        capsys.readouterr().err
        == f"error: argument --port: {port!r} is not allowed; allowed: 0 (any free port) to 65535\n"
    )


def test_watch_builds_the_stacks_job_and_policy_and_says_in_one_line_that_the_dashboard_is_unreachable():
    with socket.socket() as closed:  # bound, never listening: connections are refused
        closed.bind(("127.0.0.1", 0))
        address = f"http://127.0.0.1:{closed.getsockname()[1]}"
        code, out, err = run_cli("watch", "--stack", "dev", "--address", address, "--once")
    assert (code, out) == (3, "") and err.count("\n") == 1, err
    assert err.startswith(f"error: Ray dashboard unreachable at {address}"), err


def test_watch_refuses_a_run_file_whose_backoff_is_above_its_cap_in_one_line(tmp_path):
    run_file = tmp_path / "run.json"
    run_file.write_text(json.dumps({"recovery": {"backoff_seconds": 600, "max_backoff_seconds": 60}}))
    code, out, err = run_cli("watch", "--stack", "dev", "--run-file", str(run_file), "--once")
    assert (code, out, err) == (2, "", "error: watch: max backoff must be at least the backoff\n")


@pytest.mark.parametrize("flag", ["--max-restarts", "--backoff", "--max-backoff", "--pool-gpus"])
def test_watch_takes_the_policy_from_the_stack_not_from_flags(flag):
    code, out, err = run_cli("watch", "--stack", "dev", flag, "3", "--once")
    assert (code, out, err) == (2, "", f"error: unrecognized arguments: {flag} 3\n")


def test_watch_takes_the_stacks_recovery_section_from_its_run_plan_and_waits_for_all_of_its_pools_gpus():
    loaded = load_stack("b200")
    policy = RecoveryPolicy.from_dict(cli_stack.run_plan(loaded).recovery)
    recovery = loaded.config.recovery
    assert policy.pool_gpus == 64  # eight B200 nodes of eight GPUs
    assert policy.max_restarts == recovery.max_restarts
    assert policy.check_interval_seconds == recovery.check_interval_seconds
    assert policy.resubmit_missing is loaded.config.job.submit


# ---------------------------------------------------------------- issue 36: files and streams a user hands the CLI


def test_an_empty_config_file_flag_is_refused_not_read_as_the_stacks_own_file():
    code, out, err = run_cli("submit", "--dry-run", "--config-file", "")
    assert (code, out) == (2, "")
    assert (
        err == "error: argument --config-file: '' is not allowed; allowed: a file path (is a shell variable unset?)\n"
    )


@pytest.mark.parametrize("content, says", [("[1, 2]", "not a JSON object"), ("{", "Expecting property name")])
def test_watch_with_a_run_file_that_is_not_a_run_plan_is_one_line(tmp_path, content, says):
    path = tmp_path / "run.json"
    path.write_text(content)
    code, out, err = run_cli("watch", "--once", "--run-file", str(path), "--address", "http://127.0.0.1:9")
    assert (code, out) == (2, "") and err.startswith(f"error: --run-file {path}: {says}") and err.count("\n") == 1


def test_watch_with_a_run_file_that_is_a_fifo_or_a_device_is_refused_without_waiting(tmp_path):
    import os

    fifo = tmp_path / "run.json"
    os.mkfifo(fifo)
    for path, what in ((fifo, "is a named pipe (FIFO)"), ("/dev/zero", "is a character device")):
        start = time.monotonic()
        code, out, err = run_cli("watch", "--once", "--run-file", str(path), "--address", "http://127.0.0.1:9")
        assert (code, out) == (2, "") and err.startswith(f"error: --run-file {path}: {what}; allowed: a regular file")
        assert time.monotonic() - start < 10


class _FailingOut(io.StringIO):
    def __init__(self, error: OSError):
        super().__init__()
        self.error = error

    def write(self, text: str) -> int:
        raise self.error


def test_a_closed_pipe_ends_the_cli_quietly_and_a_full_disk_is_one_line_exit_3():
    err = io.StringIO()
    assert cli.main(["submit", "--dry-run"], out=_FailingOut(BrokenPipeError(32, "Broken pipe")), err=err) == 0
    assert err.getvalue() == ""
    err = io.StringIO()
    assert cli.main(["submit", "--dry-run"], out=_FailingOut(OSError(28, "No space left on device")), err=err) == 3
    assert err.getvalue() == "error: cannot write to standard output (No space left on device)\n"


@pytest.mark.parametrize("start", [float("nan"), float("inf"), 1e300])
def test_a_ledger_from_the_head_with_a_time_no_calendar_has_is_not_readable_not_a_traceback(start, monkeypatch):
    import argparse

    from jobctl import commands
    from workloads.ledger import Attempt, Ledger

    stack = load_stack("dev")
    ledger = Ledger("dev", "r", attempts=[Attempt(1, "dev-x", start, 2)])
    monkeypatch.setattr(commands, "_ledger_on_head", lambda client, stack: ledger)
    out = io.StringIO()
    commands._print_ledger(argparse.Namespace(ledger_file=None), None, stack, out)
    assert out.getvalue().startswith("run ledger: not readable (a number in it: ") and out.getvalue().count("\n") == 1


def test_the_cli_asks_for_the_workers_through_the_gke_api_and_waits_until_ray_counts_them(monkeypatch):
    # `jobctl submit`/`gate` through the GKE API server (the dashboard proxy's endpoint and token): the group is
    # scaled from 0 with a claim, and the step returns only once Ray counts the pool's workers alive.
    import argparse

    from test_gang_wait import FakeApi

    from jobctl import commands
    from workloads import worker_group
    from workloads.gang_wait import CLAIM_ANNOTATION

    api = FakeApi([], {}, [{"groupName": "gpu", "replicas": 0, "minReplicas": 0, "maxReplicas": 1}])
    counts = iter([0, 1])
    monkeypatch.setattr(worker_group, "alive_gpu_nodes", lambda _client: next(counts))
    monkeypatch.setattr(worker_group, "POLL_S", 0.01)
    args = argparse.Namespace(
        address=None, endpoint=api.base, head_service="nemo-rl-head-svc", namespace=None, ca_file=None
    )
    out = io.StringIO()
    try:
        ensure = commands.ensure_workers(args, load_stack("dev"), object(), out, token_provider=lambda: "tok")
        assert api.requests == [], "nothing is asked for before an attempt is about to start"
        assert ensure() == 1
    finally:
        api.close()
    assert api.groups()[0]["replicas"] == 1 and CLAIM_ANNOTATION in api.cluster["metadata"]["annotations"]
    assert {r[2] for r in api.requests if r[0] == "GET"} == {"Bearer tok"}
    assert out.getvalue().splitlines()[:2] == [
        "Ray workers asked for: 0 -> 1 (GKE adds the GPU nodes for them)",
        "waiting for the Ray GPU workers: 0 of 1 alive",
    ]
