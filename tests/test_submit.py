"""Job submission against a real local Ray head, through the module and the CLI users run
(the CLI's own commands: tests/test_jobctl.py).

Jobs are short `python -c` commands; each test uses its own stack name so the shared head's
jobs never mix. Only 127.0.0.1 is contacted.
"""

from __future__ import annotations

import asyncio
import io
import shlex
import socket
import subprocess
import sys
import time
import uuid

import pytest
from conftest import ROOT
from dashboard_proxy import AuthProxy
from ray.job_submission import JobStatus
from ray_head import JOB_TIMEOUT, STALL_BOUND
from stalled_http import StalledServer

from jobctl import cli
from workloads import submit as jobs
from workloads.job_spec import META_STACK, JobSpec

PREFIX = "/api/v1/namespaces/ns/services/head:dashboard/proxy"

# Ray's own log-tail call trips a deprecation in the installed aiohttp; not ours to fix.
pytestmark = pytest.mark.filterwarnings("ignore:ssl=None is deprecated:DeprecationWarning")


def python_job(stack: str, code: str, recipe: str = "t") -> JobSpec:
    """A spec running `code` with this interpreter (the raylet's PATH may not have the venv)."""
    return JobSpec.create(
        stack=stack,
        recipe=recipe,
        entrypoint=f"{shlex.quote(sys.executable)} -c {shlex.quote(code)}",
        # A unique value keeps reruns against a long-lived head from matching old jobs.
        runtime_env={"env_vars": {"RAY_OVERRIDE_JOB_RUNTIME_ENV": "1", "RUN": uuid.uuid4().hex[:8]}},
    )


def run_cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = cli.main(list(argv), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def test_a_job_runs_then_succeeds_and_resubmitting_it_adds_nothing(client, tmp_path):
    # The job runs until the test has seen it RUNNING (a fixed sleep could end before a slow poll).
    go = tmp_path / "go"
    spec = python_job(
        "t-ok",
        "import os, time; print('hello from the job', flush=True)\n"
        f"while not os.path.exists({str(go)!r}): time.sleep(0.05)",
    )
    first = jobs.submit(client, spec)
    assert first.created and first.submission_id == spec.submission_id and first.stopped == ()
    seen: list[JobStatus] = []
    assert (
        jobs.wait(
            client,
            spec.submission_id,
            until={JobStatus.RUNNING},
            timeout=JOB_TIMEOUT,
            on_status=lambda s, _t: seen.append(s),
            poll_interval=0.2,
        )
        == JobStatus.RUNNING
    )
    go.touch()
    assert (
        jobs.wait(
            client, spec.submission_id, timeout=JOB_TIMEOUT, on_status=lambda s, _t: seen.append(s), poll_interval=0.3
        )
        == JobStatus.SUCCEEDED
    )
    assert JobStatus.RUNNING in seen and seen[-1] == JobStatus.SUCCEEDED
    assert "hello from the job" in "".join(jobs.logs(client, spec.submission_id))

    again = jobs.submit(client, spec)
    assert (again.submission_id, again.created, again.status) == (spec.submission_id, False, JobStatus.SUCCEEDED)
    listed = jobs.list_jobs(client, "t-ok")
    assert [j.submission_id for j in listed] == [spec.submission_id]
    assert listed[0].metadata[META_STACK] == "t-ok"


def test_the_same_spec_running_is_not_resubmitted(client, tmp_path):
    go = tmp_path / "go"
    spec = python_job("t-running", f"import os, time\nwhile not os.path.exists({str(go)!r}): time.sleep(0.05)")
    first = jobs.submit(client, spec)
    jobs.wait(client, spec.submission_id, until={JobStatus.RUNNING}, timeout=JOB_TIMEOUT, poll_interval=0.2)
    again = jobs.submit(client, spec)
    go.touch()
    assert (again.submission_id, again.created, again.status) == (first.submission_id, False, JobStatus.RUNNING)
    assert [j.submission_id for j in jobs.list_jobs(client, "t-running")] == [spec.submission_id]


def test_the_same_spec_pending_is_not_resubmitted(client):
    spec = python_job("t-pending", "print('never runs')")
    # The first attempt as `submit_attempt` makes it, but asking for a resource no node has: Ray keeps
    # it PENDING for as long as the test needs (a real cluster: a job waiting for its GPU nodes).
    client.submit_job(
        entrypoint=spec.entrypoint,
        submission_id=spec.submission_id,
        runtime_env=spec.runtime_env,
        metadata={**spec.metadata, jobs.META_ATTEMPT: "1"},
        entrypoint_resources={"t-pending-never": 1},
    )
    try:
        assert jobs.status(client, spec.submission_id) == JobStatus.PENDING
        again = jobs.submit(client, spec)
        assert (again.submission_id, again.created, again.status) == (spec.submission_id, False, JobStatus.PENDING)
        assert [j.submission_id for j in jobs.list_jobs(client, "t-pending")] == [spec.submission_id]
    finally:
        jobs.stop(client, spec.submission_id)


def test_a_failing_job_reaches_failed_and_the_same_spec_is_retried_as_a_new_attempt(client):
    spec = python_job("t-fail", "import sys; print('going down'); sys.exit(3)")
    jobs.submit(client, spec)
    assert jobs.wait(client, spec.submission_id, timeout=JOB_TIMEOUT, poll_interval=0.3) == JobStatus.FAILED
    retry = jobs.submit(client, spec)
    assert retry.created and retry.submission_id == f"{spec.submission_id}-r2"
    jobs.wait(client, retry.submission_id, timeout=JOB_TIMEOUT, poll_interval=0.3)
    assert [j.submission_id for j in jobs.list_jobs(client, "t-fail")] == [spec.submission_id, retry.submission_id]


def test_a_changed_spec_stops_the_running_job_first_and_stop_ends_a_running_job(client):
    old = python_job("t-change", "import time; time.sleep(120)")
    jobs.submit(client, old)
    assert (
        jobs.wait(client, old.submission_id, until={JobStatus.RUNNING}, timeout=JOB_TIMEOUT, poll_interval=0.2)
        == JobStatus.RUNNING
    )
    new = python_job("t-change", "import time; time.sleep(120)  # v2")
    result = jobs.submit(client, new)
    assert result.created and result.stopped == (old.submission_id,)
    assert jobs.status(client, old.submission_id) == JobStatus.STOPPED
    assert (
        jobs.wait(client, new.submission_id, until={JobStatus.RUNNING}, timeout=JOB_TIMEOUT, poll_interval=0.2)
        == JobStatus.RUNNING
    )
    assert jobs.stop(client, new.submission_id) is True
    assert jobs.wait(client, new.submission_id, timeout=JOB_TIMEOUT, poll_interval=0.2) == JobStatus.STOPPED
    assert jobs.stop(client, new.submission_id) is False


def test_a_second_submitter_of_the_same_attempt_adopts_the_job_the_first_created(client):
    # Ray refuses the duplicate id with an HTTP 500 whose first line is "Traceback (most recent call last):".
    spec = python_job("t-twice", "pass")
    assert jobs.submit_attempt(client, spec, 2) == (f"{spec.submission_id}-r2", True)
    assert jobs.submit_attempt(client, spec, 2) == (f"{spec.submission_id}-r2", False)
    assert [j.submission_id for j in jobs.list_jobs(client, "t-twice")] == [f"{spec.submission_id}-r2"]


def test_an_unknown_job_id_raises_unknown_job(client, head):
    for call in (jobs.status, jobs.stop, lambda c, j: list(jobs.logs(c, j))):
        with pytest.raises(jobs.UnknownJob, match="no job 'no-such-job'"):
            call(client, "no-such-job")
    code, out, err = run_cli("status", "--address", head.address, "--job", "no-such-job")
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("error: no job 'no-such-job'")
    code, _, err = run_cli("logs", "--stack", "h200", "--address", head.address)  # no --job, no job of h200
    assert (code, err) == (2, f"error: no job of stack h200 on {head.address}; `submit` one, or pass --job\n")


def test_an_unreachable_address_raises_dashboard_unreachable_and_the_cli_says_so_in_one_line():
    # A bound socket that never listens: connections are refused and nothing else can take the port.
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        address = f"http://127.0.0.1:{closed.getsockname()[1]}"
        with pytest.raises(jobs.DashboardUnreachable, match=f"unreachable at {address}.*check that the cluster is up"):
            jobs.connect(address)
        proc = subprocess.run(
            [sys.executable, "-m", "jobctl", "list", "--address", address],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=JOB_TIMEOUT,
        )
    assert proc.returncode == 3 and proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith(f"error: Ray dashboard unreachable at {address}")


def test_a_stalled_dashboard_ends_in_a_timeout_error_not_a_hang():
    # Accepted connections, no answer: Ray's client sends every request without a timeout.
    with StalledServer(answer_version=False) as address:
        started = time.monotonic()
        with pytest.raises(jobs.DashboardUnreachable, match="ReadTimeout: the request got no answer in time"):
            jobs.connect(address, read_timeout=0.5)
        assert time.monotonic() - started < STALL_BOUND


def test_every_job_api_call_after_connecting_has_a_timeout_too():
    with StalledServer(answer_version=True) as address:
        client = jobs.connect(address, read_timeout=0.5)  # the version check is answered
        for call in (lambda: jobs.status(client, "x"), lambda: jobs.list_jobs(client), lambda: jobs.stop(client, "x")):
            started = time.monotonic()
            with pytest.raises(jobs.DashboardUnreachable, match="ReadTimeout"):
                call()
            assert time.monotonic() - started < STALL_BOUND


def test_a_silent_log_stream_gives_up_after_its_idle_timeout_instead_of_hanging():
    # What `logs --follow` drives Ray's log websocket with; a stream that never sends stands in for a
    # stalled connection, and the caller then falls back to polling over HTTP (with timeouts).
    async def silent():
        await asyncio.sleep(3600)
        yield "never"

    started = time.monotonic()
    with pytest.raises(asyncio.TimeoutError):
        next(jobs._sync_iter(silent(), 0.2))
    assert time.monotonic() - started < STALL_BOUND


@pytest.fixture
def proxy(head):
    p = AuthProxy(upstream=head.address, prefix=PREFIX, tokens={"tok-1", "tok-2"}).start()
    yield p
    p.stop()


def test_the_dashboard_is_reached_through_an_api_server_style_proxy_with_a_bearer_token(proxy, monkeypatch):
    issued = []

    def token() -> str:  # rotates, as a refreshed Google token would
        issued.append(f"tok-{len(issued) % 2 + 1}")
        return issued[-1]

    client = jobs.connect(gke_endpoint=proxy.base, namespace="ns", service="head", token_provider=token)
    assert client.get_address() == proxy.base + PREFIX
    spec = python_job("t-proxy", "import time\nfor i in range(3):\n    print('line', i, flush=True); time.sleep(0.3)")
    assert jobs.submit(client, spec).created
    assert len(issued) > 2  # a token per request, not one for the client's life

    # The CLI takes the same path with --endpoint (Google credentials faked here) and follows
    # the log over the proxied websocket until the job ends.
    monkeypatch.setattr(jobs, "google_token_provider", lambda *a, **k: lambda: "tok-2")
    proxy_args = ("--stack", "dev", "--endpoint", proxy.base, "--namespace", "ns", "--head-service", "head")
    code, out, err = run_cli("logs", *proxy_args, "--job", spec.submission_id, "--follow")
    assert (code, err) == (0, "")
    assert all(f"line {i}" in out for i in range(3))
    code, out, err = run_cli("status", *proxy_args, "--job", spec.submission_id)
    assert (code, err) == (0, "") and out.startswith(f"{spec.submission_id}  SUCCEEDED")
    assert proxy.seen and all(s.authorized and s.path.startswith(PREFIX + "/api/") for s in proxy.seen)
    assert any(s.websocket and s.path.endswith(f"/api/jobs/{spec.submission_id}/logs/tail") for s in proxy.seen)


def test_the_proxy_path_reports_bad_credentials_and_a_wrong_service_clearly(proxy):
    with pytest.raises(jobs.DashboardAuthError, match="not authorized"):
        jobs.connect(gke_endpoint=proxy.base, namespace="ns", service="head", token_provider=lambda: "wrong")
    with pytest.raises(jobs.DashboardUnreachable, match="wrong service or namespace"):
        jobs.connect(gke_endpoint=proxy.base, namespace="ns", service="other", token_provider=lambda: "tok-1")


@pytest.mark.parametrize(
    ("endpoint", "needed"),
    [
        ("203.0.113.10", True),
        ("203.0.113.10:443", True),
        ("2001:db8::1", True),
        ("[2001:db8::1]:443", True),
        ("https://203.0.113.10", True),
        ("gke-0123456789abcdef-123456789012.us-east1.gke.goog", False),
        ("gke-0123456789abcdef-123456789012.us-east1.gke.goog:443", False),
        ("https://gke-0123456789abcdef-123456789012.us-east1.gke.goog", False),
        ("http://127.0.0.1:8001", False),
    ],
)
def test_only_an_ip_endpoint_needs_the_cluster_ca(endpoint, needed):
    assert jobs.needs_cluster_ca(endpoint) is needed, endpoint


def test_connect_raises_invalid_address_before_touching_the_network():
    with pytest.raises(jobs.InvalidAddress) as bad:
        jobs.connect("127.0.0.1:0")
    assert (bad.value.address, bad.value.reason) == ("127.0.0.1:0", "port 0 is out of range; allowed: 1-65535")
    with pytest.raises(jobs.InvalidAddress, match=r"^203\.0\.113\.10:https: port 'https' is not a number"):
        jobs.connect(
            gke_endpoint="203.0.113.10:https", service="head", ca_file="unused.pem", token_provider=lambda: "t"
        )


def wait_for_log_line(client, job_id: str, text: str, timeout: float = JOB_TIMEOUT) -> str:
    """Poll the job's log until it contains `text`; the log then. Fails naming the job and the text."""
    deadline = time.monotonic() + timeout
    while True:
        log = "".join(jobs.logs(client, job_id))
        if text in log:
            return log
        assert time.monotonic() < deadline, f"job {job_id}: {text!r} not in its log after {timeout:g}s:\n{log[-500:]}"
        time.sleep(0.2)


def test_logs_tail_prints_only_the_last_lines_of_the_job_log_also_when_following(client, head, tmp_path):
    # The job prints only once Ray's "Running entrypoint" line is in its log: Ray writes that line
    # through a buffered file object it closes after starting the driver
    # (ray/dashboard/modules/job/job_supervisor.py `_exec_entrypoint`, 2.60.0), so a driver quick enough
    # on a busy machine could get its lines in first, and the last two lines would not be the job's.
    go = tmp_path / "go"
    spec = python_job(
        "t-tail",
        f"import os, time\nwhile not os.path.exists({str(go)!r}): time.sleep(0.05)\n"
        "for i in range(1, 6): print('line', i)",
    )
    jobs.submit(client, spec)
    wait_for_log_line(client, spec.submission_id, "Running entrypoint")
    go.touch()
    assert jobs.wait(client, spec.submission_id, timeout=JOB_TIMEOUT, poll_interval=0.3) == JobStatus.SUCCEEDED
    assert "line 1\n" in "".join(jobs.logs(client, spec.submission_id))  # the whole log has all five
    args = ("logs", "--stack", "dev", "--address", head.address, "--job", spec.submission_id, "--tail", "2")
    assert run_cli(*args) == (0, "line 4\nline 5\n", "")
    # Following replays the log from its start over the websocket; none of the skipped part may reappear.
    assert run_cli(*args, "--follow") == (0, "line 4\nline 5\n", "")
    assert run_cli(*args[:-1], "99") == (0, "".join(jobs.logs(client, spec.submission_id)), "")
